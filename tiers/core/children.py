"""The daemon's child processes (its embedding workers, its vector store's process, an index
build or a purge of the embedded store) and what binds them to it.

The daemon starts each with :func:`spawn_options`: in a process group of its own, so that a
terminal's Ctrl-C, sent to the daemon's whole group, reaches the daemon alone (a child whose
interpreter had not yet set SIGINT aside died of it), which ends its children in its staged
stop; and with the daemon's pid in its environment (:data:`DAEMON_PID`). The child calls
:func:`bind` as it starts: it sets SIGINT and SIGTERM aside and never outlives the daemon.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from typing import Any

DAEMON_PID = "STRATA_DAEMON_PID"
"""The environment variable that names a child's daemon (:func:`spawn_options`): a daemon gone
before the child could watch it (between the fork and the child's first step) is found so."""

PARENT_CHECK_SECONDS = 1.0
"""How often a child checks that its daemon is there (:func:`bind`)."""

_PR_SET_PDEATHSIG = 1


def spawn_options() -> dict[str, Any]:
    """``subprocess.Popen``'s keywords for a child of the daemon: its own process group, the
    daemon's pid in its environment."""
    return {"process_group": 0, "env": {**os.environ, DAEMON_PID: str(os.getpid())}}


def bind(*, at_once: bool = False) -> None:
    """For a child of the daemon, as it starts: set SIGINT and SIGTERM aside (the daemon ends
    it), and exit (code 0) once the daemon is gone, checked every :data:`PARENT_CHECK_SECONDS`
    on a thread of its own (a pipe to the daemon may stay open in a grandchild, so its end is
    no sign). ``at_once``: besides, be killed (SIGKILL) as soon as the daemon's thread that
    started it ends (Linux's ``PR_SET_PDEATHSIG``; elsewhere the check alone), for a child
    that must not go on a moment after a crash: one whose writes the next daemon's could
    meet. A daemon already gone when the child calls this ends it at once."""
    expected = os.environ.get(DAEMON_PID)
    parent = int(expected) if expected and expected.isdigit() else os.getppid()
    if at_once:
        with contextlib.suppress(OSError, AttributeError):  # not Linux: the check alone
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    if os.getppid() != parent:  # gone before the binding held
        os._exit(0)

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_SECONDS)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
