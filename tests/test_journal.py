"""Tier 2 on a real TTL RocksDB in tmp_path."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiers.errors import EpisodeNotFound
from tiers.journal import JOURNAL_CFS, InvalidPageToken, Journal
from tiers.records import Message, Scope
from tiers.rocks import RocksStore
from tiers.session import WindowLimits
from tiers.working import STATE_CFS, WorkingMemory

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


def test_listing_filters_pages_and_orders(tmp_path: Path):
    state = RocksStore(tmp_path / "state", STATE_CFS)
    jstore = RocksStore(tmp_path / "journal", JOURNAL_CFS, ttl_seconds=3600)
    journal, wm = make(state, jstore, 3600)
    ids = {}
    for day in range(6):
        ids[day] = flush(wm, f"a{day}", "alice", "x" if day % 2 else "y", day)
    flush(wm, "b0", "bob", "x", 3)

    everything = journal.list(page_size=100).episodes
    assert len(everything) == 7
    assert [e.started_at_us for e in everything] == sorted(e.started_at_us for e in everything)

    alice = journal.list(user_id="alice", page_size=100).episodes
    assert [e.episode_id for e in alice] == [ids[d] for d in range(6)]
    assert [e.episode_id for e in journal.list(user_id="alice", agent_id="x").episodes] == [
        ids[1],
        ids[3],
        ids[5],
    ]
    window = journal.list(user_id="alice", start_us=T0 + 2 * DAY_US, end_us=T0 + 4 * DAY_US)
    assert [e.episode_id for e in window.episodes] == [ids[2], ids[3]]
    newest = journal.list(user_id="alice", newest_first=True, page_size=2)
    assert [e.episode_id for e in newest.episodes] == [ids[5], ids[4]]

    # paging forwards and backwards visits every episode once
    for newest_first in (False, True):
        seen, token = [], ""
        while True:
            page = journal.list(
                user_id="alice", page_size=4, page_token=token, newest_first=newest_first
            )
            seen += [e.episode_id for e in page.episodes]
            token = page.next_page_token
            if not token:
                break
        expected = [ids[d] for d in range(6)]
        assert seen == (expected[::-1] if newest_first else expected)

    bob_token = journal.list(page_size=1).next_page_token
    with pytest.raises(InvalidPageToken):
        journal.list(user_id="zed", page_token=bob_token)
    with pytest.raises(InvalidPageToken):
        journal.list(page_token="!!not base64!!")
    jstore.close()
    state.close()


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
