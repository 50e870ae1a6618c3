"""The daemon's worker process, from outside: ``stratad serve`` starts it at a lower priority,
``weaverctl status`` shows it, and one killed in the middle of the index stage is restarted
with nothing acknowledged lost."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import psutil
import pytest

from tests.support import MAY, QUIET_ENV, hold_still, talk, wait_indexed, wait_until, weaverctl

pytestmark = pytest.mark.slow


def status(address: str) -> dict[str, Any]:
    out = weaverctl(address, "status", "--json")
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_a_worker_killed_while_it_indexes_is_restarted_and_nothing_is_lost(spawn) -> None:
    d = spawn(**QUIET_ENV)
    with d.client(timeout=60) as c:
        wait_indexed(c)
        (worker,) = status(d.address)["workers"]
        pid = int(worker["pid"])
        assert psutil.Process(pid).ppid() == d.pid
        assert psutil.Process(pid).nice() == psutil.Process(d.pid).nice() + 10
        hold_still(pid)  # the index stage's request waits on it
        sessions = [f"s{i}" for i in range(12)]
        for i, sid in enumerate(sessions):
            talk(c, "alice", sid, MAY, f"Alice keeps marker word zorblax{i} in her notes.", "Ok.")
        wait_until(lambda: status(d.address)["workers"][0].get("busy"), 30, "for the request")
        os.kill(pid, signal.SIGKILL)
        wait_indexed(c, 120)
        (after,) = status(d.address)["workers"]
        assert after["alive"] and int(after["pid"]) != pid
        assert after["restarts"] == 1 and after["lastExit"] == "signal 9"
        for i, sid in enumerate(sessions):  # every acknowledged session is recallable
            hits = c.recall(f"zorblax{i}", user_id="alice", channels=["keyword"], k=3).hits
            assert any(h.session_id == sid for h in hits), sid
    text = weaverctl(d.address, "status")
    assert (
        "worker 0" in text.stdout
        and "1 restarts" in text.stdout
        and "last exit: signal 9" in (text.stdout)
    )
    assert '"workers.exited"' in d.log() or "workers.exited" in d.log()


def test_without_workers_the_status_says_where_documents_are_embedded(spawn) -> None:
    d = spawn(workers__count="0", **QUIET_ENV)
    with d.client(timeout=60) as c:
        wait_indexed(c)
    got = status(d.address)
    assert got["workers"] == []
    assert got["workersNote"] == "in the daemon's process (workers.count = 0)"
    assert not [
        p for p in psutil.Process(d.pid).children() if "tiers.workers" in " ".join(p.cmdline())
    ]
