"""The method decorators that define a client method once, for the blocking and the asyncio
client.

A method decorated with :func:`unary`, :func:`stream` or :func:`paged` only *describes* its call
(:mod:`stratad_client.calls`): the stub, the request, the deadline. Read on a client, it is a
function of the same parameters that runs the call on the client's transport: on a blocking
client it returns the reply (an iterator for a stream or pages); on an asyncio client an
awaitable (an async iterator for a stream or pages). The types say so (the overloads of
``__get__``): mypy and an IDE see ``MemoryClient.append(...) -> AppendResponse`` and
``AsyncMemoryClient.append(...) -> Coroutine[..., AppendResponse]``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

from stratad_client.calls import Pages, Stream, Unary
from stratad_client.transport import Asyncio, Blocking

P = ParamSpec("P")
R = TypeVar("R")
D = TypeVar("D")
Item = TypeVar("Item")
Self = TypeVar("Self", bound="_Method[Any, Any, Any]")


class _OnBlocking(Protocol):
    @property
    def _transport(self) -> Blocking: ...


class _OnAsyncio(Protocol):
    @property
    def _transport(self) -> Asyncio: ...


class _Method(Generic[P, R, D]):
    """A client method: ``build(client, *args, **kwargs)`` describes the call (a ``D``);
    :meth:`_run` runs it on the client's transport."""

    def __init__(self, build: Callable[Concatenate[Any, P], D]) -> None:
        self.build = build
        self.__doc__ = build.__doc__
        self.__name__ = build.__name__
        signature = inspect.signature(build)
        # The parameters without ``self``; the reply's type depends on the client (see above).
        self.__signature__ = signature.replace(
            parameters=list(signature.parameters.values())[1:],
            return_annotation=inspect.Signature.empty,
        )

    def _run(self, transport: Any, described: D) -> Any:
        raise NotImplementedError

    def __get__(self, client: Any, owner: type | None = None) -> Any:
        if client is None:
            return self

        @functools.wraps(self.build)
        def method(*args: Any, **kwargs: Any) -> Any:
            return self._run(client._transport, self.build(client, *args, **kwargs))

        method.__signature__ = self.__signature__  # type: ignore[attr-defined]
        return method


class unary(_Method[P, R, Unary[R]]):
    """One request, one reply: the reply (blocking) or an awaitable of it (asyncio)."""

    def _run(self, transport: Any, described: Unary[R]) -> Any:
        return transport.unary(described)

    def pages(
        self, client: Any, kwargs: Mapping[str, Any], items: Callable[[R], Iterable[Item]]
    ) -> Pages[Item]:
        """Every item of this paged list call on ``client`` (``kwargs``: its keyword arguments
        but ``page_token``; ``items``: a reply's items), page after page."""
        build: Callable[..., Unary[R]] = self.build  # mypy cannot check **kwargs against P
        return Pages(lambda token: build(client, **{**kwargs, "page_token": token}), items)

    @overload
    def __get__(self: Self, client: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(self, client: _OnBlocking, owner: type | None = None) -> Callable[P, R]: ...
    @overload
    def __get__(
        self, client: _OnAsyncio, owner: type | None = None
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(self, client: Any, owner: type | None = None) -> Any:
        return super().__get__(client, owner)


class stream(_Method[P, R, Stream[R] | Pages[R]]):
    """A stream of replies, or every item of a paged list: an iterator (blocking) or an async
    iterator (asyncio)."""

    def _run(self, transport: Any, described: Stream[R] | Pages[R]) -> Any:
        if isinstance(described, Pages):
            return transport.pages(described)
        return transport.stream(described)

    @overload
    def __get__(self: Self, client: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(
        self, client: _OnBlocking, owner: type | None = None
    ) -> Callable[P, Iterator[R]]: ...
    @overload
    def __get__(
        self, client: _OnAsyncio, owner: type | None = None
    ) -> Callable[P, AsyncIterator[R]]: ...
    def __get__(self, client: Any, owner: type | None = None) -> Any:
        return super().__get__(client, owner)
