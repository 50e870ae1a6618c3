"""Authentication and rights, at the server's door.

A call carries ``authorization: Bearer <token>`` in its metadata. :class:`AuthInterceptor`
hashes the token (SHA-256), finds its entry in ``auth.tokens``, checks that the entry has the
right the method needs (:data:`RIGHTS_BY_METHOD`; admin implies every right) and runs the call
as the token's :class:`daemon.services.tenancy.Principal`. The handlers ask
:mod:`daemon.services.tenancy` which tenant a request acts for and what it may see.

Health and reflection stay open: they are what probes and tools use before they have a token.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from daemon.codec.status import (
    PermissionDenied,
    StrataError,
    Unauthenticated,
    grpc_status,
)
from daemon.server.interceptors import HandlerInterceptor
from daemon.services.tenancy import Principal, act_as
from daemon.settings.security import AuthSettings

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
# Any method not listed above needs admin: every method of AdminService and WeaverService.
OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def right_for(method: str) -> str | None:
    """The right ``method`` needs; None for an open method (health, reflection)."""
    if method.startswith(OPEN_PREFIXES):
        return None
    return RIGHTS_BY_METHOD.get(method, "admin")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class AuthInterceptor(HandlerInterceptor):
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

    def replace(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        method: str = details.method
        right = right_for(method)
        if right is None:
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
            act_as(outcome)  # each call is its own task: its context ends with it

    def reply(behavior: Callable[..., Any]) -> Callable[..., Any]:
        """One reply, to a request or to a stream of them."""

        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await enter(context)
            result = behavior(request, context)
            return await result if inspect.isawaitable(result) else result

        return call

    def replies(behavior: Callable[..., Any]) -> Callable[..., AsyncIterator[Any]]:
        """A stream of replies, to a request or to a stream of them."""

        async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await enter(context)
            async for item in _items(behavior(request, context)):
                yield item

        return call

    codec = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(reply(handler.unary_unary), **codec)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(replies(handler.unary_stream), **codec)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(reply(handler.stream_unary), **codec)
    return grpc.stream_stream_rpc_method_handler(replies(handler.stream_stream), **codec)


async def _items(produced: Any) -> AsyncIterator[Any]:
    if hasattr(produced, "__aiter__"):
        async for item in produced:
            yield item
    else:
        for item in produced:
            yield item


def interceptors(settings: AuthSettings) -> list[grpc.aio.ServerInterceptor]:
    return [AuthInterceptor(settings)] if settings.enabled else []
