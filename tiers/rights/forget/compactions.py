"""RocksDB's side of Forget's purge, behind it: the compactions that rewrite the SST files
holding what a Forget deleted.

Before Forget returns, every memtable is flushed and the write-ahead logs synced
(:meth:`~tiers.rights.forget.purge.Purger.flush_stores`), so that RocksDB deletes the logs
that held the deleted values. The SST files that hold them go when the families the Forget
touched are compacted. Most of those families are keyed by ids (episodes, messages, graph
edges), so one user's deletes lie all over the family, and compacting it rewrites all of it:
at ten million points, the graph's edge ids alone took 2.0 s of a 200,000-point user's
Forget (112 MiB; the journal, larger in a store that keeps its sessions, is compacted the
same way). That grows with the store, not with what was forgotten, so :class:`Compactions`
runs it on a thread of its own after Forget returns, within the purge's bound
(docs/operations.md, Forget). RocksDB's compactions release the interpreter: a thread waking
every millisecond saw no gap over 5 ms during those 2.0 s (2026-12-02).

Requests made while a compaction runs share the next one, over the union of their families;
a family asked for under two different key prefixes is compacted whole. Each request has a
ticket, and :meth:`Compactions.wait` returns once a compaction that began after it has
ended: the purger's thread waits for that before it clears a Forget's ``purge`` mark, so a
crash before the compaction compacts again at the next start. A compaction that fails is
logged and tried again every :data:`RETRY_SECONDS`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping

from tiers.core.priority import BACKGROUND_NICE, lower_this_thread
from tiers.rocks import RocksStore

__all__ = ["RETRY_SECONDS", "Compactions"]

log = logging.getLogger("strata.forget")
RETRY_SECONDS = 10.0

# A family's compaction: its whole key space (None) or the one prefix its deletes were under.
_Range = bytes | None


class Compactions:
    """The compactions asked for by Forgets, run by one thread (module doc), which starts with
    the first request and stops at :meth:`close` after the compaction under way."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._wanted: dict[RocksStore, dict[str, _Range]] = {}  # asked since the last start
        self._asked = 0  # tickets handed out
        self._done = 0  # every ticket up to this one is compacted
        self._running = False
        self._closing = False
        self._thread: threading.Thread | None = None

    def request(
        self,
        store: RocksStore,
        families: Iterable[str],
        prefixes: Mapping[str, bytes] | None = None,
    ) -> int:
        """Have ``families`` of ``store`` compacted (those in ``prefixes`` under that prefix
        alone); returns the request's ticket (for :meth:`wait`)."""
        with self._cond:
            self._want(store, {f: (prefixes or {}).get(f) for f in families})
            self._asked += 1
            if self._thread is None and not self._closing:
                self._thread = threading.Thread(target=self._loop, name="compact", daemon=True)
                self._thread.start()
            self._cond.notify_all()
            return self._asked

    @property
    def asked(self) -> int:
        """The last ticket handed out."""
        with self._cond:
            return self._asked

    @property
    def pending(self) -> bool:
        """Whether a compaction is asked for or running."""
        with self._cond:
            return self._running or self._done < self._asked

    def wait(self, ticket: int, timeout: float) -> bool:
        """Whether every compaction asked for up to ``ticket`` is done, waiting up to
        ``timeout`` seconds (False at once when closing)."""
        with self._cond:
            self._cond.wait_for(lambda: self._done >= ticket or self._closing, timeout)
            return self._done >= ticket

    def close(self) -> None:
        """Stop the thread after the compaction under way (RocksDB cannot stop one); what
        is left is compacted at the next start (the ``purge`` mark)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def join(self, timeout: float) -> bool:
        """Wait for the thread to end (after :meth:`close`); returns whether it did."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def _want(self, store: RocksStore, families: Mapping[str, _Range]) -> None:
        """Add ``families`` to what the next compaction covers (under the lock): a family
        asked for under two ranges, or a range and the whole, is compacted whole."""
        wanted = self._wanted.setdefault(store, {})
        for family, prefix in families.items():
            wanted[family] = prefix if wanted.get(family, prefix) == prefix else None

    def _loop(self) -> None:
        lower_this_thread(BACKGROUND_NICE)
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._done < self._asked or self._closing)
                if self._closing:
                    return
                ticket, wanted, self._wanted = self._asked, self._wanted, {}
                self._running = True
            began = time.perf_counter()
            try:
                for store, families in wanted.items():
                    prefixes = {f: p for f, p in families.items() if p is not None}
                    store.purge(families, prefixes)
            except Exception as exc:
                with self._cond:
                    self._running = False
                    for store, families in wanted.items():  # asked again, with what came since
                        self._want(store, families)
                    if self._closing:
                        return
                    log.error("forget.compaction_failed", extra={"fields": {"error": str(exc)}})
                    self._cond.wait(RETRY_SECONDS)
                continue
            ms = round((time.perf_counter() - began) * 1000, 1)
            log.info("forget.compacted", extra={"fields": {"ms": ms}})
            with self._cond:
                self._done, self._running = ticket, False
                self._cond.notify_all()
