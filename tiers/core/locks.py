"""A thread's lock taken from an event loop without blocking it (:func:`when_free`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
# While a thread holds the lock, the loop looks again after this pause, doubled each time up
# to the second figure (seconds).
POLL = (0.001, 0.02)


async def when_free(lock: threading.RLock, call: Callable[[], T]) -> T:
    """``call`` (a call of a few milliseconds that takes ``lock``, such as an append to the
    working memory) on the event loop, once ``lock`` is free. A thread may hold it for longer
    (a Forget finding a scope's open sessions, a backup's checkpoints, a session's flush): the
    loop then pauses and looks again instead of blocking on it, so every other call it serves
    goes on. ``lock`` must be re-entrant: ``call`` takes it again, with no await in between."""
    pause, longest = POLL
    while not lock.acquire(blocking=False):
        await asyncio.sleep(pause)
        pause = min(pause * 2, longest)
    try:
        return call()
    finally:
        lock.release()
