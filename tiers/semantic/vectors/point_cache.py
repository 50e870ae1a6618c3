"""Decoded memory points of the embedded store, kept while they are read often.

Turning an engine record's payload into Python objects is most of a read's cost: a dense
search of 50 hits takes about 2.1 ms with payloads and 0.3 ms without, and fetching 50 points
by id 1.2 ms (measured 2026-11-25 at 20k points, p50, another benchmark beside it). A Recall
reads the same points several times (each channel's hits, the graph channel's memories, the
messages of the survivors), and consecutive queries of a user mostly read the same ones. So
searches ask the engine for ids and scores only, and the points come from this cache, the
missing ones fetched by id and kept: least recently used first out, at most ``max_points``.

Read-your-writes. Every write (upsert, a payload change, a delete) *invalidates* the ids it
wrote before it returns, under the shard's write lock and after the engine has applied it.
A reader takes a snapshot (:meth:`PointCache.snapshot`) before it reads the engine and puts
what it read with that snapshot: a point invalidated since is not kept (what the reader read
may predate the write), so the cache never holds a point older than the engine's. A reader
that looks a point up before the write returned may see it as it was, as it would reading
the engine.

The cache is in memory only; a delete (a Forget) invalidates the ids it removed, so no
forgotten text stays here after the delete returns.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from tiers.semantic.vectors import MemoryPoint

__all__ = ["POINT_CACHE", "PointCache"]

POINT_CACHE = 20_000  # points a store keeps decoded by default (vectors.point_cache)


class PointCache:
    """Decoded points by id (module doc). Thread-safe."""

    def __init__(self, max_points: int) -> None:
        if max_points < 0:
            raise ValueError(f"a point cache holds 0 or more points, not {max_points}")
        self.max_points = max_points
        self._lock = threading.Lock()
        self._points: OrderedDict[str, MemoryPoint] = OrderedDict()
        self._seq = 0  # invalidations so far
        # id -> the invalidation that last named it, oldest first; kept while a reader with
        # an older snapshot is active
        self._written: OrderedDict[str, int] = OrderedDict()
        self._readers: dict[int, int] = {}  # snapshot -> active readers holding it
        self.hits = 0  # points answered from the cache (for tests and figures)
        self.misses = 0

    def __len__(self) -> int:
        return len(self._points)

    def snapshot(self) -> int:
        """Before reading the engine: the snapshot to :meth:`put` what was read with, and to
        :meth:`release` after."""
        with self._lock:
            seq = self._seq
            self._readers[seq] = self._readers.get(seq, 0) + 1
            return seq

    def release(self, snapshot: int) -> None:
        with self._lock:
            left = self._readers.pop(snapshot) - 1
            if left:
                self._readers[snapshot] = left
            oldest = min(self._readers, default=self._seq)
            while self._written:
                pid, seq = next(iter(self._written.items()))
                if seq > oldest:
                    break
                del self._written[pid]

    def get(self, ids: Sequence[str]) -> dict[str, MemoryPoint]:
        """The cached points among ``ids``."""
        if not self.max_points:
            return {}
        found: dict[str, MemoryPoint] = {}
        with self._lock:
            for pid in ids:
                point = self._points.get(pid)
                if point is not None:
                    self._points.move_to_end(pid)
                    found[pid] = point
            self.hits += len(found)
            self.misses += len(ids) - len(found)
        return found

    def put(self, points: Iterable[MemoryPoint], snapshot: int) -> None:
        """Keep ``points``, read from the engine after ``snapshot`` was taken, except those
        invalidated since."""
        if not self.max_points:
            return
        with self._lock:
            for point in points:
                if self._written.get(point.id, -1) > snapshot:
                    continue  # written since it was read: what was read may be older
                self._points[point.id] = point
                self._points.move_to_end(point.id)
            while len(self._points) > self.max_points:
                self._points.popitem(last=False)

    def invalidate(self, ids: Iterable[str]) -> None:
        """After a write of ``ids`` reached the engine, before it returns."""
        with self._lock:
            self._seq += 1
            for pid in ids:
                self._points.pop(pid, None)
                if self._readers:
                    self._written[pid] = self._seq
                    self._written.move_to_end(pid)
