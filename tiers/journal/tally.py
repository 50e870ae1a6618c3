"""How many of the journal's episodes have not expired (:class:`EpisodeTally`), without a
read of every episode at each ask: a metrics scrape and ``Stats`` ask for it, and a fleet's
month is millions of episodes (reading the 200,000 index entries of a day's took 0.25 s, the
interpreter held throughout; measured 2026-12-01)."""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator

import numpy as np

_MERGE = 65_536  # flush times kept apart from the sorted array before they join it


class EpisodeTally:
    """The flush times of the journal's episodes in memory, 8 bytes an episode (48 MB for six
    million), read once at the first :meth:`count` and kept by the journal's writes and
    deletes since: each goes through :meth:`write`, so that a write and its tally are one step
    for a count being read. ``read`` yields the flush time of every episode stored;
    the store's iterator must be a snapshot taken at its first item (RocksDB's are)."""

    def __init__(self, read: Callable[[], Iterator[int]]) -> None:
        self._read = read
        self._lock = threading.Lock()  # a write and its tally; the count's fields
        self._building = threading.Lock()  # one first read at a time
        self._sorted: np.ndarray | None = None  # None: not read yet
        self._start = 0  # the sorted times before it have expired
        self._recent: list[int] = []  # sorted too
        self._unread_drops: list[int] = []  # deletes of read episodes, while they are read
        self._tracking = False

    def write(self, write: Callable[[], tuple[Iterable[int], Iterable[int]]]) -> None:
        """Run ``write`` (a write to the store), which returns the flush times of the episodes
        it added (not stored before) and removed (stored before), and tally them. Raises what
        ``write`` raises, and tallies nothing then."""
        with self._lock:
            added, removed = write()
            if not self._tracking:
                return
            for t in added:
                bisect.insort(self._recent, t)
            gone = [t for t in removed if not self._drop_recent(t)]
            if gone:
                self._drop_sorted(gone)
            if len(self._recent) > _MERGE and self._sorted is not None:
                merged = np.concatenate([self._sorted[self._start :], self._recent])
                self._sorted, self._start, self._recent = np.sort(merged), 0, []

    def count(self, cutoff_us: int) -> int:
        """The episodes flushed after ``cutoff_us``: those that have not expired."""
        if self._sorted is None:
            self._build()
        with self._lock:
            assert self._sorted is not None
            expired = int(np.searchsorted(self._sorted, cutoff_us, side="right"))
            self._start = max(self._start, expired)
            if self._start > len(self._sorted) // 2:
                self._sorted, self._start = self._sorted[self._start :].copy(), 0
            newer = len(self._recent) - bisect.bisect_right(self._recent, cutoff_us)
            return len(self._sorted) - self._start + newer

    def _build(self) -> None:
        with self._building:
            if self._sorted is not None:
                return
            with self._lock:  # from here on the writes are tallied apart
                self._tracking, self._recent, self._unread_drops = True, [], []
                try:
                    times = self._read()
                    first = next(times, None)  # the store's snapshot: what it holds now
                except BaseException:
                    self._tracking = False
                    raise
            try:
                read = itertools.chain([] if first is None else [first], times)
                stored = np.sort(np.fromiter(read, dtype=np.int64))  # no int object kept
            except BaseException:
                with self._lock:
                    self._tracking, self._recent, self._unread_drops = False, [], []
                raise
            with self._lock:
                self._sorted, self._start = stored, 0
                self._drop_sorted(self._unread_drops)
                self._unread_drops = []

    def _drop_recent(self, t: int) -> bool:
        i = bisect.bisect_left(self._recent, t)
        if i < len(self._recent) and self._recent[i] == t:
            del self._recent[i]
            return True
        return False

    def _drop_sorted(self, times: list[int]) -> None:
        if self._sorted is None:  # being read: applied once it is
            self._unread_drops.extend(times)
            return
        drop: set[int] = set()
        for t in times:
            i = int(np.searchsorted(self._sorted, t, side="left"))
            while i < len(self._sorted) and self._sorted[i] == t and i in drop:
                i += 1
            if i < len(self._sorted) and self._sorted[i] == t:
                drop.add(i)
        if drop:
            kept = np.delete(self._sorted, sorted(drop))
            self._start -= sum(1 for i in drop if i < self._start)
            self._sorted = kept
