"""A delete of the embedded shard (tiers.semantic.vectors.edge.delete): a caller resting (an
erasure: tiers.core.priority.resting) lets go of the shard's write lock between its pages, so
another user's write goes in meanwhile; every point of the filter goes, with its terms, even
when a purge swaps the live shard between two pages."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contracts.vectors import BOB, DIM, KEYWORDS, MODEL, mem
from tiers.core.priority import rest_after, resting, rests
from tiers.semantic.vectors import PointFilter
from tiers.semantic.vectors.edge import delete as edge_delete
from tiers.semantic.vectors.edge.shard import READ_PAGE
from tiers.semantic.vectors.edge.store import EdgeVectorStore

ALICES = 2 * READ_PAGE + 300  # three pages
BOBS = ["bob's red kayak", "a kayak trip with bob", "the blue canoe"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EdgeVectorStore]:
    store = EdgeVectorStore(tmp_path / "vectors")
    store.ensure(MODEL, DIM)
    store.upsert([mem(f"alice note {i}", seq=i, seed=i) for i in range(ALICES)])
    store.upsert([mem(text, scope=BOB, seq=i, seed=9000 + i) for i, text in enumerate(BOBS)])
    yield store
    store.close()


def kayak(store: EdgeVectorStore) -> dict[str, float]:
    """Bob's keyword scores: their IDF is the store's, so alice's terms count in them."""
    hits = store.search_sparse(KEYWORDS.embed_query("kayak"), PointFilter(user_id="bob"), 10)
    return {h.point.text: round(h.score, 5) for h in hits}


def only_bobs(path: Path, texts: list[str]) -> dict[str, float]:
    fresh = EdgeVectorStore(path)
    fresh.ensure(MODEL, DIM)
    fresh.upsert([mem(text, scope=BOB, seq=i, seed=9000 + i) for i, text in enumerate(texts)])
    try:
        return kayak(fresh)
    finally:
        fresh.close()


def test_a_thread_rests_only_within_resting_and_for_its_share() -> None:
    assert not rests()
    began = time.perf_counter()
    rest_after(began - 10)  # outside: at once
    assert time.perf_counter() - began < 1
    with resting(2.0):
        assert rests()
        with resting(0.0):
            assert not rests()
        assert rests()
        seen: list[bool] = []
        other = threading.Thread(target=lambda: seen.append(rests()))
        other.start()
        other.join()
        assert seen == [False]  # the thread's own, not the process's
        began = time.perf_counter()
        rest_after(began - 0.05)
        assert time.perf_counter() - began >= 0.1  # 2.0 x the 50 ms step
    assert not rests()


def test_a_resting_delete_lets_another_writer_in_between_its_pages(
    store: EdgeVectorStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    free: list[bool] = []

    def rest(began: float) -> None:  # instead of the sleep: another thread writes
        got = store.live.write_lock.acquire(blocking=False)
        free.append(got)
        if got:
            store.live.write_lock.release()
        if len(free) == 1:
            writer = threading.Thread(
                target=store.upsert, args=([mem("bob's kayak paddle", scope=BOB, seed=9100)],)
            )
            writer.start()
            writer.join(30)
            assert not writer.is_alive()

    monkeypatch.setattr(edge_delete, "rest_after", rest)
    with resting(1.0):
        assert store.delete(PointFilter(user_id="alice")) == ALICES
    assert free == [True, True]  # after each page but the last, the lock was free
    assert store.count(PointFilter(user_id="alice")) == 0
    assert store.count(PointFilter(user_id="bob")) == len(BOBS) + 1
    assert kayak(store) == only_bobs(tmp_path / "fresh", [*BOBS, "bob's kayak paddle"])


def test_a_delete_not_resting_never_rests(
    store: EdgeVectorStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rested: list[float] = []
    monkeypatch.setattr(edge_delete, "rest_after", rested.append)
    assert store.delete(PointFilter(user_id="alice")) == ALICES
    assert rested == []
    assert store.count(PointFilter(user_id="alice")) == 0
    assert kayak(store) == only_bobs(tmp_path / "fresh", BOBS)


def test_a_purge_between_two_pages_leaves_none_of_the_points(
    store: EdgeVectorStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = store.live.current()
    purged: list[bool] = []

    def rest(began: float) -> None:
        if not purged:
            store.purge()  # a new generation, made from the live one's copy, swapped in
            purged.append(store.live.current() is not before)

    monkeypatch.setattr(edge_delete, "rest_after", rest)
    with resting(1.0):
        assert store.delete(PointFilter(user_id="alice")) == ALICES
    assert purged == [True]
    assert store.count(PointFilter(user_id="alice")) == 0
    assert store.scroll(PointFilter(user_id="alice"), limit=10 * ALICES) == []
    assert store.count(PointFilter(user_id="bob")) == len(BOBS)
    assert kayak(store) == only_bobs(tmp_path / "fresh", BOBS)
