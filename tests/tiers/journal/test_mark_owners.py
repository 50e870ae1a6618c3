"""Marked episodes are found by their owner (``Journal.marked``, ``mark_owners``) on real
RocksDB stores: the entries built once for a store written before them, and none left behind
when the two stages unmark one episode at the same time."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any, cast

from tiers.core.records import Episode, Scope
from tiers.journal.consolidation import MARK_OWNERS_CF, PENDING_CF, UNINDEXED_CF, mark
from tiers.journal.store import JOURNAL_CFS, Journal
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS


def episode(i: int, user: str) -> Episode:
    eid = f"{i:032x}"
    return Episode(eid, f"s{i}", Scope(user, "bot"), 1, 2, 3, 2, 1, 2, "client")


def journal_on(tmp_path: Path) -> tuple[Journal, RocksStore, RocksStore]:
    state = RocksStore(tmp_path / "state", STATE_CFS)
    jstore = RocksStore(tmp_path / "journal", JOURNAL_CFS, ttl_seconds=3600)
    return Journal(jstore, state, 3600), state, jstore


def test_a_store_written_before_the_owners_entries_gets_them_at_the_first_call(tmp_path: Path):
    journal, state, jstore = journal_on(tmp_path)
    try:
        batch = state.batch()  # as an earlier release wrote them: the marks alone
        for i in range(20_000):
            e = episode(i, f"user-{i % 7}")
            batch.put(UNINDEXED_CF, e.episode_id.encode(), mark(e))
            if i % 2:
                batch.put(PENDING_CF, e.episode_id.encode(), mark(e))
        state.write(batch)
        assert list(state.scan(MARK_OWNERS_CF, b"")) == []
        found = journal.marked("user-3")
        assert sorted(e for e, _ in found) == sorted(f"{i:032x}" for i in range(3, 20_000, 7))
        assert {owner for _, owner in found} == {Scope("user-3", "bot")}
        built = sum(1 for _ in state.scan(MARK_OWNERS_CF, b""))
        assert built == 20_000 + 1  # an entry per episode, and the key that says all are there
        journal.mark_indexed(f"{4:032x}")  # its only mark: its entry goes
        assert len(journal.marked("user-4")) == len(range(4, 20_000, 7)) - 1
    finally:
        jstore.close()
        state.close()


class Meeting:
    """The state store, where each thread's second read of a mark (an unmark reads its own,
    then the other) waits, once it has read it, for the other thread's (up to a second): two
    unmarks of one episode then both read both marks before either writes, unless something
    keeps them apart."""

    def __init__(self, state: RocksStore) -> None:
        self._state = state
        self._meet = threading.Barrier(2, timeout=1.0)
        self._reads: dict[int, int] = {}

    def get(self, cf: str, key: bytes) -> bytes | None:
        value = self._state.get(cf, key)
        if cf in (UNINDEXED_CF, PENDING_CF):
            me = threading.get_ident()
            self._reads[me] = self._reads.get(me, 0) + 1
            if self._reads[me] == 2:
                with contextlib.suppress(threading.BrokenBarrierError):
                    self._meet.wait()
        return value

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


def test_two_stages_unmarking_one_episode_at_once_leave_no_entry(tmp_path: Path):
    _journal, state, jstore = journal_on(tmp_path)
    journal = Journal(jstore, cast(RocksStore, Meeting(state)), 3600)
    try:
        e = episode(1, "ann")
        batch = state.batch()
        Journal.mark_pending(batch, e)
        state.write(batch)
        assert journal.marked("ann") == [(e.episode_id, Scope("ann", "bot"))]
        threads = [
            threading.Thread(target=journal.mark_indexed, args=(e.episode_id,)),
            threading.Thread(target=journal.mark_consolidated, args=(e.episode_id,)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert journal.unindexed() == journal.pending() == []
        assert journal.marked("ann") == []  # the last mark took its entry along
    finally:
        jstore.close()
        state.close()
