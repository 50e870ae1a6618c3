"""tiers.core.batcher.Batcher: concurrent single calls share batch calls, results go to the right
callers, errors reach every caller of the failed call."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

import pytest

from tests.support import wait_until
from tiers.core.batcher import Batcher

T = TypeVar("T")


class FirstCallHeld(Generic[T]):
    """A batch function whose first call waits until the test lets it go, so that callers
    arriving meanwhile queue up behind it; the others answer at once. ``calls``: the items of
    each call, in order; ``answer`` makes a call's results from its items."""

    def __init__(self, answer: Callable[[list[int]], list[T]]) -> None:
        self.answer = answer
        self.calls: list[list[int]] = []
        self.started, self.release = threading.Event(), threading.Event()

    def __call__(self, items: list[int]) -> list[T]:
        self.calls.append(list(items))
        if len(self.calls) == 1:
            self.started.set()
            assert self.release.wait(10)
        return self.answer(items)

    def hold_first(self, pool: ThreadPoolExecutor, b: Batcher[int, T]) -> Future[T]:
        """The call of item 0, submitted and held."""
        head = pool.submit(b, 0)
        assert self.started.wait(10)
        return head

    def release_once_waiting(self, b: Batcher[int, T], items: int) -> None:
        """Let the first call go once ``items`` items wait behind it."""
        wait_until(lambda: len(b._waiting) >= items, 10, f"for {items} waiting items", 0.01)
        self.release.set()


def test_an_idle_caller_gets_its_own_call_at_once() -> None:
    calls: list[list[int]] = []
    b = Batcher(lambda items: calls.append(items) or [i * 10 for i in items])
    assert b(1) == 10
    assert b(2) == 20
    assert calls == [[1], [2]]


def test_callers_arriving_during_a_call_share_the_next_one() -> None:
    batch = FirstCallHeld(lambda items: [f"r{i}" for i in items])
    b = Batcher(batch, max_batch=4)
    with ThreadPoolExecutor(8) as pool:
        head = batch.hold_first(pool, b)
        rest = [pool.submit(b, i) for i in range(1, 8)]
        batch.release_once_waiting(b, 7)  # all seven wait behind the call in progress
        assert head.result(10) == "r0"
        assert [f.result(10) for f in rest] == [f"r{i}" for i in range(1, 8)]
    assert batch.calls[0] == [0]
    # The seven waiting items went out in two calls of at most max_batch, oldest first.
    assert batch.calls[1:] == [[1, 2, 3, 4], [5, 6, 7]]
    assert b.calls == 3


def test_an_error_reaches_every_caller_of_that_call_and_the_batcher_goes_on() -> None:
    fail = threading.Event()
    fail.set()

    def batch(items: list[int]) -> list[int]:
        if fail.is_set():
            raise OSError("model gone")
        return items

    b = Batcher(batch)
    with pytest.raises(OSError, match="model gone"):
        b(1)
    fail.clear()
    assert b(2) == 2


def test_a_wrong_number_of_results_is_an_error_not_a_mix_up() -> None:
    batch = FirstCallHeld(lambda items: [items[0]])  # one result, whatever the number of items
    b = Batcher(batch)
    with ThreadPoolExecutor(3) as pool:
        head = batch.hold_first(pool, b)
        pair = [pool.submit(b, 1), pool.submit(b, 2)]
        batch.release_once_waiting(b, 2)
        assert head.result(10) == 0  # a call of one item is fine
        for f in pair:  # the call of two is refused for both callers
            with pytest.raises(RuntimeError, match="1 results for 2"):
                f.result(10)


def test_items_submitted_together_go_out_in_one_call_in_order() -> None:
    calls: list[list[str]] = []
    b = Batcher(lambda items: calls.append(list(items)) or [s.upper() for s in items], max_batch=2)
    assert b.many(["query", "neutral"]) == ["QUERY", "NEUTRAL"]
    assert calls == [["query", "neutral"]]
    # More than max_batch: several calls, the results still in the order given.
    assert b.many(["a", "b", "c"]) == ["A", "B", "C"]
    assert calls[1:] == [["a", "b"], ["c"]]
    assert b.many([]) == []


def test_items_submitted_together_during_a_call_join_the_others_waiting() -> None:
    batch = FirstCallHeld(lambda items: [i + 100 for i in items])
    b = Batcher(batch, max_batch=8)
    with ThreadPoolExecutor(3) as pool:
        head = batch.hold_first(pool, b)
        pair = pool.submit(b.many, [1, 2])
        one = pool.submit(b, 3)
        batch.release_once_waiting(b, 3)
        assert head.result(10) == 100
        assert pair.result(10) == [101, 102]
        assert one.result(10) == 103
    assert sorted(batch.calls[1]) == [1, 2, 3] and len(batch.calls) == 2
