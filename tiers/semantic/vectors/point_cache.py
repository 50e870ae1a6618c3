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

**Kept out of the collector's walks.** The cache holds its points as msgpack bytes
(:func:`packed`), which CPython's collector never tracks. Kept as objects, 20,000 points were
some 85,000 tracked objects (a point, its sources, their list, its scope), walked by every
full collection and by every middle one while they aged: at 1M points under a fleet they
were most of the old generation, and a full collection took 120-175 ms in the daemon, against
8-18 ms as bytes, and 25-39 ms with the hot points below (2026-11-29, docs/benchmarks.md).
(Tuples of atoms would leave the walks too, but only one level of nesting per pass.) Building
a point from its bytes (:func:`unpacked`) takes about 4.5 µs, and a Recall reads the same
points several times, so the :data:`HOT_POINTS` most recently read are also kept decoded, as
objects.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import msgpack

from tiers.core.priority import in_background
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, Source, SparseVector

__all__ = ["POINT_CACHE", "CacheCounts", "PointCache"]

# Points a store keeps by default, as bytes (vectors.point_cache): 0.55-0.9 KB each with their
# keys, so 53-86 MiB when full; the preloads (shards.preloads) read a user of up to a quarter of
# it whole. A larger cache holds larger users whole, at the cost of their preloads' work.
POINT_CACHE = 100_000
HOT_POINTS = 1_000  # of them, the most recently read, kept as objects too (module doc)


def packed(point: MemoryPoint) -> bytes:
    """``point`` as msgpack bytes: an object the collector never tracks."""
    return msgpack.packb(
        [
            point.id,
            point.kind,
            point.text,
            point.scope.user_id,
            point.scope.agent_id,
            point.episode_id,
            point.session_id,
            [
                [
                    *(s.session_id, s.seq, s.message_id, s.metadata),
                    *(s.speaker, s.created_at_us, s.text, s.role),
                ]
                for s in point.sources
            ],
            point.created_at_us,
            point.extractor,
            point.valid_from_us,
            point.valid_to_us,
            point.attrs,
            point.dense,
            None if point.sparse is None else [point.sparse.indices, point.sparse.values],
            point.replaced_by,
        ]
    )


def unpacked(data: bytes) -> MemoryPoint:
    """The point :func:`packed` was given, with its own dicts and lists."""
    fields = msgpack.unpackb(data)
    (pid, kind, text, user, agent, episode, session, sources, created, extractor) = fields[:10]
    (valid_from, valid_to, attrs, dense, sparse, replaced_by) = fields[10:]
    return MemoryPoint(
        pid,
        kind,
        text,
        Scope(user, agent),
        episode,
        session,
        [Source(*source) for source in sources],
        created,
        extractor,
        valid_from,
        valid_to,
        attrs,
        dense,
        None if sparse is None else SparseVector(*sparse),
        replaced_by,
    )


class CacheCounts(NamedTuple):
    """A point cache's figures (the daemon's metrics): the points requests found in it and
    those they read from the engine since it was made (the daemon's own work, within
    :func:`tiers.core.priority.background`, is not counted), the points it holds, and how many
    it may hold."""

    hits: int
    misses: int
    points: int
    capacity: int


class PointCache:
    """Decoded points by id (module doc). Thread-safe."""

    def __init__(self, max_points: int) -> None:
        if max_points < 0:
            raise ValueError(f"a point cache holds 0 or more points, not {max_points}")
        self.max_points = max_points
        self._lock = threading.Lock()
        self._points: OrderedDict[str, bytes] = OrderedDict()
        self._hot: OrderedDict[str, MemoryPoint] = OrderedDict()  # ids in _points only
        self._max_hot = min(HOT_POINTS, max_points)
        self._seq = 0  # invalidations so far
        # id -> the invalidation that last named it, oldest first; kept while a reader with
        # an older snapshot is active
        self._written: OrderedDict[str, int] = OrderedDict()
        self._readers: dict[int, int] = {}  # snapshot -> active readers holding it
        self.hits = 0  # points requests found here (for figures: the metrics)
        self.misses = 0  # and those they read from the engine (not background work's)

    def __len__(self) -> int:
        return len(self._points)

    def counts(self) -> CacheCounts:
        with self._lock:
            return CacheCounts(self.hits, self.misses, len(self._points), self.max_points)

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
        kept: dict[str, bytes] = {}
        with self._lock:
            for pid in ids:
                data = self._points.get(pid)
                if data is None:
                    continue
                self._points.move_to_end(pid)
                point = self._hot.get(pid)
                if point is None:
                    kept[pid] = data
                else:
                    self._hot.move_to_end(pid)
                    found[pid] = point
            if not in_background():  # a request's reads: what the hit rate is for
                self.hits += len(found) + len(kept)
                self.misses += len(ids) - len(found) - len(kept)
        decoded = {pid: unpacked(data) for pid, data in kept.items()}
        with self._lock:
            for pid, point in decoded.items():
                if self._points.get(pid) is kept[pid]:  # not written nor dropped meanwhile
                    self._keep_hot(point)
        return found | decoded

    def put(self, points: Iterable[MemoryPoint], snapshot: int) -> None:
        """Keep ``points``, read from the engine after ``snapshot`` was taken, except those
        invalidated since."""
        if not self.max_points:
            return
        kept = [(point, packed(point)) for point in points]
        with self._lock:
            for point, data in kept:
                if self._written.get(point.id, -1) > snapshot:
                    continue  # written since it was read: what was read may be older
                self._points[point.id] = data
                self._points.move_to_end(point.id)
                self._keep_hot(point)
            while len(self._points) > self.max_points:
                pid, _data = self._points.popitem(last=False)
                self._hot.pop(pid, None)

    def _keep_hot(self, point: MemoryPoint) -> None:
        """Under the lock: ``point`` (in the cache as it is) kept decoded too."""
        self._hot[point.id] = point
        self._hot.move_to_end(point.id)
        while len(self._hot) > self._max_hot:
            self._hot.popitem(last=False)

    def invalidate(self, ids: Iterable[str]) -> None:
        """After a write of ``ids`` reached the engine, before it returns."""
        with self._lock:
            self._seq += 1
            for pid in ids:
                self._points.pop(pid, None)
                self._hot.pop(pid, None)
                if self._readers:
                    self._written[pid] = self._seq
                    self._written.move_to_end(pid)
