"""The context calls of :class:`stratad_client.MemoryClient` and its asyncio twin:
``get_context``, ``set_anchor``, ``get_anchor`` and ``pin_memory``, defined once for both."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stratad_client.base import Api, T
from stratad_client.calls import Unary
from stratad_client.pb import memory_pb2 as pb
from stratad_client.requests import (
    get_anchor_request,
    get_context_request,
    pin_request,
    set_anchor_request,
)
from stratad_client.rpc import unary


class ContextApi(Api[T]):
    """The context calls (the base of :class:`MemoryApi`)."""

    @unary
    def get_context(
        self,
        session_id: str,
        max_tokens: int,
        *,
        query: str | None = None,
        user_id: str = "",
        agent_id: str = "",
        per_kind_caps: Mapping[str, int] | None = None,
        window_share: float | None = None,
        kinds: Iterable[str] = (),
        recipe: str = "",
        explain: bool = False,
        story: bool | None = None,
        timeout: float | None = None,
    ) -> Unary[pb.GetContextResponse]:
        """What to put before the next model call of session ``session_id``, within
        ``max_tokens``: its anchor, its scope's pinned memories, its window and the memories
        recalled for ``query`` (None: formulated from the window). ``text`` is the block
        ready for a system prompt; ``messages`` and ``memories`` are its parts. ``user_id``
        names the session's user (required for a session the daemon has not seen).
        ``per_kind_caps``: the most tokens per memory kind; ``window_share``: the part of the
        budget the window may take (None: the daemon's setting); ``kinds``: only memories of
        these kinds; ``recipe``: a named recall recipe of the daemon; ``explain``: say why
        each memory was chosen; ``story``: lead with the story so far (None: when the window
        is shorter than the daemon's context.story_below_tokens)."""
        req = get_context_request(
            session_id, max_tokens, query, user_id, agent_id, per_kind_caps, window_share,
            kinds, recipe, explain,
        )  # fmt: skip
        if story is not None:
            req.story = story
        return Unary(self._memory.GetContext, req, self._t(timeout))

    @unary
    def set_anchor(
        self,
        session_id: str,
        text: str,
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> Unary[pb.SetAnchorResponse]:
        """Replace the anchor of session ``session_id`` with ``text`` (empty: clear it);
        durable on return. GetContext puts it first, also after the session ended."""
        req = set_anchor_request(session_id, text, user_id, agent_id)
        return Unary(self._memory.SetAnchor, req, self._t(timeout))

    @unary
    def get_anchor(
        self, session_id: str, *, user_id: str = "", timeout: float | None = None
    ) -> Unary[pb.GetAnchorResponse]:
        """The anchor of session ``session_id``, or :class:`NotFoundError`."""
        req = get_anchor_request(session_id, user_id)
        return Unary(self._memory.GetAnchor, req, self._t(timeout))

    @unary
    def pin_memory(
        self,
        memory_id: str,
        *,
        pinned: bool = True,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> Unary[pb.PinMemoryResponse]:
        """Pin (``pinned=False``: unpin) a memory (``memory_id``: a hit's or item's id) for
        ``user_id`` (every agent of it) or for its agent ``agent_id`` only: GetContext puts the
        pinned memories first."""
        req = pin_request(memory_id, pinned, user_id, agent_id)
        return Unary(self._memory.PinMemory, req, self._t(timeout))
