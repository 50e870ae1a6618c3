"""A child of the daemon is bound to it (``tiers.core.children``): started in a process group
of its own, it sets a terminal's Ctrl-C and SIGTERM aside, exits once the daemon is gone, and
with ``at_once`` is killed as the daemon dies, even held still. Real processes: a script
stands for the daemon, and its child binds itself as the daemon's children do."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.stopping import hold_still
from tiers.core import children

DEADLINE = 30.0

# The child: binds itself, says so, then answers each line of its input until it ends.
CHILD = """
import sys
from tiers.core import children
children.bind(at_once={at_once})
print("bound", flush=True)
for line in sys.stdin:
    print("alive", flush=True)
"""

# The daemon: starts the child as the daemon starts its children, says its pid, then waits.
DAEMON = """
import subprocess, sys, time
from tiers.core import children
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], **children.spawn_options())
print(child.pid, flush=True)
time.sleep(600)
"""

# What the daemon's supervisor would be: the child's reaper once the daemon is gone, so that
# how each of them ended is known (and the child's group is not orphaned: the kernel would
# wake it, held still, with SIGHUP and SIGCONT).
REAPER = """
import ctypes, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
while True:
    try:
        pid, status = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    print("ended", pid, os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0, flush=True)
"""


def gone(pid: int) -> bool:
    """Whether the process ``pid`` has ended (no more, or a zombie no one reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


class Family:
    """A daemon script and its bound child under a reaper; their output read line by line."""

    def __init__(self, at_once: bool) -> None:
        self.reaper = subprocess.Popen(
            [sys.executable, "-c", REAPER, DAEMON, CHILD.format(at_once=at_once)],
            cwd=ROOT,
            stdin=subprocess.PIPE,  # the child's input, inherited
            stdout=subprocess.PIPE,  # what each of them says
            text=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        said = {self.line() for _ in range(2)}
        assert "bound" in said, said
        (pid,) = said - {"bound"}
        self.child = int(pid)
        self.daemon = self._parent(self.child)

    @staticmethod
    def _parent(pid: int) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])

    def _read(self) -> None:
        assert self.reaper.stdout is not None
        for line in self.reaper.stdout:
            self._lines.put(line.strip())

    def line(self) -> str:
        """The next line any of them said; fails after :data:`DEADLINE` seconds."""
        try:
            return self._lines.get(timeout=DEADLINE)
        except queue.Empty:
            raise AssertionError(f"nothing said in {DEADLINE} s") from None

    def say(self, text: str) -> None:
        assert self.reaper.stdin is not None
        self.reaper.stdin.write(text + "\n")
        self.reaper.stdin.flush()

    def ended(self) -> dict[int, int]:
        """Each process the reaper saw end until the child did: the signal that killed it,
        or 0."""
        seen: dict[int, int] = {}
        while self.child not in seen:
            _, pid, signum = self.line().split()
            seen[int(pid)] = int(signum)
        return seen

    def close(self) -> None:
        for pid in (self.daemon, self.child, self.reaper.pid):
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
        self.reaper.wait(DEADLINE)


@pytest.fixture
def family(request: pytest.FixtureRequest) -> Iterator[Family]:
    made = Family(at_once=request.param)
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("family", [False, True], indirect=True)
def test_a_child_runs_in_a_group_of_its_own_and_sets_ctrl_c_aside(family: Family) -> None:
    # A terminal's Ctrl-C goes to the daemon's whole group: the daemon ends its children.
    assert os.getpgid(family.child) == family.child != os.getpgid(family.daemon)
    os.kill(family.child, signal.SIGINT)
    os.kill(family.child, signal.SIGTERM)
    family.say("are you there")
    assert family.line() == "alive"


@pytest.mark.parametrize("family", [False], indirect=True)
def test_a_child_exits_once_its_daemon_is_gone(family: Family) -> None:
    # Its input stays open: the pipe is held by the reaper too.
    os.kill(family.daemon, signal.SIGKILL)
    assert family.ended() == {family.daemon: signal.SIGKILL, family.child: 0}


@pytest.mark.parametrize("family", [True], indirect=True)
def test_a_child_bound_at_once_is_killed_with_its_daemon_even_held_still(family: Family) -> None:
    # Held still, it cannot check its daemon: the kernel kills it as the daemon dies (an index
    # build must not go on writing after a crash).
    hold_still(family.child)
    os.kill(family.daemon, signal.SIGKILL)
    assert family.ended() == {family.daemon: signal.SIGKILL, family.child: signal.SIGKILL}


def test_a_child_whose_daemon_is_gone_before_it_binds_exits_at_once() -> None:
    # The daemon its environment names is not its parent: it died between the start and the bind.
    env = {**os.environ, children.DAEMON_PID: str(os.getpid() + 1_000_000)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(at_once=True)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert (done.returncode, done.stdout) == (0, "")
