"""The Memory Weaver at work: one worker thread runs every indexing, consolidation and
maintenance job in order, so Tier 3 writes never race each other.

The :class:`Weaver` owns the line of jobs (:mod:`weaver.jobs.jobqueue`), the worker thread
that handles each kind of job (:mod:`weaver.jobs.kinds`) with ``match``, and the parts that
queue and run them:

- ``notify_flushed`` (called when a session ends) queues the episode for stage 1; queued index
  jobs are drained into one batch; ``notify_documents`` (called when a keyed document is put)
  queues the indexing of the documents marked unindexed, a batch per job
  (:class:`weaver.jobs.indexing.IndexJobs`).
- ``request_run`` queues a consolidation run (stage 2 over pending episodes, after indexing any
  of them still unindexed) and returns a :class:`Run` that observers follow; the run goes on
  whether or not anyone follows it. The scheduler calls :meth:`Weaver.scheduled_run`
  (:class:`weaver.jobs.runs.RunJobs`).
- ``request_optimize`` starts the vector store's index build on a thread of its own
  (:class:`weaver.jobs.optimizer.IndexBuilds`).
- ``events``: observers subscribe to what the weaver did (:mod:`weaver.jobs.events`).

A run, its progress events and its report are in :mod:`weaver.run`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from tiers.core.errors import Stopped, Unavailable
from tiers.core.events import Events
from tiers.core.priority import BACKGROUND_NICE, background, lower_this_thread
from tiers.core.records import Scope
from tiers.journal.store import Journal
from tiers.semantic.store import SemanticStore
from tiers.space import DiskFull
from tiers.working.session import MessagesAppended, MessagesRemoved, SessionFlushed
from weaver.consolidate import Consolidator
from weaver.extractors import Extractor
from weaver.index import DocumentIndexer, Indexer
from weaver.jobs.backoff import Backoff
from weaver.jobs.indexing import IndexJobs
from weaver.jobs.jobqueue import JobQueue
from weaver.jobs.kinds import (
    Call,
    Consolidate,
    IndexDocuments,
    IndexEpisodes,
    IndexLive,
    Job,
    unknown,
)
from weaver.jobs.live import LiveStage
from weaver.jobs.optimizer import IndexBuilds
from weaver.jobs.runs import RunJobs
from weaver.live import LiveBacklog, LiveIndexer
from weaver.run import ANY_SCOPE, Run, RunReport

log = logging.getLogger("strata.weaver")
T = TypeVar("T")


class Weaver:
    def __init__(
        self,
        journal: Journal,
        semantic: SemanticStore,
        indexer: Indexer,
        consolidator: Consolidator,
        next_run: Callable[[], float | None] = lambda: None,
        llm_backoff: tuple[float, float] = (30.0, 1800.0),
        documents: DocumentIndexer | None = None,
        live: LiveIndexer | None = None,
    ) -> None:
        """``live``: the live index stage (:mod:`weaver.live`; None: live sessions are
        indexed when they end)."""
        self._semantic = semantic
        self._consolidator = consolidator
        self.next_run = next_run
        self.last_error = ""
        # Observers (metrics): called on the worker thread; an exception in one is logged.
        self.events = Events("weaver")
        self._jobs = JobQueue()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._builds = IndexBuilds(semantic, self._stopping, self._failed)
        # A failed index stage retries after a pause (index_backoff), and so does a run after
        # the LLM failed (llm_backoff; llm.on_failure = "wait").
        stage = None
        if live is not None:
            stage = LiveStage(live, semantic, self._notify_live, self._stopping)
        self.live = stage
        self._index = IndexJobs(
            self._jobs,
            journal,
            indexer,
            documents,
            self._builds,
            self.events,
            self._stopping,
            stage,
        )
        self._runs = RunJobs(
            self._jobs,
            journal,
            semantic,
            consolidator,
            self._index,
            self._builds,
            self.events,
            self._stopping,
            self._failed,
            llm_backoff,
        )

    def _notify_live(self) -> None:
        self._index.notify_live()

    def _failed(self, error: str) -> None:
        self.last_error = error

    @property
    def extractor(self) -> Extractor:
        return self._consolidator.extractor

    @property
    def ready(self) -> bool:
        """Whether Tier 3 (model and vector store) is ready."""
        return self._semantic.ready

    @property
    def tier3_error(self) -> str | None:
        """Why Tier 3 failed to open, or why it is not open yet (an embedding endpoint that
        is down while its vector size is probed), in one line; None once it is ready."""
        semantic = self._semantic
        return semantic.error or (None if semantic.ready else semantic.embeddings.error)

    @property
    def extractor_name(self) -> str:
        return self._consolidator.extractor.name

    # -- what the parts hold ---------------------------------------------------------------
    @property
    def running(self) -> Run | None:
        return self._runs.running

    @property
    def last_run(self) -> RunReport | None:
        return self._runs.last_run

    @property
    def llm_backoff(self) -> Backoff:
        return self._runs.backoff

    @property
    def index_backoff(self) -> Backoff:
        return self._index.backoff

    # -- requests --------------------------------------------------------------------------
    def notify_flushed(self, episode_id: str) -> None:
        self._index.notify_flushed(episode_id)

    def follow(self, working: Events) -> None:
        """Subscribe to the working memory's events: ended sessions are indexed; with the
        live stage, live ones as they go."""
        working.subscribe(SessionFlushed, self.session_flushed)
        if self.live is not None:
            working.subscribe(MessagesAppended, self.live.appended)
            working.subscribe(MessagesRemoved, self.live.removed)

    def session_flushed(self, event: SessionFlushed) -> None:
        """A session ended: its episode is indexed (past what the live stage did)."""
        if self.live is not None:
            self.live.ended(event.result.episode_id)
        self.notify_flushed(event.result.episode_id)

    def notify_documents(self) -> None:
        """Documents were put: index the marked ones (one job in line is enough)."""
        self._index.notify_documents()

    def unindexed_documents(self) -> int:
        return self._index.unindexed_documents()

    def live_backlog(self) -> LiveBacklog:
        """Live sessions with messages not embedded yet, and those messages."""
        return self.live.live.backlog() if self.live is not None else LiveBacklog(0, 0)

    def request_run(self, episode_ids: tuple[str, ...] = (), scope: Scope = ANY_SCOPE) -> Run:
        return self._runs.request_run(episode_ids, scope)

    def work_left(self) -> tuple[int, int]:
        """The episodes pending consolidation and the marks of scopes whose profiles or
        digests wait for their rewrite (:mod:`tiers.journal.stale`), counted in the state
        store: what a start finds left by the last run of the daemon."""
        return self._runs.journal.pending_count(), self._consolidator.marks.count()

    def scheduled_run(self) -> None:
        """The scheduler's job: queue a run unless one is running or queued already."""
        self._runs.scheduled_run()

    def request_optimize(self) -> None:
        """Build the vector index in the background, unless a build is running."""
        self._builds.request()

    def index_lost(self) -> None:
        """The vector store was rewritten without its index (a Forget's purge)."""
        self._builds.index_lost()

    # -- control ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._work, name="weaver", daemon=True)
        self._thread.start()
        self._index.queue_backlog()  # put before a stop or a crash
        if self.live is not None:
            self.live.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the episode at hand, then stop (idempotent). Queued work stays marked in
        the state store and is picked up at the next start."""
        self._stopping.set()
        if self.live is not None:
            self.live.stop()
        self.llm_backoff.close()
        self.index_backoff.close()
        self._jobs.stop()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                # The job at hand may be in native code (embedding, the vector engine): the
                # process must not exit under it (std::terminate: SIGABRT, exit -6). Jobs are
                # bounded (MAX_INDEX_BATCH episodes; a run stops between episodes), and a
                # second signal still exits at once (daemon.cli.stratad).
                log.warning("weaver.stop_waiting", extra={"fields": {"waited_s": timeout}})
                self._thread.join()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on the worker, between other jobs (never during a run): e.g. a rebuild."""
        future: Future[T] = Future()
        if self._stopping.is_set():
            future.set_exception(Unavailable("the weaver is stopping"))
            return future
        self._jobs.put(Call(fn, future))
        return future

    # -- the worker ------------------------------------------------------------------------
    def _work(self) -> None:
        lower_this_thread(BACKGROUND_NICE)  # below serving and Recall (tiers.core.priority)
        while True:
            job = self._jobs.get()
            if job is None or self._stopping.is_set():
                return
            try:
                with background():  # the daemon's own reads (tiers.core.priority)
                    self._handle(job)
            except Stopped:  # the stop came mid-job: what it did not write is redone later
                log.info("weaver.job_stopped", extra={"fields": {"job": job.kind}})
                return
            except Exception as exc:  # a job must never kill the worker
                self.last_error = f"{job.kind}: {exc}"
                if isinstance(exc, DiskFull):  # expected while the disk is low: no traceback
                    fields = {"job": job.kind, "error": str(exc)}
                    log.warning("weaver.job_deferred", extra={"fields": fields})
                else:
                    log.exception("weaver.job_failed", extra={"fields": {"job": job.kind}})
                if isinstance(job, IndexEpisodes | IndexDocuments):
                    self._index.failed(exc)  # (IndexLive: due again after its batch time)

    def _handle(self, job: Job) -> None:
        """Run one job, by its kind; another value raises
        :class:`weaver.jobs.kinds.UnknownJob`."""
        match job:
            case IndexEpisodes(episode_ids):
                self._index.index_batch(list(episode_ids))
            case IndexLive():
                self._index.index_live()
            case IndexDocuments():
                self._index.index_documents()
            case Consolidate(run):
                self._runs.run(run)
            case Call(fn, future):
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn())
                    except BaseException as exc:
                        future.set_exception(exc)
            case _:
                unknown(job)
