"""Decoded points kept by the embedded store (tiers.semantic.vectors.point_cache): never older than
the engine's, under each interleaving of a read and a write, forced with barriers: a reader that
read before a write (an upsert, a payload change, a delete) and keeps what it read after the write
returned keeps nothing; reads after a write see it, whether the point was cached or
not. Bounded, least recently used out; 0 keeps nothing. Real embedded engine."""

from __future__ import annotations

import dataclasses
import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contracts.vectors import DIM, KEYWORDS, MODEL, mem
from tests.support.gates import Pause
from tiers.core.priority import background
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, PointFilter, Source, Validity, point_cache
from tiers.semantic.vectors.point_cache import PointCache
from tiers.semantic.vectors.shards.store import ShardedVectorStore

ALICE = Scope("alice", "assistant")
QUERY = "favourite colour"


def colour(text: str) -> MemoryPoint:
    """The same point (one id) with ``text``: a replaced document."""
    point = mem("Alice's favourite colour is teal.", scope=ALICE, seed=1)
    return dataclasses.replace(point, text=text, sparse=KEYWORDS.embed_document(text))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ShardedVectorStore]:
    s = ShardedVectorStore(tmp_path / "vectors", 4, point_cache=100)
    s.ensure(MODEL, DIM)
    yield s
    s.close()


def cache_of(store: ShardedVectorStore) -> PointCache:
    return store.points  # the cache under test


def texts(store: ShardedVectorStore) -> dict[str, list[str]]:
    """What each read path returns for alice's colour point."""
    flt = PointFilter(user_id="alice")
    point = colour("")
    return {
        "get": [p.text for p in store.get([point.id], "alice")],
        "sparse": [h.point.text for h in store.search_sparse(KEYWORDS.embed_query(QUERY), flt, 5)],
        "dense": [h.point.text for h in store.search_dense(point.dense or [], flt, 5)],
    }


def held_put(store: ShardedVectorStore, pause: Pause) -> None:
    """The next reader that keeps points stops before keeping them."""
    cache = cache_of(store)
    real = cache.put
    held = threading.Event()

    def put(points, snapshot):  # type: ignore[no-untyped-def]
        if not held.is_set():
            held.set()
            pause()
        real(points, snapshot)

    cache.put = put  # type: ignore[method-assign]


WRITES = {
    "replace": lambda s: s.upsert([colour("Alice's favourite colour is now crimson.")]),
    "supersede": lambda s: s.set_valid_to([colour("").id], Validity(5)),
    "delete": lambda s: s.delete(PointFilter(user_id="alice", ids=(colour("").id,))),
}
AFTER = {
    "replace": ["Alice's favourite colour is now crimson."],
    "supersede": ["Alice's favourite colour is teal."],
    "delete": [],
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_read_from_before_a_write_is_not_kept_after_it(store, write):
    store.upsert([colour("Alice's favourite colour is teal.")])
    pause = Pause("between a reader's engine read and its keeping what it read")
    held_put(store, pause)
    reader = threading.Thread(target=lambda: store.get([colour("").id], "alice"))
    reader.start()
    pause.reached()  # it read the old point and has not kept it yet
    WRITES[write](store)  # the write returns: everything read from now on must show it
    pause.release()
    reader.join()
    assert len(cache_of(store)) == 0  # what it read predates the write: not kept
    for path, found in texts(store).items():
        assert found == AFTER[write], path
    if write == "supersede":
        assert store.get([colour("").id])[0].valid_to_us == 5


@pytest.mark.parametrize("write", list(WRITES))
def test_a_cached_point_is_dropped_by_a_write(store, write):
    store.upsert([colour("Alice's favourite colour is teal.")])
    assert texts(store)["get"] == ["Alice's favourite colour is teal."]
    assert len(cache_of(store)) == 1
    before = cache_of(store).hits
    texts(store)
    assert cache_of(store).hits == before + 3  # every read path answered from the cache
    WRITES[write](store)
    for path, found in texts(store).items():
        assert found == AFTER[write], path
    if write == "supersede":
        assert store.get([colour("").id])[0].valid_to_us == 5


def test_a_read_after_the_write_keeps_what_it_read(store):
    store.upsert([colour("Alice's favourite colour is teal.")])
    cache = cache_of(store)
    old = cache.snapshot()  # a reader still at work from before the write
    store.upsert([colour("Alice's favourite colour is now crimson.")])
    assert texts(store)["get"] == ["Alice's favourite colour is now crimson."]  # read after: kept
    assert len(cache) == 1
    cache.put([colour("Alice's favourite colour is teal.")], old)  # the old reader: refused
    assert texts(store)["get"] == ["Alice's favourite colour is now crimson."]
    cache.release(old)


def test_the_cache_is_bounded_least_recently_used_out():
    cache = PointCache(2)
    a, b, c = (mem(t, scope=ALICE) for t in ("a one", "b two", "c three"))
    s = cache.snapshot()
    cache.put([a, b], s)
    assert set(cache.get([a.id])) == {a.id}  # a is now the most recent
    cache.put([c], s)
    cache.release(s)
    assert set(cache.get([a.id, b.id, c.id])) == {a.id, c.id}
    off = PointCache(0)
    off.put([a], off.snapshot())
    assert len(off) == 0 and off.get([a.id]) == {}
    with pytest.raises(ValueError, match="0 or more"):
        PointCache(-1)


def test_kept_points_come_back_whole_and_leave_the_collectors_walks(monkeypatch):
    """The cache keeps its points as bytes, which the collector never walks, and the most
    recently read as objects too, no more than HOT_POINTS of them: each comes back equal,
    whichever form it was read from."""
    monkeypatch.setattr(point_cache, "HOT_POINTS", 2)
    cache = PointCache(10)
    fact = mem(
        "Alice moved to Lisbon.",
        scope=ALICE,
        valid_from_us=3,
        valid_to_us=9,
        replaced_by="b",
        attrs={"subject": "alice", "object": "Lisbon"},
    )
    fact = dataclasses.replace(
        fact, sources=[Source("chat-1", 4, "m-4", {"lang": "en"}, "Alice", 7, "I moved.", "user")]
    )
    others = [mem(f"note {n}", scope=ALICE) for n in range(3)]
    s = cache.snapshot()
    cache.put([fact, *others], s)  # fact is pushed out of the hot ones by the others
    cache.release(s)
    assert [p for p in cache._points.values() if gc.is_tracked(p)] == []  # nothing to walk
    assert len(cache._hot) == 2 and fact.id not in cache._hot
    assert cache.get([fact.id]) == {fact.id: fact}  # from its bytes
    assert fact.id in cache._hot and len(cache._hot) == 2
    assert cache.get([fact.id]) == {fact.id: fact}  # decoded already
    cache.invalidate([fact.id])  # a write drops both forms
    assert cache.get([fact.id]) == {} and fact.id not in cache._hot


def test_a_point_written_while_it_is_decoded_is_not_kept_decoded(monkeypatch):
    cache = PointCache(10)
    teal = colour("Alice's favourite colour is teal.")
    s = cache.snapshot()
    cache.put([teal], s)
    cache.release(s)
    cache._hot.clear()  # read from its bytes next
    real = point_cache.unpacked

    def written_meanwhile(data: bytes) -> MemoryPoint:
        point = real(data)
        cache.invalidate([point.id])  # a write returns while this reader decodes
        return point

    monkeypatch.setattr(point_cache, "unpacked", written_meanwhile)
    assert cache.get([teal.id]) == {teal.id: teal}  # as it was read, like an engine read
    assert teal.id not in cache._hot and cache.get([teal.id]) == {}  # but not kept


def test_requests_reads_are_counted_and_the_daemons_own_are_not(store):
    point = colour("Alice's favourite colour is teal.")
    store.upsert([point])
    with background():  # a graph build's, the weaver's or a preload's read
        assert store.get([point.id], "alice")  # read from the engine, then kept
    assert cache_of(store).counts() == (0, 0, 1, 100)
    absent = mem("never written", scope=ALICE, seed=2).id
    store.get([point.id, absent], "alice")  # a request's
    assert cache_of(store).counts() == (1, 1, 1, 100)
