"""tiers.core.batcher.Batcher: concurrent single calls share batch calls, results go to the right
callers, errors reach every caller of the failed call."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support import wait_until
from tiers.core.batcher import Batcher


def test_an_idle_caller_gets_its_own_call_at_once() -> None:
    calls: list[list[int]] = []
    b = Batcher(lambda items: calls.append(items) or [i * 10 for i in items])
    assert b(1) == 10
    assert b(2) == 20
    assert calls == [[1], [2]]


def test_callers_arriving_during_a_call_share_the_next_one() -> None:
    first_started, release = threading.Event(), threading.Event()
    calls: list[list[int]] = []

    def batch(items: list[int]) -> list[str]:
        calls.append(list(items))
        if len(calls) == 1:
            first_started.set()
            assert release.wait(10)
        return [f"r{i}" for i in items]

    b = Batcher(batch, max_batch=4)
    with ThreadPoolExecutor(8) as pool:
        head = pool.submit(b, 0)
        assert first_started.wait(10)
        rest = [pool.submit(b, i) for i in range(1, 8)]
        # all seven wait behind the call in progress
        wait_until(lambda: len(b._waiting) >= 7, 10, "for 7 callers", interval=0.01)
        release.set()
        assert head.result(10) == "r0"
        assert [f.result(10) for f in rest] == [f"r{i}" for i in range(1, 8)]
    assert calls[0] == [0]
    # The seven waiting items went out in two calls of at most max_batch, oldest first.
    assert calls[1:] == [[1, 2, 3, 4], [5, 6, 7]]
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
    first_started, release = threading.Event(), threading.Event()

    def batch(items: list[int]) -> list[int]:
        if not first_started.is_set():
            first_started.set()
            assert release.wait(10)
        return [items[0]]  # one result, whatever the number of items

    b = Batcher(batch)
    with ThreadPoolExecutor(3) as pool:
        head = pool.submit(b, 0)
        assert first_started.wait(10)
        pair = [pool.submit(b, 1), pool.submit(b, 2)]
        wait_until(lambda: len(b._waiting) >= 2, 10, "for 2 callers", interval=0.01)
        release.set()
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
    first_started, release = threading.Event(), threading.Event()
    calls: list[list[int]] = []

    def batch(items: list[int]) -> list[int]:
        calls.append(list(items))
        if len(calls) == 1:
            first_started.set()
            assert release.wait(10)
        return [i + 100 for i in items]

    b = Batcher(batch, max_batch=8)
    with ThreadPoolExecutor(3) as pool:
        head = pool.submit(b, 0)
        assert first_started.wait(10)
        pair = pool.submit(b.many, [1, 2])
        one = pool.submit(b, 3)
        wait_until(lambda: len(b._waiting) >= 3, 10, "for 3 waiting items", interval=0.01)
        release.set()
        assert head.result(10) == 100
        assert pair.result(10) == [101, 102]
        assert one.result(10) == 103
    assert sorted(calls[1]) == [1, 2, 3] and len(calls) == 2
