"""The gRPC server interceptor of the daemon's metrics (:mod:`daemon.server.metrics`): every RPC
by service, method and status code, with its latency.

The code is recorded before the reply leaves (at ``abort``, or before the handler's result is
returned), so a client that scrapes right after its reply sees its own call counted.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn

import grpc
from prometheus_client import Counter, Histogram

from daemon.server.interceptors import HandlerInterceptor


def split_method(full: str) -> tuple[str, str]:
    """``/strata.v1.MemoryService/Append`` -> (``strata.v1.MemoryService``, ``Append``)."""
    service, _, method = full.lstrip("/").rpartition("/")
    return service or "unknown", method or full


class RpcMetricsInterceptor(HandlerInterceptor):
    """Counts and times every RPC; the status code is the one the handler ended with."""

    def __init__(self, requests: Counter, seconds: Histogram) -> None:
        self._requests = requests  # by service, method and status code
        self._seconds = seconds

    def replace(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        service, method = split_method(details.method)
        record = self._recorder(service, method)
        for attr in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
            behavior = getattr(handler, attr)
            if behavior is not None:
                wrapped = _wrap(behavior, record)
                if wrapped is not None:
                    return handler._replace(**{attr: wrapped})
        return handler

    def _recorder(self, service: str, method: str) -> Callable[[grpc.StatusCode, float], None]:
        requests, durations = self._requests, self._seconds

        def record(code: grpc.StatusCode, seconds: float) -> None:
            requests.labels(service, method, code.name).inc()
            durations.labels(service, method, code.name).observe(seconds)

        return record


def _code(context: grpc.aio.ServicerContext, exc: BaseException | None) -> grpc.StatusCode:
    code = context.code()
    if isinstance(code, grpc.StatusCode) and (code is not grpc.StatusCode.OK or exc is None):
        return code
    if exc is None:
        return grpc.StatusCode.OK
    if isinstance(exc, grpc.aio.AbortError):  # aborted without a code we could read
        return grpc.StatusCode.UNKNOWN
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):  # the client went away
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


class _RecordingContext:
    """The handler's context, but ``abort`` records the code first: gRPC sends the status to
    the client inside ``abort``, so recording after it would let a client that scrapes right
    after its error reply see the old count."""

    def __init__(
        self,
        context: grpc.aio.ServicerContext,
        record: Callable[[grpc.StatusCode, float], None],
        began: float,
    ) -> None:
        self._context = context
        self._record = record
        self._began = began
        self.recorded = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    async def abort(self, code: grpc.StatusCode, details: str = "", *args: Any) -> NoReturn:
        self.done(code)
        await self._context.abort(code, details, *args)
        raise AssertionError("unreachable: abort raises")  # pragma: no cover

    def done(self, code: grpc.StatusCode) -> None:
        if not self.recorded:
            self.recorded = True
            self._record(code, time.perf_counter() - self._began)


def _wrap(
    behavior: Callable[..., Any], record: Callable[[grpc.StatusCode, float], None]
) -> Callable[..., Any] | None:
    """The same kind of callable as ``behavior`` (grpc.aio dispatches on the kind). The code is
    recorded before the reply leaves: at ``abort``, or before the handler's result is returned
    (a unary reply, or a stream's trailing status, is sent after that)."""
    if inspect.iscoroutinefunction(behavior):

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            ctx = _RecordingContext(context, record, time.perf_counter())
            try:
                result = await behavior(request, ctx)
            except BaseException as exc:
                ctx.done(_code(context, exc))
                raise
            ctx.done(_code(context, None))
            return result

        return unary
    if inspect.isasyncgenfunction(behavior):

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            ctx = _RecordingContext(context, record, time.perf_counter())
            try:
                async for item in behavior(request, ctx):
                    yield item
            except BaseException as exc:
                ctx.done(_code(context, exc))
                raise
            ctx.done(_code(context, None))

        return stream
    return None  # a synchronous handler (none of ours): not timed
