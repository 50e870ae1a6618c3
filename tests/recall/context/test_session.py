"""GetContext's policy below the wire (recall/context/session.py, recall/context/pins.py,
recall/context/access.py, recall.pack.pack_recalled), without gRPC: how a session is named, the
budget over the ``[context]`` defaults, the query rule and Recall's k, the pins, and what Pack and
GetContext count of what they hand out. Real RocksDB stores, the embedded vector engine and the real
model (the recall contract suites' corpus). The RPCs end to end are
tests/daemon/services/test_context.py and tests/daemon/services/test_recall_api.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from recall import Candidate, Query
from recall.channels import KeywordChannel, VectorChannel
from recall.context.access import accessed, count_handed
from recall.context.pins import MemoryNotFound, PinnedMemories, TooManyPins
from recall.context.session import (
    AnchorNotFound,
    ContextAsk,
    ContextDefaults,
    SessionContexts,
    SessionName,
)
from recall.engine import RecallEngine
from recall.pack import Packed, pack_recalled
from recall.recipe import RecallSettings
from recall.result import RecallResult
from tests.contracts.corpus import QUESTION, A, B, Tier3, corpus, filled
from tests.contracts.stores import Clock, Tiers
from tiers.core.errors import ScopeMismatch, SessionNotFound
from tiers.core.records import Message, Scope
from tiers.keyed.access import AccessCounts
from tiers.keyed.anchors import AnchorStore
from tiers.keyed.documents import DocumentStore
from tiers.keyed.pins import PinStore
from tiers.semantic.vectors import MemoryPoint, Source
from tiers.working.session import WindowLimits

DEFAULTS = ContextDefaults(
    max_query_bytes=64, window_share=0.5, pinned_share=0.25, per_kind_caps={"summary": 2}
)
MISSING = "00000000-0000-4000-8000-000000000000"
SETTINGS = RecallSettings(graph_weight=0)  # the engine here has the vector and keyword channels


@dataclass
class World:
    tier3: Tier3
    tiers: Tiers
    engine: RecallEngine
    access: AccessCounts
    anchors: AnchorStore
    pins: PinStore
    pinned: PinnedMemories
    contexts: SessionContexts


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root: Path = tmp_path_factory.mktemp("context")
    tier3 = filled(root / "tier3")
    tiers = Tiers(root / "tiers", WindowLimits(), Clock())
    semantic, state = tier3.semantic, tier3.state
    access = AccessCounts(state)
    channels = {"vector": VectorChannel(semantic), "keyword": KeywordChannel(semantic)}
    engine = RecallEngine(semantic, channels, {}, access=access)
    anchors, pins = AnchorStore(state), PinStore(state)
    pinned = PinnedMemories(pins, semantic, DocumentStore(state))
    contexts = SessionContexts(
        tiers.wm, engine, semantic, anchors, pinned, access, SETTINGS, DEFAULTS
    )
    tiers.wm.append(
        "chat",
        A,
        [
            Message("user", "Hi, it is Caroline."),
            Message("assistant", "Hello Caroline, how is Melanie?"),
            Message("user", QUESTION),
        ],
    )
    yield World(tier3, tiers, engine, access, anchors, pins, pinned, contexts)
    engine.close()
    tiers.close()
    tier3.close()


def point_of(text: str, scope: Scope = A) -> MemoryPoint:
    return next(p for p in corpus()[0] if p.text.endswith(text) and p.scope == scope)


# -- naming ----------------------------------------------------------------------------------


def test_a_session_is_named_by_its_id_and_user(world: World) -> None:
    scope, view = world.contexts.session(SessionName("chat", "alice"))
    assert scope == A and view is not None and len(view.messages) == 3
    scope, view = world.contexts.session(SessionName("chat", ""))  # by its id alone
    assert scope == A and view is not None


def test_a_session_never_seen_is_its_named_user_s(world: World) -> None:
    assert world.contexts.session(SessionName("new", "alice", "bot")) == (A, None)
    with pytest.raises(SessionNotFound, match=r"name scope\.user_id"):
        world.contexts.session(SessionName("new", ""))


def test_another_agent_than_the_session_s_is_refused(world: World) -> None:
    with pytest.raises(ScopeMismatch):
        world.contexts.session(SessionName("chat", "alice", "other-bot"))


# -- the budget and the query ----------------------------------------------------------------


def test_the_budget_is_the_request_s_over_the_defaults(world: World) -> None:
    budget = world.contexts.budget(ContextAsk(max_tokens=500))
    assert (budget.max_tokens, budget.window_share, budget.pinned_share) == (500, 0.5, 0.25)
    assert dict(budget.per_kind_caps) == {"summary": 2}
    ask = ContextAsk(max_tokens=500, window_share=0.0, per_kind_caps={"summary": 0, "fact": 1})
    budget = world.contexts.budget(ask)
    assert budget.window_share == 0.0  # a share of 0 is the request's, not "unset"
    assert dict(budget.per_kind_caps) == {"summary": 0, "fact": 1}


def test_the_query_is_the_caller_s_or_the_window_s(world: World) -> None:
    _scope, view = world.contexts.session(SessionName("chat", "alice"))
    assert world.contexts.query_text(ContextAsk(100, query="Lisbon?"), view) == "Lisbon?"
    formulated = world.contexts.query_text(ContextAsk(100, query="  "), view)
    assert formulated.startswith("Where does Caroline")  # the last user message
    assert len(formulated.encode()) <= DEFAULTS.max_query_bytes  # cut to the limit
    assert world.contexts.query_text(ContextAsk(100), None) == ""  # no window, no query


def test_recall_asks_for_recall_k_and_never_more_than_max_k(world: World) -> None:
    contexts = world.contexts
    query = contexts.query(ContextAsk(100, kinds=("fact", "fact")), "q", A)
    assert query.k == RecallSettings().max_k and query.kinds == ("fact",)
    for recall_k, k in ((5, 5), (10_000, RecallSettings().max_k)):
        other = SessionContexts(
            world.tiers.wm,
            world.engine,
            world.engine._semantic,
            world.anchors,
            world.pinned,
            None,
            RecallSettings(),
            ContextDefaults(max_query_bytes=64, recall_k=recall_k),
        )
        assert other.query(ContextAsk(100), "q", A).k == k


# -- GetContext ------------------------------------------------------------------------------


def test_get_context_recalls_assembles_and_counts_what_it_hands_out(world: World) -> None:
    ask = ContextAsk(max_tokens=400, query="Where does Biscuit go for walks?", explain=True)
    answer = asyncio.run(world.contexts.get(SessionName("chat", "alice"), ask))
    ctx = answer.context
    assert answer.scope == A and answer.query.text == ask.query and answer.query.scope == A
    assert answer.result.hits and ctx.memories and ctx.tokens <= 400
    assert {"session", "pins", "assemble", "count", "context"} <= set(answer.timings)
    assert all(m.why.startswith("recalled for the query: rank") for m in ctx.memories)
    handed = [(m.candidate.point.scope, m.candidate.point.id) for m in ctx.memories]
    counts = world.access.counts(handed)
    assert set(counts) == {mid for _scope, mid in handed}
    assert all(p.scope.user_id == "alice" for p in (m.candidate.point for m in ctx.memories))


def test_nothing_is_recalled_nor_counted_without_a_query(world: World) -> None:
    answer = asyncio.run(world.contexts.get(SessionName("new", "bob", "bot"), ContextAsk(300)))
    assert answer.view is None and answer.scope == B and answer.query.text == ""
    assert answer.result.hits == [] and answer.context.memories == []
    assert world.access.of_scope(B) == []


def test_the_anchor_and_the_pins_come_first(world: World) -> None:
    name = SessionName("chat", "alice")
    with pytest.raises(AnchorNotFound):
        asyncio.run(world.contexts.anchor(name))
    anchor, replaced = asyncio.run(world.contexts.set_anchor(name, "Plan a trip to Lisbon."))
    assert (
        anchor is not None and not replaced and asyncio.run(world.contexts.anchor(name)) == anchor
    )
    job = point_of("I started a new job as a nurse at Mercy Hospital.")
    assert world.pinned.pin(A, job.id, True, max_pins=5)
    try:
        ask = ContextAsk(max_tokens=400, query="Biscuit")
        ctx = asyncio.run(world.contexts.get(name, ask)).context
        assert ctx.anchor == anchor and ctx.text.startswith("Session anchor")
        assert ctx.memories[0].pinned and ctx.memories[0].candidate.point.id == job.id
    finally:
        world.pinned.pin(A, job.id, False, max_pins=5)
        removed, _replaced = asyncio.run(world.contexts.set_anchor(name, "   "))  # blank: gone
        assert removed is None


# -- pins ------------------------------------------------------------------------------------


def test_a_pin_names_a_memory_of_its_scope_within_the_limit(world: World) -> None:
    biscuit = point_of("I adopted a beagle called Biscuit last spring.")
    bobs = point_of("I adopted a beagle called Biscuit last spring.", B)
    with pytest.raises(MemoryNotFound):
        world.pinned.pin(A, MISSING, True, max_pins=5)
    with pytest.raises(MemoryNotFound):
        world.pinned.pin(A, bobs.id, True, max_pins=5)  # another user's memory
    assert world.pinned.pin(A, biscuit.id, True, max_pins=1)
    try:
        assert not world.pinned.pin(A, biscuit.id, True, max_pins=1)  # already: no change
        with pytest.raises(TooManyPins):
            world.pinned.pin(A, point_of("Biscuit is a good dog and loves the park.").id, True, 1)
        assert world.pinned.pin(A, MISSING, False, max_pins=1) is False  # unpin needs nothing
    finally:
        world.pinned.pin(A, biscuit.id, False, max_pins=1)


def test_a_pin_whose_memory_is_gone_is_skipped_and_deleted(world: World) -> None:
    gone = Scope("carol")
    world.pins.set(gone, MISSING, True)
    assert world.pinned.for_session(gone) == []
    assert world.pins.get(gone, MISSING) is None


# -- access counting and Pack ----------------------------------------------------------------


def test_a_handed_memory_counts_with_what_merged_into_it() -> None:
    source = Source("s1", 1, "m1")
    p = MemoryPoint("id-1", "fact", "x", A, "ep-1", "s1", [source], 1, "local")
    handed = Candidate(p, found_via="id-chunk", merged_ids=["id-2"])
    assert [(a.memory_id, a.scope, a.episode_id) for a in accessed([handed])] == [
        ("id-1", A, "ep-1"),
        ("id-chunk", A, "ep-1"),
        ("id-2", A, "ep-1"),
    ]
    asyncio.run(count_handed(None, [handed]))  # no store: nothing, no error


def test_pack_counts_what_its_block_holds(world: World) -> None:
    query = Query("Where does Caroline work?", A, 10, SETTINGS.recipe(""))

    def packed_on_its_thread() -> tuple[Packed, RecallResult]:
        def answer(result: RecallResult) -> tuple[Packed, RecallResult]:
            return pack_recalled(world.access, result, 60), result

        return world.engine.submit_then(query, answer).result(timeout=60)

    packed, result = packed_on_its_thread()
    assert result.hits and packed.items and packed.tokens <= 60
    assert len(packed.items) < len(result.hits)  # the budget left some out
    hits = [(c.point.scope, c.point.id) for c in result.hits]
    before = world.access.counts(hits)
    packed, _result = packed_on_its_thread()
    handed = {a.memory_id for a in accessed([i.candidate for i in packed.items])}
    after = world.access.counts(hits)
    for _scope, mid in hits:  # once per Pack, and only what its block holds
        assert after.get(mid, 0) == before.get(mid, 0) + (mid in handed)
    assert handed & set(after)
