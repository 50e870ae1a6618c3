"""Tier 2's episodic journal: the contract of :class:`tiers.journal.store.Journal`, on real RocksDB
stores in tmp_path (a TTL journal store and the no-TTL state store for the marks). Its clock is
set by hand, so expiry needs no sleep; RocksDB's own TTL compaction, which needs real seconds
to pass, is ``tests/tiers/journal/test_journal.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contracts.stores import (
    BIG,
    DAY_US,
    JOURNAL_TTL_SECONDS,
    T0,
    Journals,
    close_broken,
    full_disk,
)
from tiers.core.errors import EpisodeNotFound, InvalidArgument, NotFound, StoreUnavailable
from tiers.core.records import Scope, episode_id_for
from tiers.journal.consolidation import MARK_OWNERS_CF
from tiers.journal.store import PendingEpisode
from tiers.rocks import InvalidPageToken

TTL = JOURNAL_TTL_SECONDS


@pytest.fixture(params=["rocksdb"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Journals]:
    journals = Journals(tmp_path)
    yield journals
    close_broken(journals.jstore, journals.state)


def test_listing_filters_pages_and_orders(impl):
    journal = impl.journal
    ids = {}
    for day in range(6):
        ids[day] = impl.write(f"a{day}", "alice", "x" if day % 2 else "y", day).episode_id
    impl.write("b0", "bob", "x", 3)

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


def test_an_episode_reads_back_whole_and_survives_a_restart(impl):
    episode = impl.write("s", "alice", "agent", 0, n=5)
    eid = episode.episode_id
    for journal in impl.and_reopened():
        assert journal.get(eid) == episode and journal.find(eid) == episode
        assert [m.content for m in journal.messages(eid)] == [f"s message {i}" for i in range(5)]
        assert [m.seq for m in journal.messages(eid, after_seq=2)] == [3, 4, 5]
        assert [m.seq for m in journal.messages(eid, after_seq=1, limit=2)] == [2, 3]
        assert journal.messages(eid, after_seq=5) == []
        assert journal.messages("f" * 32) == []
        assert journal.count() == 1
        assert journal.expires_at_us(episode) == impl.now_us() + TTL * 1_000_000
    impl.journal.compact()  # nothing has expired: nothing goes
    assert impl.journal.get(eid) == episode and impl.journal.size_bytes() > 0


def test_writing_an_episode_again_is_idempotent_and_delete_undoes_it(impl):
    first = impl.write("s", "alice", "", 1, n=3)
    again = impl.write("s", "alice", "", 1, n=3)
    assert again == first
    journal = impl.journal
    assert journal.count() == 1 and len(journal.list().episodes) == 1
    assert len(journal.messages(first.episode_id)) == 3
    journal.delete_episode(first)
    for j in impl.and_reopened():
        assert j.find(first.episode_id) is None and j.count() == 0
        assert j.messages(first.episode_id) == [] and j.list(user_id="alice").episodes == []
        with pytest.raises(EpisodeNotFound):
            j.get(first.episode_id)


def test_unknown_and_expired_episodes_are_not_found(impl):
    with pytest.raises(EpisodeNotFound, match="not found") as info:
        impl.journal.get("f" * 32)
    assert isinstance(info.value, NotFound)
    assert impl.journal.find("f" * 32) is None
    old = impl.write("old", "alice", "", 0)
    impl.clock.now += TTL - 1
    young = impl.write("young", "alice", "", 1)
    assert impl.journal.count() == 2
    impl.clock.now += 1  # the old episode's TTL is up
    with pytest.raises(EpisodeNotFound, match="expired"):
        impl.journal.get(old.episode_id)
    assert impl.journal.get(young.episode_id) == young
    assert [e.episode_id for e in impl.journal.list().episodes] == [young.episode_id]
    assert [e.episode_id for e in impl.journal.list(user_id="alice").episodes] == [young.episode_id]
    assert impl.journal.count() == 1
    assert impl.journal.find(old.episode_id) == old  # crash recovery still sees it


def test_page_tokens_are_invalid_arguments(impl):
    impl.write("a", "alice", "", 0)
    impl.write("b", "alice", "", 1)
    token = impl.journal.list(page_size=1).next_page_token
    assert token
    with pytest.raises(InvalidArgument):  # a token of another listing's range
        impl.journal.list(start_us=T0 + 5 * DAY_US, page_token=token)
    with pytest.raises(InvalidPageToken, match="not a token"):
        impl.journal.list(page_token="abcde")
    assert len(impl.reopen().list(page_token=token).episodes) == 1  # tokens outlive a restart


def test_consolidation_marks_are_durable_and_outlive_the_episode(impl):
    a = impl.write("a", "alice", "x", 0)
    impl.clock.now += 10
    b = impl.write("b", "bob", "", 1)
    mark_a = PendingEpisode(a.episode_id, a.flushed_at_us, "alice", "x", "a")
    mark_b = PendingEpisode(b.episode_id, b.flushed_at_us, "bob", "", "b")
    journal = impl.journal
    assert journal.pending() == journal.unindexed() == [mark_a, mark_b]  # oldest flush first
    assert journal.pending_count() == journal.unindexed_count() == 2
    assert journal.is_pending(a.episode_id)

    journal.mark_indexed(a.episode_id)
    journal.mark_consolidated(b.episode_id)
    journal.mark_indexed("f" * 32)  # an unknown id: nothing to do
    journal = impl.reopen()
    assert journal.unindexed() == [mark_b] and journal.pending() == [mark_a]
    assert not journal.is_pending(b.episode_id)
    assert journal.pending_count() == journal.unindexed_count() == 1

    journal.set_marks(b, indexed=False, consolidated=False)
    assert journal.pending() == [mark_a, mark_b] and journal.unindexed() == [mark_b]
    journal.set_marks(a, indexed=True, consolidated=True)
    assert journal.pending() == journal.unindexed() == [mark_b]

    # Marks live in the state store: an expired episode keeps its mark.
    impl.clock.now += TTL - 5
    assert journal.near_expiry() == [mark_b]  # less than a tenth of its TTL left
    # Of the episodes given, those with no time left: a's has expired.
    assert journal.near_expiry([mark_a, mark_b], fraction=0.0) == [mark_a]
    impl.clock.now += 10
    assert journal.count() == 0 and journal.pending() == [mark_b]
    assert journal.near_expiry(fraction=0.0) == [mark_b]


def test_a_users_marked_episodes_are_found_by_owner_until_their_last_mark_goes(impl):
    a = impl.write("a", "ann", "x", 0)
    b = impl.write("b", "ann", "", 1)
    c = impl.write("c", "anne", "x", 2)  # a longer id with the same start
    journal = impl.journal
    assert sorted(journal.marked("ann")) == sorted(
        [(a.episode_id, Scope("ann", "x")), (b.episode_id, Scope("ann", ""))]
    )
    journal.mark_indexed(a.episode_id)  # one mark left: still marked
    journal.mark_consolidated(b.episode_id)
    journal.mark_indexed(b.episode_id)  # none left
    journal.mark_consolidated(b.episode_id)  # again: nothing to do
    journal = impl.reopen()
    assert journal.marked("ann") == [(a.episode_id, Scope("ann", "x"))]
    journal.set_marks(b, indexed=True, consolidated=False)  # imported with a mark
    journal.set_marks(a, indexed=True, consolidated=True)  # imported with none
    assert journal.marked("ann") == [(b.episode_id, Scope("ann", ""))]
    assert journal.marked("anne") == [(c.episode_id, Scope("anne", "x"))]
    assert journal.marked("nobody") == []
    for episode in (b, c):
        journal.mark_consolidated(episode.episode_id)
        journal.mark_indexed(episode.episode_id)
    assert journal.marked("ann") == journal.marked("anne") == []
    owners = [key for key, _ in impl.state.scan(MARK_OWNERS_CF, b"")]
    assert owners == [b""]  # no entry outlives its marks: only the key that says all are there


def test_a_refused_write_raises_store_unavailable_and_stores_nothing(impl):
    kept = impl.write("kept", "alice", "", 0)
    with full_disk(), pytest.raises(StoreUnavailable, match="File too large"):
        impl.write("big", "alice", "", 1, content=BIG)
    assert impl.journal.count() == 1 and impl.journal.pending_count() == 1
    with pytest.raises(EpisodeNotFound):
        impl.journal.get(episode_id_for("big", 1, "alice"))
    assert impl.journal.messages(episode_id_for("big", 1, "alice")) == []
    assert impl.journal.get(kept.episode_id) == kept
    with pytest.raises(StoreUnavailable):  # the journal store refuses every later write
        impl.journal.delete_episode(kept)
    assert impl.journal.get(kept.episode_id) == kept
