"""A user's points read into the point cache behind its first search, so that its next
searches find their hits decoded.

A search asks the engine for ids and scores, and the points come from the point cache
(:mod:`tiers.semantic.vectors.point_cache`); those missing are read by id. Each read of a
point the page cache does not hold is a fault of the engine's payload file, taken while the
engine holds the interpreter: 1-2.4 ms a point on this machine's disk, 44-120 ms for the 50
hits of a channel (2026-12-01). A user's next question brings other hits, so its later
visits kept reading cold points (docs/benchmarks.md). The page cache alone does not keep
them: hosts reclaim pages left unread for a minute, and memory of the process is not
reclaimed without swap.

So the first search of a user (:meth:`Preloads.searching`) queues a preload, which a thread
of its own runs: the shard's payload files read into the page cache a MiB at a time
(sequential, without the interpreter:
:meth:`~tiers.semantic.vectors.edge.builds.EdgeBuilds.read_ahead`), then the user's ids,
then its points by id, :data:`CHUNK` at a time, each chunk kept by the store's own read
(:meth:`~tiers.semantic.vectors.edge.store.EdgeVectorStore.get`, so the cache's snapshot keeps it
from holding a point older than the engine's, as for any read). Searches come first: before
each step (a MiB, a chunk) the thread rests as long as the step before took, then waits
while a search of the store is under way, and while a Recall is served
(:data:`~tiers.core.priority.REQUESTS`), at most :data:`MOST_WAIT_SECONDS` each; a chunk
holds the interpreter for a few milliseconds, so a query's other stages and other users'
cold reads share the disk and the interpreter with it at most half the time.

Bounded: a user is preloaded when it holds from :data:`READ_PAGE` points up to
:data:`CACHE_SHARE` of the cache, and at least :data:`SHARD_SHARE` of its shard's points
(the files read ahead are the shard's); once per :data:`AGAIN_SECONDS` (a user whose points
the cache dropped meanwhile is read again only then); and within any such window the
preloads keep at most :data:`WINDOW_KEPT` of the cache and read ahead at most
:data:`WINDOW_READ` caches' worth of shards' points, so that users asked in turn, more than
the cache holds, never make the preloads read without end, each one dropping another's. At
most :data:`QUEUED` wait: in a burst of new users the oldest is dropped, and queued again at
its next search.

**A user too large for the cache is kept warm instead** (:data:`WARM_SECONDS`): its shard's
payload files are read into the page cache, and read again while it is searched, before the
host's reclaim of pages left unread would take them; its points are not kept. Its hits the
cache lacks are then read from memory rather than from the disk: a 200,000-point user's
lists of 50 hits read in 0.66 ms at p50 rather than 1.2, five lists a Recall, in its first
400 Recalls after a start (docs/benchmarks.md, 2026-12-07). Bounded by :data:`WARM_POINTS`
shards' points within :data:`WARM_SECONDS`; its reads, a MiB at a time with the interpreter
let go, rest as long as each took but do not wait for the searches (a pass over pages the
cache still holds takes some 20 ms for 128 MiB)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tiers.core.priority import (
    BACKGROUND_NICE,
    REQUESTS,
    background,
    lower_this_thread,
    resting,
)
from tiers.semantic.vectors import PointFilter
from tiers.semantic.vectors.edge.shard import READ_PAGE
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.semantic.vectors.point_cache import PointCache

if TYPE_CHECKING:
    from qdrant_edge import EdgeShard

__all__ = ["Preloads"]

log = logging.getLogger("strata.vectors")

CHUNK = 64  # points read by id at a time: a few ms of the interpreter, 64-150 ms cold
MOST_WAIT_SECONDS = 1.0  # searches never pausing (a busy fleet): a step goes anyway after this
CACHE_SHARE = 0.25  # a user holding more points than this share of the cache: not preloaded
SHARD_SHARE = 1 / 128  # nor one whose points are less than this share of its shard's
AGAIN_SECONDS = 600.0  # a user preloaded is not preloaded again within this
QUEUED = 64  # preloads waiting at most: the oldest of more is dropped (its user asked anew later)
WINDOW_KEPT = 0.75  # the points preloaded within AGAIN_SECONDS: at most this share of the cache
WINDOW_READ = 2.0  # the shards' points read ahead within AGAIN_SECONDS: at most this many caches
REST = 1.0  # rest after each step, in the step's time: half the interpreter at most
WARM_SECONDS = 40.0
"""A user too large for the cache has its shard's payload files read again this long after
they were last read, at its next search (module doc): less than the minute after which hosts
page out what was left unread (here a DAMON scheme paging out after 60 s)."""
WARM_POINTS = 1_000_000
"""The shards' points whose payload files are kept warm within :data:`WARM_SECONDS` at most:
about 600 MiB of page cache at 620 bytes a point, three or four shards of a large user each."""


class Preloads:
    """The preloads of a sharded store's users into ``points`` (module doc). The thread starts
    with the first preload and stops at :meth:`close`; nothing here raises to a search.
    ``enabled`` false: none (``vectors.preload``)."""

    def __init__(
        self,
        points: PointCache,
        *,
        enabled: bool = True,
        most_wait: float = MOST_WAIT_SECONDS,
    ) -> None:
        self.points = points
        self.enabled = enabled and points.max_points > 0
        self.most_wait = most_wait
        self._cond = threading.Condition()
        self._queue: OrderedDict[str, EdgeVectorStore] = OrderedDict()
        self._next: dict[str, float] = {}  # user -> when a search may queue it again
        self._searches = 0  # under way
        self._spent: deque[tuple[float, int, int]] = deque()  # (when, kept, read) in the window
        self._warm: deque[tuple[float, int]] = deque()  # (when, read) within WARM_SECONDS
        self._thread: threading.Thread | None = None
        self._busy = False  # a preload runs
        self._closed = False
        self.preloaded = 0  # users preloaded (for tests and figures)
        self.skipped = 0  # users asked for and not preloaded: their size, or the window's budget
        self.warmed = 0  # passes of a large user's shard into the page cache (module doc)
        self.warmed_bytes = 0  # what they read

    @contextlib.contextmanager
    def searching(self, user_id: str, store: EdgeVectorStore) -> Iterator[None]:
        """Around a search of ``user_id`` in ``store`` (its shard): the preload's steps wait
        for its end, and a user not preloaded within :data:`AGAIN_SECONDS` (one kept warm:
        :data:`WARM_SECONDS`) is queued."""
        if not self.enabled:
            yield
            return
        now = time.monotonic()
        with self._cond:
            self._searches += 1
            if not self._closed and now >= self._next.get(user_id, now):
                if len(self._next) >= 4096:  # users whose wait is over go
                    self._next = {u: t for u, t in self._next.items() if t > now}
                self._next[user_id] = now + AGAIN_SECONDS
                self._queue[user_id] = store
                if len(self._queue) > QUEUED:  # a burst of new users: the oldest waited longest
                    dropped, _store = self._queue.popitem(last=False)
                    self._next.pop(dropped, None)  # its wait may have ended while queued
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="vectors-preload")
                    self._thread.daemon = True
                    self._thread.start()
        try:
            yield
        finally:
            with self._cond:
                self._searches -= 1
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
        """Drop the queued preloads; a running one ends before its next step. Idempotent."""
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
                user_id, store = self._queue.popitem(last=False)
                self._busy = True
            try:
                with background():
                    self._preload(user_id, store)
            except _Stopped:
                pass
            except Exception as exc:  # a hint lost (the shard closed or failed); never raised
                if not self._closed:
                    fields = {"user_id": user_id, "error": str(exc) or type(exc).__name__}
                    log.warning("vectors.preload_failed", extra={"fields": fields})
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _turn(self) -> bool:
        """Wait while a search is under way (:attr:`most_wait` at most); whether to go on."""
        deadline = time.monotonic() + self.most_wait
        with self._cond:
            while self._searches and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return not self._closed

    def _affords(self, kept: int, read: int) -> bool:
        """Whether a preload keeping ``kept`` points, reading ``read`` ahead, fits the
        window's budget (module doc); if so, it is spent."""
        now = time.monotonic()
        while self._spent and now - self._spent[0][0] >= AGAIN_SECONDS:
            self._spent.popleft()
        most = self.points.max_points
        if sum(k for _t, k, _r in self._spent) + kept > most * WINDOW_KEPT:
            return False
        if sum(r for _t, _k, r in self._spent) + read > most * WINDOW_READ:
            return False
        self._spent.append((now, kept, read))
        return True

    def _preload(self, user_id: str, store: EdgeVectorStore) -> None:
        began = time.perf_counter()
        flt = PointFilter(user_id=user_id)
        most = int(self.points.max_points * CACHE_SHARE)
        step = _Steps(self)
        step()
        with store.live.read("preload") as shard:
            held, read = store.count(flt), shard.info().points_count
            if held > most and held >= max(READ_PAGE, read * SHARD_SHARE):  # too large
                self._keep_warm(user_id, store, shard, held, read)  # kept warm (module doc)
                return
            if (
                not READ_PAGE <= held <= most
                or held < read * SHARD_SHARE
                or not self._affords(held, read)
            ):
                self.skipped += 1
                return
            store.live.read_ahead(shard, held, ["payload_storage"], share=0.0, between=step)
        step()
        with resting(REST):
            ids = store.ids(flt, most)
        kept = 0
        for at in range(0, len(ids), CHUNK):
            step()
            kept += len(store.get(ids[at : at + CHUNK], user_id))
        self.preloaded += 1
        log.info(
            "vectors.preloaded",
            extra={
                "fields": {
                    "user_id": user_id,
                    "points": kept,
                    "ms": round((time.perf_counter() - began) * 1000, 1),
                }
            },
        )

    def _keep_warm(
        self, user_id: str, store: EdgeVectorStore, shard: EdgeShard, held: int, read: int
    ) -> None:
        """``user_id``, too large for the cache, holds ``held`` of its shard's ``read``
        points: the shard's payload files read into the page cache within the budget
        (:data:`WARM_POINTS`), and the user queued again by a search :data:`WARM_SECONDS`
        after (module doc)."""
        now = time.monotonic()
        while self._warm and now - self._warm[0][0] >= WARM_SECONDS:
            self._warm.popleft()
        if sum(r for _t, r in self._warm) + read > WARM_POINTS:
            self.skipped += 1
        else:
            self._warm.append((now, read))
            began = time.perf_counter()
            done = store.live.read_ahead(
                shard, held, ["payload_storage"], share=0.0, between=_Steps(self, aside=False)
            )
            self.warmed += 1
            self.warmed_bytes += done
            ms = round((time.perf_counter() - began) * 1000, 1)
            fields = {"user_id": user_id, "points": read, "bytes": done, "ms": ms}
            log.debug("vectors.kept_warm", extra={"fields": fields})
        with self._cond:
            self._next[user_id] = time.monotonic() + WARM_SECONDS


class _Stopped(Exception):
    """The preloads stopped (:meth:`Preloads.stop`) between two steps."""


class _Steps:
    """Called before each step of a preload (a MiB read ahead, a chunk read by id): rests as
    long as the step before took (:data:`REST` times), then, with ``aside``, waits while a
    search is under way (:meth:`Preloads._turn`) and while a Recall is served
    (:data:`~tiers.core.priority.REQUESTS`); raises :class:`_Stopped` once the preloads
    stopped."""

    def __init__(self, preloads: Preloads, *, aside: bool = True) -> None:
        self._preloads = preloads
        self._aside = aside
        self._began: float | None = None

    def __call__(self) -> None:
        if self._began is not None:
            time.sleep((time.perf_counter() - self._began) * REST)
        if self._aside:
            REQUESTS.step_aside(self._preloads.most_wait, lambda: self._preloads._closed)
            if not self._preloads._turn():  # after the wait: a close meanwhile stops it here
                raise _Stopped
        elif self._preloads._closed:
            raise _Stopped
        self._began = time.perf_counter()
