"""The watchers of ``python -m tests.bench.load --watchers N``: one spawned process that follows
N of the load's users with ``MemoryService.Watch`` (one asyncio stream each) while the agents
load the daemon, and the figures it reports: the changes delivered in the measured window, per
second, and their lag from commit (the change's time, stamped by the daemon as it writes it)
to delivery (the watcher's clock: the same machine)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections import Counter
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from stratad_client import AsyncMemoryClient, StrataClientError
from tests.bench.support.daemon import latency_ms

Result = tuple[list[float], Counter[str], str | None]  # lags (ms), errors, a failure


async def _follow_all(
    address: str, users: list[str], warmup: float, duration: float, barrier: Barrier
) -> tuple[list[float], Counter[str]]:
    await asyncio.to_thread(barrier.wait, 120)
    now = time.monotonic()
    begin, end = now + warmup, now + warmup + duration
    lags: list[float] = []
    errors: Counter[str] = Counter()

    async def follow(c: AsyncMemoryClient, user: str) -> None:
        try:
            async for event in c.watch(user_id=user):
                received = time.time()
                if time.monotonic() >= begin:
                    at = event.at.seconds + event.at.nanos / 1e9
                    lags.append((received - at) * 1000)
        except StrataClientError as exc:
            errors[f"Watch {exc.code.name}"] += 1

    async with AsyncMemoryClient(address) as c:
        streams = asyncio.gather(*(follow(c, u) for u in users))
        with contextlib.suppress(TimeoutError):  # the window is over: the streams end
            await asyncio.wait_for(streams, timeout=end - time.monotonic())
    return lags, errors


def watchers_process(
    address: str,
    users: list[str],
    warmup: float,
    duration: float,
    barrier: Barrier,
    results: Queue[Result],
) -> None:
    """A spawned process's target: follow ``users`` from the barrier to the end of the
    measured window; puts the lags, the errors and a failure (or None) on ``results``."""
    try:
        lags, errors = asyncio.run(_follow_all(address, users, warmup, duration, barrier))
        results.put((lags, errors, None))
    except BaseException:
        barrier.abort()
        results.put(([], Counter(), traceback.format_exc()))


def watch_figures(watchers: int, lags: list[float], seconds: float) -> dict[str, Any]:
    return {
        "watchers": watchers,
        "events": len(lags),
        "per_s": round(len(lags) / seconds, 1),
        **latency_ms(lags, prefix="lag_"),
    }
