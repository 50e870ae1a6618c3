"""The daemon's scheduled jobs: ending idle sessions, compacting the journal and removing the
changes older than the change log's retention, and with the
weaver enabled, consolidation runs (``weaver.interval_seconds`` or ``weaver.cron``) and the
vector store's index builds. A job never overlaps itself (``max_instances`` 1) and missed
runs coalesce into one. On ``weaver.interval_seconds``, a start that finds the weaver's work
left (a restart) runs it once ``weaver.first_run_delay_seconds`` later: the interval counts
from the start, so a daemon restarted more often than it would otherwise never consolidate.
A crontab's runs come at its own times whatever the restarts (an operator's hours of the
night, say), so with ``weaver.cron`` there is no such run.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from daemon.settings import Settings
from tiers.changes.log import ChangeLog
from tiers.journal.store import Journal
from tiers.working.memory import WorkingMemory
from weaver.jobs.runner import Weaver

log = logging.getLogger("strata.daemon")


def new_scheduler() -> AsyncIOScheduler:
    """A scheduler with no job yet (:func:`schedule_jobs`); it takes the running event loop
    when it starts."""
    return AsyncIOScheduler(
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60}
    )


def schedule_jobs(
    scheduler: AsyncIOScheduler,
    settings: Settings,
    working: WorkingMemory,
    journal: Journal,
    changes: ChangeLog,
    weaver: Weaver | None,
) -> None:
    """Add every job to ``scheduler``."""
    s = settings
    for job, part, seconds in (
        (end_idle_sessions, working, s.working_memory.sweep_interval_seconds),
        (compact_journal, journal, s.journal.compaction_interval_seconds),
        (trim_changes, changes, s.changes.trim_interval_seconds),
    ):  # each job's id is its function's name
        scheduler.add_job(job, "interval", args=(part,), seconds=seconds, id=job.__name__)
    if weaver is not None:
        if s.weaver.cron:
            trigger = CronTrigger.from_crontab(s.weaver.cron)
        else:
            trigger = IntervalTrigger(seconds=s.weaver.interval_seconds)
        scheduler.add_job(weaver.scheduled_run, trigger, id="consolidate")
        if not s.weaver.cron:  # a crontab's runs come at its times, whatever the restarts
            _run_after_start(scheduler, weaver, s.weaver.first_run_delay_seconds)
        scheduler.add_job(
            weaver.request_optimize,
            "interval",
            seconds=s.vectors.optimize_interval_seconds,
            id="optimize_vectors",
        )


def _run_after_start(scheduler: AsyncIOScheduler, weaver: Weaver, delay: float) -> None:
    """A consolidation run ``delay`` seconds after the start (0: none) when the weaver's last
    run left work (``weaver.run_after_start``); it joins a run already under way or queued."""
    pending, stale = weaver.work_left()
    if delay <= 0 or not (pending or stale):
        return
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)
    scheduler.add_job(weaver.scheduled_run, "date", run_date=when, id="consolidate_after_start")
    fields = {"pending": pending, "stale_scopes": stale, "seconds": delay}
    log.info("weaver.run_after_start", extra={"fields": fields})


def next_consolidation(scheduler: AsyncIOScheduler) -> float | None:
    """When the next scheduled consolidation run starts (Unix time); None if none is (or the
    scheduler has not started)."""
    job = scheduler.get_job("consolidate")
    when = getattr(job, "next_run_time", None)  # a job not scheduled yet has none
    return None if when is None else float(when.timestamp())


async def end_idle_sessions(working: WorkingMemory) -> None:
    for result in await asyncio.to_thread(working.end_idle):
        log.info(
            "session.ended",
            extra={
                "fields": {
                    "session_id": result.session_id,
                    "episode_id": result.episode_id,
                    "messages": result.message_count,
                    "reason": result.reason,
                }
            },
        )


async def trim_changes(changes: ChangeLog) -> None:
    removed = await asyncio.to_thread(changes.trim)
    if removed:
        log.info("changes.trimmed", extra={"fields": {"changes": removed}})


async def compact_journal(journal: Journal) -> None:
    began = time.monotonic()
    expired = await asyncio.to_thread(journal.announce_expired)  # before compaction drops them
    if expired:
        log.info("journal.expired", extra={"fields": {"episodes": expired}})
    await asyncio.to_thread(journal.compact)
    log.info(
        "journal.compacted",
        extra={"fields": {"ms": round((time.monotonic() - began) * 1000, 1)}},
    )
