"""RocksDB's compactions behind a Forget (``tiers.rights.forget.compactions``), on real RocksDB
stores: requests made while one runs share the next, a ticket waits for the compaction after
it, the deleted bytes leave the files; and through a real Forget: it returns while its
compaction is held, its ``purge`` mark stays until that compaction has ended, and a
compaction that never ran before a stop runs at the next start."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.support.disk import on_disk
from tests.support.polling import wait_until
from tests.tiers.rights.test_forget_erasure import SMALL, House, episode_ids, points
from tiers.core.records import Message
from tiers.rights.forget.compactions import Compactions
from tiers.rights.forget.plan import ForgetTarget
from tiers.rocks import RocksStore
from tiers.semantic.tombstones import PURGE_KEY, TOMBSTONES_CF

SECRET = b"Wombatword7707"


class Held:
    """``store.purge`` held until :attr:`release` is set (raising after 60 s), the calls'
    arguments kept: the real compaction runs once released."""

    def __init__(self, store: RocksStore) -> None:
        self.calls: list[tuple[list[str], dict[str, bytes]]] = []
        self.entered, self.release = threading.Event(), threading.Event()
        self._purge = store.purge
        store.purge = self  # type: ignore[method-assign]

    def __call__(self, families: Any, prefixes: Any = None) -> None:
        self.calls.append((sorted(families), dict(prefixes or {})))
        self.entered.set()
        if not self.release.wait(60):
            raise RuntimeError("held for a minute")
        self._purge(families, prefixes)


def test_requests_made_while_a_compaction_runs_share_the_next_one(tmp_path: Path):
    store = RocksStore(tmp_path / "state", ["a", "b", "c"])
    held, compactions = Held(store), Compactions()
    try:
        first = compactions.request(store, ["a"])
        assert held.entered.wait(60)
        assert not compactions.wait(first, 0.05) and compactions.pending
        # Three more while it runs: one compaction of their union; a family asked for under
        # two prefixes is compacted whole, one under a single prefix in its range alone.
        compactions.request(store, ["b"], {"b": b"u1\x00"})
        compactions.request(store, ["b", "c"], {"b": b"u2\x00", "c": b"u3\x00"})
        last = compactions.request(store, ["a"])
        held.release.set()
        assert compactions.wait(last, 60) and compactions.wait(first, 0)
        assert held.calls == [(["a"], {}), (["a", "b", "c"], {"c": b"u3\x00"})]
        wait_until(lambda: not compactions.pending, 60, "the thread idle")
    finally:
        held.release.set()
        compactions.close()
        assert compactions.join(60)
        store.close()


def test_a_compaction_leaves_no_byte_of_what_was_deleted(tmp_path: Path):
    store = RocksStore(tmp_path / "state", ["a"])
    compactions = Compactions()
    try:
        for i in range(2000):  # an SST of other rows, the secret among them
            batch = store.batch()
            batch.put("a", f"row-{i:05d}".encode(), SECRET if i == 1000 else b"x" * 100)
            store.write(batch)
        store.flush()
        assert list(on_disk(tmp_path, [SECRET.decode()]))
        batch = store.batch()
        batch.delete("a", b"row-01000")
        store.write(batch)
        store.flush()  # what Forget does before it returns: the SST still holds it
        assert list(on_disk(tmp_path, [SECRET.decode()])) != []
        assert compactions.wait(compactions.request(store, ["a"]), 60)
        assert on_disk(tmp_path, [SECRET.decode()]) == {}
        assert store.get("a", b"row-00999") == b"x" * 100
    finally:
        compactions.close()
        assert compactions.join(60)
        store.close()


def test_a_forget_returns_before_its_compaction_and_its_mark_stays_until_that_ends(
    tmp_path: Path,
):
    house = House(tmp_path, "edge")
    held = Held(house.state)
    vectors_purged = threading.Event()
    vectors_purge = house.vectors.purge

    def purge_vectors() -> None:
        vectors_purge()
        vectors_purged.set()

    house.vectors.purge = purge_vectors
    marks_when_compacted: list[bytes | None] = []
    compact = held._purge

    def compacted(families: Any, prefixes: Any = None) -> None:
        compact(families, prefixes)
        marks_when_compacted.append(house.state.get(TOMBSTONES_CF, PURGE_KEY))

    held._purge = compacted  # type: ignore[method-assign]
    try:
        house.write(points(SMALL, episode_ids(2), 3, seed=5))
        # The compaction is held: a Forget that waited for it would fail after a minute.
        counts = house.forgetter.forget(ForgetTarget(scope=SMALL), lambda _scope: True)
        assert counts.vector_points == 6 and counts.flush_ms >= 0
        assert held.entered.wait(60) and vectors_purged.wait(60)
        assert house.state.get(TOMBSTONES_CF, PURGE_KEY) is not None
        held.release.set()
        wait_until(lambda: not house.forgetter.purger.pending, 60, "the purge and compaction")
        assert marks_when_compacted[0] is not None  # not cleared before the compaction ended
        assert house.state.get(TOMBSTONES_CF, PURGE_KEY) is None
    finally:
        held.release.set()
        house.close()


def test_a_compaction_that_failed_until_a_stop_runs_at_the_next_start(tmp_path: Path):
    house = House(tmp_path, "edge")
    failures: list[str] = []

    def refuse(families: Any, prefixes: Any = None) -> None:
        failures.append("compaction")
        raise RuntimeError("the disk refuses the compaction")

    house.state.purge = refuse  # type: ignore[method-assign]
    house.jstore.purge = refuse  # type: ignore[method-assign]
    try:
        house.working.append("s1", SMALL, [Message("user", f"My code word is {SECRET.decode()}.")])
        house.working.end_session("s1")
        house.state.flush()
        house.jstore.flush()
        assert any(p.startswith("journal/") for p in on_disk(tmp_path, [SECRET.decode()]))
        counts = house.forgetter.forget(ForgetTarget(scope=SMALL), lambda _scope: True)
        assert counts.episodes == 1
        wait_until(lambda: failures, 60, "a compaction tried")
        # Forget's flush left no log holding it; the SST files still do (no compaction ran).
        held = list(on_disk(tmp_path, [SECRET.decode()]))
        assert held and not [p for p in held if p.endswith(".log")]
        assert house.state.get(TOMBSTONES_CF, PURGE_KEY) is not None
    finally:
        house.close()
    house = House(tmp_path, "edge")  # the next start
    try:
        assert house.forgetter.purger.resume()
        wait_until(lambda: not house.forgetter.purger.pending, 60, "the resumed purge")
        assert on_disk(tmp_path, [SECRET.decode()]) == {}
    finally:
        house.close()
