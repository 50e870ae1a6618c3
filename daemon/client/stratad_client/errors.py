"""The client's one exception family: every call of a client raises a :class:`StrataClientError`.

The daemon answers a refused or failed call with the gRPC status code of the error's *kind*
(``InvalidArgument``, ``NotFound``, ... in the daemon's error tree; one kind, one code), so the
client reads the kind back from the code: :func:`error_from` makes the subclass of the kind,
with the code, the daemon's message and the original ``grpc.RpcError`` as ``__cause__``. Codes
that no kind of the daemon has (a deadline that passed, a cancelled call) have their own
subclasses; any other code is a plain :class:`StrataClientError` (``kind`` "Unknown").
"""

from __future__ import annotations

from typing import ClassVar

import grpc


class StrataClientError(Exception):
    """Root of every error a client call raises. ``kind``: the Strata error kind (the name of
    its class in the daemon's tree, or "Unknown"); ``code``: the gRPC status code;
    ``message``: the daemon's message (what was wrong, without secrets)."""

    kind: ClassVar[str] = "Unknown"

    def __init__(self, message: str, *, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


class InvalidArgumentError(StrataClientError):
    """The request is malformed regardless of the daemon's state."""

    kind = "InvalidArgument"


class NotFoundError(StrataClientError):
    """The thing the request names does not exist (or has expired)."""

    kind = "NotFound"


class AlreadyExistsError(StrataClientError):
    """The request would create something that exists already."""

    kind = "AlreadyExists"


class FailedPreconditionError(StrataClientError):
    """The request is well formed but conflicts with the daemon's current state."""

    kind = "FailedPrecondition"


class ResourceExhaustedError(StrataClientError):
    """The request is over a size or capacity limit."""

    kind = "ResourceExhausted"


class UnavailableError(StrataClientError):
    """The daemon is unreachable, or a store of it cannot take the request right now; nothing
    was acknowledged, a retry may succeed."""

    kind = "Unavailable"


class UnauthenticatedError(StrataClientError):
    """The call carries no valid credentials (a bearer token, when authentication is on)."""

    kind = "Unauthenticated"


class PermissionDeniedError(StrataClientError):
    """The token lacks the right or the tenant the call needs."""

    kind = "PermissionDenied"


class InternalError(StrataClientError):
    """The daemon failed the call for a reason of its own (its log says which)."""

    kind = "Internal"


class OutOfRangeError(StrataClientError):
    """The call read past what the daemon keeps (a Watch cursor older than the change log's
    retention)."""

    kind = "OutOfRange"


class DeadlineExceededError(StrataClientError):
    """The call's deadline (``timeout``) passed before the daemon answered."""

    kind = "DeadlineExceeded"


class CallCancelledError(StrataClientError):
    """The call was cancelled (by the client, or the daemon shutting down)."""

    kind = "Cancelled"


_BY_CODE: dict[grpc.StatusCode, type[StrataClientError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRangeError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.INTERNAL: InternalError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.CANCELLED: CallCancelledError,
}


def error_from(exc: grpc.RpcError) -> StrataClientError:
    """The error of the family for a failed call (raise it ``from exc``)."""
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    details = exc.details() if callable(getattr(exc, "details", None)) else None
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    return _BY_CODE.get(code, StrataClientError)(details or code.name, code=code)
