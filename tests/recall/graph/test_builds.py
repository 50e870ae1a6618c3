"""The graphs' background builds (recall.graph.builds): one thread, the smallest waiting
first, and a build under way lets smaller waiting ones run between its pages. Real threads;
the builds are plain functions that record what ran."""

from __future__ import annotations

import threading

import pytest

from recall.graph import builds
from recall.graph.builds import BuildQueue
from tests.support.gates import served


def queue_held() -> tuple[BuildQueue, threading.Event, threading.Event]:
    """A queue whose thread is held in a first build (size 1,000) until ``go`` is set."""
    queue = BuildQueue("test-build")
    entered, go = threading.Event(), threading.Event()

    def first() -> None:
        entered.set()
        assert go.wait(30)

    queue.submit(1_000, first)
    assert entered.wait(30)
    return queue, entered, go


def test_the_smallest_waiting_build_runs_first_then_the_oldest_of_a_size():
    queue, _entered, go = queue_held()
    ran: list[str] = []
    futures = [
        queue.submit(size, lambda name=name: ran.append(name))
        for name, size in (("big", 500), ("small", 5), ("mid", 50), ("small-later", 5))
    ]
    go.set()
    for future in futures:
        assert future.result(30) is None
    assert ran == ["small", "small-later", "mid", "big"]
    queue.shutdown()


def test_a_build_under_way_lets_the_smaller_waiting_ones_run_between_its_pages():
    queue = BuildQueue("test-build")
    ran: list[str] = []
    paged, go = threading.Event(), threading.Event()

    def large() -> None:
        ran.append("large: page 1")
        paged.set()
        assert go.wait(30)  # meanwhile a smaller and a larger build are queued
        queue.between()
        ran.append("large: page 2")
        queue.between()  # nothing smaller waits any more

    def small() -> None:
        ran.append("small")
        queue.between()  # "huge" is not smaller than it: it waits

    done = queue.submit(100, large)
    assert paged.wait(30)
    later = [queue.submit(10, small), queue.submit(1_000, lambda: ran.append("huge"))]
    go.set()
    for future in (done, *later):
        future.result(30)
    assert ran == ["large: page 1", "small", "large: page 2", "huge"]
    queue.shutdown()


def test_between_does_nothing_off_the_queues_thread():
    queue, _entered, go = queue_held()
    ran: list[str] = []
    waiting = queue.submit(1, lambda: ran.append("small"))
    queue.between()  # a build on a query's thread lets nothing run on it
    assert ran == [] and not waiting.done()
    go.set()
    waiting.result(30)
    assert ran == ["small"]
    queue.shutdown()


def test_a_builds_error_is_its_futures_and_the_thread_goes_on():
    queue = BuildQueue("test-build")

    def fails() -> None:
        raise ValueError("unreadable point")

    with pytest.raises(ValueError, match="unreadable point"):
        queue.submit(1, fails).result(30)
    ran: list[int] = []
    queue.submit(1, lambda: ran.append(1)).result(30)
    assert ran == [1]
    queue.shutdown()


def test_a_shutdown_cancels_the_waiting_builds_and_refuses_new_ones():
    queue, _entered, go = queue_held()
    waiting = queue.submit(1, lambda: None)
    queue.shutdown()
    queue.shutdown()  # idempotent
    assert waiting.cancelled()
    with pytest.raises(RuntimeError, match="shut down"):
        queue.submit(1, lambda: None)
    go.set()  # the build under way ends by itself


def test_a_build_steps_aside_between_its_pages_while_a_request_is_served(monkeypatch):
    """The engine holds the interpreter through a build's reads: between two pages the build
    waits while a Recall is served (tiers.core.priority.REQUESTS), its own thread's never."""
    monkeypatch.setattr(builds, "STEP_ASIDE_SECONDS", 3600.0)
    queue, _entered, go = queue_held()
    ran: list[str] = []
    paged, more = threading.Event(), threading.Event()

    def paged_build() -> None:
        ran.append("page 1")
        paged.set()
        assert more.wait(30)
        queue.between()
        ran.append("page 2")

    done = queue.submit(10, paged_build)
    go.set()
    assert paged.wait(30)
    with served():
        more.set()
        with pytest.raises(TimeoutError):
            done.result(0.3)
        assert ran == ["page 1"]
    assert done.result(30) is None and ran == ["page 1", "page 2"]
    queue.shutdown()
