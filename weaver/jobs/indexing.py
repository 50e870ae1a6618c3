"""The weaver's index jobs (:class:`IndexJobs`, owned by :class:`weaver.jobs.runner.Weaver`,
run on its worker).

- :class:`~weaver.jobs.kinds.IndexEpisodes`: stage 1 for ended sessions. Queued index jobs at
  the head of the line are drained into one batch of at most :data:`MAX_INDEX_BATCH` episodes
  (one embedding call), so one job stays short: shutdown waits for the job at hand. Each
  batch publishes :class:`~weaver.jobs.events.EpisodesIndexed`.
- :class:`~weaver.jobs.kinds.IndexLive`: a batch of live sessions (:mod:`weaver.live`), queued
  by the live stage's thread (:class:`weaver.jobs.live.LiveStage`) when one is due.
- :class:`~weaver.jobs.kinds.IndexDocuments`: the keyed documents marked unindexed,
  :data:`MAX_DOCUMENT_BATCH` per job (:class:`weaver.index.DocumentIndexer`); one such job in
  line is enough.

A consolidation run (:mod:`weaver.jobs.runs`) holds the worker for minutes under a fleet: between
two of its episodes the index jobs in line overtake it (:meth:`IndexJobs.overtake`), so what
ended or is live waits at most one episode's consolidation (found by ``make bench-fleet``: a
run of 100 episodes held the live batches back for 90 s).

A failed job (Tier 3 refused the points) backs off (:data:`INDEX_BACKOFF`) and then queues
everything still marked unindexed; so does the first job that succeeds after failures.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tiers.core.errors import Stopped
from tiers.core.events import Events
from tiers.journal.store import Journal
from weaver.index import MAX_DOCUMENT_BATCH, DocumentIndexer, Indexer
from weaver.jobs.backoff import Backoff
from weaver.jobs.events import EpisodesIndexed
from weaver.jobs.jobqueue import JobQueue
from weaver.jobs.kinds import IndexDocuments, IndexEpisodes, IndexLive
from weaver.jobs.live import LiveStage
from weaver.jobs.optimizer import IndexBuilds

log = logging.getLogger("strata.weaver")
# Episodes per index job (one embedding batch): bounds how long a job, and so a shutdown, takes.
MAX_INDEX_BATCH = 16
# The pause after a failed index stage (Tier 3 refused the chunks): first, longest.
INDEX_BACKOFF = (1.0, 60.0)
__all__ = ["INDEX_BACKOFF", "MAX_DOCUMENT_BATCH", "MAX_INDEX_BATCH", "IndexJobs"]


@dataclass(eq=False, slots=True)
class IndexJobs:
    """Queueing and running the index jobs, and their backoff (:attr:`backoff`)."""

    jobs: JobQueue
    journal: Journal
    indexer: Indexer
    documents: DocumentIndexer | None
    builds: IndexBuilds
    events: Events
    stopping: threading.Event
    live: LiveStage | None = None
    backoff: Backoff = field(init=False)

    def __post_init__(self) -> None:
        self.backoff = Backoff(*INDEX_BACKOFF, retry=self.retry)

    def notify_flushed(self, episode_id: str) -> None:
        self.jobs.put(IndexEpisodes((episode_id,)))

    def notify_documents(self) -> None:
        """Documents were put: index the marked ones (one job in line is enough)."""
        if self.documents is not None and not self.jobs.queued(IndexDocuments):
            self.jobs.put(IndexDocuments())

    def unindexed_documents(self) -> int:
        return 0 if self.documents is None else self.documents.documents.unindexed_count()

    def queue_backlog(self) -> None:
        """Queue everything marked unindexed: the episodes, then the documents."""
        backlog = tuple(p.episode_id for p in self.journal.unindexed())
        if backlog:
            self.jobs.put(IndexEpisodes(backlog))
        if self.unindexed_documents():
            self.notify_documents()

    def retry(self) -> None:
        """The backoff is over, or Tier 3 works again: queue what is still unindexed."""
        backlog = tuple(p.episode_id for p in self.journal.unindexed())
        if backlog and not self.stopping.is_set():
            self.jobs.put(IndexEpisodes(backlog))
        if self.unindexed_documents() and not self.stopping.is_set():
            self.notify_documents()

    def index_all(self, episode_ids: list[str]) -> int:
        """Index these episodes, MAX_INDEX_BATCH at a time (a stop ends it between batches)."""
        chunks = 0
        for i in range(0, len(episode_ids), MAX_INDEX_BATCH):
            if self.stopping.is_set():
                break
            chunks += self.index_batch(episode_ids[i : i + MAX_INDEX_BATCH], drain=False)
        return chunks

    def index_batch(self, episode_ids: list[str], drain: bool = True) -> int:
        # Drain the other queued index jobs into this batch: one embedding call for all, up
        # to MAX_INDEX_BATCH episodes so that one job stays short (shutdown waits for it).
        # Only index jobs at the head of the line: a run or a stop keeps its place (putting
        # it back at the end let a stream of index jobs defer a run for ever). This thread is
        # the only consumer, so the head it saw is the job it gets.
        while drain and len(episode_ids) < MAX_INDEX_BATCH:
            job = self.jobs.take_next(IndexEpisodes)
            if job is None:
                break
            episode_ids += job.episode_ids
        if len(episode_ids) > MAX_INDEX_BATCH:  # the rest: back in line, as one job
            self.jobs.put(IndexEpisodes(tuple(episode_ids[MAX_INDEX_BATCH:])))
            episode_ids = episode_ids[:MAX_INDEX_BATCH]
        todo = {p.episode_id for p in self.journal.unindexed()}
        batch = [eid for eid in dict.fromkeys(episode_ids) if eid in todo]
        if not batch:
            return 0
        began = time.monotonic()
        result = self.indexer.index(batch, self.stopping)
        if self.backoff.failures:  # Tier 3 works again: what failed before goes now
            self.backoff.succeeded()
            self.retry()
        self.builds.wrote(result.points)
        self.events.publish(
            EpisodesIndexed(result.episodes, result.points, time.monotonic() - began)
        )
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

    def notify_live(self) -> None:
        """Live sessions' batches are due (:mod:`weaver.jobs.live`): one job in line is
        enough, so the ended episodes' index jobs behind it still drain into batches."""
        if not self.stopping.is_set() and not self.jobs.queued(IndexLive):
            self.jobs.put(IndexLive())

    def index_live(self) -> None:
        assert self.live is not None
        began = time.monotonic()
        try:
            result = self.live.live.index(self.live.take_ready(), self.stopping)
        finally:
            self.live.batch_done()  # a session still behind is due again
        self.builds.wrote(result.points)
        ms = round((time.monotonic() - began) * 1000, 1)
        fields = {"sessions": result.sessions, "points": result.points, "ms": ms}
        log.info("weaver.live_indexed", extra={"fields": fields})

    def index_documents(self) -> None:
        assert self.documents is not None
        began = time.monotonic()
        result = self.documents.index(stopping=self.stopping)
        if result.more:  # the rest after what is in line now
            self.jobs.put(IndexDocuments())
        if self.backoff.failures:
            self.backoff.succeeded()
            self.retry()
        self.builds.wrote(result.points)
        ms = round((time.monotonic() - began) * 1000, 1)
        fields = {"documents": result.documents, "points": result.points, "ms": ms}
        log.info("weaver.documents_indexed", extra={"fields": fields})

    def overtake(self, failed: Callable[[str], None]) -> None:
        """Run the index jobs in line now (the worker, between two episodes of a run): those
        in line when it is called, so that a stream of new ones cannot hold the run back for
        ever; their episodes in one batch, as at the head of the line. ``failed`` hears a
        job's error, as the worker's would."""
        taken = self.jobs.take(IndexLive, IndexEpisodes)
        episodes = [e for job in taken if isinstance(job, IndexEpisodes) for e in job.episode_ids]
        todo: list[IndexLive | IndexEpisodes] = [IndexEpisodes(tuple(episodes))] if episodes else []
        if any(isinstance(job, IndexLive) for job in taken):
            todo.insert(0, IndexLive())
        for job in todo:
            if self.stopping.is_set():
                return  # what is unindexed is queued again at the next start
            try:
                if isinstance(job, IndexLive):
                    self.index_live()
                else:
                    self.index_batch(list(job.episode_ids))
            except Stopped:
                return  # as above; the caller sees the stop too
            except Exception as exc:  # as the worker does: log, back off, go on
                failed(f"{job.kind}: {exc}")
                log.exception("weaver.job_failed", extra={"fields": {"job": job.kind}})
                if isinstance(job, IndexEpisodes):
                    self.failed(exc)

    def failed(self, exc: Exception) -> str:
        """A job failed: back off; says when the next try is."""
        delay = self.backoff.failed()
        log.warning(
            "weaver.index_backoff",
            extra={
                "fields": {
                    "seconds": delay,
                    "failures": self.backoff.failures,
                    "error": str(exc),
                }
            },
        )
        return f"next try in {delay:g} s"
