"""Shutdown while the weaver indexes a backlog (found by ``make bench-load``).

Under load, index jobs were drained into one unbounded embedding batch (150 episodes at the end
of a 30 s load run); SIGTERM waited ``shutdown_grace_seconds`` for the weaver and then let the
process exit while the weaver thread was inside torch: ``terminate called without an active
exception``, SIGABRT, exit -6 instead of 0. Now an index job holds at most
``MAX_INDEX_BATCH`` episodes and shutdown waits for the job at hand.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import pytest

from stratad_client import message
from tests.support import QUIET, ProcessDaemon, ThreadDaemon, wait_until
from weaver.jobs.indexing import MAX_INDEX_BATCH

TURNS = [
    "I moved to Lisbon last spring and I still love the light in the evenings.",
    "Nice! Did you find a flat close to the river, or somewhere up in the hills?",
    "Up in Graça, the trams are loud but the view over the roofs is worth it.",
    "My sister visits in June; we plan a trip to Sintra and a day at the beach.",
]


@pytest.mark.slow
def test_sigterm_during_an_index_backlog_waits_for_the_job_and_exits_0(
    spawn: Callable[..., ProcessDaemon],
) -> None:
    proc = spawn(log_level="info", shutdown_grace_seconds="0")
    sessions = 3 * MAX_INDEX_BATCH
    with proc.client(timeout=60) as c:
        deadline = time.monotonic() + 120
        wait_until(lambda: c.admin.weaver_status().embedding_ready, 120, "for the model")
        for i in range(sessions):
            c.append_batch(f"s{i}", [message(t, name="Ana") for t in TURNS * 3], user_id="u1")
        for i in range(sessions):
            c.end_session(f"s{i}")
        wait_until(
            lambda: "event=weaver.indexed" in proc.log_path.read_text(),
            deadline - time.monotonic(),  # the model's wait and this one: 120 s in all
            "for an index job",
            interval=0.02,
        )
    assert proc.terminate(120) == 0  # was -6 (SIGABRT) when a job outlived the grace
    log = proc.log_path.read_text()
    assert "terminate called" not in log
    batches = [int(n) for n in re.findall(r"event=weaver\.indexed episodes=(\d+)", log)]
    assert batches and max(batches) <= MAX_INDEX_BATCH
    assert "event=server.stopped" in log


def test_index_jobs_in_line_do_not_hold_back_the_scheduled_run(
    start_daemon: Callable[..., ThreadDaemon],
) -> None:
    """Under sustained load index jobs are always in line: the scheduled run was skipped
    ("queued already" meant "the line is not empty"), and a run drained along with index jobs
    went back to the end of the line. Both starved consolidation for the whole load run."""
    daemon = start_daemon(weaver=QUIET)
    weaver = daemon.daemon.parts.weaver
    assert weaver is not None
    release = threading.Event()
    blocked = weaver.submit(lambda: release.wait(30))  # the worker is busy: the line waits
    try:
        # the worker took the blocking job
        wait_until(weaver._jobs.empty, 60, "for the worker", interval=0.01)
        weaver.notify_flushed("a" * 32)
        weaver.scheduled_run()
        weaver.scheduled_run()  # one queued run is enough
        weaver.notify_flushed("b" * 32)
        assert weaver._jobs.kinds() == ["index", "run", "index"]
        # The drain takes the index jobs at the head of the line only; the run keeps its place.
        weaver._jobs.get(block=False)
        weaver._index.index_batch(["a" * 32])
        assert weaver._jobs.kinds() == ["run", "index"]
    finally:
        release.set()
    assert blocked.result(30) is True
    wait_until(lambda: weaver.last_run is not None, 60, "for the scheduled run")
