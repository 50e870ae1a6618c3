"""The vector store fails: mid-write (some points of an upsert stored, then an error) or on
searches. The weaver retries with nothing lost or doubled, appends go on, and Recall and Pack
answer from the channels that work, naming the failed ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from daemon.components import configured_vectors
from daemon.settings import Settings
from daemon.wiring import Factories
from tests.support import MAY, QUIET, wait_until
from tests.support.weaving import conversation, run
from tiers.journal.consolidation import EXTRACTIONS_CF
from tiers.semantic.graph.nxgraph import GRAPH_CF
from tiers.semantic.vectors import (
    Hit,
    MemoryPoint,
    PointFilter,
    SparseVector,
    VectorStore,
    VectorStoreUnavailable,
    point_id,
)
from weaver.consolidate import decode_extraction
from weaver.episodes import chunk, chunk_text, load_episode, sources


class FlakyVectors:
    """A real vector store behind the seam, failing where a test says."""

    def __init__(self, inner: VectorStore) -> None:
        self.inner = inner
        self.upsert_budget: int | None = None  # points still stored before upserts fail
        self.fail_dense = False
        self.fail_sparse = False
        self.fail_close = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # the calls it never fails go to the real store

    def _fail(self, what: str) -> None:
        raise VectorStoreUnavailable(f"injected fault: {what} failed")

    def upsert(self, points: Sequence[MemoryPoint]) -> None:
        if self.upsert_budget is None:
            return self.inner.upsert(points)
        allowed = list(points[: self.upsert_budget])
        self.upsert_budget -= len(allowed)
        if allowed:
            self.inner.upsert(allowed)
        if len(allowed) < len(points):
            self._fail(f"upsert after {len(allowed)} of {len(points)} points")

    def search_dense(self, vector: Sequence[float], flt: PointFilter, limit: int) -> list[Hit]:
        if self.fail_dense:
            self._fail("dense search")
        return self.inner.search_dense(vector, flt, limit)

    def search_sparse(self, vector: SparseVector, flt: PointFilter, limit: int) -> list[Hit]:
        if self.fail_sparse:
            self._fail("sparse search")
        return self.inner.search_sparse(vector, flt, limit)

    def close(self) -> None:
        self.inner.close()
        if self.fail_close:
            self._fail("close")


@dataclass
class Flaky:
    """Daemons started with ``factories`` open their vector store through FlakyVectors
    (``made``, in the order they opened)."""

    made: list[FlakyVectors] = field(default_factory=list)

    def open_vectors(self, settings: Settings) -> VectorStore:
        self.made.append(FlakyVectors(configured_vectors(settings)))
        return self.made[-1]

    @property
    def factories(self) -> Factories:
        return Factories(open_vectors=self.open_vectors)


@pytest.fixture
def flaky() -> Flaky:
    return Flaky()


def points(daemon: Any, kind: str) -> list[MemoryPoint]:
    _embedder, vectors = daemon.daemon.parts.semantic.wait_ready(0)
    found: list[MemoryPoint] = vectors.scroll(PointFilter(user_id="alice", kinds=(kind,)))
    return found


TURNS = [f"Turn {i}: I planted {i + 3} tomato plants in the garden." for i in range(7)]


def test_a_failed_write_is_retried_with_nothing_lost_or_doubled(start_daemon, flaky):
    daemon = start_daemon(weaver=QUIET, factories=flaky.factories)
    daemon.daemon.parts.semantic.wait_ready(120)
    store = flaky.made[0]
    weaver = daemon.daemon.parts.weaver
    journal = daemon.daemon.parts.journal
    with daemon.client() as c:
        # Index stage: the first batch stores 2 chunks, then the store fails.
        store.upsert_budget = 2
        ids = [conversation(c, f"s{i}", MAY, *TURNS) for i in range(2)]
        wait_until(lambda: weaver.index_backoff.failures >= 1, 30)
        assert "injected fault" in c.admin.weaver_status().last_error
        assert c.admin.weaver_status().unindexed == 2  # both stay unindexed
        # Appends go on meanwhile.
        assert c.append("s-live", "still writing", user_id="alice").seq == 1
        store.upsert_budget = None  # the store is back: the retry (after 1 s) indexes all
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 30)
        assert weaver.index_backoff.failures == 0
        chunks = points(daemon, "episode_chunk")
        expected = set()
        for eid in ids:
            episode = load_episode(journal, eid)
            for window in chunk(episode, 3, 1, 200):
                srcs = sources(episode, [t.seq for t in window], with_text=True)
                expected.add(point_id(episode.scope, "episode_chunk", chunk_text(window), srcs))
        assert len(chunks) == len(expected) and {p.id for p in chunks} == expected

        # Consolidation: the upsert of each episode's summary and facts fails half-way.
        store.upsert_budget = 1
        report = run(c)
        assert not report.ok and report.failures == 2 and "injected fault" in report.error
        assert c.admin.weaver_status().pending == 2
        assert not list(daemon.daemon.parts.state.scan(GRAPH_CF, b""))  # no edge without its point
        store.upsert_budget = None
        report = run(c)
        assert report.ok and report.episodes == 2
        assert c.admin.weaver_status().pending == 0
    summaries = points(daemon, "summary")
    assert sorted(p.episode_id for p in summaries) == sorted(ids)
    facts = points(daemon, "fact")
    for eid in ids:
        raw = daemon.daemon.parts.state.get(EXTRACTIONS_CF, eid.encode())
        stored = sorted(f.text for f in decode_extraction(raw).facts)
        assert sorted(p.text for p in facts if p.episode_id == eid) == stored


def test_recall_and_pack_answer_from_the_channels_that_work(start_daemon, flaky):
    daemon = start_daemon(weaver=QUIET, factories=flaky.factories)
    daemon.daemon.parts.semantic.wait_ready(120)
    store = flaky.made[0]
    with daemon.client() as c:
        conversation(c, "s1", MAY, "I planted tomatoes in the garden.", "How many?")
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 30)
        healthy = c.recall("tomatoes garden", user_id="alice", k=3)
        assert healthy.hits and list(healthy.degraded_channels) == []

        # the graph channel seeds its walk from the dense index too: both are degraded
        store.fail_dense = True
        recalled = c.recall("tomatoes garden", user_id="alice", k=3)
        assert sorted(recalled.degraded_channels) == ["graph", "vector"]
        assert recalled.hits and "tomatoes" in recalled.hits[0].text  # from BM25
        packed = c.pack("tomatoes garden", user_id="alice", max_tokens=200)
        assert sorted(packed.degraded_channels) == ["graph", "vector"]
        assert "tomatoes" in packed.text

        store.fail_sparse = True
        nothing = c.recall("tomatoes garden", user_id="alice", k=3)
        assert list(nothing.hits) == []
        assert sorted(nothing.degraded_channels) == ["graph", "keyword", "vector"]
        empty = c.pack("tomatoes garden", user_id="alice", max_tokens=200)
        assert empty.text == ""
        assert sorted(empty.degraded_channels) == ["graph", "keyword", "vector"]

        store.fail_dense = store.fail_sparse = False
        again = c.recall("tomatoes garden", user_id="alice", k=3)
        assert again.hits and list(again.degraded_channels) == []


def test_a_stage_of_the_shutdown_that_fails_does_not_keep_the_daemon_running(
    start_daemon, flaky, caplog
):
    """Tier 3's close fails: the shutdown logs it, closes the state and journal stores
    anyway, and stops (the exit code of ``stratad serve`` says it failed); it used to stay
    running, stopped in part, until a second signal."""
    daemon = start_daemon(weaver=QUIET, factories=flaky.factories)
    daemon.daemon.parts.semantic.wait_ready(120)
    with daemon.client() as c:
        assert c.append("s1", "before the stop", user_id="alice").seq == 1
    flaky.made[0].fail_close = True
    daemon.call(daemon.daemon.stop(), timeout=60)  # returns: the daemon stopped
    assert daemon.daemon.stop_failures == ["purges and tier 3"]  # Tier 3 closes there first
    assert daemon.call(daemon.daemon.wait_stopped(), timeout=5) is None
    failed = [r for r in caplog.records if r.getMessage() == "server.stop_failed"]
    assert failed and "injected fault: close failed" in str(failed[0].__dict__)
    with pytest.raises(Exception):  # noqa: B017 - closed: rocksdict's own error type
        daemon.daemon.parts.state.get(GRAPH_CF, b"x")


def test_the_recall_engine_stops_before_tier_3_closes(start_daemon, flaky):
    """The graph builds queued behind Recalls end with the engine, before Tier 3 closes: they
    used to run on against the closed store at every stop, each logged as a failure
    (``recall.graph_build_failed``)."""
    daemon = start_daemon(weaver=QUIET, factories=flaky.factories)
    daemon.daemon.parts.semantic.wait_ready(120)
    engine = daemon.daemon.parts.engine
    store = flaky.made[0]
    engine_open_at_close: list[bool] = []

    def close() -> None:
        try:  # a stopped engine takes no more requests
            engine.submit(None).cancel()  # type: ignore[arg-type]
            engine_open_at_close.append(True)
        except RuntimeError:
            engine_open_at_close.append(False)
        FlakyVectors.close(store)

    store.close = close  # type: ignore[method-assign]
    daemon.call(daemon.daemon.stop(), timeout=60)
    assert daemon.daemon.stop_failures == []
    assert engine_open_at_close == [False]
