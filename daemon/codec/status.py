"""The one mapping of the project's errors to gRPC status codes.

The exception tree is in :mod:`tiers.core.errors` (the lowest floor that raises it): ``StrataError``
is the root, the *kind* classes (``InvalidArgument``, ``NotFound``, ...) sit under it, and each
package adds its own subclasses that also inherit a kind. The kind decides the gRPC status
code, in :func:`grpc_status` and nowhere else; the kinds are re-exported here for the daemon's
code. The message of the exception is sent to the client, so it must say what was wrong and
must not contain secrets.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from tiers.core.errors import (
    AlreadyExists,
    ConfigError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    StrataError,
    Unauthenticated,
    Unavailable,
)

__all__ = [
    "AlreadyExists",
    "ConfigError",
    "FailedPrecondition",
    "InvalidArgument",
    "MalformedRequest",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "ResourceExhausted",
    "StrataError",
    "Unauthenticated",
    "Unavailable",
    "grpc_status",
    "rpc",
    "rpc_stream",
]

_CODES: tuple[tuple[type[StrataError], grpc.StatusCode], ...] = (
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (OutOfRange, grpc.StatusCode.OUT_OF_RANGE),
    (ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
)


def grpc_status(exc: BaseException) -> grpc.StatusCode:
    """The status code for ``exc``: its kind's code, ``INTERNAL`` for anything else."""
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    return grpc.StatusCode.INTERNAL


class MalformedRequest:
    """Stands for a request whose bytes are not the RPC's message (see :mod:`daemon.codec.wire`);
    the decorators below answer it with INVALID_ARGUMENT before the handler runs."""

    def __init__(self, method: str, reason: str) -> None:
        self.method = method
        self.reason = reason

    def error(self) -> InvalidArgument:
        name = self.method.rsplit("/", 1)[-1]
        return InvalidArgument(f"the request is not a valid {name} request message")


_log = logging.getLogger("strata.rpc")

_Handler = TypeVar("_Handler", bound=Callable[..., Awaitable[Any]])


def rpc(handler: _Handler) -> _Handler:
    """Decorate a servicer method: a StrataError becomes its status code and message; any other
    exception is logged with its traceback and becomes INTERNAL without internals."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            if isinstance(request, MalformedRequest):
                raise request.error()
            return await handler(self, request, context)
        except Exception as exc:
            await _abort(context, exc, handler.__name__)

    return wrapper  # type: ignore[return-value]


_Stream = TypeVar("_Stream", bound=Callable[..., AsyncIterator[Any]])


def rpc_stream(handler: _Stream) -> _Stream:
    """:func:`rpc` for server-streaming methods (async generators)."""

    @functools.wraps(handler)
    async def wrapper(
        self: Any, request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        try:
            if isinstance(request, MalformedRequest):
                raise request.error()
            async for item in handler(self, request, context):
                yield item
        except Exception as exc:
            await _abort(context, exc, handler.__name__)

    return wrapper  # type: ignore[return-value]


async def _abort(context: grpc.aio.ServicerContext, exc: Exception, method: str) -> None:
    if isinstance(exc, StrataError):
        await context.abort(grpc_status(exc), str(exc))
    _log.error("rpc.failed", exc_info=exc, extra={"fields": {"method": method}})
    await context.abort(grpc.StatusCode.INTERNAL, f"{method} failed; see the daemon log")
