"""Authentication, rights and tenants.

A call carries ``authorization: Bearer <token>`` in its metadata. :class:`AuthInterceptor`
hashes the token (SHA-256), finds its entry in ``auth.tokens``, checks that the entry has the
right the method needs (:data:`RIGHTS_BY_METHOD`; admin implies every right) and sets the
caller's :class:`Principal` in a context variable for the length of the call. Handlers then
ask :func:`effective_user` which tenant (``user_id``) a request acts for and :func:`visible`
whether a stored thing belongs to the caller. With authentication off there is no principal
and both helpers change nothing.

Health and reflection stay open: they are what probes and tools use before they have a token.
"""

from __future__ import annotations

import contextvars
import hashlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc

from daemon.codec.status import (
    InvalidArgument,
    PermissionDenied,
    StrataError,
    Unauthenticated,
    grpc_status,
)
from daemon.settings.security import ALL_TENANTS, RIGHTS, AuthSettings, TokenEntry

log = logging.getLogger("strata.auth")

_MEMORY = "/strata.v1.MemoryService/"
RIGHTS_BY_METHOD: dict[str, str] = {
    **{
        _MEMORY + m: "append"
        for m in (
            "Append",
            "AppendBatch",
            "EndSession",
            "RemoveMessages",
            "PutDocument",
            "DeleteDocument",
            "SetAnchor",
            "PinMemory",
        )
    },
    **{
        _MEMORY + m: "recall"
        for m in (
            "GetWorkingMemory",
            "ListEpisodes",
            "GetEpisode",
            "Recall",
            "Pack",
            "GetNode",
            "GetDocument",
            "ListDocuments",
            "GetContext",
            "GetAnchor",
            "Watch",
        )
    },
    _MEMORY + "Forget": "forget",
    _MEMORY + "Stats": "admin",
}
# Every method of these services needs admin; any other method not listed above too.
ADMIN_SERVICES = ("/strata.v1.AdminService/", "/strata.v1.WeaverService/")
OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def right_for(method: str) -> str | None:
    """The right ``method`` needs; None for an open method (health, reflection)."""
    if method.startswith(OPEN_PREFIXES):
        return None
    return RIGHTS_BY_METHOD.get(method, "admin")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a token's name, its tenants (None: all tenants) and its rights."""

    name: str
    tenants: frozenset[str] | None
    rights: frozenset[str]

    @classmethod
    def of(cls, entry: TokenEntry) -> Principal:
        rights = frozenset(RIGHTS) if "admin" in entry.rights else frozenset(entry.rights)
        tenants = None if entry.tenants == [ALL_TENANTS] else frozenset(entry.tenants)
        return cls(entry.name, tenants, rights)

    def allows(self, user_id: str) -> bool:
        return self.tenants is None or user_id in self.tenants


_current: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "strata_principal", default=None
)


def current() -> Principal | None:
    """The caller of the RPC being served; None when authentication is off."""
    return _current.get()


def effective_user(requested: str) -> str:
    """The tenant a request acts for.

    A named ``user_id`` must be one of the token's tenants (PERMISSION_DENIED otherwise). An
    empty one becomes the token's tenant when it has exactly one; it stays empty for an
    all-tenants token (the caller may see every user) and is an INVALID_ARGUMENT for a token of
    several tenants, which must say which one it means.
    """
    p = current()
    if p is None:
        return requested
    if requested:
        if not p.allows(requested):
            raise PermissionDenied(f"this token may not act for user_id {requested!r}")
        return requested
    if p.tenants is None:
        return ""
    if len(p.tenants) == 1:
        return next(iter(p.tenants))
    raise InvalidArgument("scope.user_id is required: this token has several tenants")


def visible(user_id: str) -> bool:
    """Whether something stored for ``user_id`` may be shown to (or changed by) the caller."""
    p = current()
    return p is None or p.allows(user_id)


def require_all_tenants(what: str) -> None:
    """For operations over every tenant at once (a backup): only an all-tenants token."""
    p = current()
    if p is not None and p.tenants is not None:
        raise PermissionDenied(f'{what} needs a token whose tenants are ["*"]')


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates every call but the open ones and checks the method's right."""

    def __init__(self, settings: AuthSettings) -> None:
        self._tokens = {t.sha256: Principal.of(t) for t in settings.tokens}

    def authenticate(self, metadata: Any, method: str, right: str) -> Principal:
        header = ""
        for key, value in metadata or ():
            if key == "authorization":
                header = value if isinstance(value, str) else value.decode(errors="replace")
                break
        scheme, _, token = header.partition(" ")
        if not header:
            raise Unauthenticated("this daemon needs a token: authorization: Bearer <token>")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("the authorization header must be: Bearer <token>")
        principal = self._tokens.get(token_hash(token.strip()))
        if principal is None:
            raise Unauthenticated("the token is not valid")
        if right not in principal.rights:
            log.warning(
                "auth.denied",
                extra={"fields": {"token": principal.name, "method": method, "right": right}},
            )
            raise PermissionDenied(f"this token lacks the {right!r} right for {method}")
        return principal

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        method: str = details.method
        right = right_for(method)
        if handler is None or right is None:
            return handler
        try:
            outcome: Principal | StrataError = self.authenticate(
                details.invocation_metadata, method, right
            )
        except StrataError as exc:
            outcome = exc
        return _wrap(handler, outcome)


def _wrap(handler: grpc.RpcMethodHandler, outcome: Principal | StrataError) -> Any:
    """``handler`` with its behaviour run as ``outcome``, or refused with its error."""

    async def enter(context: grpc.aio.ServicerContext) -> None:
        if isinstance(outcome, StrataError):
            await context.abort(grpc_status(outcome), str(outcome))
        else:
            _current.set(outcome)  # each call is its own task: its context ends with it

    codec = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        unary = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await enter(context)
            result = unary(request, context)
            return await result if inspect.isawaitable(result) else result

        return grpc.unary_unary_rpc_method_handler(unary_unary, **codec)
    if handler.unary_stream is not None:
        stream = handler.unary_stream

        async def unary_stream(
            request: Any, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            await enter(context)
            async for item in _items(stream(request, context)):
                yield item

        return grpc.unary_stream_rpc_method_handler(unary_stream, **codec)
    if handler.stream_unary is not None:
        client_stream = handler.stream_unary

        async def stream_unary(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            await enter(context)
            result = client_stream(requests, context)
            return await result if inspect.isawaitable(result) else result

        return grpc.stream_unary_rpc_method_handler(stream_unary, **codec)
    bidi = handler.stream_stream

    async def stream_stream(requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await enter(context)
        async for item in _items(bidi(requests, context)):
            yield item

    return grpc.stream_stream_rpc_method_handler(stream_stream, **codec)


async def _items(produced: Any) -> AsyncIterator[Any]:
    if hasattr(produced, "__aiter__"):
        async for item in produced:
            yield item
    else:
        for item in produced:
            yield item


def interceptors(settings: AuthSettings) -> list[grpc.aio.ServerInterceptor]:
    return [AuthInterceptor(settings)] if settings.enabled else []


def session_user(requested: str) -> tuple[str, Callable[[str], bool] | None]:
    """How a call names a session's user (sessions are per user): the user, or "" with the
    users it may be found among (None: any), when the session is to be found by its id.

    A named user must be one of the token's tenants (PERMISSION_DENIED otherwise); an empty
    one is the token's tenant when it has one, and otherwise is found among its tenants. Another
    tenant's session of the same id is a different session, never named by this caller."""
    p = current()
    if p is None or requested:
        return effective_user(requested), None
    if p.tenants is None:
        return "", None
    if len(p.tenants) == 1:
        return next(iter(p.tenants)), None
    return "", p.allows
