"""The interceptors' one step (daemon.server.interceptors), on a real grpc.aio server on
loopback: a known method's handler is the one the interceptor hands back, in the order the
server lists them; an unknown method passes every interceptor untouched and gRPC answers
UNIMPLEMENTED; a malformed request to Strata's own services is INVALID_ARGUMENT."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from daemon.codec.status import MalformedRequest
from daemon.server.interceptors import HandlerInterceptor, MalformedRequestInterceptor

ECHO = "/strata.v1.Test/Echo"


class Tagging(HandlerInterceptor):
    """Replaces a handler by one that runs it and appends its tag to the reply."""

    def __init__(self, tag: bytes, seen: list[str]) -> None:
        self._tag = tag
        self._seen = seen

    def replace(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        self._seen.append(f"{self._tag.decode()} {details.method}")
        inner = handler.unary_unary

        async def tagged(request: Any, context: grpc.aio.ServicerContext) -> bytes:
            reply: bytes = await inner(request, context)
            return reply + self._tag

        return handler._replace(unary_unary=tagged)  # type: ignore[no-any-return]


async def _echo(request: Any, context: grpc.aio.ServicerContext) -> bytes:
    if isinstance(request, MalformedRequest):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed: {request.method}")
    return bytes(request)


def _strict(data: bytes) -> bytes:
    if data.startswith(b"\xff"):
        raise ValueError("not the request message")
    return data


async def _run(seen: list[str]) -> dict[str, Any]:
    handler = grpc.unary_unary_rpc_method_handler(
        _echo, request_deserializer=_strict, response_serializer=bytes
    )
    server = grpc.aio.server(
        interceptors=[
            Tagging(b"A", seen),
            Tagging(b"B", seen),
            MalformedRequestInterceptor(),
        ]
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("strata.v1.Test", {"Echo": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    out: dict[str, Any] = {}
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            out["echo"] = await channel.unary_unary(ECHO)(b"hi", timeout=10)
            for name, method, body in (
                ("unknown", "/strata.v1.Test/Nothing", b"hi"),
                ("malformed", ECHO, b"\xffhi"),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await channel.unary_unary(method)(body, timeout=10)
                out[name] = (err.value.code(), err.value.details())
    finally:
        await server.stop(None)
    return out


def test_each_interceptor_replaces_a_known_methods_handler_and_leaves_an_unknown_one() -> None:
    seen: list[str] = []
    out = asyncio.run(_run(seen))
    # The server's first interceptor is the outermost: its tag is added last.
    assert out["echo"] == b"hiBA"
    assert out["unknown"][0] == grpc.StatusCode.UNIMPLEMENTED
    assert out["malformed"] == (grpc.StatusCode.INVALID_ARGUMENT, f"malformed: {ECHO}")
    # Each call asked each interceptor once, for a method gRPC knows only, the innermost first
    # (each replaces the handler the ones inside it handed back).
    assert seen == [f"{tag} {ECHO}" for _ in range(2) for tag in "BA"]
