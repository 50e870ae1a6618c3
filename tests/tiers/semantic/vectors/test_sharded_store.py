"""The embedded store in shards (tiers.semantic.vectors.shards): a user's points live in one
shard, reads and writes that name a user touch it alone, a build rebuilds only the shards written
since their last one, a purge rewrites only the shards deleted from (their marks survive a
restart) and leaves no byte of what was deleted, and a purge of one shard does not give up a
build of another. What every store does is in tests/contracts/test_vector_store.py; moving an
older store into shards is in tests/tiers/semantic/vectors/test_vector_resharding.py."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.contracts.vectors import DIM, MODEL, mem, ready, unit
from tests.support import wait_until
from tests.support.builds import child_running, gated_child, index_small_stores
from tests.support.disk import files_with
from tests.support.gates import served
from tiers.core.priority import resting, rests
from tiers.core.records import Scope
from tiers.semantic.vectors import IndexBuildCancelled, MemoryPoint, PointFilter, Validity, shard_of
from tiers.semantic.vectors.edge import generations, layout
from tiers.semantic.vectors.edge.store import SIDECAR
from tiers.semantic.vectors.shards import members
from tiers.semantic.vectors.shards.members import ShardSet
from tiers.semantic.vectors.shards.store import ShardedVectorStore

SHARDS = 4
USERS = {"alice": 3, "bob": 2, "carol": 2, "ivan": 0}  # shard_of(user, 4)
DEADLINE = 60.0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "vectors"


@pytest.fixture
def store(root: Path) -> Iterator[ShardedVectorStore]:
    with ready(ShardedVectorStore, root, SHARDS) as s:
        yield s


def of(user: str, n: int, word: str = "memory", start: int = 0) -> list[MemoryPoint]:
    scope = Scope(user, "assistant")
    return [
        mem(f"{user} {word} {i}", scope=scope, seq=i, seed=hash_seed(user) + i)
        for i in range(start, start + n)
    ]


def hash_seed(user: str) -> int:
    return sum(map(ord, user)) * 1000


def generation(root: Path, index: int) -> str:
    return generations.current(root / layout.shard_name(index)).name


def test_the_users_map_to_the_shards_the_tests_assume():
    assert {u: shard_of(u, SHARDS) for u in USERS} == USERS
    assert shard_of("alice", 4) == shard_of("alice", 4)  # stable: a hash of the id's bytes
    with pytest.raises(ValueError):
        shard_of("alice", 0)
    with pytest.raises(ValueError, match="1 to 256"):
        ShardedVectorStore(Path("unused"), 0)


def test_a_shard_is_made_with_its_first_point_and_holds_its_users_alone(store, root):
    assert json.loads((root / SIDECAR).read_text()) == {
        "model": MODEL,
        "dim": DIM,
        "format": 2,
        "shards": SHARDS,
    }
    assert store.open_shards() == {}  # no point yet: no shard
    store.upsert(of("alice", 3) + of("bob", 2) + of("carol", 1))
    shards = store.open_shards()
    assert sorted(shards) == [2, 3]
    assert sorted(p.name for p in root.iterdir()) == [
        "build-counts.checkpoint",  # the points each holds unindexed, for a crash
        "build-marks",  # the store keeps build marks: the two shards need their first build
        "shard-002",
        "shard-002.build",
        "shard-003",
        "shard-003.build",
        SIDECAR,
    ]
    assert shards[3].count(PointFilter()) == 3
    assert shards[2].count(PointFilter(user_id="bob")) == 2
    assert shards[2].count(PointFilter(user_id="carol")) == 1
    assert store.count(PointFilter()) == 6
    store.close()
    with ready(ShardedVectorStore, root, SHARDS) as again:
        assert sorted(again.open_shards()) == [2, 3] and again.count(PointFilter()) == 6


def test_after_a_clean_close_a_shard_opens_when_first_asked_for(store, root):
    """Serving begins without opening every shard: a user's shard opens with its first read
    or write, what needs every shard opens the rest, and deletes and purges work on shards
    opened this way; after a crash (no keyword counts kept) every shard opens at once."""
    store.upsert(of("alice", 3) + of("bob", 2) + of("ivan", 2, "violin"))
    store.close()
    with ready(ShardedVectorStore, root, SHARDS, open_behind=False) as again:
        assert again.opened == []
        query = unit(hash_seed("alice")).tolist()
        assert len(again.search_dense(query, PointFilter(user_id="alice"), 3)) == 3
        assert again.opened == [3]
        again.flush()  # as Tier 3's close does: the shards not opened stay so
        assert again.opened == [3]
        assert again.delete(PointFilter(user_id="ivan")) == 2 and again.opened == [0, 3]
        again.purge()
        assert again.purges == 1 and again.opened == [0, 3]
        assert again.count(PointFilter()) == 5 and again.opened == [0, 2, 3]
    behind = ShardedVectorStore(root, SHARDS)  # the rest opened by a thread of its own
    behind.ensure(MODEL, DIM)
    try:
        wait_until(lambda: behind.opened == [0, 2, 3], DEADLINE, "for the shards to open")
        assert behind.count(PointFilter(user_id="bob")) == 2
    finally:
        behind.close()
    (root / "term-frequencies").unlink()  # as a crash leaves it
    with ready(ShardedVectorStore, root, SHARDS, open_behind=False) as crashed:
        assert crashed.opened == []  # each shard counts its terms as it opens
        assert crashed.count(PointFilter(user_id="bob")) == 2 and crashed.opened == [2]


def test_the_largest_shards_open_at_the_start_the_others_when_asked_for(store, root, monkeypatch):
    """Shards of ``open_first`` bytes or more on disk are open when ``ensure`` returns, so their
    users' first read waits for no load; the others open as asked for. 0 opens none at the
    start, and none opens once the start's time for them is up."""
    store.upsert(of("alice", 60) + of("bob", 2) + of("ivan", 2, "violin"))
    store.close()
    sizes = {i: layout.disk_bytes(root, i) for i in range(SHARDS)}
    assert sizes[1] == 0 and all(sizes[i] > 0 for i in (0, 2, 3))  # shard 1 was never made
    largest = max(sizes.values())
    with ready(ShardedVectorStore, root, SHARDS, open_behind=False, open_first=largest) as again:
        assert again.opened == [i for i in range(SHARDS) if sizes[i] == largest]
        assert again.count(PointFilter(user_id="bob")) == 2 and 2 in again.opened
    with ready(ShardedVectorStore, root, SHARDS, open_behind=False, open_first=1) as again:
        assert again.opened == [0, 2, 3]
    with ready(ShardedVectorStore, root, SHARDS, open_behind=False, open_first=0) as again:
        assert again.opened == []
    monkeypatch.setattr(members, "OPEN_FIRST_SECONDS", -1.0)
    with ready(ShardedVectorStore, root, SHARDS, open_behind=False, open_first=1) as again:
        assert again.opened == []
        assert again.count(PointFilter()) == 64  # and every shard opens when needed


def test_a_request_waits_for_its_own_shard_not_for_the_others_being_opened(
    store, root, monkeypatch
):
    """The thread opening the other shards holds none of them up: alice's Recall opens her
    shard while the opener is stuck on another."""
    for user in ("alice", "bob", "ivan"):
        store.upsert(of(user, 2))
    store.close()
    release = threading.Event()
    real = ShardSet._open

    def gated(self: ShardSet, index: int, *, count_terms: bool) -> Any:
        if index != USERS["alice"]:
            release.wait(DEADLINE)  # the opener, on another shard first
        return real(self, index, count_terms=count_terms)

    monkeypatch.setattr(ShardSet, "_open", gated)
    again = ShardedVectorStore(root, SHARDS)
    again.ensure(MODEL, DIM)
    try:
        query = unit(hash_seed("alice")).tolist()
        assert len(again.search_dense(query, PointFilter(user_id="alice"), 2)) == 2
        assert again.opened == [USERS["alice"]]  # the opener is still held on shard 0
        release.set()
        wait_until(lambda: again.opened == [0, 2, 3], DEADLINE, "for the opener")
    finally:
        release.set()
        again.close()


def test_the_opener_opens_the_shards_written_last_first(store, root, monkeypatch):
    """After a restart the users who wrote last are the likeliest to come back: the thread
    opening the shards behind takes them by their last write, newest first."""
    for user in ("alice", "bob", "ivan"):
        store.upsert(of(user, 2))
    store.close()
    now = time.time()
    for age, user in ((300, "bob"), (200, "alice"), (100, "ivan")):  # not the order written
        wal = generations.current(root / layout.shard_name(USERS[user])) / "wal"
        for f in wal.iterdir():
            os.utime(f, (now - age, now - age))
    # A segment that a flush deletes while it is read (a link to nothing stands for it) is
    # passed over, not taken for a shard never written.
    gone = generations.current(root / layout.shard_name(USERS["ivan"])) / "wal" / "gone"
    gone.symlink_to(root / "nothing")
    written = [layout.last_written(root, USERS[u]) for u in ("ivan", "alice", "bob")]
    assert written == pytest.approx([now - 100, now - 200, now - 300], abs=0.01)
    gone.unlink()
    order: list[int] = []
    real = ShardSet._open

    def recorded(self: ShardSet, index: int, *, count_terms: bool) -> Any:
        order.append(index)
        return real(self, index, count_terms=count_terms)

    monkeypatch.setattr(ShardSet, "_open", recorded)
    again = ShardedVectorStore(root, SHARDS)
    again.ensure(MODEL, DIM)
    try:
        wait_until(lambda: again.opened == [0, 2, 3], DEADLINE, "for the opener")
        assert order == [USERS["ivan"], USERS["alice"], USERS["bob"]]
    finally:
        again.close()


def test_the_opener_steps_aside_while_a_request_is_served(store, root, monkeypatch):
    """A load holds the interpreter throughout: the opener starts none while a Recall is
    served (tiers.core.priority.REQUESTS), and opens the rest once none is."""
    for user in ("alice", "bob", "ivan"):
        store.upsert(of(user, 2))
    store.close()
    monkeypatch.setattr(members, "STEP_ASIDE_SECONDS", 3600.0)
    again = ShardedVectorStore(root, SHARDS)
    try:
        with served():
            again.ensure(MODEL, DIM)
            assert not threading.Event().wait(0.5)  # the opener's time to open one
            assert again.opened == []
        wait_until(lambda: again.opened == [0, 2, 3], DEADLINE, "for the opener")
    finally:
        again.close()


def test_a_close_while_shards_open_behind_leaves_none_open(store, root):
    for user in ("alice", "bob", "ivan"):
        store.upsert(of(user, 2))
    store.close()
    for _ in range(5):
        again = ShardedVectorStore(root, SHARDS)
        again.ensure(MODEL, DIM)
        again.close()  # the opener stops with the store, which closes what it opened
        assert not any(t.name == "vectors-open" for t in threading.enumerate())
    with ready(ShardedVectorStore, root, SHARDS) as last:
        assert last.count(PointFilter()) == 6


def test_reads_and_deletes_that_name_a_user_touch_its_shard_alone(store, monkeypatch):
    alice, bob = of("alice", 3), of("bob", 3)
    store.upsert(alice + bob)
    calls: list[tuple[int, str]] = []
    for index, shard in store.open_shards().items():
        for name in ("get", "dense", "search_dense", "search_sparse", "scroll", "count"):
            real = getattr(shard, name)

            def spy(*args: Any, _i: int = index, _n: str = name, _r: Any = real) -> Any:
                calls.append((_i, _n))
                return _r(*args)

            monkeypatch.setattr(shard, name, spy)
    ids = [p.id for p in alice + bob]
    assert [p.id for p in store.get(ids, "alice")] == [p.id for p in alice]
    assert set(store.dense(ids, "alice")) == {p.id for p in alice}
    vec = [float(x) for x in unit(1)]
    store.search_dense(vec, PointFilter(user_id="alice"), 3)
    store.scroll(PointFilter(user_id="alice"))
    assert store.delete(PointFilter(user_id="alice", ids=(alice[0].id,))) == 1
    assert {i for i, _name in calls} == {3}  # alice's shard only
    calls.clear()
    assert len(store.get(ids)) == 5  # no user: every shard
    assert {i for i, _name in calls} == {2, 3}


def recorded_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Small stores indexed, and the list that every index build's shard is added to."""
    index_small_stores(monkeypatch)
    built: list[str] = []
    real = generations.child_command

    def command(gen: Path, compact_into: Path | None = None, *made: str) -> list[str]:
        if compact_into is None:
            built.append(gen.parent.name)
        return real(gen, compact_into, *made)

    monkeypatch.setattr(generations, "child_command", command)
    return built


def test_a_build_rebuilds_only_the_shards_written_since_their_last(store, root, monkeypatch):
    built = recorded_builds(monkeypatch)
    store.upsert(of("alice", 30) + of("bob", 30))
    store.optimize()
    assert sorted(built) == ["shard-002", "shard-003"] and store.builds == 2
    built.clear()
    store.optimize()  # nothing written since
    assert built == []
    store.upsert(of("ivan", 20))
    store.set_valid_to([p.id for p in of("bob", 20)], Validity(5))  # changed points leave the index
    store.upsert(of("alice", 3, start=100))  # too few for the engine's threshold (17 here)
    store.optimize()
    assert sorted(built) == ["shard-000", "shard-002"]
    built.clear()
    store.delete(PointFilter(user_id="alice", ids=(of("alice", 1)[0].id,)))
    store.purge()  # a purge's copy has no index: the shard is built again
    store.optimize()
    assert built == ["shard-003"]


def opened(root: Path) -> ShardedVectorStore:
    store = ShardedVectorStore(root, SHARDS)
    store.ensure(MODEL, DIM)
    return store


def test_a_restart_builds_only_the_shards_written_since_their_last_build(root, monkeypatch):
    built = recorded_builds(monkeypatch)
    store = opened(root)
    store.upsert(of("alice", 30) + of("bob", 30))
    store.optimize()
    store.upsert(of("carol", 20))  # written after the build: carol's shard only
    assert layout.build_mark(root, 2).exists() and not layout.build_mark(root, 3).exists()
    store.close()
    built.clear()
    store = opened(root)
    try:
        store.optimize()
        assert built == ["shard-002"]  # bob's and carol's shard; alice's is built
        built.clear()
        store.optimize()
        assert built == []
    finally:
        store.close()
    # A store from before build marks: every shard holding points is built once.
    layout.build_marks_kept(root).unlink()
    store = opened(root)
    try:
        store.optimize()
        assert sorted(built) == ["shard-002", "shard-003"]
    finally:
        store.close()


def test_a_build_is_due_once_enough_points_were_written_and_a_clean_close_keeps_the_count(
    root, monkeypatch
):
    built = recorded_builds(monkeypatch)  # the engine indexes from 17 points of 16 dims
    store = opened(root)
    store.upsert(of("alice", 10))
    store.optimize()
    assert built == [] and store._ledger.unindexed(3) == 10  # no copy of the shard
    store.close()
    assert json.loads(layout.build_counts(root).read_text()) == {"shard-003": 10}
    store = opened(root)
    assert not layout.build_counts(root).exists()  # taken: a crash from here leaves none
    store.upsert(of("alice", 6, start=10))
    store.optimize()
    assert built == []
    store.upsert(of("alice", 1, start=16))  # 17 since the last build: due
    store.optimize()
    assert built == ["shard-003"] and store._ledger.unindexed(3) == 0
    store.upsert(of("alice", 5, start=20))
    store._set.close()  # a crash: the shards' files stay, no count is kept
    built.clear()
    with ready(ShardedVectorStore, root, SHARDS) as store:
        assert store._ledger.unindexed(3) is None
        store.optimize()  # an unknown count: the build is due (the engine may find little)
        assert built == ["shard-003"]


def test_after_a_crash_the_counts_come_from_the_checkpoint_and_a_purged_shard_is_built(
    root, monkeypatch
):
    built = recorded_builds(monkeypatch)  # the engine indexes from 17 points of 16 dims
    store = opened(root)
    store.upsert(of("alice", 10))
    store.optimize()  # a round: not due, and its checkpoint counts alice's shard's 10
    store.upsert(of("alice", 3, start=10))  # after the checkpoint: not in it
    store._set.close()  # a crash: no clean count is kept
    assert not layout.build_counts(root).exists()
    with ready(ShardedVectorStore, root, SHARDS) as store:
        assert store._ledger.unindexed(3) == 10  # a lower bound, not unknown
        store.optimize()
        assert built == []  # no copy of a shard whose engine would find nothing to index
        store.upsert(of("alice", 7, start=13))  # 17 counted since the last build: due
        store.optimize()
        assert built == ["shard-003"]
        built.clear()
        store.upsert(of("alice", 2, start=20))
        store.delete(PointFilter(user_id="alice", ids=(of("alice", 1)[0].id,)))
        store.purge()  # the copy has no index: its count is unknown, in the checkpoint too
        store._set.close()
    assert json.loads(layout.build_checkpoint(root).read_text()) == {}
    with ready(ShardedVectorStore, root, SHARDS) as store:
        assert store._ledger.unindexed(3) is None
        store.optimize()
        assert built == ["shard-003"]


def test_a_flush_takes_the_shards_written_since_and_a_resting_caller_rests_after_each(
    store, monkeypatch
):
    store.upsert(of("alice", 3) + of("bob", 3))
    store.flush()
    shards = store.open_shards()
    flushed = {i: s.live.flushes for i, s in shards.items()}
    rested: list[bool] = []
    rest_after = members.rest_after

    def spied(began: float) -> None:
        rested.append(rests())
        rest_after(began)

    monkeypatch.setattr(members, "rest_after", spied)
    store.upsert(of("alice", 2, start=3))
    with resting(0.1):
        store.flush()
    store.flush()  # nothing written since
    assert {i: s.live.flushes - flushed[i] for i, s in shards.items()} == {2: 0, 3: 1}
    assert rested == [True]  # after alice's shard, the one flushed
    assert store.count(PointFilter(user_id="alice")) == 5


def test_a_purge_rewrites_only_the_shards_deleted_from_and_leaves_no_byte(store, root):
    secrets = of("alice", 4, "Wombatmark")
    store.upsert(of("alice", 20) + secrets + of("bob", 20, "Okapimark"))
    store.flush()
    before = {i: generation(root, i) for i in (2, 3)}
    for p in secrets:  # four Forgets of one shard: one purge
        assert store.delete(PointFilter(user_id="alice", ids=(p.id,))) == 1
    assert layout.purge_mark(root, 3).exists() and not layout.purge_mark(root, 2).exists()
    assert files_with(root, b"Wombatmark")  # deleted, but in the engine's files
    store.purge()
    shards = store.open_shards()
    assert shards[3].purges == 1 and shards[2].purges == 0
    assert generation(root, 3) != before[3] and generation(root, 2) == before[2]
    assert files_with(root, b"Wombatmark") == []
    assert files_with(root, b"Okapimark")  # bob's shard was not touched
    assert not layout.purge_mark(root, 3).exists()
    assert store.count(PointFilter(user_id="alice")) == 20
    store.purge()  # nothing deleted since: nothing rewritten
    assert shards[3].purges == 1


def test_a_purge_takes_the_shard_deleted_from_last_first(store, root, monkeypatch):
    store.upsert(of("alice", 3) + of("bob", 3) + of("ivan", 3))
    for user, k in (("ivan", 0), ("alice", 0), ("bob", 0), ("ivan", 1)):  # ivan's again, last
        assert store.delete(PointFilter(user_id=user, ids=(of(user, 3)[k].id,))) == 1
    order: list[int] = []
    for index, shard in store.open_shards().items():
        real = shard.purge

        def purge(_i: int = index, _real: Callable[[], None] = real) -> None:
            order.append(_i)
            _real()

        monkeypatch.setattr(shard, "purge", purge)
    store.purge()
    assert order == [0, 2, 3]  # ivan's, bob's, alice's


def test_a_delete_during_a_purge_is_covered_by_the_next(store, root, tmp_path, monkeypatch):
    first, second = of("alice", 1, "Quokkamark"), of("alice", 1, "Narwhalmark", start=1)
    store.upsert(of("alice", 10, start=10) + first + second)
    store.delete(PointFilter(ids=(first[0].id,)))
    gate = tmp_path / "go"
    gated_child(monkeypatch, gate, purge=True)
    purge, errors = child_running(store.purge, store.open_shards()[3], "the purge's child")
    store.delete(PointFilter(ids=(second[0].id,)))  # after the purge's copy was taken
    gate.touch()
    purge.join(DEADLINE)
    assert not purge.is_alive() and not errors
    assert files_with(root, b"Quokkamark") == []
    assert layout.purge_mark(root, 3).exists()  # the second delete is not purged yet
    store.purge()
    assert files_with(root, b"Narwhalmark") == [] and not layout.purge_mark(root, 3).exists()
    assert store.count(PointFilter()) == 10


def test_purge_marks_survive_a_restart(store, root):
    store.upsert(of("alice", 5) + of("ivan", 5, "Pangolinmark"))
    store.delete(PointFilter(user_id="ivan"))
    store.close()  # a stop (or a crash) before the purge
    assert files_with(root, b"Pangolinmark") and layout.purge_mark(root, 0).exists()
    with ready(ShardedVectorStore, root, SHARDS) as again:
        again.purge()
        assert again.open_shards()[0].purges == 1 and again.open_shards()[3].purges == 0
        assert files_with(root, b"Pangolinmark") == []
        assert not layout.purge_mark(root, 0).exists()


def alice_building(
    store: ShardedVectorStore,
) -> tuple[threading.Thread, Any, list[BaseException]]:
    """Alice's 20 points written and a round of builds started on a thread, once alice's
    shard's build child runs: the thread, that shard, and the errors the round raised."""
    store.upsert(of("alice", 20))
    alice_shard = store.open_shards()[3]
    build, errors = child_running(store.optimize, alice_shard, "alice's build")
    return build, alice_shard, errors


def test_a_purge_of_one_shard_does_not_give_up_a_build_of_another(
    store, root, tmp_path, monkeypatch
):
    index_small_stores(monkeypatch)
    store.upsert(of("bob", 20))
    store.optimize()  # bob's shard is built
    gated_child(monkeypatch, tmp_path / "go")  # builds wait for the gate, purges do not
    build, alice_shard, errors = alice_building(store)
    store.delete(PointFilter(user_id="bob", ids=(of("bob", 1)[0].id,)))
    store.purge()  # bob's shard, while alice's builds
    assert store.open_shards()[2].purges == 1
    (tmp_path / "go").touch()
    build.join(DEADLINE)
    assert not build.is_alive() and errors == []
    assert alice_shard.builds == 1


def test_a_purge_of_the_shard_being_built_gives_the_build_up_and_the_rest_go_on(
    store, root, tmp_path, monkeypatch
):
    index_small_stores(monkeypatch)
    gated_child(monkeypatch, tmp_path / "never")
    build, alice_shard, errors = alice_building(store)
    store.delete(PointFilter(user_id="alice", ids=(of("alice", 1)[0].id,)))
    store.purge()
    build.join(DEADLINE)
    assert len(errors) == 1 and isinstance(errors[0], IndexBuildCancelled)
    monkeypatch.undo()
    index_small_stores(monkeypatch)
    store.optimize()  # the shard is still unbuilt: built now
    assert alice_shard.builds == 1


def test_copy_to_writes_the_sharded_layout_which_opens_as_it_was(store, root, tmp_path):
    store.upsert(of("alice", 5) + of("bob", 4) + of("ivan", 3, "Gone"))
    store.delete(PointFilter(user_id="ivan"))
    dest = tmp_path / "backup" / "vectors"
    store.copy_to(dest)
    assert json.loads((dest / SIDECAR).read_text())["shards"] == SHARDS
    assert files_with(dest, b"Gone") == []  # deleted points are not copied
    with ready(ShardedVectorStore, dest, SHARDS) as copy:
        assert copy.count(PointFilter()) == 9
        ids = [p.id for p in of("alice", 5) + of("bob", 4)]
        assert [p.id for p in copy.get(ids)] == ids


def test_a_shard_directory_beyond_the_count_is_refused(store, root):
    store.close()
    (root / "shard-009").mkdir()
    with pytest.raises(Exception, match="beyond the 4 shards"):
        ShardedVectorStore(root, SHARDS).ensure(MODEL, DIM)
