"""The Memory Weaver at work: one worker thread runs every indexing, consolidation and
maintenance job in order, so Tier 3 writes never race each other.

- ``notify_flushed`` (called when a session ends) queues the episode for stage 1; queued index
  jobs are drained into one batch (:mod:`weaver.jobs.indexing`).
- ``request_run`` queues a consolidation run (stage 2 over pending episodes, after indexing any
  of them still unindexed) and returns a :class:`Run` that observers follow; the run goes on
  whether or not anyone follows it. The scheduler calls :meth:`Weaver.scheduled_run`. The
  consolidation loop is :mod:`weaver.jobs.runs`.
- ``notify_documents`` (called when a keyed document is put) queues the indexing of the
  documents marked unindexed, a batch per job (:mod:`weaver.jobs.indexing`).
- ``request_optimize`` starts the vector store's index build on a thread of its own
  (:mod:`weaver.jobs.optimizer`).

A run, its progress events and its report are in :mod:`weaver.run`.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from tiers.core.errors import Unavailable
from tiers.journal.store import Journal
from tiers.semantic.store import SemanticStore
from weaver.consolidate import Consolidator
from weaver.extractors import Extractor
from weaver.index import DocumentIndexer, Indexer
from weaver.jobs.backoff import Backoff
from weaver.jobs.indexing import INDEX_BACKOFF, IndexJobs
from weaver.jobs.optimizer import IndexBuilds
from weaver.jobs.runs import RunJobs
from weaver.run import Run, RunReport

log = logging.getLogger("strata.weaver")
T = TypeVar("T")


# ("index", [episode ids]) | ("run", Run) | ("call", (fn, Future))
Job = tuple[str, Any]


class Weaver(IndexJobs, RunJobs, IndexBuilds):
    def __init__(
        self,
        journal: Journal,
        semantic: SemanticStore,
        indexer: Indexer,
        consolidator: Consolidator,
        next_run: Callable[[], float | None] = lambda: None,
        llm_backoff: tuple[float, float] = (30.0, 1800.0),
        documents: DocumentIndexer | None = None,
    ) -> None:
        self._journal = journal
        self._documents = documents
        # After a run the LLM failed (llm.on_failure = "wait"): no scheduled run until the
        # pause is over, then one run; a failed index stage retries the same way.
        self.llm_backoff = Backoff(*llm_backoff, retry=self._retry_run)
        self.index_backoff = Backoff(*INDEX_BACKOFF, retry=self._retry_index)
        self._semantic = semantic
        self._indexer = indexer
        self._consolidator = consolidator
        self.next_run = next_run
        self._jobs: queue.Queue[Job | None] = queue.Queue()  # None stops the worker
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.running: Run | None = None
        self.last_run: RunReport | None = None
        self.last_error = ""
        self._init_builds()
        # Observers (metrics): called on the worker thread; an exception in one is logged.
        self.on_indexed: list[Callable[[int, int, float], None]] = []  # episodes, points, s
        self.on_run: list[Callable[[RunReport], None]] = []

    def _notify(self, listeners: list[Callable[..., None]], *args: Any) -> None:
        for listener in listeners:
            try:
                listener(*args)
            except Exception:
                log.exception("weaver.observer_failed")

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

    # -- control ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._work, name="weaver", daemon=True)
        self._thread.start()
        backlog = [p.episode_id for p in self._journal.unindexed()]
        if backlog:
            self._jobs.put(("index", backlog))
        if self.unindexed_documents():  # put before a stop or a crash
            self.notify_documents()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the episode at hand, then stop (idempotent). Queued work stays marked in
        the state store and is picked up at the next start."""
        self._stopping.set()
        self.llm_backoff.close()
        self.index_backoff.close()
        self._jobs.put(None)
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
        self._jobs.put(("call", (fn, future)))
        return future

    # -- the worker ------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None or self._stopping.is_set():
                return
            kind, arg = job
            try:
                if kind == "index":
                    self._index_batch(list(arg))
                elif kind == "documents":
                    self._index_documents()
                elif kind == "run":
                    self._run(arg)
                elif kind == "call":
                    fn, future = arg
                    if future.set_running_or_notify_cancel():
                        try:
                            future.set_result(fn())
                        except BaseException as exc:
                            future.set_exception(exc)
            except Exception as exc:  # a job must never kill the worker
                self.last_error = f"{kind}: {exc}"
                log.exception("weaver.job_failed", extra={"fields": {"job": kind}})
                if kind in ("index", "documents"):
                    self._index_failed(exc)
