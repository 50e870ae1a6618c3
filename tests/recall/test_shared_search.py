"""One dense search per query (recall.SharedSearch): the vector channel's list and the graph
channel's dense seeds come from the same engine call; a channel answers from it only when the
shared search covers what it asks (depth, kinds), and a failure of that one search reaches
both channels. Real model, RocksDB and embedded engine (the contract corpus)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from recall import Query, QueryContext, SharedSearch
from recall.channels import VectorChannel
from recall.engine import RecallEngine
from recall.graph.channel import GraphChannel
from recall.recipe import Recipe
from tests.contracts.corpus import QUESTION, TWIN, A, Tier3, channels, ctx, filled
from tiers.core.priority import MAX_NICE, RECALL_NICE, REQUESTS
from tiers.semantic.vectors import Hit, VectorStoreUnavailable


@pytest.fixture(scope="module")
def tier3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tier3]:
    t = filled(tmp_path_factory.mktemp("corpus"))
    yield t
    t.close()


@pytest.fixture
def searches(tier3: Tier3, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The dense searches the vector store answers, recorded."""
    _embedder, vectors = tier3.semantic.wait_ready(0)
    real = vectors.search_dense
    made: list[tuple[Any, ...]] = []

    def search_dense(*args: Any) -> list[Hit]:
        made.append(args)
        return real(*args)

    monkeypatch.setattr(vectors, "search_dense", search_dense)
    return made


def engine(tier3: Tier3) -> RecallEngine:
    return RecallEngine(tier3.semantic, channels(tier3.semantic), {})


def test_a_recall_makes_one_dense_search_for_the_vector_and_graph_channels(tier3, searches):
    recall = engine(tier3)
    try:
        result = recall.recall(Query(QUESTION, A, 5, Recipe()))
    finally:
        recall.close()
    assert result.hits and not result.degraded
    assert {"vector", "graph"} <= set(result.timings)
    assert len(searches) == 1


def test_the_vector_channel_answers_from_the_shared_search_as_from_its_own(tier3, searches):
    channel = VectorChannel(tier3.semantic)
    own = channel.search(ctx(), 5)
    shared = ctx()
    _embedder, vectors = tier3.semantic.wait_ready(0)
    shared.dense = SharedSearch(
        10, lambda: vectors.search_dense(shared.vector.tolist(), shared.query.filter(), 10)
    )
    assert channel.search(shared, 5) == own
    assert channel.search(shared, 3) == own[:3]
    assert len(searches) == 2  # its own, then the shared one once for both calls
    channel.search(shared, 11)  # deeper than the shared search: a search of its own
    assert len(searches) == 3


def test_a_channel_searches_itself_when_the_shared_search_does_not_cover_its_kinds(tier3):
    only_summaries = ctx(kinds=("summary",))
    only_summaries.dense = SharedSearch(50, lambda: [])
    assert only_summaries.dense_hits(20, ("episode_turn", "fact")) is None
    assert only_summaries.dense_hits(20) == []
    every_kind = QueryContext(Query(QUESTION, A, 5, Recipe()), only_summaries.vector)
    every_kind.dense = SharedSearch(50, lambda: [])
    assert every_kind.dense_hits(20, ("episode_turn", "fact")) == []


def test_a_failed_shared_search_fails_every_channel_that_reads_it(tier3):
    calls: list[int] = []

    def failing() -> list[Hit]:
        calls.append(1)
        raise VectorStoreUnavailable("disk gone")

    c = ctx()
    c.dense = SharedSearch(50, failing)
    for _ in range(2):
        with pytest.raises(VectorStoreUnavailable, match="disk gone"):
            VectorChannel(tier3.semantic).search(c, 10)
    with pytest.raises(VectorStoreUnavailable, match="disk gone"):
        GraphChannel(tier3.semantic).search(c, 10)
    assert calls == [1]  # searched once; the error is kept for the others


def test_a_cut_of_the_shared_search_keeps_the_lower_id_of_tied_hits(tier3):
    """Which of two tied points a shorter list keeps does not depend on the order the engine
    returned them in (storage order, its threads' merge): the lower id, as every channel
    orders ties."""
    c = ctx()
    _embedder, vectors = tier3.semantic.wait_ready(0)
    both = vectors.search_dense(c.vector.tolist(), c.query.filter(), 10)
    twins = [h for h in both if h.point.text.endswith(TWIN.split(": ", 1)[1])]
    assert len(twins) == 2 and twins[0].score == twins[1].score
    low, high = sorted(twins, key=lambda h: h.point.id)
    for order in ([low, high], [high, low]):
        c.dense = SharedSearch(10, lambda order=order: list(order))
        assert c.dense_hits(1) == [low]


def test_a_recall_is_computed_and_answered_below_the_callers_priority(tier3):
    """The engine's request threads run below the event loop's CPU priority
    (tiers.core.priority), and ``submit_then`` builds the answer on the recall's thread."""
    recall = engine(tier3)
    seen: list[tuple[int, int]] = []

    def answer(result):
        tid = threading.get_native_id()
        seen.append((tid, os.getpriority(os.PRIO_PROCESS, tid)))
        return len(result.hits)

    try:
        hits = recall.submit_then(Query(QUESTION, A, 5, Recipe()), answer).result(timeout=60)
    finally:
        recall.close()
    assert hits > 0
    ((tid, nice),) = seen
    assert tid != threading.get_native_id()
    if sys.platform == "linux":
        caller = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        assert nice == min(MAX_NICE, caller + RECALL_NICE)


def test_a_recall_and_its_answer_are_served_so_the_background_steps_aside(tier3):
    """A Recall counts among the requests served (tiers.core.priority.REQUESTS) from its
    first stage to its answer, which the background reads step aside for; not after."""
    recall = engine(tier3)
    counted: list[int] = []
    embedder = recall._semantic.wait_ready(0)[0]  # the query's first stage
    real = embedder.encode_queries

    def encode_queries(texts):  # type: ignore[no-untyped-def]
        counted.append(REQUESTS.serving_now)
        return real(texts)

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(embedder, "encode_queries", encode_queries)
            answered = recall.submit_then(
                Query(QUESTION + " again", A, 5, Recipe()), lambda _r: REQUESTS.serving_now
            ).result(timeout=60)
            recall.recall(Query(QUESTION + " once more", A, 5, Recipe()))
    finally:
        recall.close()
    assert counted == [1, 1] and answered == 1
    assert REQUESTS.serving_now == 0


def test_a_recall_leaves_no_reference_cycle_for_the_collector(tier3):
    """Its hits are freed when the Recall ends, not by a collection: the shared search holds
    no reference back to its query's context once run (cyclic garbage of the hits made the
    daemon's young collections stop every thread for 55-88 ms under a fleet's Recalls)."""
    import gc

    recall = engine(tier3)
    try:
        recall.recall(Query(QUESTION, A, 5, Recipe()))  # caches and lazy imports first
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for text in (QUESTION, TWIN):
                assert recall.recall(Query(text, A, 5, Recipe())).hits
            gc.collect()
            left = [o for o in gc.garbage if isinstance(o, (Hit, SharedSearch, QueryContext))]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    finally:
        recall.close()
    assert left == []
