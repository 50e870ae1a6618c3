"""The embedded vector store in a process of its own (``vectors.process``), from outside: a
real ``stratad`` serves and recalls through it, a store process killed while the daemon
serves is started again with nothing acknowledged lost, a daemon killed leaves no store
process holding the shards, so it starts again on the same data, and a clean stop ends it.
What the store's process logs is in the daemon's log, as the daemon's own records are."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from tests.support import MAY, QUIET_ENV, talk, wait_indexed, wait_until

pytestmark = pytest.mark.slow

CHILD = "tiers.semantic.vectors.child.main"


def store_processes(daemon_pid: int) -> list[psutil.Process]:
    return [p for p in psutil.Process(daemon_pid).children() if CHILD in " ".join(p.cmdline())]


def recalled(c, i: int, sid: str) -> bool:
    hits = c.recall(f"zorblax{i}", user_id="alice", channels=["keyword"], k=3).hits
    return any(h.session_id == sid for h in hits)


def test_a_daemon_recalls_through_its_store_process_and_outlives_its_death(spawn) -> None:
    d = spawn(vectors__process="true", **QUIET_ENV)
    with d.client(timeout=60) as c:
        wait_indexed(c)
        (child,) = store_processes(d.pid)
        talk(c, "alice", "s0", MAY, "Alice keeps marker word zorblax0 in her notes.", "Ok.")
        wait_indexed(c, 120)
        assert recalled(c, 0, "s0")
        os.kill(child.pid, signal.SIGKILL)
        for i in range(1, 6):  # the weaver indexes these while the store starts again
            talk(c, "alice", f"s{i}", MAY, f"Alice keeps marker word zorblax{i}.", "Ok.")
        wait_indexed(c, 120)
        wait_until(lambda: recalled(c, 5, "s5"), 120, "for the last session's recall")
        for i in range(6):  # every acknowledged session is recallable
            assert recalled(c, i, f"s{i}"), i
        (again,) = store_processes(d.pid)
        assert again.pid != child.pid
        # The process started again logs into the daemon's log, in its format: the end of its
        # opener, which loads the shards it found behind its first calls.
        opened = "level=info logger=strata.vectors event=vectors.opened "
        wait_until(lambda: opened in d.log(), 60, "for the store process's log record")
    assert "level=error logger=strata.vectors event=vectors.child.exited " in d.log()
    # The daemon killed: its store process dies with it, and a new daemon opens the shards.
    child = store_processes(d.pid)[0]
    d.kill()
    child.wait(30)
    e = spawn(vectors__process="true", **QUIET_ENV)
    with e.client(timeout=60) as c:
        wait_indexed(c, 120)
        for i in range(6):
            assert recalled(c, i, f"s{i}"), i
        (child,) = store_processes(e.pid)
    assert e.terminate() == 0  # a clean stop ends the store's process too
    assert not child.is_running()
