"""The base of every client: the connection, the stubs, the per-call deadline and the health
check. A client class is this base over a transport (:mod:`stratad_client.transport`): blocking
or asyncio; its methods are defined once, for both (:mod:`stratad_client.rpc`)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Generic, TypeVar, overload

from grpc_health.v1 import health_pb2, health_pb2_grpc

from stratad_client.calls import Unary
from stratad_client.channel import PathLike, connection
from stratad_client.pb import admin_pb2_grpc, memory_pb2_grpc, weaver_pb2_grpc
from stratad_client.requests import default_address, serving_status
from stratad_client.rpc import unary
from stratad_client.transport import Asyncio, Blocking

T = TypeVar("T", Blocking, Asyncio)
A = TypeVar("A", bound="Api[Any]")


class Api(Generic[T]):
    """A connection to a daemon and the stubs of its services, over the transport ``T``."""

    _transport_class: type[T]
    _transport: T

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
        """``address``: the daemon's host:port (None: ``$STRATA_ADDRESS`` or 127.0.0.1:50051);
        ``timeout``: the default deadline of a call, in seconds (each method also takes
        ``timeout``); ``token``: the bearer token; ``token_file``: a file holding it;
        ``ca_file``: TLS with this CA; ``cert_file`` and ``key_file``: a client certificate.
        None: from the environment (STRATA_TOKEN, STRATA_TOKEN_FILE, STRATA_TLS_CA,
        STRATA_TLS_CERT, STRATA_TLS_KEY)."""
        conn = connection(token, token_file, ca_file, cert_file, key_file)
        self._start(self._transport_class(address or default_address(), conn), timeout)

    def _start(self, transport: T, timeout: float) -> None:
        self.timeout = timeout
        self._transport = transport
        channel = transport.channel
        self._memory = memory_pb2_grpc.MemoryServiceStub(channel)
        self._admin = admin_pb2_grpc.AdminServiceStub(channel)
        self._weaver = weaver_pb2_grpc.WeaverServiceStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)

    def _sibling(self, cls: type[A]) -> A:
        """A client of class ``cls`` on this client's connection (closed with it)."""
        sibling = cls.__new__(cls)
        sibling._start(self._transport, self.timeout)
        return sibling

    @overload
    def close(self: Api[Blocking]) -> None: ...
    @overload
    def close(self: Api[Asyncio]) -> Coroutine[Any, Any, None]: ...
    def close(self) -> Any:
        """Close the connection (to be awaited on an asyncio client)."""
        return self._transport.close()

    def _t(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else timeout

    @unary
    def health(self, service: str = "", *, timeout: float | None = None) -> Unary[str]:
        """The status ("SERVING", "NOT_SERVING", ...) of ``service`` ("" = the daemon).
        ``timeout``: this call's deadline in seconds (None: the client's)."""
        req = health_pb2.HealthCheckRequest(service=service)
        return Unary(self._health.Check, req, self._t(timeout), serving_status)
