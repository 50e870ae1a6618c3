"""Malformed requests are INVALID_ARGUMENT, not UNKNOWN.

gRPC's Python server answers UNKNOWN ("Unexpected DecodeError") when a request's bytes are not
the RPC's request message (corrupt wire format, a string field that is not UTF-8, a field of
the wrong wire type). :class:`MalformedRequestInterceptor` gives every handler of Strata's own
services a deserializer that returns a :class:`daemon.codec.status.MalformedRequest` instead of
raising; the servicers' :func:`daemon.codec.status.rpc` decorators turn it into INVALID_ARGUMENT.
Health and reflection keep gRPC's own behaviour.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from daemon.codec.status import MalformedRequest

PREFIX = "/strata.v1."


def tolerant(deserialize: Callable[[bytes], Any], method: str) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except (DecodeError, ValueError, TypeError) as exc:
            return MalformedRequest(method, str(exc))

    return parse


class MalformedRequestInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        method: str = details.method
        deserialize = getattr(handler, "request_deserializer", None)
        if handler is None or deserialize is None or not method.startswith(PREFIX):
            return handler
        replaced: grpc.RpcMethodHandler = handler._replace(
            request_deserializer=tolerant(deserialize, method)
        )
        return replaced
