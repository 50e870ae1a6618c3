"""The weaver's index jobs (mixed into :class:`weaver.jobs.runner.Weaver`, run on its worker).

- ``("index", [episode ids])``: stage 1 for ended sessions. Queued index jobs at the head of
  the line are drained into one batch of at most :data:`MAX_INDEX_BATCH` episodes (one
  embedding call), so one job stays short: shutdown waits for the job at hand.
- ``("documents", None)``: the keyed documents marked unindexed, :data:`MAX_DOCUMENT_BATCH`
  per job (:class:`weaver.index.DocumentIndexer`); one such job in line is enough.

A failed job (Tier 3 refused the points) backs off (:data:`INDEX_BACKOFF`) and then queues
everything still marked unindexed; so does the first job that succeeds after failures.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from tiers.journal.store import Journal
from weaver.index import MAX_DOCUMENT_BATCH, DocumentIndexer, Indexer
from weaver.jobs.backoff import Backoff

log = logging.getLogger("strata.weaver")
# Episodes per index job (one embedding batch): bounds how long a job, and so a shutdown, takes.
MAX_INDEX_BATCH = 16
# The pause after a failed index stage (Tier 3 refused the chunks): first, longest.
INDEX_BACKOFF = (1.0, 60.0)
__all__ = ["INDEX_BACKOFF", "MAX_DOCUMENT_BATCH", "MAX_INDEX_BATCH", "IndexJobs"]


class IndexJobs:
    """Queueing and running the index jobs; the state is the Weaver's."""

    _jobs: queue.Queue[tuple[str, Any] | None]
    _journal: Journal
    _indexer: Indexer
    _documents: DocumentIndexer | None
    _stopping: threading.Event
    index_backoff: Backoff
    on_indexed: list[Callable[[int, int, float], None]]
    points_since_optimize: int

    _notify: Callable[..., None]  # (listeners, *args): calls each, logs a failing one

    def _queued(self, kind: str) -> bool:
        """Whether a job of ``kind`` waits in line. Under sustained load the line always holds
        index jobs: they must not hold back the scheduled run (found by ``make bench-load``)."""
        with self._jobs.mutex:
            return any(job is not None and job[0] == kind for job in self._jobs.queue)

    def notify_flushed(self, episode_id: str) -> None:
        self._jobs.put(("index", [episode_id]))

    def notify_documents(self) -> None:
        """Documents were put: index the marked ones (one job in line is enough)."""
        if self._documents is not None and not self._queued("documents"):
            self._jobs.put(("documents", None))

    def unindexed_documents(self) -> int:
        return 0 if self._documents is None else self._documents.documents.unindexed_count()

    def _next_is_index(self) -> bool:
        with self._jobs.mutex:
            head = self._jobs.queue[0] if self._jobs.queue else None
        return head is not None and head[0] == "index"

    def _retry_index(self) -> None:
        backlog = [p.episode_id for p in self._journal.unindexed()]
        if backlog and not self._stopping.is_set():
            self._jobs.put(("index", backlog))
        if self.unindexed_documents() and not self._stopping.is_set():
            self.notify_documents()

    def _index_all(self, episode_ids: list[str]) -> int:
        """Index these episodes, MAX_INDEX_BATCH at a time (a stop ends it between batches)."""
        chunks = 0
        for i in range(0, len(episode_ids), MAX_INDEX_BATCH):
            if self._stopping.is_set():
                break
            chunks += self._index_batch(episode_ids[i : i + MAX_INDEX_BATCH], drain=False)
        return chunks

    def _index_batch(self, episode_ids: list[str], drain: bool = True) -> int:
        # Drain the other queued index jobs into this batch: one embedding call for all, up
        # to MAX_INDEX_BATCH episodes so that one job stays short (shutdown waits for it).
        # Only index jobs at the head of the line: a run or a stop keeps its place (putting
        # it back at the end let a stream of index jobs defer a run for ever). This thread is
        # the only consumer, so the head it saw is the job it gets.
        while drain and len(episode_ids) < MAX_INDEX_BATCH and self._next_is_index():
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            assert job is not None
            episode_ids += job[1]
        if len(episode_ids) > MAX_INDEX_BATCH:  # the rest: back in line, as one job
            self._jobs.put(("index", episode_ids[MAX_INDEX_BATCH:]))
            episode_ids = episode_ids[:MAX_INDEX_BATCH]
        todo = {p.episode_id for p in self._journal.unindexed()}
        batch = [eid for eid in dict.fromkeys(episode_ids) if eid in todo]
        if not batch:
            return 0
        began = time.monotonic()
        result = self._indexer.index(batch)
        if self.index_backoff.failures:  # Tier 3 works again: what failed before goes now
            self.index_backoff.succeeded()
            self._retry_index()
        self.points_since_optimize += result.points
        self._notify(self.on_indexed, result.episodes, result.points, time.monotonic() - began)
        log.info(
            "weaver.indexed",
            extra={
                "fields": {
                    "episodes": result.episodes,
                    "points": result.points,
                    "ms": round((time.monotonic() - began) * 1000, 1),
                }
            },
        )
        return result.points

    def _index_documents(self) -> None:
        assert self._documents is not None
        began = time.monotonic()
        result = self._documents.index()
        if result.more:  # the rest after what is in line now
            self._jobs.put(("documents", None))
        if self.index_backoff.failures:
            self.index_backoff.succeeded()
            self._retry_index()
        self.points_since_optimize += result.points
        ms = round((time.monotonic() - began) * 1000, 1)
        fields = {"documents": result.documents, "points": result.points, "ms": ms}
        log.info("weaver.documents_indexed", extra={"fields": fields})

    def _index_failed(self, exc: Exception) -> str:
        delay = self.index_backoff.failed()
        log.warning(
            "weaver.index_backoff",
            extra={
                "fields": {
                    "seconds": delay,
                    "failures": self.index_backoff.failures,
                    "error": str(exc),
                }
            },
        )
        return f"next try in {delay:g} s"
