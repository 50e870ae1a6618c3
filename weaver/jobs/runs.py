"""The weaver's consolidation runs (mixed into :class:`weaver.jobs.runner.Weaver`, run on its
worker).

- ``("run", Run)``: stage 2 over the pending episodes the run wants, after indexing any of them
  still unindexed. Episodes are consolidated one at a time, so a stop ends a run between two
  of them. When the LLM is down (``llm.on_failure = "wait"``), only episodes close to expiry
  go on; the rest stay pending and the next run waits for the LLM backoff. A run that wrote
  :data:`OPTIMIZE_AFTER_POINTS` points or more starts the vector index build.

A run, its progress events and its report are in :mod:`weaver.run`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from tiers.core.errors import EpisodeNotFound
from tiers.core.records import Scope
from tiers.journal.store import Journal
from tiers.semantic.store import SemanticStore
from weaver.consolidate import Consolidator
from weaver.errors import ExtractionDeferred
from weaver.jobs.backoff import Backoff
from weaver.run import ANY_SCOPE, Progress, Run, RunReport

log = logging.getLogger("strata.weaver")
# A run that wrote at least this many points builds the vector index right after it.
OPTIMIZE_AFTER_POINTS = 10_000


class RunJobs:
    """Queueing and running consolidation runs; the state is the Weaver's."""

    _jobs: queue.Queue[tuple[str, Any] | None]
    _journal: Journal
    _semantic: SemanticStore
    _consolidator: Consolidator
    _stopping: threading.Event
    llm_backoff: Backoff
    running: Run | None
    last_run: RunReport | None
    last_error: str
    on_run: list[Callable[[RunReport], None]]
    points_since_optimize: int

    _notify: Callable[..., None]  # (listeners, *args): calls each, logs a failing one
    _queued: Callable[[str], bool]  # weaver.jobs.indexing
    _index_all: Callable[[list[str]], int]
    _index_failed: Callable[[Exception], str]
    request_optimize: Callable[[], None]  # weaver.jobs.optimizer

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
