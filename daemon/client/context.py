"""The context methods of both clients (the bases of :class:`MemoryClient` and
:class:`AsyncMemoryClient`): ``get_context``, ``set_anchor``, ``get_anchor`` and
``pin_memory``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from daemon.client.base import BaseClient
from daemon.client.requests import (
    get_anchor_request,
    get_context_request,
    pin_request,
    set_anchor_request,
)
from daemon.pb import memory_pb2 as pb


class ContextMethods(BaseClient):
    """Blocking: the base of :class:`daemon.client.MemoryClient`."""

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
        timeout: float | None = None,
    ) -> pb.GetContextResponse:
        """What to put before the next model call of session ``session_id``, within
        ``max_tokens``: its anchor, its scope's pinned memories, its window and the memories
        recalled for ``query`` (None: formulated from the window). ``text`` is the block
        ready for a system prompt; ``messages`` and ``memories`` are its parts. ``user_id``
        names the session's user (required for a session the daemon has not seen)."""
        req = get_context_request(
            session_id, max_tokens, query, user_id, agent_id, per_kind_caps, window_share,
            kinds, recipe, explain,
        )  # fmt: skip
        return self._memory.GetContext(req, timeout=self._t(timeout))

    def set_anchor(
        self,
        session_id: str,
        text: str,
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> pb.SetAnchorResponse:
        """Replace the session's anchor with ``text`` (empty: clear it); durable on return.
        GetContext puts it first, also after the session ended."""
        req = set_anchor_request(session_id, text, user_id, agent_id)
        return self._memory.SetAnchor(req, timeout=self._t(timeout))

    def get_anchor(
        self, session_id: str, *, user_id: str = "", timeout: float | None = None
    ) -> pb.GetAnchorResponse:
        """The session's anchor, or ``grpc.RpcError`` NOT_FOUND."""
        req = get_anchor_request(session_id, user_id)
        return self._memory.GetAnchor(req, timeout=self._t(timeout))

    def pin_memory(
        self,
        memory_id: str,
        *,
        pinned: bool = True,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> pb.PinMemoryResponse:
        """Pin (``pinned=False``: unpin) a memory (a hit's or item's id) for ``user_id``
        (every agent of it) or for its agent ``agent_id`` only: GetContext puts the pinned
        memories first."""
        req = pin_request(memory_id, pinned, user_id, agent_id)
        return self._memory.PinMemory(req, timeout=self._t(timeout))


class AsyncContextMethods(BaseClient):
    """asyncio: the base of :class:`daemon.client.AsyncMemoryClient`, as
    :class:`ContextMethods`."""

    async def get_context(
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
        timeout: float | None = None,
    ) -> pb.GetContextResponse:
        req = get_context_request(
            session_id, max_tokens, query, user_id, agent_id, per_kind_caps, window_share,
            kinds, recipe, explain,
        )  # fmt: skip
        return await self._memory.GetContext(req, timeout=self._t(timeout))

    async def set_anchor(
        self,
        session_id: str,
        text: str,
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> pb.SetAnchorResponse:
        req = set_anchor_request(session_id, text, user_id, agent_id)
        return await self._memory.SetAnchor(req, timeout=self._t(timeout))

    async def get_anchor(
        self, session_id: str, *, user_id: str = "", timeout: float | None = None
    ) -> pb.GetAnchorResponse:
        req = get_anchor_request(session_id, user_id)
        return await self._memory.GetAnchor(req, timeout=self._t(timeout))

    async def pin_memory(
        self,
        memory_id: str,
        *,
        pinned: bool = True,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> pb.PinMemoryResponse:
        req = pin_request(memory_id, pinned, user_id, agent_id)
        return await self._memory.PinMemory(req, timeout=self._t(timeout))
