"""The Memory Weaver at work: one worker thread runs every indexing, consolidation and
maintenance job in order, so Tier 3 writes never race each other.

- ``notify_flushed`` (called when a session ends) queues the episode for stage 1; queued index
  jobs are drained into one batch (:mod:`weaver.index_jobs`).
- ``request_run`` queues a consolidation run (stage 2 over pending episodes, after indexing any
  of them still unindexed) and returns a :class:`Run` that observers follow; the run goes on
  whether or not anyone follows it. The scheduler calls :meth:`Weaver.scheduled_run`.
- ``notify_documents`` (called when a keyed document is put) queues the indexing of the
  documents marked unindexed, a batch per job (:mod:`weaver.index_jobs`).
- ``request_optimize`` starts the vector store's index build on a thread of its own
  (:mod:`weaver.optimizer`).

A run, its progress events and its report are in :mod:`weaver.run`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from tiers.errors import EpisodeNotFound, Unavailable
from tiers.journal import Journal
from tiers.records import Scope
from tiers.semantic import SemanticStore
from weaver.backoff import Backoff
from weaver.consolidate import Consolidator
from weaver.errors import ExtractionDeferred
from weaver.extractors import Extractor
from weaver.index import DocumentIndexer, Indexer
from weaver.index_jobs import INDEX_BACKOFF, IndexJobs
from weaver.optimizer import IndexBuilds
from weaver.run import ANY_SCOPE, Progress, Run, RunReport

log = logging.getLogger("strata.weaver")
T = TypeVar("T")
# A run that wrote at least this many points builds the vector index right after it.
OPTIMIZE_AFTER_POINTS = 10_000


# ("index", [episode ids]) | ("run", Run) | ("call", (fn, Future))
Job = tuple[str, Any]


class Weaver(IndexJobs, IndexBuilds):
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
                # second signal still exits at once (daemon.cli).
                log.warning("weaver.stop_waiting", extra={"fields": {"waited_s": timeout}})
                self._thread.join()

    def request_run(self, episode_ids: tuple[str, ...] = (), scope: Scope = ANY_SCOPE) -> Run:
        run = Run(uuid.uuid4().hex[:12], episode_ids, scope)
        run.publish(Progress("queued", 0, 0))
        self._jobs.put(("run", run))
        return run

    def scheduled_run(self) -> None:
        """The scheduler's job: queue a run unless one is running or queued already."""
        if self.llm_backoff.waiting:
            log.info(
                "weaver.run_skipped",
                extra={"fields": {"reason": "llm backoff", "until": self.llm_backoff.until}},
            )
            return
        if self.running is None and not self._queued("run"):
            self.request_run()

    def _retry_run(self) -> None:
        if not self._stopping.is_set():
            self.request_run()

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

    def _run(self, run: Run) -> None:
        report = RunReport(run.run_id, started_at=time.time())
        self.running = run
        began = time.monotonic()
        try:
            targets = [p for p in self._journal.pending() if run.wants(p)]
            near = self._journal.near_expiry(targets)
            if near:
                log.warning(
                    "weaver.pending_near_expiry",
                    extra={"fields": {"episodes": len(near), "first": near[0].episode_id}},
                )
            unindexed = {p.episode_id for p in self._journal.unindexed()}
            to_index = [p.episode_id for p in targets if p.episode_id in unindexed]
            if to_index:
                run.publish(Progress("index", 0, len(to_index)))
                try:
                    report.chunks = self._index_all(to_index)
                except Exception as exc:
                    # Tier 3 refused the chunks: everything stays unindexed and pending.
                    report.ok = False
                    report.failures += 1
                    report.error = f"index: {exc}; {self._index_failed(exc)}"
                    return
                run.publish(Progress("index", len(to_index), len(to_index)))
            near_ids = {p.episode_id for p in near}
            llm_down = ""  # why the LLM failed this run (llm.on_failure = "wait")
            deferred = 0
            total = len(targets)
            for done, pending in enumerate(targets):
                if self._stopping.is_set():
                    report.error = "stopped by shutdown"
                    report.ok = False
                    break
                run.publish(Progress("consolidate", done, total, pending.episode_id))
                near_expiry = pending.episode_id in near_ids
                if llm_down and not near_expiry:
                    deferred += 1  # the LLM is down: only episodes close to expiry go on
                    continue
                try:
                    outcome = self._consolidator.consolidate(pending.episode_id, near_expiry)
                except ExtractionDeferred as exc:
                    llm_down = str(exc)
                    deferred += 1
                    report.failures += 1
                    continue
                except EpisodeNotFound:
                    if self._semantic.tombstones.episode(pending.episode_id):
                        continue  # forgotten while the run went on: nothing to do
                    # Its turns are gone for good (their chunks, indexed at the end of the
                    # session, stay in Tier 3): say so loudly, once, and stop retrying.
                    report.failures += 1
                    report.error = f"{pending.episode_id}: expired before consolidation"
                    log.error(
                        "weaver.episode_expired",
                        extra={"fields": {"episode_id": pending.episode_id}},
                    )
                    self._journal.mark_consolidated(pending.episode_id)
                    continue
                except Exception as exc:
                    report.failures += 1
                    report.error = f"{pending.episode_id}: {exc}"
                    log.warning(
                        "weaver.episode_failed",
                        extra={"fields": {"episode_id": pending.episode_id, "error": str(exc)}},
                    )
                    continue
                if outcome.forgotten:
                    continue
                report.episodes += 1
                report.summaries += outcome.summaries
                report.facts += outcome.facts
                report.triplets += outcome.triplets
                report.superseded += outcome.superseded
                report.fallbacks += int(outcome.fallback)
                report.llm_calls += outcome.llm_calls
                self.points_since_optimize += outcome.summaries + outcome.facts
            else:
                run.publish(Progress("consolidate", total, total))
            report.profiles = self._consolidator.refresh_profiles()
            self.points_since_optimize += report.profiles
            if llm_down:
                delay = self.llm_backoff.failed()
                report.error = (
                    f"the LLM failed ({llm_down}); {deferred} episodes stay pending; "
                    f"next try in {delay:g} s (backoff {self.llm_backoff.failures})"
                )
                log.warning(
                    "weaver.llm_backoff",
                    extra={
                        "fields": {
                            "pending": deferred,
                            "seconds": delay,
                            "failures": self.llm_backoff.failures,
                            "error": llm_down,
                        }
                    },
                )
            elif report.episodes:
                self.llm_backoff.succeeded()
            if report.failures:
                report.ok = False
            if self.points_since_optimize >= OPTIMIZE_AFTER_POINTS:
                self.request_optimize()
        except Exception as exc:  # e.g. a store failed: the run failed, whatever it did
            report.ok = False
            report.failures += 1
            report.error = f"run: {exc}"
            raise
        finally:
            report.finished_at = time.time()
            report.seconds = round(time.monotonic() - began, 3)
            if report.error:
                self.last_error = report.error
            self.last_run = report
            self.running = None
            run.finish(report)
            self._notify(self.on_run, report)
            log.info(
                "weaver.run",
                extra={
                    "fields": {
                        "run_id": report.run_id,
                        "ok": report.ok,
                        "episodes": report.episodes,
                        "facts": report.facts,
                        "failures": report.failures,
                        "seconds": report.seconds,
                    }
                },
            )
