"""A user's points read into the point cache behind its first search, so that its next
searches find their hits decoded.

A search asks the engine for ids and scores, and the points come from the point cache
(:mod:`tiers.semantic.vectors.point_cache`); those missing are read by id. Each read of a
point the page cache does not hold is a fault of the engine's payload file, taken while the
engine holds the interpreter: 1-2.4 ms a point on this machine's disk, 44-120 ms for the 50
hits of a channel (2026-12-01). A user's next question brings other hits, so its later
visits kept reading cold points: at one million points 23-25 ms at p50 after the first
visit, 15-17 ms with the user's points in the cache (docs/benchmarks.md). The page cache
alone does not keep them: hosts reclaim pages unread for a minute, memory of the process is
not reclaimed without swap.

So the first search of a user (:meth:`Preloads.asked`) queues a preload, which a thread of
its own runs once the store's searches have paused (:data:`QUIET_SECONDS`, at most
:data:`MOST_WAIT_SECONDS` after the ask): the shard's payload files read into the page cache
(sequential, without the interpreter:
:meth:`~tiers.semantic.vectors.edge_builds.EdgeBuilds.read_ahead`), then the user's points
read in pages, resting as long as each page took (:func:`~tiers.core.priority.resting`), and
kept as bytes (:meth:`~tiers.semantic.vectors.point_cache.PointCache.put`, not as the hot
ones). The cache's snapshot keeps it from holding a point older than the engine's, as for
any read.

Bounded: a user is preloaded when it holds from :data:`READ_PAGE` points up to
:data:`CACHE_SHARE` of the cache, and at least :data:`SHARD_SHARE` of its shard's points
(the files read ahead are the shard's); once per :data:`AGAIN_SECONDS` (a user whose points
the cache dropped meanwhile is read again only then, so users asked in turn never make the
preloads chase each other).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from tiers.core.priority import BACKGROUND_NICE, lower_this_thread, resting
from tiers.semantic.vectors import PointFilter
from tiers.semantic.vectors.edge import EdgeVectorStore
from tiers.semantic.vectors.edge_shard import READ_PAGE
from tiers.semantic.vectors.point_cache import PointCache

__all__ = ["Preloads"]

log = logging.getLogger("strata.vectors")

QUIET_SECONDS = 0.25  # no search began for this long: the query that asked has answered
MOST_WAIT_SECONDS = 5.0  # searches never pausing (a busy fleet): start anyway after this
CACHE_SHARE = 0.25  # a user holding more points than this share of the cache: not preloaded
SHARD_SHARE = 1 / 128  # nor one whose points are less than this share of its shard's
AGAIN_SECONDS = 600.0  # a user preloaded is not preloaded again within this
REST = 1.0  # rest after each page, in the page's time: half the interpreter at most


def wait_left(asked_at: float, last_search: float, now: float, quiet: float, most: float) -> float:
    """Seconds a preload asked for at ``asked_at`` waits still, the last search having begun
    at ``last_search``: until searches have paused for ``quiet``, ``most`` after the ask at
    the latest; 0 when it starts now."""
    return max(0.0, min(last_search + quiet, asked_at + most) - now)


class Preloads:
    """The preloads of a sharded store's users into ``points`` (module doc). ``asked`` is
    quick and never raises; the thread starts with the first preload and stops at
    :meth:`close`. ``enabled`` false: none (``vectors.preload``)."""

    def __init__(
        self,
        points: PointCache,
        *,
        enabled: bool = True,
        quiet: float = QUIET_SECONDS,
        most_wait: float = MOST_WAIT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.points = points
        self.enabled = enabled and points.max_points > 0
        self.quiet = quiet
        self.most_wait = most_wait
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: OrderedDict[str, tuple[EdgeVectorStore, float]] = OrderedDict()
        self._done: dict[str, float] = {}  # user -> when its last preload was asked
        self._last_search = float("-inf")
        self._thread: threading.Thread | None = None
        self._busy = False  # a preload runs
        self._closed = False
        self.preloaded = 0  # users preloaded (for tests and figures)
        self.skipped = 0  # users asked for and not preloaded: too few or too many points

    def asked(self, user_id: str, store: EdgeVectorStore) -> None:
        """A search of ``user_id`` in ``store`` (its shard) begins."""
        if not self.enabled:
            return
        now = self._clock()
        with self._cond:
            self._last_search = now
            if self._closed or now - self._done.get(user_id, now - AGAIN_SECONDS) < AGAIN_SECONDS:
                return
            if len(self._done) >= 4096:  # users not asked for within AGAIN_SECONDS go
                self._done = {u: t for u, t in self._done.items() if now - t < AGAIN_SECONDS}
            self._done[user_id] = now
            self._queue[user_id] = (store, now)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="vectors-preload")
                self._thread.daemon = True
                self._thread.start()
            self._cond.notify_all()

    def idle(self, timeout: float) -> bool:
        """Wait until no preload is queued or running (for tests); whether none is."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return True

    def stop(self) -> None:
        """Drop the queued preloads; a running one ends at its next read of a closed shard
        (the store closes them next). Idempotent."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()

    def close(self) -> None:
        """:meth:`stop`, then wait for the thread to end. Idempotent."""
        self.stop()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        lower_this_thread(BACKGROUND_NICE)
        while True:
            with self._cond:
                while not self._closed and not self._queue:
                    self._cond.wait()
                if self._closed:
                    return
                user_id, (store, asked_at) = next(iter(self._queue.items()))
                now = self._clock()
                left = wait_left(asked_at, self._last_search, now, self.quiet, self.most_wait)
                if left > 0:
                    self._cond.wait(left)
                    continue
                del self._queue[user_id]
                self._busy = True
            try:
                self._preload(user_id, store)
            except Exception as exc:  # a hint lost (the shard closed or failed); never raised
                if not self._closed:
                    fields = {"user_id": user_id, "error": str(exc) or type(exc).__name__}
                    log.warning("vectors.preload_failed", extra={"fields": fields})
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _preload(self, user_id: str, store: EdgeVectorStore) -> None:
        began = time.perf_counter()
        flt = PointFilter(user_id=user_id)
        most = int(self.points.max_points * CACHE_SHARE)
        with store.live.read("preload") as shard:
            held = store.count(flt)
            if not READ_PAGE <= held <= most or held < shard.info().points_count * SHARD_SHARE:
                self.skipped += 1
                return
            store.live.read_ahead(shard, held, ["payload_storage"], share=0.0)
        snapshot = self.points.snapshot()
        try:
            with resting(REST):
                found = store.scroll(flt, most)
            self.points.put(found, snapshot, hot=False)
        finally:
            self.points.release(snapshot)
        self.preloaded += 1
        log.info(
            "vectors.preloaded",
            extra={
                "fields": {
                    "user_id": user_id,
                    "points": len(found),
                    "ms": round((time.perf_counter() - began) * 1000, 1),
                }
            },
        )
