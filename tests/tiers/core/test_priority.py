"""CPU priority of the daemon's own threads (tiers.core.priority): a thread lowers its own
nice value, not the process's, and the threads it starts inherit it (as a library's threads
started from it do). Linux only: elsewhere the call changes nothing."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from tiers.core.priority import MAX_NICE, lower_this_thread

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def in_thread(work) -> list[int]:  # type: ignore[no-untyped-def]
    seen: list[int] = []
    t = threading.Thread(target=lambda: seen.extend(work()))
    t.start()
    t.join(30)
    return seen


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
