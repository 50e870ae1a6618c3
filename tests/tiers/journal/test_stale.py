"""The scopes left stale (``tiers.journal.stale``) on a real RocksDB store: marked per part,
read back after the store is opened again, cleared without a write when there is no mark,
rewritten one at a time (a failing scope keeps its mark, the others go on; a store's error
ends it), and forgotten with their scope (a user's, or one agent's), never with another's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiers.core.errors import StoreUnavailable
from tiers.core.records import Scope
from tiers.journal.stale import STALE_CF, StaleScopes
from tiers.rocks import Batch, RocksStore
from tiers.schema import STATE_CFS
from tiers.scoped import Covered

ANN, ANN_BOT, ANNE = Scope("ann"), Scope("ann", "bot"), Scope("anne")  # "anne": ann's prefix


@pytest.fixture
def state(tmp_path: Path) -> Iterator[RocksStore]:
    store = RocksStore(tmp_path / "state", STATE_CFS)
    try:
        yield store
    finally:
        store.close()


def test_marks_are_kept_per_part_and_read_back_after_a_reopen(tmp_path: Path) -> None:
    state = RocksStore(tmp_path / "state", STATE_CFS)
    marks = StaleScopes(state)
    marks.mark("profiles", [ANN, ANN_BOT])
    marks.mark("digests", [ANNE])
    marks.mark("profiles", [ANN])  # again: still one mark
    state.close()

    state = RocksStore(tmp_path / "state", STATE_CFS)
    try:
        marks = StaleScopes(state)
        assert marks.marked("profiles") == {ANN, ANN_BOT}
        assert marks.marked("digests") == {ANNE}
        assert marks.count() == 3
        marks.clear("profiles", ANN)
        assert marks.marked("profiles") == {ANN_BOT} and marks.marked("digests") == {ANNE}
    finally:
        state.close()


def test_a_mark_is_written_once_and_cleared_only_when_there(
    state: RocksStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete writes its key, the user's id in it, into the store's files: a scope
    forgotten before its refresh must not get one back. And the weaver marks a scope at each
    of its episodes: only the first writes."""
    writes: list[Batch] = []
    real = state.write

    def write(batch: Batch) -> None:
        if not batch.empty:
            writes.append(batch)
        real(batch)

    monkeypatch.setattr(state, "write", write)
    marks = StaleScopes(state)
    marks.clear("digests", ANN)
    assert writes == []
    marks.mark("digests", [ANN])
    marks.mark("digests", [ANN])
    assert len(writes) == 1
    marks.clear("digests", ANN)
    assert len(writes) == 2 and marks.count() == 0


@pytest.mark.parametrize(
    ("forgotten", "left"),
    [
        (ANN, {(ANNE, "profiles")}),  # the user: every agent's marks, not anne's
        (ANN_BOT, {(ANN, "profiles"), (ANN, "digests"), (ANNE, "profiles")}),
        (
            Scope("nobody"),
            {(ANN, "profiles"), (ANN, "digests"), (ANN_BOT, "profiles"), (ANNE, "profiles")},
        ),  # nothing of the others
    ],
)
def test_a_forget_of_a_scope_takes_its_marks(
    state: RocksStore, forgotten: Scope, left: set[tuple[Scope, str]]
) -> None:
    marks = StaleScopes(state)
    marks.mark("profiles", [ANN, ANN_BOT, ANNE])
    marks.mark("digests", [ANN])
    batch = state.batch()
    with marks.lock:
        done = marks.forget_into(batch, Covered(scope=forgotten))
        state.write(batch)
    assert done.count == 4 - len(left) and done.memories == ()
    remaining = {(s, "profiles") for s in marks.marked("profiles")}
    remaining |= {(s, "digests") for s in marks.marked("digests")}
    assert remaining == left
    assert marks.count() == len(left) == sum(1 for _ in state.scan(STALE_CF, b""))


def test_a_forget_of_episodes_or_memories_keeps_the_marks(state: RocksStore) -> None:
    marks = StaleScopes(state)
    marks.mark("profiles", [ANN])
    batch = state.batch()
    covered = Covered(episodes=((ANN, "e" * 32),), memories=((ANN, "m1"),))
    assert marks.forget_into(batch, covered).count == 0 and batch.empty
    assert marks.owner("m1") is None


def test_a_rewrite_clears_each_mark_it_did_and_keeps_the_failed_ones(state: RocksStore) -> None:
    marks = StaleScopes(state)
    marks.mark("profiles", [ANNE, ANN_BOT, ANN])
    done: list[Scope] = []

    def rewrite(scope: Scope) -> int:
        if scope == ANN_BOT:
            raise ValueError("no profile for the bot")
        done.append(scope)
        return 2

    rewritten = marks.rewrite("profiles", marks.marked("profiles"), rewrite)
    assert done == [ANN, ANNE]  # by user and agent; the failure did not end it
    assert rewritten.written == 4 and list(rewritten.failed) == [ANN_BOT]
    assert str(rewritten.failed[ANN_BOT]) == "no profile for the bot"
    assert marks.marked("profiles") == {ANN_BOT}


def test_a_stores_error_or_a_stop_ends_the_rewrite_with_the_rest_marked(
    state: RocksStore,
) -> None:
    """An error of a store would fail every scope after it: raised, not kept per scope."""
    marks = StaleScopes(state)
    marks.mark("digests", [ANN, ANN_BOT, ANNE])

    def down(scope: Scope) -> int:
        raise StoreUnavailable("the state store cannot be read")

    with pytest.raises(StoreUnavailable):
        marks.rewrite("digests", marks.marked("digests"), down)
    assert marks.marked("digests") == {ANN, ANN_BOT, ANNE}

    stopping = threading.Event()

    def then_stop(scope: Scope) -> int:
        stopping.set()
        return 1

    rewritten = marks.rewrite("digests", marks.marked("digests"), then_stop, stopping)
    assert rewritten.written == 1 and not rewritten.failed
    assert marks.marked("digests") == {ANN_BOT, ANNE}
