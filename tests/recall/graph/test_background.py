"""A large scope's graph is built in the background (recall.graph.memory): no query waits
for it; until the first build is done the graph channel is not ready for the scope (the
engine reports it degraded, and the other channels answer); after a write the previous build
answers while the next runs; a Forget or a close during a build keeps nothing of it. Real
RocksDB and embedded engine (:class:`tests.recall.world.World`)."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any

import pytest

from recall import ChannelNotReady, Query
from recall.channels import KeywordChannel, VectorChannel
from recall.engine import RecallEngine
from recall.graph import builds
from recall.graph import reads as graph_reads
from recall.graph.channel import GraphChannel
from recall.graph.memory import MemoryGraphs
from recall.recipe import Recipe
from tests.recall.world import A, B, World
from tiers.core.priority import REQUESTS


class Gated:
    """The real vector store, its ``ids`` held until ``go`` is set (so that a test acts
    while a build is under way)."""

    def __init__(self, vectors: Any) -> None:
        self._vectors = vectors
        self._ids = vectors.ids
        self.entered = threading.Event()
        self.go = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._vectors, name)

    def ids(self, *args: Any, **kwargs: Any) -> list[str]:
        self.entered.set()
        assert self.go.wait(30)
        return self._ids(*args, **kwargs)


def test_a_large_scope_is_built_in_the_background(world: World):
    world.turn(A, "Caroline", "I like painting.")
    ticks = itertools.count()  # each reading of the clock is one second later
    graphs = MemoryGraphs(world.semantic, large_scope=2, wait_seconds=0, clock=lambda: next(ticks))
    try:
        world.turn(B, "Bob", "I like chess.")
        assert graphs.get(B, world.vectors).count == 1  # a small scope: built by the query
        world.turn(A, "Melanie", "Me too.", seq=2)
        with pytest.raises(ChannelNotReady, match="alice"):
            graphs.get(A, world.vectors)  # a build by the query would have returned its graph
        assert graphs.idle(30)
        first = graphs.get(A, world.vectors)
        assert first.count == 2 and first.speakers >= {"caroline", "melanie"}
        world.turn(A, "Zed", "I play chess.", seq=3)
        assert graphs.get(A, world.vectors) is first  # younger than ten times its build
        assert graphs.idle(0)  # and not redone
        for _ in range(30):
            next(ticks)
        assert graphs.get(A, world.vectors) is first  # the previous build answers at once
        assert graphs.idle(30)
        assert graphs.get(A, world.vectors).count == 3  # the next one, built behind it
    finally:
        graphs.close()


class Counts:
    """The real vector store, its ``count`` calls recorded as ``exact`` flags."""

    def __init__(self, vectors: Any) -> None:
        self._vectors = vectors
        self.asked: list[bool] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._vectors, name)

    def count(self, flt: Any, *, exact: bool = True) -> int:
        self.asked.append(exact)
        return int(self._vectors.count(flt, exact=exact))


def test_a_scope_estimated_at_twice_the_large_size_is_counted_no_further(world: World):
    """The engine's estimate (0.3 ms) stands in for its exact count (36-45 ms for 200,000
    points) when it puts a scope at twice ``large_scope`` or more; below, the count is
    exact."""
    for seq, text in enumerate(("I like painting.", "Me too.", "Chess?", "Sure."), start=1):
        world.turn(A, "Caroline", text, seq=seq)
    world.turn(B, "Bob", "I like chess.")
    graphs = MemoryGraphs(world.semantic, large_scope=2, wait_seconds=0)
    try:
        vectors = Counts(world.vectors)
        with pytest.raises(ChannelNotReady, match="alice"):
            graphs.get(A, vectors)  # type: ignore[arg-type]
        assert vectors.asked == [False]  # four: twice two, large by the estimate alone
        vectors.asked.clear()
        assert graphs.get(B, vectors).count == 1  # type: ignore[arg-type]
        assert vectors.asked == [False, True]  # one: counted to be built here
        assert graphs.idle(30) and graphs.get(A, world.vectors).count == 4
    finally:
        graphs.close()


def test_the_query_that_starts_a_first_build_waits_for_it_a_while(
    world: World, monkeypatch: pytest.MonkeyPatch
):
    world.turn(A, "Caroline", "I like painting.")
    world.turn(B, "Bob", "I like chess.")
    readers: list[str] = []
    ids = world.vectors.ids

    def recorded(*args: Any, **kwargs: Any) -> list[str]:
        readers.append(threading.current_thread().name)
        return ids(*args, **kwargs)

    monkeypatch.setattr(world.vectors, "ids", recorded)
    graphs = MemoryGraphs(world.semantic, large_scope=1, wait_seconds=30)
    assert graphs.get(A, world.vectors).count == 1  # built behind the query, within its wait
    assert readers and all(name.startswith("graph-build") for name in readers)
    graphs.wait_seconds = 0.2
    gated = Gated(world.vectors)
    began = time.monotonic()
    with pytest.raises(ChannelNotReady):
        graphs.get(B, gated)  # not built within the wait
    assert time.monotonic() - began >= 0.2
    gated.go.set()
    assert graphs.idle(30)
    graphs.close()


def test_a_build_the_query_waits_for_does_not_step_aside_for_that_query(
    world: World, monkeypatch: pytest.MonkeyPatch
):
    """The builds behind step aside while a Recall is served (tiers.core.priority.REQUESTS),
    but not for the query waiting for its own build: it is not counted while it waits."""
    monkeypatch.setattr(builds, "STEP_ASIDE_SECONDS", 3600.0)
    world.turn(A, "Caroline", "I like painting.")
    graphs = MemoryGraphs(world.semantic, large_scope=1, wait_seconds=30)
    try:
        with REQUESTS.serving():  # as the engine serves a Recall
            assert graphs.get(A, world.vectors).count == 1  # built within the wait
            assert REQUESTS.serving_now == 1
    finally:
        graphs.close()


def held(world: World) -> tuple[MemoryGraphs, Gated]:
    """Graphs of large scopes, with the first build of A's under way and held at its read."""
    world.turn(A, "Caroline", "I like painting.")
    graphs = MemoryGraphs(world.semantic, large_scope=1, wait_seconds=0)
    gated = Gated(world.vectors)
    with pytest.raises(ChannelNotReady):
        graphs.get(A, gated)
    assert gated.entered.wait(30)
    return graphs, gated


def test_a_forget_during_a_build_keeps_nothing_of_it(world: World):
    graphs, gated = held(world)
    with pytest.raises(ChannelNotReady):
        graphs.get(A, gated)  # one build at a time: this query starts none
    assert graphs.forget_scope("alice") == 0
    gated.go.set()
    assert graphs.idle(30)
    assert graphs.nbytes == 0  # built before the Forget: not kept
    with pytest.raises(ChannelNotReady):
        graphs.get(A, world.vectors)  # so the next query starts another
    assert graphs.idle(30)
    assert graphs.get(A, world.vectors).count == 1
    graphs.close()


def test_a_smaller_scopes_build_runs_between_the_pages_of_a_larger_ones(
    world: World, monkeypatch: pytest.MonkeyPatch
):
    """A small user's first build waits for no page of a large user's beyond the one under way
    (recall.graph.builds): before, it waited for the whole build (seconds at 1M points)."""
    monkeypatch.setattr(graph_reads, "READ_PAGE", 1)  # A's build: its two memories, two pages
    world.turn(A, "Caroline", "I like painting.")
    world.turn(A, "Melanie", "Me too.", seq=2)
    world.turn(B, "Bob", "I like chess.")
    reads: list[str] = []  # whose points each page read
    entered, go = threading.Event(), threading.Event()
    get = world.vectors.get

    def read(ids: Any, user_id: str = "") -> Any:
        reads.append(user_id)
        if len(reads) == 1:
            entered.set()
            assert go.wait(30)  # A's first page, held until B's build waits
        return get(ids, user_id)

    monkeypatch.setattr(world.vectors, "get", read)
    graphs = MemoryGraphs(world.semantic, large_scope=1, wait_seconds=0)
    try:
        with pytest.raises(ChannelNotReady):
            graphs.get(A, world.vectors)
        assert entered.wait(30)
        with pytest.raises(ChannelNotReady):
            graphs.get(B, world.vectors)  # one memory: queued behind A's two
        go.set()
        assert graphs.idle(30)
        assert reads == ["alice", "bob", "alice"]  # B's build ran before A's second page
        assert graphs.get(A, world.vectors).count == 2
        assert graphs.get(B, world.vectors).count == 1
    finally:
        graphs.close()


def test_a_close_stops_the_builds(world: World):
    world.turn(B, "Bob", "I like chess.")
    graphs, gated = held(world)
    with pytest.raises(ChannelNotReady):
        graphs.get(B, world.vectors)  # its build waits for A's
    graphs.close()
    graphs.close()  # idempotent
    gated.go.set()
    assert graphs.idle(30)  # B's build was dropped
    assert graphs.nbytes == 0  # and the one under way stopped at its next page
    with pytest.raises(ChannelNotReady):
        graphs.get(B, world.vectors)
    assert graphs.idle(0)  # and none started


def test_recall_goes_on_without_the_graph_until_it_is_built(
    world: World, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    world.turn(A, "Caroline", "I signed up for a pottery class.")
    world.turn(A, "Melanie", "Pottery sounds fun, Caroline!", seq=2)
    world.turn(B, "Bob", "I like chess.")
    graph = GraphChannel(world.semantic, large_scope=1, wait_seconds=0)
    channels = {
        "vector": VectorChannel(world.semantic),
        "keyword": KeywordChannel(world.semantic),
        "graph": graph,
    }
    engine = RecallEngine(world.semantic, channels, {}, speakers=graph.speakers)  # as wired
    query = Query("What did Caroline sign up for?", A, 5, Recipe())
    gated = Gated(world.vectors)
    monkeypatch.setattr(world.vectors, "ids", gated.ids)  # the build waits for the test
    try:
        with caplog.at_level(logging.WARNING, logger="strata.recall"):
            first = engine.recall(query)
        assert first.degraded == ["graph"] and first.hits
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        gated.go.set()
        assert graph.graphs.idle(30)
        second = engine.recall(query)
        assert not second.degraded and "graph" in second.timings  # searched, and answered
    finally:
        engine.close()
    with pytest.raises(ChannelNotReady):
        graph.graphs.get(B, world.vectors)  # the engine's close closed its channels' builds
    assert graph.graphs.idle(0)


def test_a_build_a_recall_asks_for_starts_once_it_has_answered(
    world: World, monkeypatch: pytest.MonkeyPatch
):
    world.turn(A, "Caroline", "I signed up for a pottery class.")
    world.turn(A, "Melanie", "Pottery sounds fun, Caroline!", seq=2)
    graph = GraphChannel(world.semantic, large_scope=1, wait_seconds=0)
    keyword = KeywordChannel(world.semantic)
    channels = {"vector": VectorChannel(world.semantic), "keyword": keyword, "graph": graph}
    engine = RecallEngine(world.semantic, channels, {}, speakers=graph.speakers)  # as wired
    reads: list[str] = []  # the build's reads of the scope's ids
    during: list[int] = []  # how many the build had made when the query's keyword search ended
    ids, search = world.vectors.ids, keyword.search_text  # run beside the query's embedding

    def read(*args: Any, **kwargs: Any) -> list[str]:
        reads.append(threading.current_thread().name)
        return ids(*args, **kwargs)

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.5)  # a cold read: a build started with the query would read meanwhile
        found = search(*args, **kwargs)
        during.append(len(reads))
        return found

    monkeypatch.setattr(world.vectors, "ids", read)
    monkeypatch.setattr(keyword, "search_text", slow)
    try:
        first = engine.recall(Query("What did Caroline sign up for?", A, 5, Recipe()))
        assert first.degraded == ["graph"] and first.hits
        assert graph.graphs.idle(30)
        assert during == [0] and reads and all(r.startswith("graph-build") for r in reads)
        assert engine.recall(Query("Pottery?", A, 5, Recipe())).degraded == []
    finally:
        engine.close()
