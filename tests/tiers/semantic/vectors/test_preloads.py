"""A user's points read into the point cache behind its first search
(tiers.semantic.vectors.shards.preloads): its next searches read no point from the engine;
held off while a search is under way; bounded by the user's size, once per user in a while
and by the cache; never older than the engine's; stopped by close. Real embedded engine."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contracts.vectors import DIM, KEYWORDS, MODEL, mem
from tests.support.gates import Pause, served
from tiers.core.records import Scope
from tiers.core.sparse import data_size
from tiers.semantic.vectors import MemoryPoint, PointFilter, shard_of
from tiers.semantic.vectors.edge.shard import READ_PAGE
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.semantic.vectors.point_cache import PointCache
from tiers.semantic.vectors.shards import preloads
from tiers.semantic.vectors.shards.store import ShardedVectorStore

ALICE = Scope("alice", "assistant")
BOB = Scope("bob", "assistant")
ALICE_POINTS = READ_PAGE + 88  # enough to be preloaded, in ten chunks read by id


def points_of(scope: Scope, count: int) -> list[MemoryPoint]:
    return [
        mem(f"{scope.user_id} note {i}: the {i}th thing said", scope=scope, seed=i, seq=i)
        for i in range(count)
    ]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ShardedVectorStore]:
    s = ShardedVectorStore(tmp_path / "vectors", 2, point_cache=4 * ALICE_POINTS)
    s.ensure(MODEL, DIM)
    yield s
    s.close()


def cache_of(store: ShardedVectorStore) -> PointCache:
    return store.points  # the cache the preloads fill


def search(store: ShardedVectorStore, user: str, seed: int) -> list[str]:
    flt = PointFilter(user_id=user)
    return [h.point.id for h in store.search_dense(mem("q", seed=seed).dense or [], flt, 20)]


def test_a_users_first_search_preloads_its_points_and_later_searches_read_none(store):
    alice = points_of(ALICE, ALICE_POINTS)
    store.upsert(alice)
    cache = cache_of(store)
    assert search(store, "alice", seed=10_001)  # its hits read from the engine
    assert store.preloads.idle(60)
    assert store.preloads.preloaded == 1
    # The preload's reads count as no miss: the figures say what the requests found.
    counts = cache.counts()
    assert counts.misses <= 20 < ALICE_POINTS and counts.hits + counts.misses > 0
    assert (counts.points, counts.capacity) == (ALICE_POINTS, 4 * ALICE_POINTS)
    assert len(cache.get([p.id for p in alice])) == ALICE_POINTS  # every point, none missing
    misses = cache.misses
    for seed in range(10_002, 10_012):  # other questions, other hits
        assert len(search(store, "alice", seed)) == 20
        store.search_sparse(KEYWORDS.embed_query(f"note {seed % 97}"), PointFilter("alice"), 20)
    assert cache.misses == misses  # every hit came from the cache
    found = store.get([alice[7].id], "alice")[0]
    assert (found.text, found.sources) == (alice[7].text, alice[7].sources)


def test_a_user_is_preloaded_once_in_a_while_however_often_it_is_asked_about(store):
    alice = points_of(ALICE, ALICE_POINTS)
    store.upsert(alice)
    search(store, "alice", seed=10_001)
    assert store.preloads.idle(60) and store.preloads.preloaded == 1
    cache_of(store).invalidate([p.id for p in alice])  # dropped, as a full cache drops them
    search(store, "alice", seed=10_002)
    assert store.preloads.idle(60)
    assert store.preloads.preloaded == 1  # not read again: users asked in turn never chase
    assert len(cache_of(store).get([p.id for p in alice])) <= 20  # only what the search read


def test_users_too_small_or_too_large_for_the_cache_are_not_preloaded(tmp_path: Path):
    s = ShardedVectorStore(tmp_path / "vectors", 2, point_cache=2 * ALICE_POINTS)
    s.ensure(MODEL, DIM)
    try:
        s.upsert(points_of(ALICE, ALICE_POINTS) + points_of(BOB, READ_PAGE - 1))
        search(s, "alice", seed=1)  # more than a quarter of the cache: kept warm instead
        search(s, "bob", seed=2)  # fewer than a page: its searches read its points soon
        assert s.preloads.idle(60)
        assert (s.preloads.preloaded, s.preloads.skipped, s.preloads.warmed) == (0, 1, 1)
        assert len(s.points) <= 40  # the searches' hits only
    finally:
        s.close()


def payload_bytes(store: ShardedVectorStore, user: str) -> int:
    """The size of the payload files of ``user``'s shard, as it is now."""
    gen = store.open_shards()[shard_of(user, store.shards)].live._dir
    files = gen.glob("segments/*/payload_storage/**/*")
    return sum(data_size(f) for f in files if f.is_file())


def test_a_user_too_large_for_the_cache_has_its_payload_files_read_while_it_is_asked_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Its shard's payload files are read into the page cache, none of its points kept, and
    read again at a search once WARM_SECONDS have passed since, never sooner."""
    s = ShardedVectorStore(tmp_path / "vectors", 2, point_cache=2 * ALICE_POINTS)
    s.ensure(MODEL, DIM)
    try:
        s.upsert(points_of(ALICE, ALICE_POINTS))
        s.flush()
        size = payload_bytes(s, "alice")
        monkeypatch.setattr(preloads, "WARM_SECONDS", 0.0)  # each search finds the wait over
        for seed in (1, 2):
            search(s, "alice", seed)
            assert s.preloads.idle(60)
        assert (s.preloads.warmed, s.preloads.preloaded, s.preloads.skipped) == (2, 0, 0)
        assert size > 0 and s.preloads.warmed_bytes == 2 * size
        assert len(s.points) <= 40  # the searches' hits only: none of its points kept
        monkeypatch.setattr(preloads, "WARM_SECONDS", 3600.0)
        search(s, "alice", 3)  # read again, and not again for an hour
        assert s.preloads.idle(60) and s.preloads.warmed == 3
        for seed in (4, 5):
            search(s, "alice", seed)
            assert s.preloads.idle(60)
        assert s.preloads.warmed == 3 and s.preloads.warmed_bytes == 3 * size
    finally:
        s.close()


def test_the_shards_kept_warm_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(preloads, "WARM_POINTS", ALICE_POINTS - 1)  # less than its shard
    s = ShardedVectorStore(tmp_path / "vectors", 2, point_cache=2 * ALICE_POINTS)
    s.ensure(MODEL, DIM)
    try:
        s.upsert(points_of(ALICE, ALICE_POINTS))
        search(s, "alice", seed=1)
        assert s.preloads.idle(60)
        assert (s.preloads.warmed, s.preloads.warmed_bytes, s.preloads.skipped) == (0, 0, 1)
    finally:
        s.close()


def test_preloads_keep_at_most_three_quarters_of_the_cache_in_a_while(tmp_path: Path):
    shards = 8
    users: list[str] = []  # four users, each alone in its shard: every preload reads its own
    for i in range(100):
        if len(users) < 4 and shard_of(f"u{i}", shards) not in {shard_of(u, shards) for u in users}:
            users.append(f"u{i}")
    s = ShardedVectorStore(tmp_path / "vectors", shards, point_cache=4 * ALICE_POINTS)
    s.ensure(MODEL, DIM)
    try:
        for user in users:
            s.upsert(points_of(Scope(user, "assistant"), ALICE_POINTS))
        for user in users:
            search(s, user, seed=1)
            assert s.preloads.idle(60)
        assert (s.preloads.preloaded, s.preloads.skipped) == (3, 1)  # 3 x 600 of 2,400
        assert all(
            len(s.points.get([p.id for p in points_of(Scope(u, "assistant"), ALICE_POINTS)]))
            == ALICE_POINTS
            for u in users[:3]
        )
    finally:
        s.close()


def test_a_point_written_while_a_preload_reads_is_never_kept_older(store, monkeypatch):
    alice = points_of(ALICE, ALICE_POINTS)
    store.upsert(alice)
    cache = cache_of(store)
    pause = Pause("between a preload's engine read of a chunk and its keeping what it read")
    real = cache.put
    held: list[MemoryPoint] = []  # the chunk read before the write

    def put(points, snapshot):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "vectors-preload" and not held:
            held.extend(points)
            pause()
        real(points, snapshot)

    monkeypatch.setattr(cache, "put", put)
    search(store, "alice", seed=10_001)
    pause.reached()  # it read a chunk of alice's points and has not kept them yet
    target = next(p for p in alice if p.id == held[0].id)
    changed = dataclasses.replace(target, text="alice note, corrected")
    store.upsert([dataclasses.replace(changed, sparse=KEYWORDS.embed_document(changed.text))])
    pause.release()
    assert store.preloads.idle(60) and store.preloads.preloaded == 1
    assert target.id not in cache.get([target.id])  # read before the write: not kept
    assert store.get([target.id], "alice")[0].text == "alice note, corrected"
    assert len(cache.get([p.id for p in alice])) == ALICE_POINTS  # the others kept, and it now


def held_search(store: ShardedVectorStore, monkeypatch: pytest.MonkeyPatch) -> Pause:
    """The next search stops before it reads the engine, under way meanwhile."""
    pause = Pause("a search under way")
    real = EdgeVectorStore.search_dense

    def search_dense(self, vector, flt, limit):  # type: ignore[no-untyped-def]
        pause()
        return real(self, vector, flt, limit)

    monkeypatch.setattr(EdgeVectorStore, "search_dense", search_dense)
    return pause


def alice_waiting(store: ShardedVectorStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Alice's points written, a preload's wait unbounded, and the threads that count a shard's
    points (a preload's first read) recorded in the list returned."""
    store.upsert(points_of(ALICE, ALICE_POINTS))
    store.preloads.most_wait = 3600.0
    reads: list[str] = []
    real_count = EdgeVectorStore.count

    def count(self, flt):  # type: ignore[no-untyped-def]
        reads.append(threading.current_thread().name)
        return real_count(self, flt)

    monkeypatch.setattr(EdgeVectorStore, "count", count)
    return reads


def test_a_preload_waits_while_a_search_is_under_way(store, monkeypatch):
    reads = alice_waiting(store, monkeypatch)
    pause = held_search(store, monkeypatch)
    searcher = threading.Thread(target=search, args=(store, "alice", 1))
    searcher.start()
    pause.reached()  # the search that asked for the preload is under way
    assert not store.preloads.idle(0.5)  # queued, its thread waiting
    assert reads == [] and store.preloads.preloaded == 0
    pause.release()
    searcher.join()
    assert store.preloads.idle(60) and store.preloads.preloaded == 1
    assert reads == ["vectors-preload"]


def test_a_preload_steps_aside_while_a_request_is_served(store, monkeypatch):
    """Not only the store's searches: the whole of a Recall served meanwhile
    (tiers.core.priority.REQUESTS), whose other stages the engine's reads would stall."""
    reads = alice_waiting(store, monkeypatch)
    with served():
        search(store, "alice", 1)  # its search is over, the request is not
        assert not store.preloads.idle(0.5)
        assert reads == [] and store.preloads.preloaded == 0
    assert store.preloads.idle(60) and store.preloads.preloaded == 1
    assert reads == ["vectors-preload"]


def test_a_burst_of_new_users_keeps_the_latest_queued_and_a_dropped_one_asks_again(
    store, monkeypatch
):
    monkeypatch.setattr(preloads, "QUEUED", 2)
    users = ["u1", "u2", "u3"]
    scopes = [ALICE, *(Scope(u, "assistant") for u in users)]
    store.upsert([p for scope in scopes for p in points_of(scope, 10)])
    store.preloads.most_wait = 3600.0
    pause = held_search(store, monkeypatch)
    searcher = threading.Thread(target=search, args=(store, "alice", 1))
    searcher.start()
    pause.reached()  # alice's preload waits for this search to end
    deadline = time.monotonic() + 60
    while store.preloads._queue and time.monotonic() < deadline:  # taken by its thread
        time.sleep(0.01)
    for user in users:
        search(store, user, seed=2)
    assert list(store.preloads._queue) == ["u2", "u3"]  # u1, the oldest, dropped
    search(store, "u1", seed=3)
    assert list(store.preloads._queue) == ["u3", "u1"]  # asked anew: queued again
    pause.release()
    searcher.join()
    assert store.preloads.idle(60)


def test_users_queued_past_their_wait_never_raise_to_a_search(store, monkeypatch):
    """A preload that waited in the queue longer than AGAIN_SECONDS: once 4,096 users are
    remembered, those whose wait is over are forgotten, queued ones among them, and a burst
    that then drops one from the queue must not fail the search that queued it."""
    monkeypatch.setattr(preloads, "QUEUED", 2)
    monkeypatch.setattr(preloads, "AGAIN_SECONDS", 0.0)  # every wait over at once
    store.upsert(points_of(ALICE, 10))
    store.preloads.most_wait = 3600.0
    pause = held_search(store, monkeypatch)
    searcher = threading.Thread(target=search, args=(store, "alice", 1))
    searcher.start()
    pause.reached()  # alice's preload waits for this search: the queue is not drained
    deadline = time.monotonic() + 60
    while store.preloads._queue and time.monotonic() < deadline:  # taken by its thread
        time.sleep(0.01)
    shard = store.open_shards()[shard_of("alice", store.shards)]
    # Users asked before, up to one short of the 4,096 remembered: u2 finds them all, and
    # forgets every wait that is over, u1's among them; u3 then drops u1 from the queue.
    gone = 4_096 - 1 - len(store.preloads._next)
    store.preloads._next.update({f"gone{i}": 0.0 for i in range(gone)})
    for user in ("u1", "u2", "u3"):
        with store.preloads.searching(user, shard):
            pass
    assert list(store.preloads._queue) == ["u2", "u3"]
    pause.release()
    searcher.join()
    assert store.preloads.idle(60)


def test_close_drops_a_waiting_preload_and_ends_its_thread(store, monkeypatch):
    store.upsert(points_of(ALICE, ALICE_POINTS))
    store.preloads.most_wait = 3600.0
    pause = held_search(store, monkeypatch)
    failed: list[BaseException] = []

    def searching() -> None:
        try:
            search(store, "alice", 1)
        except BaseException as exc:  # the store closed under it
            failed.append(exc)

    searcher = threading.Thread(target=searching)
    searcher.start()
    pause.reached()
    thread = store.preloads._thread
    assert thread is not None and thread.is_alive()
    store.close()  # the preload waits for the search: close ends it all the same
    assert not thread.is_alive() and store.preloads.preloaded == 0
    pause.release()
    searcher.join()
    store.close()  # idempotent


def test_a_preload_that_fails_is_logged_and_the_next_user_is_still_preloaded(
    store, monkeypatch, caplog
):
    store.upsert(points_of(ALICE, ALICE_POINTS) + points_of(BOB, ALICE_POINTS))
    real = EdgeVectorStore.count
    failed = threading.Event()

    def count(self, flt):  # type: ignore[no-untyped-def]
        if flt.user_id == "alice" and not failed.is_set():
            failed.set()
            raise RuntimeError("disk gone")
        return real(self, flt)

    monkeypatch.setattr(EdgeVectorStore, "count", count)
    search(store, "alice", seed=1)
    search(store, "bob", seed=2)
    assert store.preloads.idle(60)
    assert store.preloads.preloaded == 1  # bob's
    [failure] = [r for r in caplog.records if r.getMessage() == "vectors.preload_failed"]
    fields = failure.fields  # type: ignore[attr-defined]
    assert fields["user_id"] == "alice" and "disk gone" in fields["error"]


def test_preload_off_reads_nothing_ahead(tmp_path: Path):
    s = ShardedVectorStore(tmp_path / "vectors", 2, point_cache=4 * ALICE_POINTS, preload=False)
    s.ensure(MODEL, DIM)
    try:
        s.upsert(points_of(ALICE, ALICE_POINTS))
        search(s, "alice", seed=1)
        assert s.preloads._thread is None and len(s.points) <= 20
    finally:
        s.close()
