"""Holding a process still in a test: SIGSTOP, and the wait until every thread of it has
stopped (:func:`hold_still`)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.support.polling import wait_until


def hold_still(pid: int, timeout: float = 30) -> None:
    """Stop the process ``pid`` (SIGSTOP) and return once every thread of it has stopped; it
    stays so until SIGCONT or SIGKILL.

    The signal alone is not enough: the kernel wakes one of the process's threads to stop the
    others, and under load another thread can run first. A thread woken meanwhile by a request
    sent right after the signal (a call on a socket) answers it before it stops."""
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: stopped(pid), timeout, f"for process {pid} to stop", interval=0.01)


def stopped(pid: int) -> bool:
    """Whether every thread of the process ``pid`` is stopped (``/proc``'s state ``T``)."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:  # a thread that ended as it was read
            continue
        states.append(stat.rpartition(")")[2].split()[0])  # the name may hold spaces
    return bool(states) and all(state in ("T", "t") for state in states)
