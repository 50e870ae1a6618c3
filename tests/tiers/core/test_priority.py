"""CPU priority of the daemon's own threads (tiers.core.priority): a thread lowers its own
nice value, not the process's, and the threads it starts inherit it (as a library's threads
started from it do; Linux only: elsewhere the call changes nothing). Background steps step
aside for the requests being served (``Requests``), and for a while after the last one ends
(its linger): real threads, events rather than timings."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

import pytest

from tests.support.gates import served
from tiers.core.priority import MAX_NICE, Requests, lower_this_thread

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def in_thread(work) -> list[int]:  # type: ignore[no-untyped-def]
    seen: list[int] = []
    t = threading.Thread(target=lambda: seen.extend(work()))
    t.start()
    t.join(30)
    return seen


@linux_only
def test_a_thread_lowers_itself_and_what_it_starts_not_the_process() -> None:
    main = nice_of_this_thread()

    def work() -> list[int]:
        lower_this_thread(3)
        lowered = nice_of_this_thread()
        return [lowered, *in_thread(lambda: [nice_of_this_thread()])]

    lowered, child = in_thread(work)
    assert lowered == min(MAX_NICE, main + 3)
    assert child == lowered  # a thread started from it inherits it
    assert nice_of_this_thread() == main  # the caller's thread (the event loop's) is as it was
    assert os.getpriority(os.PRIO_PROCESS, 0) == main


@linux_only
def test_the_level_is_below_the_main_thread_not_below_the_caller() -> None:
    """A pool's thread started from an already lowered thread lands at the same level, not
    lower again; a thread never moves up, and 19 is the floor."""
    main = nice_of_this_thread()

    def work() -> list[int]:
        lower_this_thread(2)
        first = nice_of_this_thread()
        lower_this_thread(2)  # again, or in a thread started from this one: the same level
        again = nice_of_this_thread()
        lower_this_thread(1)  # a smaller step does not raise it back
        kept = nice_of_this_thread()
        lower_this_thread(0)
        lower_this_thread(100)
        return [first, again, kept, nice_of_this_thread()]

    first, again, kept, lowest = in_thread(work)
    assert first == again == kept == min(MAX_NICE, main + 2)
    assert lowest == MAX_NICE


def stepping_aside(
    requests: Requests, most: float = 3600.0, stopped: Callable[[], bool] | None = None
) -> threading.Event:
    """A background thread's step, started now: the event is set once it steps in."""
    stepped = threading.Event()

    def step() -> None:
        requests.step_aside(most, stopped)
        stepped.set()

    threading.Thread(target=step, daemon=True).start()
    return stepped


def test_a_background_step_waits_until_no_request_is_served() -> None:
    requests = Requests()
    with served(requests):
        with served(requests):
            stepped = stepping_aside(requests)
            assert not stepped.wait(0.3)  # two served
        assert not stepped.wait(0.3)  # one still is
        assert requests.serving_now == 1
    assert stepped.wait(30)
    assert requests.serving_now == 0


def test_a_request_never_waits_for_itself_and_nested_serving_counts_once() -> None:
    requests = Requests()
    with requests.serving(), requests.serving():
        assert requests.serving_now == 1
        assert requests.step_aside(3600.0) == 0.0  # its own work: at once
    assert requests.serving_now == 0
    assert requests.step_aside(3600.0) < 5  # nothing served: at once


def test_a_step_waits_no_longer_than_its_most_while_requests_never_stop() -> None:
    requests = Requests()
    with served(requests):
        waited = requests.step_aside(0.05)  # a background step: this thread serves none
        assert waited >= 0.05 and requests.serving_now == 1  # it went on, still served


def test_a_step_waiting_for_requests_ends_when_its_job_stops() -> None:
    requests = Requests()
    stop = threading.Event()
    with served(requests):
        stepped = stepping_aside(requests, stopped=stop.is_set)
        assert not stepped.wait(0.3)
        stop.set()  # a close: the job ends at once, the request still served
        assert stepped.wait(30)


def test_a_request_waiting_for_background_work_does_not_hold_it_back() -> None:
    requests = Requests()
    with requests.serving():
        stepped = stepping_aside(requests)
        assert not stepped.wait(0.3)
        with requests.waiting():  # this request waits for the step's work
            assert stepped.wait(30)
            assert requests.serving_now == 0
        assert requests.serving_now == 1
    assert requests.serving_now == 0


def test_a_step_waits_out_the_linger_after_a_request_ends() -> None:
    requests = Requests(linger=3600.0)
    assert requests.step_aside(3600.0) < 5  # none served yet: at once
    with requests.serving():
        pass
    # One just ended: its reply is still being written, so a step waits, here until its most.
    assert requests.step_aside(0.2) >= 0.2
    stop = threading.Event()
    stepped = stepping_aside(requests, stopped=stop.is_set)
    assert not stepped.wait(0.3)
    stop.set()  # a close ends the wait at once
    assert stepped.wait(30)


def test_without_a_linger_a_step_goes_as_the_last_request_ends() -> None:
    requests = Requests()
    with served(requests):
        stepped = stepping_aside(requests)
        assert not stepped.wait(0.3)
    assert stepped.wait(30)
    with requests.serving():
        pass
    assert requests.step_aside(3600.0) < 5


def test_a_request_waiting_for_background_work_does_not_start_a_linger() -> None:
    requests = Requests(linger=3600.0)
    with requests.serving():
        stepped = stepping_aside(requests)
        with requests.waiting():  # not an end: the work it waits for goes at once
            assert stepped.wait(30)
