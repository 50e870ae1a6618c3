"""The access counts (tiers.keyed.access) on a real RocksDB, and the fact categories of the weaver
(weaver.categories). Through gRPC: tests/weaver/test_reinforcement.py."""

from __future__ import annotations

import threading
import typing
from pathlib import Path

import pytest

from recall.recipe import Category
from tiers.core.records import Scope
from tiers.keyed.access import AccessCounts, Accessed
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.scoped import Covered
from tiers.semantic.tombstones import Tombstones
from weaver.categories import CATEGORIES, categorize

ANN = Scope("ann")
ANN_BOT = Scope("ann", "bot")
BEN = Scope("ben")


@pytest.fixture
def state(tmp_path: Path) -> typing.Iterator[RocksStore]:
    store = RocksStore(tmp_path / "state", STATE_CFS, sync=False)
    try:
        yield store
    finally:
        store.close()


def test_record_counts_each_memory_once_per_call_and_keeps_scopes_apart(state):
    access = AccessCounts(state, clock=lambda: 1000.0)
    assert access.record([]) == 0
    assert access.record([Accessed("m1", ANN, "e1"), Accessed("m1", ANN, "e1")]) == 1
    assert access.record([Accessed("m1", ANN, "e1"), Accessed("m2", ANN_BOT, "e2")]) == 2
    assert access.counts([(ANN, "m1"), (ANN_BOT, "m2"), (ANN, "m2"), (BEN, "m1")]) == {
        "m1": 2,
        "m2": 1,
    }
    (count,) = [c for c in access.of_scope(ANN) if c.memory_id == "m1"]
    assert (count.count, count.last_us, count.episode_id) == (2, 1_000_000_000, "e1")
    assert {c.memory_id for c in access.of_scope(ANN)} == {"m1", "m2"}  # every agent's
    assert [c.memory_id for c in access.of_scope(ANN_BOT)] == ["m2"]


def test_concurrent_records_lose_no_count(state):
    access = AccessCounts(state)

    def work() -> None:
        for _ in range(50):
            access.record([Accessed("m", ANN, "e")])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert access.counts([(ANN, "m")]) == {"m": 200}


def test_forget_into_removes_a_scope_an_episode_or_named_memories(state):
    access = AccessCounts(state)
    access.record(
        [
            Accessed("a1", ANN, "e1"),
            Accessed("a2", ANN, "e2"),
            Accessed("a3", ANN_BOT, "e1"),
            Accessed("b1", BEN, "e9"),
        ]
    )

    def forget(scope: Scope | None, episodes=(), memories=()) -> int:
        batch = state.batch()
        n = access.forget_into(batch, Covered(scope, tuple(episodes), tuple(memories))).count
        state.write(batch)
        return n

    assert forget(None, episodes=[(ANN, "e1")]) == 2  # both agents' points of e1
    assert access.counts([(ANN, "a2"), (BEN, "b1")]) == {"a2": 1, "b1": 1}
    assert forget(None, memories=[(BEN, "b1"), (BEN, "unknown")]) == 1
    assert forget(ANN) == 1
    assert list(access.of_scope(ANN)) == list(access.of_scope(BEN)) == []


def test_a_forgotten_memory_or_episode_is_not_counted(state):
    access = AccessCounts(state)
    batch = state.batch()
    Tombstones.add(batch, ["gone-episode"], ["gone-memory"])
    state.write(batch)
    n = access.record(
        [
            Accessed("gone-memory", ANN, "e1"),
            Accessed("m", ANN, "gone-episode"),
            Accessed("kept", ANN, "e1"),
        ]
    )
    assert n == 1
    assert access.counts([(ANN, "gone-memory"), (ANN, "m"), (ANN, "kept")]) == {"kept": 1}


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Melanie loves painting sunsets.", "preference"),
        ("Caroline is a big fan of Taylor Swift.", "preference"),
        ("The user prefers window seats.", "preference"),
        ("Jon can't stand loud bars.", "preference"),
        ("Always answer in French.", "instruction"),
        ("From now on the user wants replies in French.", "instruction"),
        ("Make sure to cc Ana on every invoice.", "instruction"),
        ("Caroline actually moved to Boston, not Denver.", "correction"),
        ("John doesn't play chess anymore.", "correction"),
        ("Ana no longer works at Acme.", "correction"),
        ("Melanie changed her mind about the trip.", "correction"),
        ("Jon went to Paris on 3 May 2023.", ""),
        ("It looks like rain.", ""),
        ("Caroline is not sure about the job.", ""),
    ],
)
def test_categorize(text, category):
    assert categorize(text) == category


def test_the_settings_name_every_category():
    assert set(typing.get_args(Category)) == set(CATEGORIES)
