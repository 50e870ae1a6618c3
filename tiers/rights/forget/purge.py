"""Purging: making Forget's deletes physical, so no byte of what was forgotten stays on disk.

A delete leaves the deleted bytes in files for a while: RocksDB keeps them in its write-ahead
logs and SST files until memtables are flushed and the files compacted, and the embedded
vector engine keeps deleted points in its WAL and segment pages. :class:`Purger` removes them:

- :meth:`Purger.flush_stores` (RocksDB, milliseconds): every memtable of the ``state`` and
  ``journal`` stores is flushed, so the logs that held the deleted values are deleted. Forget
  calls it before it returns.
- the compaction of the column families Forget touched, which rewrites the SST files that
  hold the deleted values (:mod:`tiers.rights.forget.compactions`: seconds at ten million
  points, growing with the store), on a thread of its own, asked for by :meth:`Purger.request`
  right after the flush.
- the vector store's :meth:`~tiers.semantic.vectors.VectorStore.purge` (seconds to a minute at 100k
  points: a child process rewrites the live points into a new generation) runs on the
  purger's own thread. Requests made while it runs are coalesced into one more purge after
  it, which also covers deletes that happened during the first. Before it, the same thread
  deletes the points of the users a Forget hid (:mod:`tiers.semantic.erasures`).

A ``purge`` mark (``forgotten`` column family, :data:`~tiers.semantic.tombstones.PURGE_KEY`) is
written in the same batch as a Forget's tombstones. The Forget hands it to :meth:`Purger.request`
once its deletes are made, and the first purge that begins after that request clears it, once
the compactions asked for by then are done too (a purge that began between the mark's write
and the request leaves it to the next). If the daemon stops or dies first, the next start
compacts every family Forget touches and purges again (:meth:`Purger.resume`) as soon as Tier 3
is open. Failed purges are retried every :data:`RETRY_SECONDS`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tiers.core.errors import StoreUnavailable
from tiers.core.events import Events
from tiers.core.priority import BACKGROUND_NICE, lower_this_thread, resting
from tiers.core.records import u64
from tiers.rights.forget.compactions import RETRY_SECONDS, Compactions
from tiers.rocks import Batch, RocksStore
from tiers.semantic.erasures import ERASE_REST, ErasingVectors
from tiers.semantic.store import SemanticStore
from tiers.semantic.tombstones import PURGE_KEY, TOMBSTONES_CF, Tombstones
from tiers.space import freeing

log = logging.getLogger("strata.forget")
TOMBSTONE_BATCH = 8192  # an erased user's episodes tombstoned in one write
READY_TIMEOUT = 60.0
# How long a backup waits for the compactions of earlier Forgets (then it is refused).
SETTLE_SECONDS = 300.0


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
        self._mark: bytes | None = None  # the last request's purge mark, not taken yet
        self._running = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self._erasures = semantic.erasures
        self._compactions = Compactions()
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
        busy = busy or self._compactions.pending
        return busy or self._state.get(TOMBSTONES_CF, PURGE_KEY) is not None

    def settle(self, timeout: float = SETTLE_SECONDS) -> None:
        """Return once the compactions of every Forget so far are done, so that no SST file
        holds what they deleted (a backup links the files: call it holding
        ``SemanticStore.write_lock``, so no Forget asks for more). Raises StoreUnavailable
        when ``timeout`` passes or the purger closes first."""
        if not self._compactions.wait(self._compactions.asked, timeout):
            raise StoreUnavailable(
                "a Forget's compaction is still rewriting the files that held what it deleted;"
                " try again later"
            )

    # -- purging ---------------------------------------------------------------------------
    def flush_stores(self) -> float:
        """Flush every memtable of both stores and sync their logs, so that RocksDB deletes
        the logs that held what was deleted (module doc); returns the ms it took. Raises
        StoreUnavailable."""
        began = time.perf_counter()
        self._state.flush()
        self._jstore.flush()
        return round((time.perf_counter() - began) * 1000, 1)

    def request(
        self,
        mark: bytes | None = None,
        state_only: Sequence[str] = (),
        prefixes: Mapping[str, bytes] | None = None,
    ) -> None:
        """Have the column families a Forget touched compacted, then the purger's thread purge
        everything (coalesced with other requests) and clear ``mark`` (the Forget's, from
        :meth:`write_marked`) unless a later one replaced it. ``state_only``: the deletes
        were in these column families of the state store alone (keyed documents), so only
        they are compacted; ``prefixes``: those of a state family were under that key prefix
        alone."""
        with self._cond:
            if self._closing:
                return
            self._mark = mark or self._mark
            self._compactions.request(self._state, state_only or self._state_cfs, prefixes)
            if not state_only:
                self._compactions.request(self._jstore, self._journal_cfs)
            self._requested = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="purge", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def resume(self) -> bool:
        """At start-up, once Tier 3 is open: purge again if a Forget's purge or erasure did
        not finish (a mark is set). Returns whether it did."""
        mark = self._state.get(TOMBSTONES_CF, PURGE_KEY)
        if mark is None and not self._erasures.users():
            return False
        log.info("forget.purge_resumed")
        self.request(mark)  # what the Forget deleted is not known: every family it may touch
        return True

    def close(self) -> None:
        """Stop the thread after its current purge (a closing vector store ends it): call
        :meth:`join` after closing the vector store, before closing the RocksDB stores."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._compactions.close()

    def join(self, timeout: float) -> bool:
        """Wait for both threads to end (after :meth:`close`); returns whether they did."""
        ends = time.monotonic() + timeout
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        joined = thread is None or not thread.is_alive()
        return self._compactions.join(max(0.0, ends - time.monotonic())) and joined

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
                # The mark of a Forget whose request came, and what it asked to compact: a
                # Forget that wrote its mark and has not asked yet is the next purge's.
                self._requested, self._running = False, True
                mark, self._mark = self._mark, None
                compacted = self._compactions.asked
            began = time.perf_counter()
            try:
                _embedder, vectors = self._semantic.wait_ready(READY_TIMEOUT)
                if not self._erase(vectors):  # closing: the marks stay for the next start
                    with self._cond:
                        self._running = False
                    return
                vectors.purge()
            except Exception as exc:
                with self._cond:
                    self._running = False
                    self._mark = self._mark or mark  # the next purge clears it
                    if self._closing:
                        return
                    log.error("forget.purge_failed", extra={"fields": {"error": str(exc)}})
                    self._cond.wait(RETRY_SECONDS)
                    self._requested = True
                continue
            if not self._compacted(compacted):  # closing: the mark stays for the next start
                with self._cond:
                    self._running = False
                return
            if mark is not None:
                self.clear(mark)
            ms = round((time.perf_counter() - began) * 1000, 1)
            log.info("forget.purged", extra={"fields": {"ms": ms}})
            self.events.publish(Purged())
            with self._cond:
                self._running = False
                self._cond.notify_all()

    def _compacted(self, ticket: int) -> bool:
        """Wait for the compactions asked for up to ``ticket``; False when closing first."""
        while not self._compactions.wait(ticket, 1.0):
            with self._cond:
                if self._closing:
                    return False
        return True

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
