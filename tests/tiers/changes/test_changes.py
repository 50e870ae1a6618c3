"""The change log (:mod:`tiers.changes.log`) on a real RocksDB: changes are read in order from a
cursor, never past one whose write has not settled; the numbering survives a restart and a
retention that removed everything; a cursor older than what retention removed is refused; a
Forget leaves no change of what it forgot, and no byte of the user."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tiers.changes.log import (
    CHANGES_CF,
    ORDER_CF,
    Change,
    ChangeLog,
    ChangesVisible,
    CursorExpired,
    Entry,
)
from tiers.core.errors import InvalidArgument
from tiers.core.records import Scope
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS, change_types
from tiers.scoped import Covered

ALICE, ALICE_BOT, BOB = Scope("alice"), Scope("alice", "bot"), Scope("bob")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def state(tmp_path: Path) -> Iterator[RocksStore]:
    store = RocksStore(tmp_path / "state", STATE_CFS)
    yield store
    store.close()


def appended(scope: Scope, session: str, count: int = 1) -> Change:
    return Change(
        scope,
        "session.appended",
        {"session_id": session, "episode_id": "ep-" + session, "count": count},
    )


def read(log: ChangeLog, scope: Scope, after: int, limit: int) -> list[Entry]:
    """The changes of a page (what a reader is sent)."""
    return log.page(scope, after, limit).entries


def types(entries: list) -> list[str]:  # type: ignore[type-arg]
    return [e.change.type for e in entries]


def test_changes_are_read_in_order_from_a_cursor_per_scope(state: RocksStore) -> None:
    log = ChangeLog(state, types=change_types())
    log.write(state.batch(), [Change(ALICE, "session.started", {"session_id": "s1"})])
    log.write(state.batch(), [appended(BOB, "b1"), appended(ALICE_BOT, "s1", 2)])
    log.write(state.batch(), [Change(ALICE, "anchor.set", {"session_id": "s1"})])
    everything = read(log, ALICE, 0, 100)
    assert [e.seq for e in everything] == [1, 3, 4]
    assert types(everything) == ["session.started", "session.appended", "anchor.set"]
    assert everything[1].change.scope == ALICE_BOT and everything[1].change.attrs["count"] == 2
    assert [e.seq for e in read(log, ALICE, 1, 100)] == [3, 4]
    assert [e.seq for e in read(log, ALICE, 1, 1)] == [3]  # a page
    assert [e.seq for e in read(log, BOB, 0, 100)] == [2]
    # an agent's scope: its own changes and the user's, not another agent's
    log.write(state.batch(), [appended(Scope("alice", "other"), "s9")])
    assert [e.seq for e in read(log, ALICE_BOT, 0, 100)] == [1, 3, 4]
    with pytest.raises(InvalidArgument, match="ahead"):
        read(log, ALICE, 99, 10)
    with pytest.raises(InvalidArgument, match="unknown change type"):
        log.write(state.batch(), [Change(ALICE, "session.exploded")])


def test_a_reader_never_passes_a_change_whose_write_has_not_settled(state: RocksStore) -> None:
    log = ChangeLog(state)
    first = state.batch()
    with log.staged(first, [appended(ALICE, "slow")]) as (slow,):
        # a later change is written while the first one's write is still under way
        (fast,) = log.write(state.batch(), [appended(ALICE, "fast")])
        assert fast > slow
        assert log.visible == 0 and read(log, ALICE, 0, 10) == []
        state.write(first)
    assert log.visible == fast
    assert [e.change.attrs["session_id"] for e in read(log, ALICE, 0, 10)] == ["slow", "fast"]
    # a write that fails settles too: readers go on past its number
    try:
        with log.staged(state.batch(), [appended(ALICE, "lost")]):
            raise OSError("the disk is full")
    except OSError:
        pass
    (after,) = log.write(state.batch(), [appended(ALICE, "after")])
    assert log.visible == after
    assert [e.change.attrs["session_id"] for e in read(log, ALICE, fast, 10)] == ["after"]


def test_numbers_go_on_after_a_restart_and_after_retention_removed_everything(
    tmp_path: Path,
) -> None:
    clock = Clock()
    state = RocksStore(tmp_path / "state", STATE_CFS)
    log = ChangeLog(state, retention_seconds=3600, clock=clock)
    log.write(state.batch(), [appended(ALICE, "s1"), appended(BOB, "b1")])
    state.close()
    state = RocksStore(tmp_path / "state", STATE_CFS)
    try:
        log = ChangeLog(state, retention_seconds=3600, clock=clock)
        assert log.visible == 2 and [e.seq for e in read(log, ALICE, 0, 10)] == [1]
        clock.now += 7200
        assert log.trim() == 2 and log.count() == 0
        state.close()
        state = RocksStore(tmp_path / "state", STATE_CFS)
        log = ChangeLog(state, retention_seconds=3600, clock=clock)
        assert log.write(state.batch(), [appended(ALICE, "s2")]) == [3]
    finally:
        state.close()


def test_a_cursor_older_than_retention_is_refused(state: RocksStore) -> None:
    clock = Clock()
    log = ChangeLog(state, retention_seconds=3600, clock=clock)
    log.write(state.batch(), [appended(ALICE, "old1"), appended(ALICE, "old2")])
    log.write(state.batch(), [appended(BOB, "b-old")])
    clock.now += 3000
    log.write(state.batch(), [appended(ALICE, "new")])
    clock.now += 1000  # the first three are older than an hour now
    assert log.trim(batch_size=2) == 3  # in two batches
    with pytest.raises(CursorExpired, match="older than the change log keeps"):
        read(log, ALICE, 1, 10)
    assert log.oldest(ALICE) == 2
    assert [e.change.attrs["session_id"] for e in read(log, ALICE, log.oldest(ALICE), 10)] == [
        "new"
    ]
    assert read(log, ALICE, 2, 10)[0].seq == 4
    assert read(log, BOB, 3, 10) == [] and log.oldest(BOB) == 3
    # a user retention never touched reads from the start
    assert read(log, Scope("carol"), 0, 10) == []


def user_bytes(state: RocksStore, user: bytes) -> int:
    return sum(
        user in key or user in value
        for cf in (CHANGES_CF, ORDER_CF)
        for key, value in state.scan(cf, b"")
    )


def test_a_forget_leaves_no_change_of_what_it_forgot(state: RocksStore) -> None:
    clock = Clock()
    log = ChangeLog(state, retention_seconds=3600, clock=clock, types=change_types())
    log.write(state.batch(), [appended(ALICE, "s1")])
    clock.now += 7200
    log.trim()  # alice has a retention mark now
    log.write(
        state.batch(), [appended(ALICE, "s2"), appended(ALICE_BOT, "s3"), appended(BOB, "b1")]
    )
    log.write(
        state.batch(),
        [Change(BOB, "document.put", {"memory_id": "doc-1", "namespace": ["n"], "key": "k"})],
    )
    # an episode of bob's and a memory of his
    batch = state.batch()
    forgotten = log.forget_into(batch, Covered(None, ((BOB, "ep-b1"),), ((BOB, "doc-1"),)))
    state.write(batch)
    assert forgotten.count == 2 and read(log, BOB, 0, 10) == []
    # one agent of alice's
    batch = state.batch()
    assert log.forget_into(batch, Covered(ALICE_BOT)).count == 1
    state.write(batch)
    assert [e.change.attrs["session_id"] for e in read(log, ALICE, log.oldest(ALICE), 10)] == ["s2"]
    # alice: nothing of her is left, her retention mark neither
    batch = state.batch()
    assert log.forget_into(batch, Covered(ALICE)).count == 1
    state.write(batch)
    assert user_bytes(state, b"alice") == 0 and user_bytes(state, b"bob") == 0
    assert log.count() == 0 and read(log, ALICE, 0, 10) == []


def test_a_page_says_how_far_a_reader_may_go_on(state: RocksStore) -> None:
    # a reader of alice need not read bob's changes again (a stream would spin on them)
    log = ChangeLog(state)
    log.write(state.batch(), [appended(ALICE, "s1"), appended(BOB, "b1"), appended(BOB, "b2")])
    page = log.page(ALICE, 0, 10)
    assert [e.seq for e in page.entries] == [1] and page.upto == 3 == log.visible
    assert log.page(ALICE, page.upto, 10).entries == []
    log.write(state.batch(), [appended(ALICE, "s2"), appended(ALICE, "s3")])
    first = log.page(ALICE, 3, 1)  # a full page: go on after its last change
    assert [e.seq for e in first.entries] == [4] and first.upto == 4
    assert [e.seq for e in log.page(ALICE, first.upto, 1).entries] == [5]


def test_readers_are_told_whose_changes_became_visible(state: RocksStore) -> None:
    log = ChangeLog(state)
    told: list[tuple[int, frozenset[str]]] = []
    log.events.subscribe(ChangesVisible, lambda e: told.append((e.seq, e.users)))
    slow = state.batch()
    with log.staged(slow, [appended(ALICE, "a1")]):
        log.write(state.batch(), [appended(BOB, "b1")])
        assert told == []  # bob's is not visible before alice's, numbered first, settles
        state.write(slow)
    log.write(state.batch(), [appended(BOB, "b2")])
    assert told == [(2, frozenset({"alice", "bob"})), (3, frozenset({"bob"}))]


def test_numbers_go_on_after_a_restart_when_retention_removed_some(tmp_path: Path) -> None:
    clock = Clock()
    state = RocksStore(tmp_path / "state", STATE_CFS)
    try:
        log = ChangeLog(state, retention_seconds=3600, clock=clock)
        log.write(state.batch(), [appended(ALICE, "old")])
        clock.now += 7200
        log.write(state.batch(), [appended(ALICE, "s1"), appended(BOB, "b1")])
        assert log.trim() == 1
        state.close()
        state = RocksStore(tmp_path / "state", STATE_CFS)
        log = ChangeLog(state, retention_seconds=3600, clock=clock)
        assert log.visible == 3 and log.write(state.batch(), [appended(ALICE, "s2")]) == [4]
    finally:
        state.close()
