"""A session's context, below the wire: what GetContext, SetAnchor and GetAnchor do once
their request is checked. The assembly of the block is :mod:`recall.context.assembly`, the pins
:mod:`recall.context.pins`, the counting of what is handed out :mod:`recall.context.access`.

**Naming.** A call names a session by its id and, when the caller knows it, its user
(:class:`SessionName`; the daemon's auth decides which users a caller may name). A named user
with no session of this id is a session the daemon has never seen: GetContext gives its
memories (no window) and SetAnchor sets its anchor. A session named by its id alone that no
user has is SessionNotFound (whose memories would be recalled?). An empty agent means the
session's agent; another agent than the session's is ScopeMismatch, as for Append.

**GetContext** (:meth:`SessionContexts.get`):

1. the budget: the request's ``max_tokens``, its ``window_share`` or the ``[context]`` one,
   the ``[context]`` per-kind caps with the request's replacing the kinds they name;
2. the query: the caller's, or the one formulated from the window
   (:func:`recall.context.assembly.formulate_query`: the last user message and the names its last
   ``query_turns`` messages mention), cut to ``max_query_bytes``; an empty query recalls
   nothing. Recall asks for ``recall_k`` memories (0: ``recall.max_k``, and never more);
3. Recall runs on the engine's request threads, as for Pack, while the anchor and the pins
   are read; it never returns a memory citing a message of the session's window (the live
   session's own older messages it may: the live index stage indexes them as they go);
4. the story so far (the scope's story digest, ``tiers.semantic.digests``) leads the recalled
   memories when the request asks for it (``story``), or leaves it to the window and the
   window holds fewer than ``story_below_tokens`` tokens;
5. the block is assembled within the budget (:func:`recall.context.assembly.assemble`), and the
   memories it hands out are counted (:func:`recall.context.access.count_handed`) before it
   goes out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

from recall import Candidate, Query
from recall.context.access import count_handed
from recall.context.assembly import Budget, Context, assemble, formulate_query
from recall.context.pins import PinnedMemories
from recall.engine import RecallEngine
from recall.recipe import RecallSettings
from recall.result import RecallResult
from tiers.core.errors import NotFound, ScopeMismatch, SessionNotFound
from tiers.core.locks import when_free
from tiers.core.records import Scope, StoredMessage
from tiers.keyed.access import AccessCounts
from tiers.keyed.anchors import Anchor, AnchorStore
from tiers.semantic.digests import STORY, digest_id
from tiers.semantic.store import SemanticStore
from tiers.working.memory import WorkingMemory
from tiers.working.session import WindowView


class AnchorNotFound(NotFound):
    """The session has no anchor."""


@dataclass(frozen=True, slots=True)
class ContextDefaults:
    """GetContext's defaults (the ``[context]`` settings) and the longest query it makes."""

    max_query_bytes: int
    window_share: float = 0.5  # of what the anchor and the pins leave
    pinned_share: float = 0.25  # of max_tokens
    per_kind_caps: Mapping[str, int] = field(default_factory=dict)
    recall_k: int = 0  # 0: recall.max_k
    query_turns: int = 4
    story_below_tokens: int = 0  # the story so far leads when the window is shorter (0: never)


@dataclass(frozen=True, slots=True)
class SessionName:
    """How a call names a session: its id, the user (empty: found by the id among the users
    ``allowed`` admits, any when None), and the agent asked for (empty: the session's)."""

    session_id: str
    user_id: str
    agent_id: str = ""
    allowed: Callable[[str], bool] | None = None


@dataclass(frozen=True, slots=True)
class ContextAsk:
    """A GetContext request, checked: kinds and the recipe are known, caps not negative."""

    max_tokens: int
    window_share: float | None = None  # None: the default
    per_kind_caps: Mapping[str, int] = field(default_factory=dict)  # over the defaults
    query: str = ""  # empty: formulated from the window
    kinds: tuple[str, ...] = ()
    recipe: str = ""
    explain: bool = False
    story: bool | None = None  # lead with the story so far; None: by the window's length


@dataclass(frozen=True, slots=True)
class SessionContext:
    """GetContext's answer: the block, the session's scope and window (None: never seen),
    the recall it was made from, and each stage's time (ms)."""

    context: Context
    scope: Scope
    view: WindowView | None
    query: Query
    result: RecallResult
    timings: dict[str, float]


@dataclass(frozen=True, slots=True)
class SessionContexts:
    """GetContext, SetAnchor and GetAnchor over the stores."""

    working: WorkingMemory
    engine: RecallEngine
    semantic: SemanticStore
    anchors: AnchorStore
    pinned: PinnedMemories
    access: AccessCounts | None
    recall: RecallSettings
    defaults: ContextDefaults

    # -- naming ------------------------------------------------------------------------------
    def session(self, name: SessionName) -> tuple[Scope, WindowView | None]:
        """The scope of the session ``name`` names and its window (None: never seen). Raises
        SessionNotFound (named by its id alone, and no user has it), AmbiguousSession,
        ScopeMismatch."""
        sid = name.session_id
        try:
            view = self.working.window(sid, user_id=name.user_id, allowed=name.allowed)
        except SessionNotFound:
            if not name.user_id:
                raise SessionNotFound(
                    f"session {sid!r} not found: name scope.user_id for a session the daemon "
                    "has not seen yet"
                ) from None
            return Scope(name.user_id, name.agent_id), None
        if name.agent_id and name.agent_id != view.scope.agent_id:
            raise ScopeMismatch(f"scope.agent_id differs from the agent of session {sid!r}")
        return view.scope, view

    async def free_session(self, name: SessionName) -> tuple[Scope, WindowView | None]:
        """:meth:`session` from the event loop, which waits for the working memory's lock
        without blocking (:func:`tiers.core.locks.when_free`)."""
        return await when_free(self.working.write_lock, lambda: self.session(name))

    # -- anchors -----------------------------------------------------------------------------
    async def set_anchor(self, name: SessionName, text: str) -> tuple[Anchor | None, bool]:
        """Set the session's anchor (a blank text removes it); the anchor (None: removed) and
        whether one was replaced."""
        scope, _view = await self.free_session(name)
        text = text if text.strip() else ""
        return await asyncio.to_thread(self.anchors.set, scope, name.session_id, text)

    async def anchor(self, name: SessionName) -> Anchor:
        """The session's anchor; AnchorNotFound when it has none."""
        scope, _view = await self.free_session(name)
        anchor = self.anchors.get(scope.user_id, name.session_id)
        if anchor is None:
            raise AnchorNotFound(f"session {name.session_id!r} has no anchor")
        return anchor

    # -- GetContext --------------------------------------------------------------------------
    def budget(self, ask: ContextAsk) -> Budget:
        """The request's budget over the defaults."""
        d = self.defaults
        share = d.window_share if ask.window_share is None else ask.window_share
        caps = {**{str(k): v for k, v in d.per_kind_caps.items()}, **ask.per_kind_caps}
        return Budget(ask.max_tokens, share, d.pinned_share, caps)

    def query_text(self, ask: ContextAsk, view: WindowView | None) -> str:
        """The caller's query, or the one formulated from the window (cut to
        ``max_query_bytes``)."""
        if ask.query.strip():
            return ask.query
        window = view.messages if view is not None else []
        text = formulate_query(window, self.defaults.query_turns)
        return text.encode()[: self.defaults.max_query_bytes].decode(errors="ignore")

    def query(self, ask: ContextAsk, text: str, scope: Scope) -> Query:
        """What GetContext asks Recall for: ``recall_k`` memories (0: ``recall.max_k``, and
        never more) of the request's kinds, by its recipe."""
        settings = self.recall
        return Query(
            text=text,
            scope=scope,
            k=min(self.defaults.recall_k or settings.max_k, settings.max_k),
            recipe=settings.recipe(ask.recipe),
            kinds=tuple(dict.fromkeys(ask.kinds)),
            explain=ask.explain,
        )

    async def get(self, name: SessionName, ask: ContextAsk) -> SessionContext:
        """The session's anchor, its scope's pins, its window and the memories recalled for
        the query (see the module's docstring), within ``ask.max_tokens``."""
        began = time.perf_counter()
        budget = self.budget(ask)
        scope, view = await self.free_session(name)
        text = self.query_text(ask, view)
        query = self.query(ask, text, scope)
        if view is not None and view.messages:  # the window is shown as it is: never recalled
            shown = (name.session_id, view.messages[0].seq, view.messages[-1].seq)
            query = replace(query, exclude_from=(shown,))
        session_ms = _ms(began)
        # Recall runs on the engine's threads while the anchor and the pins are read.
        recalled: Future[RecallResult] | None = None
        if text.strip():
            recalled = self.engine.submit(query)
        t = time.perf_counter()
        anchor = self.anchors.get(scope.user_id, name.session_id)
        pinned = await asyncio.to_thread(self.pinned.for_session, scope)
        window = view.messages if view is not None else []
        story = await asyncio.to_thread(self.story, ask, scope, window)
        pins_ms = _ms(t)
        result = RecallResult([])
        if recalled is not None:
            result = await asyncio.wrap_future(recalled)
        t = time.perf_counter()
        why = recall_reasons(result.hits) if ask.explain else {}
        hits = result.hits
        if story is not None:
            hits = [story, *(h for h in hits if h.point.id != story.point.id)]
            why[story.point.id] = "the story so far: the session's window is short"
        ctx = assemble(budget, name.session_id, anchor, pinned, window, hits, why)
        assemble_ms = _ms(t)
        t = time.perf_counter()
        await count_handed(self.access, [m.candidate for m in ctx.memories])
        timings = {
            **result.timings,
            "session": session_ms,
            "pins": pins_ms,
            "assemble": assemble_ms,
            "count": _ms(t),
            "context": _ms(began),
        }
        return SessionContext(ctx, scope, view, query, result, timings)

    def story(
        self, ask: ContextAsk, scope: Scope, window: Sequence[StoredMessage]
    ) -> Candidate | None:
        """The scope's story digest, when the request asks for it, or leaves it to the
        window's length and the window holds fewer than ``story_below_tokens`` tokens (and
        the request's kinds, if it names any, take digests)."""
        wanted = ask.story
        if wanted is None:
            below = self.defaults.story_below_tokens
            kinds_ok = not ask.kinds or "digest" in ask.kinds
            wanted = kinds_ok and below > 0 and sum(m.tokens for m in window) < below
        if not wanted or not self.semantic.ready:  # Tier 3 starting: the block without it
            return None
        _embedder, vectors = self.semantic.wait_ready(0)
        found = vectors.get([digest_id(scope, STORY)], scope.user_id)
        return Candidate(found[0]) if found else None


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)


def recall_reasons(hits: list[Candidate]) -> dict[str, str]:
    """Why each recalled memory is in the block (for explain), by id."""
    out = {}
    for rank, c in enumerate(hits, 1):
        channels = ", ".join(f"{name} #{r}" for name, r in sorted(c.ranks.items()))
        via = f"; found via {c.found_via}" if c.found_via else ""
        out[c.point.id] = (
            f"recalled for the query: rank {rank} of {len(hits)}, score {c.score:.4f}"
            + (f" ({channels})" if channels else "")
            + via
        )
    return out
