"""The gRPC server's interceptors share one step: gRPC finds a method's handler, and the
interceptor hands back that handler replaced (or as it is). :class:`HandlerInterceptor` is that
step, once; each interceptor says only how it replaces a handler
(:class:`daemon.server.auth.AuthInterceptor`,
:class:`daemon.server.rpc_metrics.RpcMetricsInterceptor`, :class:`MalformedRequestInterceptor`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable

import grpc

from daemon.codec.wire import PREFIX, tolerant


class HandlerInterceptor(grpc.aio.ServerInterceptor, ABC):
    """An interceptor that replaces the handlers of the methods gRPC knows; an unknown method
    (no handler: gRPC answers UNIMPLEMENTED itself) passes untouched."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        return self.replace(handler, details)

    @abstractmethod
    def replace(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        """The handler to run for the call ``details`` names: ``handler`` or one around it.
        Raises nothing: a refusal is a handler that aborts."""


class MalformedRequestInterceptor(HandlerInterceptor):
    """Every handler of Strata's own services gets a deserializer that hands a malformed
    request on as a :class:`daemon.codec.status.MalformedRequest` (INVALID_ARGUMENT) instead of
    raising (gRPC's UNKNOWN); health and reflection keep gRPC's behaviour. Innermost: it
    wraps the real handlers."""

    def replace(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        method: str = details.method
        deserialize = getattr(handler, "request_deserializer", None)
        if deserialize is None or not method.startswith(PREFIX):
            return handler
        replaced: grpc.RpcMethodHandler = handler._replace(
            request_deserializer=tolerant(deserialize, method)
        )
        return replaced
