"""The Memory Weaver at work: one worker thread runs every indexing, consolidation and
maintenance job in order, so Tier 3 writes never race each other.

- ``notify_flushed`` (called when a session ends) queues the episode for stage 1; queued index
  jobs are drained into one batch.
- ``request_run`` queues a consolidation run (stage 2 over pending episodes, after indexing any
  of them still unindexed) and returns a :class:`Run` that observers follow; the run goes on
  whether or not anyone follows it. The scheduler calls :meth:`Weaver.scheduled_run`.
- ``request_optimize`` queues the vector store's index build and flush.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tiers.errors import EpisodeNotFound
from tiers.journal import Journal, PendingEpisode
from tiers.records import Scope
from tiers.semantic import SemanticStore
from weaver.consolidate import Consolidator
from weaver.index import Indexer

log = logging.getLogger("strata.weaver")
ANY_SCOPE = Scope("")
# A run that wrote at least this many points builds the vector index right after it.
OPTIMIZE_AFTER_POINTS = 10_000


@dataclass(slots=True)
class RunReport:
    run_id: str
    ok: bool = True
    episodes: int = 0
    chunks: int = 0
    summaries: int = 0
    facts: int = 0
    triplets: int = 0
    superseded: int = 0
    failures: int = 0
    fallbacks: int = 0
    llm_calls: int = 0
    seconds: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0
    error: str = ""


@dataclass(frozen=True, slots=True)
class Progress:
    stage: str  # "queued", "index", "consolidate"
    done: int
    total: int
    episode_id: str = ""


@dataclass(slots=True)
class Run:
    """A requested consolidation run; thread-safe to follow from any thread."""

    run_id: str
    episode_ids: tuple[str, ...] = ()
    scope: Scope = ANY_SCOPE
    events: list[Progress] = field(default_factory=list)
    report: RunReport | None = None
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def publish(self, event: Progress) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def finish(self, report: RunReport) -> None:
        with self._cond:
            self.report = report
            self._cond.notify_all()

    def follow(self, seen: int, timeout: float) -> tuple[list[Progress], RunReport | None]:
        """Events after the first ``seen``, waiting up to ``timeout`` for something new."""
        with self._cond:
            if len(self.events) == seen and self.report is None:
                self._cond.wait(timeout)
            return self.events[seen:], self.report

    def wants(self, pending: PendingEpisode) -> bool:
        if self.episode_ids and pending.episode_id not in self.episode_ids:
            return False
        if self.scope.user_id and pending.user_id != self.scope.user_id:
            return False
        return not (self.scope.agent_id and pending.agent_id != self.scope.agent_id)


Job = tuple[str, Any]  # ("index", [episode ids]) | ("run", Run) | ("optimize", None)


class Weaver:
    def __init__(
        self,
        journal: Journal,
        semantic: SemanticStore,
        indexer: Indexer,
        consolidator: Consolidator,
        next_run: Callable[[], float | None] = lambda: None,
    ) -> None:
        self._journal = journal
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
        self.points_since_optimize = 0

    @property
    def ready(self) -> bool:
        """Whether Tier 3 (model and vector store) is ready."""
        return self._semantic.ready

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

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the episode at hand, then stop (idempotent). Queued work stays marked in
        the state store and is picked up at the next start."""
        self._stopping.set()
        self._jobs.put(None)
        if self._thread is not None:
            self._thread.join(timeout)

    def notify_flushed(self, episode_id: str) -> None:
        self._jobs.put(("index", [episode_id]))

    def request_run(self, episode_ids: tuple[str, ...] = (), scope: Scope = ANY_SCOPE) -> Run:
        run = Run(uuid.uuid4().hex[:12], episode_ids, scope)
        run.publish(Progress("queued", 0, 0))
        self._jobs.put(("run", run))
        return run

    def scheduled_run(self) -> None:
        """The scheduler's job: queue a run unless one is running or queued already."""
        if self.running is None and self._jobs.empty():
            self.request_run()

    def request_optimize(self) -> None:
        self._jobs.put(("optimize", None))

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
                elif kind == "run":
                    self._run(arg)
                elif kind == "optimize":
                    self._optimize()
            except Exception as exc:  # a job must never kill the worker
                self.last_error = f"{kind}: {exc}"
                log.exception("weaver.job_failed", extra={"fields": {"job": kind}})

    def _index_batch(self, episode_ids: list[str]) -> int:
        # Drain the other queued index jobs into this batch: one embedding call for all.
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None and job[0] == "index":
                episode_ids += job[1]
            else:
                self._jobs.put(job)  # not ours: back in line (a stop stays a stop)
                break
        todo = {p.episode_id for p in self._journal.unindexed()}
        batch = [eid for eid in dict.fromkeys(episode_ids) if eid in todo]
        if not batch:
            return 0
        began = time.monotonic()
        result = self._indexer.index(batch)
        self.points_since_optimize += result.chunks
        log.info(
            "weaver.indexed",
            extra={
                "fields": {
                    "episodes": result.episodes,
                    "chunks": result.chunks,
                    "ms": round((time.monotonic() - began) * 1000, 1),
                }
            },
        )
        return result.chunks

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
                report.chunks = self._index_batch(to_index)
                run.publish(Progress("index", len(to_index), len(to_index)))
            total = len(targets)
            for done, pending in enumerate(targets):
                if self._stopping.is_set():
                    report.error = "stopped by shutdown"
                    report.ok = False
                    break
                run.publish(Progress("consolidate", done, total, pending.episode_id))
                try:
                    outcome = self._consolidator.consolidate(pending.episode_id)
                except EpisodeNotFound:
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
            if report.failures:
                report.ok = False
            if self.points_since_optimize >= OPTIMIZE_AFTER_POINTS:
                self._optimize()
        finally:
            report.finished_at = time.time()
            report.seconds = round(time.monotonic() - began, 3)
            if report.error:
                self.last_error = report.error
            self.last_run = report
            self.running = None
            run.finish(report)
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

    def _optimize(self) -> None:
        if not self.points_since_optimize or not self._semantic.ready:
            return
        _embedder, vectors = self._semantic.wait_ready(0)
        began = time.monotonic()
        vectors.optimize()
        vectors.flush()
        log.info(
            "vectors.optimized",
            extra={
                "fields": {
                    "new_points": self.points_since_optimize,
                    "ms": round((time.monotonic() - began) * 1000, 1),
                }
            },
        )
        self.points_since_optimize = 0
