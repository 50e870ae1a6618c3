"""The context RPCs of ``strata.v1.MemoryService``: GetContext, SetAnchor, GetAnchor and
PinMemory. The assembly is :mod:`recall.context`; anchors and pins are stored by
:mod:`tiers.keyed.anchors` and :mod:`tiers.keyed.pins`.

A session is named as for GetWorkingMemory (:func:`daemon.server.auth.session_user`): by its id
and, when the caller knows it, its user. A named user with no session of this id is a
session the daemon has never seen: GetContext gives its memories (no window) and SetAnchor
sets its anchor. A session named by its id alone that no user has is NOT_FOUND (the daemon
cannot know whose memories to recall). An empty ``scope.agent_id`` means the session's agent;
another agent than the session's is FAILED_PRECONDITION, as for Append.

Pins belong to a scope: the user's own (no agent) apply to every session of the user, an
agent's to that agent's sessions only (:meth:`tiers.keyed.pins.PinStore.for_session`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from concurrent.futures import Future

import grpc

from daemon.codec import convert
from daemon.codec import validation as check
from daemon.codec.status import InvalidArgument, NotFound, ResourceExhausted, Unavailable, rpc
from daemon.pb import memory_pb2 as pb
from daemon.server import auth
from daemon.services.recall import MAX_PACK_TOKENS, hit_pb, record_access, source_pbs
from daemon.settings.context import ContextSettings
from daemon.settings.sections import LimitsSettings
from recall import Candidate, Query
from recall.context import Budget, Context, Pinned, assemble, formulate_query
from recall.engine import RecallEngine
from recall.recipe import RecallSettings
from recall.result import RecallResult
from tiers.core.errors import ScopeMismatch, SessionNotFound
from tiers.core.records import Scope
from tiers.keyed.access import AccessCounts
from tiers.keyed.anchors import Anchor, AnchorStore
from tiers.keyed.documents import DocumentStore
from tiers.keyed.pins import Pin, PinStore
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import KINDS, MemoryPoint
from tiers.working.memory import WorkingMemory
from tiers.working.session import WindowView

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class AnchorNotFound(NotFound):
    """The session has no anchor."""


class MemoryNotFound(NotFound):
    """No Tier 3 memory of this id in the scope (PinMemory)."""


def _where(scope: Scope) -> str:
    agent = f"agent {scope.agent_id!r}" if scope.agent_id else "no agent"
    return f"user {scope.user_id!r}, {agent}"


def _date(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1_000_000, dt.UTC).strftime("%Y-%m-%d")


def _visible(point: MemoryPoint, scope: Scope) -> bool:
    """Whether a pin of ``scope`` may name ``point``: the user's, and the agent's when the
    scope has one (a user's own pin may name any agent's memory, as Recall sees them)."""
    return point.scope.user_id == scope.user_id and (
        not scope.agent_id or point.scope.agent_id == scope.agent_id
    )


def anchor_pb(anchor: Anchor) -> pb.SessionAnchor:
    return pb.SessionAnchor(
        session_id=anchor.session_id,
        scope=convert.scope(anchor.scope),
        text=anchor.text,
        updated_at=convert.timestamp(anchor.updated_at_us),
    )


class ContextRPCs:
    """Mixed into MemoryService."""

    _limits: LimitsSettings
    _recall_settings: RecallSettings
    _context_settings: ContextSettings
    _working: WorkingMemory
    _engine: RecallEngine | None
    _semantic: SemanticStore | None
    _documents: DocumentStore | None
    _anchors: AnchorStore | None
    _pins: PinStore | None
    _access: AccessCounts | None

    # -- naming ------------------------------------------------------------------------------
    def _session(self, sid: str, scope: pb.Scope) -> tuple[Scope, WindowView | None]:
        """The scope of the session a call names and its window (None: never seen). Raises
        SessionNotFound (named by its id alone, and no user has it), AmbiguousSession,
        ScopeMismatch."""
        requested = check.scope(scope, self._limits)
        user, allowed = auth.session_user(requested.user_id)
        try:
            view = self._working.window(sid, user_id=user, allowed=allowed)
        except SessionNotFound:
            if not user:
                raise SessionNotFound(
                    f"session {sid!r} not found: name scope.user_id for a session the daemon "
                    "has not seen yet"
                ) from None
            return Scope(user, requested.agent_id), None
        if requested.agent_id and requested.agent_id != view.scope.agent_id:
            raise ScopeMismatch(f"scope.agent_id differs from the agent of session {sid!r}")
        return view.scope, view

    def _anchor_store(self) -> AnchorStore:
        if self._anchors is None:
            raise Unavailable("session anchors are not available in this daemon")
        return self._anchors

    def _pin_store(self) -> PinStore:
        if self._pins is None:
            raise Unavailable("pins are not available in this daemon")
        return self._pins

    # -- anchors -----------------------------------------------------------------------------
    @rpc
    async def SetAnchor(
        self, request: pb.SetAnchorRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetAnchorResponse:
        sid = check.session_id(request.session_id, self._limits)
        size = len(request.text.encode())
        if size > self._limits.max_anchor_bytes:
            raise InvalidArgument(
                f"text is {size} bytes; the limit is {self._limits.max_anchor_bytes}"
                " (limits.max_anchor_bytes)"
            )
        store = self._anchor_store()
        scope, _view = self._session(sid, request.scope)
        text = request.text if request.text.strip() else ""
        anchor, replaced = await asyncio.to_thread(store.set, scope, sid, text)
        response = pb.SetAnchorResponse(replaced=replaced)
        if anchor is not None:
            response.anchor.CopyFrom(anchor_pb(anchor))
        return response

    @rpc
    async def GetAnchor(
        self, request: pb.GetAnchorRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetAnchorResponse:
        sid = check.session_id(request.session_id, self._limits)
        scope, _view = self._session(sid, pb.Scope(user_id=request.scope.user_id))
        anchor = self._anchor_store().get(scope.user_id, sid)
        if anchor is None:
            raise AnchorNotFound(f"session {sid!r} has no anchor")
        return pb.GetAnchorResponse(anchor=anchor_pb(anchor))

    # -- pins --------------------------------------------------------------------------------
    @rpc
    async def PinMemory(
        self, request: pb.PinMemoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.PinMemoryResponse:
        checked = check.scope(request.scope, self._limits)
        scope = Scope(auth.effective_user(checked.user_id), checked.agent_id)
        if not scope.user_id:
            raise InvalidArgument("scope.user_id is required: a pin belongs to one user")
        if not _UUID.match(request.memory_id):
            raise InvalidArgument("memory_id must be a memory's id (a UUID)")
        store = self._pin_store()
        mid = request.memory_id
        if request.pinned and store.get(scope, mid) is None:
            limit = self._limits.max_pins
            if store.count(scope) >= limit:
                raise ResourceExhausted(
                    f"{_where(scope)} has {limit} pins, the limit (limits.max_pins): unpin one"
                )
            if not await asyncio.to_thread(self._exists, scope, mid):
                raise MemoryNotFound(f"memory {mid!r} not found ({_where(scope)})")
        changed = await asyncio.to_thread(store.set, scope, mid, request.pinned)
        return pb.PinMemoryResponse(pinned=request.pinned, changed=changed)

    def _exists(self, scope: Scope, memory_id: str) -> bool:
        """Whether the memory is in Tier 3 within ``scope`` (or is a keyed document of it
        that the weaver has not indexed yet)."""
        assert self._semantic is not None
        _embedder, vectors = self._semantic.wait_ready(0)
        if any(_visible(p, scope) for p in vectors.get([memory_id], scope.user_id)):
            return True
        doc = self._documents.find(memory_id) if self._documents is not None else None
        return doc is not None and _visible(doc.point(), scope)

    def _pinned(self, scope: Scope) -> list[Pinned]:
        """The pinned memories of a session of ``scope``, newest pin first, read from Tier 3
        (a keyed document not indexed yet from its record). Pins whose memory is gone are
        skipped, and deleted (:meth:`_prune`)."""
        pins = self._pin_store().for_session(scope)
        if not pins:
            return []
        assert self._semantic is not None
        _embedder, vectors = self._semantic.wait_ready(0)
        # the scope's user's shard alone: a pin's memory is its user's (PinMemory checks);
        # one not found there is looked for everywhere before its pin goes (_prune)
        points = {p.id: p for p in vectors.get([p.memory_id for p in pins], scope.user_id)}
        out: list[Pinned] = []
        missing: list[Pin] = []
        for pin in pins:
            point = points.get(pin.memory_id)
            if point is None and self._documents is not None:
                doc = self._documents.find(pin.memory_id)
                point = doc.point() if doc is not None and doc.recalled else None
                if doc is not None and point is None:
                    continue  # a document without text: nothing to show, nothing gone
            if point is None:
                missing.append(pin)
            elif _visible(point, pin.scope):
                whose = f"agent {pin.scope.agent_id!r}" if pin.scope.agent_id else "the user"
                why = f"pinned for {whose} on {_date(pin.pinned_at_us)}"
                out.append(Pinned(Candidate(point), why))
        if missing:
            self._prune(missing)
        return out

    def _prune(self, pins: list[Pin]) -> None:
        """Delete the pins whose memory is gone: checked again under Tier 3's write lock, so
        a rebuild (which deletes and writes points again, holding it) is not mistaken for a
        loss; when a writer holds the lock, the pins wait for a later call."""
        assert self._semantic is not None
        if not self._semantic.write_lock.acquire(blocking=False):
            return
        try:
            _embedder, vectors = self._semantic.wait_ready(0)
            found = {p.id for p in vectors.get([p.memory_id for p in pins])}
            gone = [p for p in pins if p.memory_id not in found]
            if self._documents is not None:
                gone = [p for p in gone if self._documents.find(p.memory_id) is None]
            self._pin_store().delete(gone)
        finally:
            self._semantic.write_lock.release()

    # -- GetContext --------------------------------------------------------------------------
    def _budget(self, request: pb.GetContextRequest) -> Budget:
        if not 1 <= request.max_tokens <= MAX_PACK_TOKENS:
            raise InvalidArgument(
                f"max_tokens must be between 1 and {MAX_PACK_TOKENS}, got {request.max_tokens}"
            )
        settings = self._context_settings
        share = settings.window_share
        if request.HasField("window_share"):
            share = request.window_share
            if not 0 <= share <= 1:  # NaN too
                raise InvalidArgument(f"window_share must be between 0 and 1, got {share}")
        caps: dict[str, int] = {str(k): v for k, v in settings.per_kind_caps.items()}
        for kind, cap in request.per_kind_caps.items():
            if kind not in KINDS:
                raise InvalidArgument(f"per_kind_caps: {kind!r} is not one of {', '.join(KINDS)}")
            if cap < 0:
                raise InvalidArgument(f"per_kind_caps[{kind}] must not be negative")
            caps[kind] = cap
        return Budget(request.max_tokens, share, settings.pinned_share, caps)

    def _recall_query(self, request: pb.GetContextRequest, text: str, scope: Scope) -> Query:
        for kind in request.kinds:
            if kind not in KINDS:
                raise InvalidArgument(f"kinds: {kind!r} is not one of {', '.join(KINDS)}")
        recipe = request.recipe
        settings = self._recall_settings
        if recipe and recipe != "default" and recipe not in settings.recipes:
            raise InvalidArgument(f"recipe: no recipe named {recipe!r} is configured")
        return Query(
            text=text,
            scope=scope,
            k=min(self._context_settings.recall_k or settings.max_k, settings.max_k),
            recipe=settings.recipe(recipe),
            kinds=tuple(dict.fromkeys(request.kinds)),
            explain=request.explain,
        )

    def _query_text(self, request: pb.GetContextRequest, view: WindowView | None) -> str:
        """The caller's query, or the one formulated from the window (cut to
        limits.max_content_bytes)."""
        limit = self._limits.max_content_bytes
        if request.HasField("query") and request.query.strip():
            size = len(request.query.encode())
            if size > limit:
                raise InvalidArgument(f"query is {size} bytes; the limit is {limit}")
            return request.query
        window = view.messages if view is not None else []
        text = formulate_query(window, self._context_settings.query_turns)
        return text.encode()[:limit].decode(errors="ignore")

    @rpc
    async def GetContext(
        self, request: pb.GetContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetContextResponse:
        """The session's anchor, its scope's pins, its window and the memories recalled for
        the request's query or, without one, for the window's last user message and the
        names its last ``context.query_turns`` messages mention (:mod:`recall.context`),
        within ``max_tokens``. Recall runs on the engine as for Pack."""
        began = time.perf_counter()
        sid = check.session_id(request.session_id, self._limits)
        budget = self._budget(request)
        scope, view = self._session(sid, request.scope)
        text = self._query_text(request, view)
        query = self._recall_query(request, text, scope)
        session_ms = _ms(began)
        # Recall runs on the engine's threads while the anchor and the pins are read.
        recalled: Future[RecallResult] | None = None
        if text.strip():
            assert self._engine is not None
            recalled = self._engine.submit(query)
        t = time.perf_counter()
        anchor = self._anchor_store().get(scope.user_id, sid)
        pinned = await asyncio.to_thread(self._pinned, scope)
        pins_ms = _ms(t)
        result = RecallResult([])
        if recalled is not None:
            result = await asyncio.wrap_future(recalled)
        t = time.perf_counter()
        why = _recall_reasons(result.hits) if request.explain else {}
        window = view.messages if view is not None else []
        ctx = assemble(budget, sid, anchor, pinned, window, result.hits, why)
        assemble_ms = _ms(t)
        t = time.perf_counter()
        await record_access(self._access, [m.candidate for m in ctx.memories])
        stages = {
            **result.timings,
            "session": session_ms,
            "pins": pins_ms,
            "assemble": assemble_ms,
            "count": _ms(t),
            "context": _ms(began),
        }
        timings = [pb.StageTiming(stage=k, ms=v) for k, v in stages.items()]
        state = pb.SESSION_STATE_UNSPECIFIED
        if view is not None:
            state = pb.SESSION_STATE_OPEN if view.open else pb.SESSION_STATE_ENDED
        response = pb.GetContextResponse(
            text=ctx.text,
            tokens=ctx.tokens,
            messages=[convert.stored_message(m) for m in ctx.window],
            memories=_items(ctx, request.explain, query),
            query=text,
            state=state,
            scope=convert.scope(scope),
            degraded_channels=result.degraded,
            timings=timings,
        )
        if ctx.anchor is not None:
            response.anchor.CopyFrom(anchor_pb(ctx.anchor))
        if request.explain:
            response.dropped.extend(
                pb.ContextDrop(id=d.id, kind=d.kind, tokens=d.tokens, reason=d.reason)
                for d in ctx.dropped
            )
        return response


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)


def _recall_reasons(hits: list[Candidate]) -> dict[str, str]:
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


def _items(ctx: Context, explain: bool, query: Query) -> list[pb.ContextItem]:
    weights = query.weights()
    out = []
    for item in ctx.memories:
        point = item.candidate.point
        entry = pb.ContextItem(
            id=point.id,
            kind=point.kind,
            text=item.text,
            tokens=item.tokens,
            sources=source_pbs(point),
            created_at=convert.timestamp(point.created_at_us),
            superseded=item.candidate.superseded,
            pinned=item.pinned,
        )
        if explain:
            entry.why = item.why
            if not item.pinned:
                entry.explanation.CopyFrom(hit_pb(item.candidate, True, weights).explanation)
        out.append(entry)
    return out
