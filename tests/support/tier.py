"""The two tiers of tests. ``make test`` runs every test. ``make test-fast`` (``pytest --fast``)
runs the unit and contract tests: it leaves out the tests marked ``slow`` or ``daemon`` and
those that use a daemon fixture (:data:`DAEMON_FIXTURES`), and in it a test that starts a
daemon anyway, in this process or as a subprocess, fails and says to mark it ``daemon``."""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Sequence
from typing import Any

DAEMON_FIXTURES = frozenset({"start_daemon", "daemon", "client", "spawn"})
# What a command line that runs a daemon names (stratad, or the MCP server that talks to one).
_DAEMON_COMMANDS = ("stratad", "stratad-mcp", "stratad_client.integrations.mcp.server")

_fast = False


def refuse_daemon(what: str) -> None:
    """Raise in the fast tier: ``what`` would start a daemon."""
    if _fast:
        raise RuntimeError(
            f"the fast tier (make test-fast) starts no daemon, and this test starts {what}: "
            "use a daemon fixture or mark it pytest.mark.daemon"
        )


def _runs_a_daemon(args: Any) -> bool:
    if isinstance(args, Sequence) and not isinstance(args, str | bytes):
        words = [str(a) for a in args]
    else:
        words = str(args).split()
    if any(w.endswith(_DAEMON_COMMANDS) for w in words):
        return True
    pairs = itertools.pairwise(words)
    return any(a == "-m" and b in ("daemon", "daemon.cli.stratad") for a, b in pairs)


class _GuardedPopen(subprocess.Popen):  # type: ignore[type-arg]
    def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
        if _runs_a_daemon(args):
            refuse_daemon(f"a daemon subprocess ({args!r})")
        super().__init__(args, *rest, **kwargs)


def enter_fast() -> None:
    """Switch this test process to the fast tier (from ``pytest_configure``)."""
    global _fast
    _fast = True
    subprocess.Popen = _GuardedPopen  # type: ignore[misc]


def is_fast() -> bool:
    return _fast
