"""Waiting for a condition in a test: the one polling loop (``wait_until``), and the wait for
a daemon's weaver to have indexed every ended episode."""

from __future__ import annotations

import time
from collections.abc import Callable

from daemon.testing import indexed
from stratad_client import MemoryClient


def wait_until(
    predicate: Callable[[], object], timeout: float = 180, what: str = "", interval: float = 0.1
) -> None:
    """Poll ``predicate`` every ``interval`` seconds until it is true; fail (AssertionError)
    after ``timeout`` seconds. What ``predicate`` raises propagates."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting {what}".strip()
        time.sleep(interval)


def wait_indexed(client: MemoryClient, timeout: float = 60) -> None:
    """Wait until the daemon's model is loaded and the weaver has indexed every ended
    episode (Recall finds them from then on)."""

    wait_until(
        lambda: indexed(client.admin.weaver_status()),
        timeout,
        "for the weaver to index every episode",
        interval=0.05,
    )
