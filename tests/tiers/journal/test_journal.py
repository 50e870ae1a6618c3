"""Tier 2 on a real TTL RocksDB in tmp_path: RocksDB's own expiry, which takes real seconds.
The journal's contract (listing, paging, marks, expiry by its clock, errors) is the suite
``tests/contracts/test_journal.py``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiers.core.errors import EpisodeNotFound
from tiers.core.records import Message, Scope
from tiers.journal.store import JOURNAL_CFS, Journal
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.working.memory import WorkingMemory
from tiers.working.session import WindowLimits

DAY_US = 86_400 * 1_000_000
T0 = 1_700_000_000 * 1_000_000


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[RocksStore, RocksStore]]:
    state = RocksStore(tmp_path / "state", STATE_CFS)
    yield state, RocksStore(tmp_path / "journal", JOURNAL_CFS, ttl_seconds=2)
    # closed by the tests that reopen; close is idempotent


def make(state: RocksStore, jstore: RocksStore, ttl: int) -> tuple[Journal, WorkingMemory]:
    journal = Journal(jstore, state, ttl)
    return journal, WorkingMemory(state, journal, WindowLimits())


def flush(wm: WorkingMemory, sid: str, user: str, agent: str, day: int, n: int = 2) -> str:
    messages = [
        Message("user", f"{sid} message {i}", created_at_us=T0 + day * DAY_US + i) for i in range(n)
    ]
    wm.append(sid, Scope(user, agent), messages)
    return wm.end_session(sid).episode_id


def test_expired_episodes_are_never_returned_and_compaction_drops_them(stores):
    state, jstore = stores
    journal, wm = make(state, jstore, ttl=2)
    old = flush(wm, "old", "alice", "", 0)
    assert journal.count() == 1 and journal.get(old).episode_id == old
    # RocksDB compares whole seconds and drops an entry only once ts + ttl < now.
    time.sleep(3.1)
    young = flush(wm, "young", "alice", "", 1)

    # Before compaction the old entries are still on disk, but no read returns them.
    assert jstore.get("episodes", old.encode()) is not None
    assert [e.episode_id for e in journal.list().episodes] == [young]
    assert [e.episode_id for e in journal.list(user_id="alice").episodes] == [young]
    assert journal.count() == 1
    with pytest.raises(EpisodeNotFound, match="expired"):
        journal.get(old)

    journal.compact()
    assert jstore.get("episodes", old.encode()) is None
    assert journal.messages(old) == []
    assert jstore.get("episodes", young.encode()) is not None
    # Consolidation state lives in the no-TTL store and survives the journal's TTL.
    assert journal.is_pending(old) and journal.is_pending(young)
    assert journal.pending_count() == 2
    jstore.close()
    state.close()
