"""The base of both clients: the channel, the stubs and the per-call deadline. A client class
names its transport (:meth:`BaseClient._open_channel`: blocking or asyncio)."""

from __future__ import annotations

from typing import Any

from grpc_health.v1 import health_pb2_grpc

from daemon.client.channel import Connection, PathLike, connection
from daemon.client.requests import default_address
from daemon.pb import admin_pb2_grpc, memory_pb2_grpc, weaver_pb2_grpc

CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]


class BaseClient:
    """The channel and the stubs; the methods are in the client classes and their bases."""

    def __init__(
        self,
        address: str | None = None,
        *,
        timeout: float = 10.0,
        token: str | None = None,
        token_file: PathLike | None = None,
        ca_file: PathLike | None = None,
        cert_file: PathLike | None = None,
        key_file: PathLike | None = None,
    ) -> None:
        """``token``: the bearer token; ``ca_file``: TLS with this CA; ``cert_file`` and
        ``key_file``: a client certificate. None: from the environment (STRATA_TOKEN,
        STRATA_TOKEN_FILE, STRATA_TLS_CA, STRATA_TLS_CERT, STRATA_TLS_KEY)."""
        conn = connection(token, token_file, ca_file, cert_file, key_file)
        channel = self._open_channel(address or default_address(), conn)
        self.timeout = timeout
        self._channel = channel
        self._memory = memory_pb2_grpc.MemoryServiceStub(channel)
        self._admin = admin_pb2_grpc.AdminServiceStub(channel)
        self._weaver = weaver_pb2_grpc.WeaverServiceStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)

    def _open_channel(self, address: str, conn: Connection) -> Any:
        """The channel to ``address``: the transport, as the client class has it."""
        raise NotImplementedError

    def _t(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else timeout
