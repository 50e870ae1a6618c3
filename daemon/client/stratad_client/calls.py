"""A call, described once for both clients: what a client method builds and its transport runs
(:mod:`stratad_client.transport`).

- :class:`Unary`: one request, one reply (read by ``read``, the reply itself by default); the
  request may also be an iterator of messages (a client stream, as Import's).
- :class:`Stream`: one request, a stream of replies.
- :class:`Pages`: a paged list call, from the first page until a page has no next token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

R = TypeVar("R")


def _same(reply: Any) -> Any:
    return reply


@dataclass(frozen=True, slots=True)
class Unary(Generic[R]):
    """``stub(request, timeout=timeout)``, its reply read by ``read``."""

    stub: Callable[..., Any]
    request: Any
    timeout: float | None
    read: Callable[[Any], R] = field(default=_same)


@dataclass(frozen=True, slots=True)
class Stream(Generic[R]):
    """``stub(request, timeout=timeout)``: the replies as they come."""

    stub: Callable[..., Any]
    request: Any
    timeout: float | None


@dataclass(frozen=True, slots=True)
class Pages(Generic[R]):
    """Every item of a paged list: ``page(token)`` is the call of one page (``""``: the first),
    ``items(reply)`` its items; a reply's ``next_page_token`` names the next page."""

    page: Callable[[str], Unary[Any]]
    items: Callable[[Any], Iterable[R]]

    def first(self) -> Unary[Any]:
        return self.page("")

    def after(self, reply: Any) -> Unary[Any] | None:
        """The call of the page after ``reply``, or None when it was the last."""
        token: str = reply.next_page_token
        return self.page(token) if token else None
