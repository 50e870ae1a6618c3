"""How a call runs: blocking (:class:`Blocking`) or on asyncio (:class:`Asyncio`).

A client method builds its call once (:mod:`stratad_client.calls`: the stub, the request, the
deadline, how to read the reply); the client's transport runs it, maps a ``grpc.RpcError`` to
the client's exception family (:mod:`stratad_client.errors`) and, for the asyncio transport,
returns an awaitable or an async iterator. Nothing else differs between the two clients.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

import grpc

from stratad_client.calls import Pages, Stream, Unary
from stratad_client.channel import Connection, aio_channel, sync_channel
from stratad_client.errors import error_from

R = TypeVar("R")

CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]


class Blocking:
    """Runs calls on a blocking ``grpc.Channel``."""

    def __init__(self, address: str, conn: Connection) -> None:
        self.channel: Any = sync_channel(address, conn, CHANNEL_OPTIONS)

    def unary(self, call: Unary[R]) -> R:
        try:
            reply = call.stub(call.request, timeout=call.timeout)
        except grpc.RpcError as exc:
            raise error_from(exc) from exc
        return call.read(reply)

    def stream(self, call: Stream[R]) -> Iterator[R]:
        replies = call.stub(call.request, timeout=call.timeout)
        try:
            yield from replies
        except grpc.RpcError as exc:
            raise error_from(exc) from exc
        finally:
            replies.cancel()  # left early (a watch the caller stops): the call ends too

    def pages(self, pages: Pages[R]) -> Iterator[R]:
        call: Unary[Any] | None = pages.first()
        while call is not None:
            reply = self.unary(call)
            yield from pages.items(reply)
            call = pages.after(reply)

    def close(self) -> None:
        self.channel.close()


class Asyncio:
    """Runs calls on a ``grpc.aio`` channel: unary calls are awaitables, streams async
    iterators."""

    def __init__(self, address: str, conn: Connection) -> None:
        self.channel: Any = aio_channel(address, conn, CHANNEL_OPTIONS)

    async def unary(self, call: Unary[R]) -> R:
        try:
            reply = await call.stub(call.request, timeout=call.timeout)
        except grpc.RpcError as exc:
            raise error_from(exc) from exc
        return call.read(reply)

    async def stream(self, call: Stream[R]) -> AsyncIterator[R]:
        replies = call.stub(call.request, timeout=call.timeout)
        try:
            async for item in replies:
                yield item
        except grpc.RpcError as exc:
            raise error_from(exc) from exc
        finally:
            replies.cancel()  # left early (a watch the caller stops): the call ends too

    async def pages(self, pages: Pages[R]) -> AsyncIterator[R]:
        call: Unary[Any] | None = pages.first()
        while call is not None:
            reply = await self.unary(call)
            for item in pages.items(reply):
                yield item
            call = pages.after(reply)

    async def close(self) -> None:
        await self.channel.close()


Transport = Blocking | Asyncio
