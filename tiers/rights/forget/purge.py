"""Purging: making Forget's deletes physical, so no byte of what was forgotten stays on disk.

A delete leaves the deleted bytes in files for a while: RocksDB keeps them in its write-ahead
logs and SST files until memtables are flushed and the files compacted, and the embedded
vector engine keeps deleted points in its WAL and segment pages. :class:`Purger` removes them:

- :meth:`Purger.purge_stores` (RocksDB, milliseconds): every memtable of the ``state`` and
  ``journal`` stores is flushed, so the logs that held the deleted values are deleted, then
  the column families Forget touches are compacted. Forget calls it before it returns.
- the vector store's :meth:`~tiers.semantic.vectors.VectorStore.purge` (seconds to a minute at 100k
  points: a child process rewrites the live points into a new generation) runs on the
  purger's own thread. Requests made while it runs are coalesced into one more purge after
  it, which also covers deletes that happened during the first. Before it, the same thread
  deletes the points of the users a Forget hid (:mod:`tiers.semantic.erasures`).

A ``purge`` mark (``forgotten`` column family, :data:`~tiers.semantic.tombstones.PURGE_KEY`) is
written in the same batch as a Forget's tombstones and cleared by the first purge that began after
it. If the daemon stops or dies first, the next start purges again (:meth:`Purger.resume`) as soon
as Tier 3 is open. Failed purges are retried every :data:`RETRY_SECONDS`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tiers.core.events import Events
from tiers.core.priority import BACKGROUND_NICE, lower_this_thread, resting
from tiers.core.records import u64
from tiers.rocks import Batch, RocksStore
from tiers.semantic.erasures import ERASE_REST, ErasingVectors
from tiers.semantic.store import SemanticStore
from tiers.semantic.tombstones import PURGE_KEY, TOMBSTONES_CF, Tombstones
from tiers.space import freeing

log = logging.getLogger("strata.forget")
RETRY_SECONDS = 10.0
TOMBSTONE_BATCH = 8192  # an erased user's episodes tombstoned in one write
READY_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class Purged:
    """Event of :attr:`Purger.events`: a purge finished (what it rewrote may have lost index
    state the weaver rebuilds)."""


class Purger:
    def __init__(
        self,
        state: RocksStore,
        journal_store: RocksStore,
        semantic: SemanticStore,
        state_cfs: Sequence[str],
        journal_cfs: Sequence[str],
    ) -> None:
        self._state = state
        self._jstore = journal_store
        self._semantic = semantic
        self._state_cfs = tuple(state_cfs)
        self._journal_cfs = tuple(journal_cfs)
        self._mark_lock = threading.Lock()  # a mark's write against its clearing
        self._cond = threading.Condition()
        self._requested = False
        self._running = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self._erasures = semantic.erasures
        # Called after each vector-store purge: its new generation has no index yet.
        self.events = Events("forget")  # Purged

    # -- the mark --------------------------------------------------------------------------
    def write_marked(self, batch: Batch) -> tuple[bytes, bool]:
        """Write ``batch`` (a Forget's tombstones) with a new ``purge`` mark; returns the mark
        and whether an earlier one was still set (a purge not finished yet)."""
        mark = u64(time.time_ns())
        batch.put(TOMBSTONES_CF, PURGE_KEY, mark)
        with self._mark_lock:
            earlier = self._state.get(TOMBSTONES_CF, PURGE_KEY) is not None
            self._state.write(batch)
        return mark, earlier

    def clear(self, mark: bytes) -> None:
        """Delete the ``purge`` mark unless a later Forget has written it since."""
        with self._mark_lock:
            if self._state.get(TOMBSTONES_CF, PURGE_KEY) == mark:
                batch = self._state.batch()
                batch.delete(TOMBSTONES_CF, PURGE_KEY)
                self._state.write(batch)

    @property
    def pending(self) -> bool:
        """Whether a purge is requested or running (or marked, after a restart)."""
        with self._cond:
            busy = self._requested or self._running
        return busy or self._state.get(TOMBSTONES_CF, PURGE_KEY) is not None

    # -- purging ---------------------------------------------------------------------------
    def purge_stores(
        self, state_only: Sequence[str] = (), prefixes: Mapping[str, bytes] | None = None
    ) -> float:
        """The RocksDB part (module doc); returns the ms it took. ``state_only``: the deletes
        were in these column families of the state store alone (keyed documents), so only
        they are compacted; ``prefixes``: those of a state family were under that key prefix
        alone (:meth:`RocksStore.purge`). Raises StoreUnavailable."""
        began = time.perf_counter()
        self._state.purge(state_only or self._state_cfs, prefixes)
        if not state_only:
            self._jstore.purge(self._journal_cfs)
        return round((time.perf_counter() - began) * 1000, 1)

    def request(self) -> None:
        """Have the purger's thread purge everything (coalesced with other requests)."""
        with self._cond:
            if self._closing:
                return
            self._requested = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="purge", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def resume(self) -> bool:
        """At start-up, once Tier 3 is open: purge again if a Forget's purge or erasure did
        not finish (a mark is set). Returns whether it did."""
        if self._state.get(TOMBSTONES_CF, PURGE_KEY) is None and not self._erasures.users():
            return False
        log.info("forget.purge_resumed")
        self.request()
        return True

    def close(self) -> None:
        """Stop the thread after its current purge (a closing vector store ends it): call
        :meth:`join` after closing the vector store, before closing the RocksDB stores."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def join(self, timeout: float) -> bool:
        """Wait for the thread to end (after :meth:`close`); returns whether it did."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def _loop(self) -> None:
        lower_this_thread(BACKGROUND_NICE)
        with freeing(self._state.space):  # a purge frees space: it may use the reserve
            self._purge_forever()

    def _purge_forever(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._requested or self._closing)
                if self._closing:
                    return
                self._requested, self._running = False, True
            mark = self._state.get(TOMBSTONES_CF, PURGE_KEY)
            began = time.perf_counter()
            try:
                _embedder, vectors = self._semantic.wait_ready(READY_TIMEOUT)
                if not self._erase(vectors):  # closing: the marks stay for the next start
                    with self._cond:
                        self._running = False
                    return
                vectors.purge()
                self.purge_stores()
            except Exception as exc:
                with self._cond:
                    self._running = False
                    if self._closing:
                        return
                    log.error("forget.purge_failed", extra={"fields": {"error": str(exc)}})
                    self._cond.wait(RETRY_SECONDS)
                    self._requested = True
                continue
            if mark is not None:
                self.clear(mark)
            ms = round((time.perf_counter() - began) * 1000, 1)
            log.info("forget.purged", extra={"fields": {"ms": ms}})
            self.events.publish(Purged())
            with self._cond:
                self._running = False
                self._cond.notify_all()

    def _erase(self, vectors: ErasingVectors) -> bool:
        """Delete the points of the users being erased (:mod:`tiers.semantic.erasures`), one
        user at a time, holding the erasures' lock: its episodes tombstoned first. Returns
        False when closing stopped it. Raises what :meth:`ErasingVectors.erase` raises."""
        for user_id in self._erasures.users():
            with self._cond:
                if self._closing:
                    return False
            began = time.perf_counter()
            with self._erasures.lock, resting(ERASE_REST):
                points = vectors.erase(user_id, self._tombstone)
            self._erasures.done(user_id)
            self._semantic.notify_write({user_id})
            ms = round((time.perf_counter() - began) * 1000, 1)
            log.info("forget.erased", extra={"fields": {"points": points, "ms": ms}})
        return True

    def _tombstone(self, episode_ids: set[str]) -> None:
        """Tombstone ``episode_ids``, :data:`TOMBSTONE_BATCH` to a write (a RocksDB write
        holds the interpreter throughout: 150,000 keys, 74 ms)."""
        ordered = sorted(episode_ids)
        for i in range(0, len(ordered), TOMBSTONE_BATCH):
            batch = self._state.batch()
            Tombstones.add(batch, ordered[i : i + TOMBSTONE_BATCH])
            self._state.write(batch)
