"""The weaver's consolidation runs (:class:`RunJobs`, owned by
:class:`weaver.jobs.runner.Weaver`, run on its worker).

- :class:`~weaver.jobs.kinds.Consolidate`: stage 2 over the pending episodes the run wants,
  after indexing any of them still unindexed. Episodes are consolidated one at a time, so a
  stop ends a run between two of them, and the index jobs in line run between two of them
  (:meth:`weaver.jobs.indexing.IndexJobs.overtake`). When the LLM is down
  (``llm.on_failure = "wait"``), only episodes close to expiry go on; the rest stay pending
  and the next run waits for the LLM backoff. A run that wrote
  :data:`OPTIMIZE_AFTER_POINTS` points or more starts the vector index build. Each run
  publishes :class:`~weaver.jobs.events.RunFinished`.

A run, its progress events and its report are in :mod:`weaver.run`.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field

from tiers.core.errors import EpisodeNotFound, Stopped
from tiers.core.events import Events
from tiers.core.records import Scope
from tiers.journal.store import Journal
from tiers.semantic.store import SemanticStore
from weaver.consolidate import Consolidator
from weaver.errors import ExtractionDeferred
from weaver.jobs.backoff import Backoff
from weaver.jobs.events import RunFinished
from weaver.jobs.indexing import IndexJobs
from weaver.jobs.jobqueue import JobQueue
from weaver.jobs.kinds import Consolidate
from weaver.jobs.optimizer import IndexBuilds
from weaver.run import ANY_SCOPE, Progress, Run, RunReport, rewrites_failed, scopes_count

log = logging.getLogger("strata.weaver")
# A run that wrote at least this many points builds the vector index right after it.
OPTIMIZE_AFTER_POINTS = 10_000


@dataclass(eq=False, slots=True)
class RunJobs:
    """Queueing and running consolidation runs: the run at hand (:attr:`running`), the last
    one's report (:attr:`last_run`) and the LLM's backoff (:attr:`backoff`). ``failed`` hears
    a run's error (the weaver's ``last_error``)."""

    jobs: JobQueue
    journal: Journal
    semantic: SemanticStore
    consolidator: Consolidator
    index: IndexJobs
    builds: IndexBuilds
    events: Events
    stopping: threading.Event
    failed: Callable[[str], None]
    llm_backoff: InitVar[tuple[float, float]]
    # After a run the LLM failed (llm.on_failure = "wait"): no scheduled run until the
    # pause is over, then one run.
    backoff: Backoff = field(init=False)
    running: Run | None = field(init=False, default=None)
    last_run: RunReport | None = field(init=False, default=None)

    def __post_init__(self, llm_backoff: tuple[float, float]) -> None:
        self.backoff = Backoff(*llm_backoff, retry=self.retry)

    def _left_stale(self, report: RunReport) -> None:
        """Say in the run's report the scopes whose profiles or digests failed to be
        rewritten (each logged: :func:`weaver.run.logged`), and log the scopes a stop left;
        both stay marked in the state store (:mod:`tiers.journal.stale`) for the next run
        (a stop ends the refresh between two scopes: a stop waited 17-89 s for it under a
        fleet at 10M)."""
        count, said = rewrites_failed(
            self.consolidator.profiles_failed, self.consolidator.digests.failed
        )
        if count:
            report.ok = False
            report.failures += count
            report.error = report.error or f"{said}; left to the next run"
        if not self.stopping.is_set():
            return
        marks = self.consolidator.marks
        profiles, digests, abstracts = (
            len(marks.marked(part)) for part in ("profiles", "digests", "abstracts")
        )
        if profiles or digests or abstracts:
            fields = {
                "profiles_scopes": profiles,
                "digests_scopes": digests,
                "abstracts_scopes": abstracts,
            }
            log.warning("weaver.refresh_left", extra={"fields": fields})
            report.ok = False
            left = f"the profiles of {scopes_count(profiles)} and the digests of {digests}"
            if abstracts:
                left += f", and the writer's rewrite of the digests of {abstracts},"
            report.error = report.error or f"stopped by shutdown: {left} left to the next run"

    def request_run(self, episode_ids: tuple[str, ...] = (), scope: Scope = ANY_SCOPE) -> Run:
        run = Run(uuid.uuid4().hex[:12], episode_ids, scope)
        run.publish(Progress("queued", 0, 0))
        self.jobs.put(Consolidate(run))
        return run

    def scheduled_run(self) -> None:
        """The scheduler's job: queue a run unless one is running or queued already. Under
        sustained load the line always holds index jobs: they must not hold back the
        scheduled run (found by ``make bench-load``)."""
        if self.backoff.waiting:
            log.info(
                "weaver.run_skipped",
                extra={"fields": {"reason": "llm backoff", "until": self.backoff.until}},
            )
            return
        if self.running is None and not self.jobs.queued(Consolidate):
            self.request_run()

    def retry(self) -> None:
        if not self.stopping.is_set():
            self.request_run()

    def run(self, run: Run) -> None:
        report = RunReport(run.run_id, started_at=time.time())
        self.running = run
        began = time.monotonic()
        try:
            targets = [p for p in self.journal.pending() if run.wants(p)]
            near = self.journal.near_expiry(targets)
            if near:
                log.warning(
                    "weaver.pending_near_expiry",
                    extra={"fields": {"episodes": len(near), "first": near[0].episode_id}},
                )
            unindexed = {p.episode_id for p in self.journal.unindexed()}
            to_index = [p.episode_id for p in targets if p.episode_id in unindexed]
            if to_index:
                run.publish(Progress("index", 0, len(to_index)))
                try:
                    report.chunks = self.index.index_all(to_index)
                except Stopped:
                    report.ok = False
                    report.error = "stopped by shutdown"
                    return
                except Exception as exc:
                    # Tier 3 refused the chunks: everything stays unindexed and pending.
                    report.ok = False
                    report.failures += 1
                    report.error = f"index: {exc}; {self.index.failed(exc)}"
                    return
                run.publish(Progress("index", len(to_index), len(to_index)))
            near_ids = {p.episode_id for p in near}
            llm_down = ""  # why the LLM failed this run (llm.on_failure = "wait")
            deferred = 0
            total = len(targets)
            for done, pending in enumerate(targets):
                self.index.overtake(self.failed)
                if self.stopping.is_set():
                    report.error = "stopped by shutdown"
                    report.ok = False
                    break
                run.publish(Progress("consolidate", done, total, pending.episode_id))
                near_expiry = pending.episode_id in near_ids
                if llm_down and not near_expiry:
                    deferred += 1  # the LLM is down: only episodes close to expiry go on
                    continue
                try:
                    outcome = self.consolidator.consolidate(pending.episode_id, near_expiry)
                except ExtractionDeferred as exc:
                    llm_down = str(exc)
                    deferred += 1
                    report.failures += 1
                    continue
                except EpisodeNotFound:
                    if self.semantic.tombstones.episode(pending.episode_id):
                        continue  # forgotten while the run went on: nothing to do
                    # Its turns are gone for good (their chunks, indexed at the end of the
                    # session, stay in Tier 3): say so loudly, once, and stop retrying.
                    report.failures += 1
                    report.error = f"{pending.episode_id}: expired before consolidation"
                    log.error(
                        "weaver.episode_expired",
                        extra={"fields": {"episode_id": pending.episode_id}},
                    )
                    self.journal.mark_consolidated(pending.episode_id, expired=True)
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
                self.builds.wrote(outcome.summaries + outcome.facts)
            else:
                run.publish(Progress("consolidate", total, total))
            self.index.overtake(self.failed)
            report.profiles = self.consolidator.refresh_profiles(self.stopping)
            report.digests = self.consolidator.digests.refresh(stopping=self.stopping)
            self.builds.wrote(report.profiles + report.digests)
            self._left_stale(report)
            if llm_down:
                delay = self.backoff.failed()
                report.error = (
                    f"the LLM failed ({llm_down}); {deferred} episodes stay pending; "
                    f"next try in {delay:g} s (backoff {self.backoff.failures})"
                )
                log.warning(
                    "weaver.llm_backoff",
                    extra={
                        "fields": {
                            "pending": deferred,
                            "seconds": delay,
                            "failures": self.backoff.failures,
                            "error": llm_down,
                        }
                    },
                )
            elif report.episodes:
                self.backoff.succeeded()
            if report.failures:
                report.ok = False
            if self.builds.points_since_optimize >= OPTIMIZE_AFTER_POINTS:
                self.builds.request()
        except Exception as exc:  # e.g. a store failed: the run failed, whatever it did
            report.ok = False
            report.failures += 1
            report.error = f"run: {exc}"
            raise
        finally:
            report.finished_at = time.time()
            report.seconds = round(time.monotonic() - began, 3)
            if report.error:
                self.failed(report.error)
            self.last_run = report
            self.running = None
            # The observers first (the metrics count the run): a caller handed the report
            # (RunNow) then finds the run counted. The caller has it whatever they do.
            try:
                self.events.publish(RunFinished(report))
            finally:
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
