"""How the clients connect: plaintext or TLS, with or without a bearer token.

Every argument left as None comes from the environment:

- ``STRATA_TOKEN`` or ``STRATA_TOKEN_FILE`` (a file holding the token): sent on every call as
  ``authorization: Bearer <token>``.
- ``STRATA_TLS_CA``: the PEM CA that signed the daemon's certificate; set, the client uses TLS.
- ``STRATA_TLS_CERT`` and ``STRATA_TLS_KEY``: a client certificate and its key, for a daemon
  that requires them (``tls.client_ca_file``).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

TOKEN_ENV = "STRATA_TOKEN"
TOKEN_FILE_ENV = "STRATA_TOKEN_FILE"
TLS_CA_ENV = "STRATA_TLS_CA"
TLS_CERT_ENV = "STRATA_TLS_CERT"
TLS_KEY_ENV = "STRATA_TLS_KEY"

PathLike = str | Path


@dataclass(frozen=True, slots=True)
class Connection:
    """What a channel needs besides the address."""

    token: str | None
    credentials: grpc.ChannelCredentials | None


def _path(explicit: PathLike | None, env: str) -> Path | None:
    value = explicit if explicit is not None else os.environ.get(env)
    return Path(value) if value else None


def connection(
    token: str | None = None,
    token_file: PathLike | None = None,
    ca_file: PathLike | None = None,
    cert_file: PathLike | None = None,
    key_file: PathLike | None = None,
) -> Connection:
    """Resolve the arguments (None: from the environment) into a :class:`Connection`."""
    if token is None:
        token = os.environ.get(TOKEN_ENV) or None
    if token is None and (tf := _path(token_file, TOKEN_FILE_ENV)) is not None:
        token = tf.read_text().strip() or None
    ca = _path(ca_file, TLS_CA_ENV)
    cert = _path(cert_file, TLS_CERT_ENV)
    key = _path(key_file, TLS_KEY_ENV)
    if (cert is None) != (key is None):
        raise ValueError("a client certificate needs its key (and the other way round)")
    credentials = None
    if ca is not None or cert is not None:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=ca.read_bytes() if ca is not None else None,
            private_key=key.read_bytes() if key is not None else None,
            certificate_chain=cert.read_bytes() if cert is not None else None,
        )
    return Connection(token, credentials)


class _Details(
    collections.namedtuple(
        "_Details",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


def _with_token(metadata: Any, header: str) -> list[tuple[str, str]]:
    return [*(metadata or ()), ("authorization", header)]


class _TokenInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds the bearer token to every call of a blocking channel."""

    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def _details(self, d: Any) -> _Details:
        return _Details(
            d.method,
            d.timeout,
            _with_token(d.metadata, self._header),
            d.credentials,
            d.wait_for_ready,
            getattr(d, "compression", None),
        )

    def _call(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    intercept_unary_unary = _call
    intercept_unary_stream = _call
    intercept_stream_unary = _call
    intercept_stream_stream = _call


def sync_channel(address: str, conn: Connection, options: list[tuple[str, Any]]) -> grpc.Channel:
    if conn.credentials is not None:
        channel = grpc.secure_channel(address, conn.credentials, options=options)
    else:
        channel = grpc.insecure_channel(address, options=options)
    if conn.token:
        channel = grpc.intercept_channel(channel, _TokenInterceptor(conn.token))
    return channel


class _AioToken:
    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    async def _call(self, continuation: Callable[..., Any], d: Any, request: Any) -> Any:
        details = grpc.aio.ClientCallDetails(
            d.method,
            d.timeout,
            grpc.aio.Metadata.from_tuple(tuple(_with_token(d.metadata, self._header))),
            d.credentials,
            d.wait_for_ready,
        )
        return await continuation(details, request)


class _AioUnaryUnary(_AioToken, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, d: Any, request: Any) -> Any:
        return await self._call(continuation, d, request)


class _AioUnaryStream(_AioToken, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, d: Any, request: Any) -> Any:
        return await self._call(continuation, d, request)


class _AioStreamUnary(_AioToken, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation: Any, d: Any, requests: Any) -> Any:
        return await self._call(continuation, d, requests)


def aio_channel(address: str, conn: Connection, options: list[tuple[str, Any]]) -> grpc.aio.Channel:
    interceptors: list[Any] = (
        [_AioUnaryUnary(conn.token), _AioUnaryStream(conn.token), _AioStreamUnary(conn.token)]
        if conn.token
        else []
    )
    if conn.credentials is not None:
        return grpc.aio.secure_channel(
            address, conn.credentials, options=options, interceptors=interceptors
        )
    return grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)
