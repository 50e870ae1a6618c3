"""tiers.core.locks.when_free: a thread's lock taken from an event loop, which serves its other
calls while the lock is held elsewhere."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tiers.core.locks import when_free


def test_the_loop_serves_other_calls_while_a_thread_holds_the_lock() -> None:
    lock = threading.RLock()
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with lock:
            held.set()
            release.wait(60)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(60)

    async def main() -> tuple[list[str], int]:
        order: list[str] = []
        waiting = asyncio.ensure_future(when_free(lock, lambda: order.append("call") or 7))
        for _ in range(5):  # the loop goes on: each of these runs while the call waits
            await asyncio.sleep(0.005)
            order.append("tick")
        assert not waiting.done()
        release.set()  # the holder lets go: the call runs, holding the lock
        return order, await waiting

    try:
        order, result = asyncio.run(main())
    finally:
        release.set()
        thread.join(60)
    assert order == ["tick"] * 5 + ["call"] and result == 7
    assert lock.acquire(blocking=False)  # released after the call
    lock.release()


def test_a_call_that_fails_leaves_the_lock_free() -> None:
    lock = threading.RLock()

    def fail() -> None:
        assert lock.acquire(blocking=False)  # re-entrant: the call takes it again
        lock.release()
        raise KeyError("nope")

    with pytest.raises(KeyError):
        asyncio.run(when_free(lock, fail))
    taken: list[bool] = []
    thread = threading.Thread(target=lambda: taken.append(lock.acquire(blocking=False)))
    thread.start()
    thread.join(60)
    assert taken == [True]  # another thread can take it: it was released
