"""CPU priority of the daemon's own threads: serving first, computation after it.

The daemon's event loop serves every RPC (an Append is one RocksDB write on it); the
computation behind a Recall and the weaver's work run on threads of their own. When the
cores are busy, the kernel should run the event loop first, so each of those threads lowers
its own priority as it starts (Linux keeps a nice value per thread, and a thread a library
starts from it inherits it: the query model's and the vector engine's threads). Child
processes set theirs below the daemon's main thread, not below the thread that started them
(:func:`below_parent`): the workers at ``workers.nice``, index builds at 10. The vector
store's own process (``vectors.process``) answers each call at its caller's priority and
within its caller's rests (:func:`lowered`, :func:`rest_share`). On an idle machine a nice
value changes nothing.

Measured under ``make bench-load`` (docs/benchmarks.md, "Serving first"): with these
priorities, the shorter switch interval below and ``recall.threads`` at 3, the appends' p99
beside a flood of queries fell from 72 to 16 ms, and the queries answered per second by 18 %.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

log = logging.getLogger("strata.priority")

RECALL_NICE = 5
"""Recall's computation (its request and channel threads, the query model's threads and
the vector engine's): below the event loop, above the weaver."""

BACKGROUND_NICE = 10
"""The weaver's thread, vector index builds and purges."""

MAX_NICE = 19

SWITCH_INTERVAL_SECONDS = 0.001
"""How long a thread keeps the interpreter while another waits for it (Python's default is
5 ms): the event loop, woken by a request, waits for a Recall thread to hand the
interpreter over. Only with the priorities above was a shorter one measured to help."""


_pace = threading.local()


class Requests:
    """The requests this process is serving now (a Recall's computation on its threads), so
    that background jobs step aside for them: the vector engine holds the interpreter through
    each of its calls (a shard's load, a page of reads), and the interpreter is shared by
    every thread, whatever its nice value, so a background step that starts while a request
    runs stalls it for the step's time. A job calls :meth:`step_aside` before each step; a
    request wraps its work in :meth:`serving`. A step also waits ``linger`` seconds after the
    last request ended: its reply is still being written on the event loop, and a client asking
    again at once would find the step begun in between (at 1M points, small users asked one after
    another by one client while graph builds ran behind: 30-45 ms at p50 without it, 13-21 ms with
    20 ms, ``docs/benchmarks.md``). The wait is bounded, so a process that never stops serving
    still runs its background work, a step per ``most`` seconds at the least."""

    def __init__(self, linger: float = 0.0) -> None:
        self.linger = linger
        self._cond = threading.Condition()
        self._serving = 0
        self._ended = -math.inf  # when the last request served ended (``time.monotonic``)
        self._local = threading.local()

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Around one request's work on the calling thread (nested: counted once)."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        if not depth:
            with self._cond:
                self._serving += 1
        try:
            yield
        finally:
            self._local.depth = depth
            if not depth:
                with self._cond:
                    self._serving -= 1
                    if not self._serving:
                        self._ended = time.monotonic()
                        self._cond.notify_all()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Around a request's wait for background work (its scope's graph build): it does
        not count meanwhile, so the work it waits for does not step aside for it."""
        if not getattr(self._local, "depth", 0):
            yield
            return
        with self._cond:
            self._serving -= 1
            if not self._serving:
                self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1

    def step_aside(self, most: float, stopped: Callable[[], bool] | None = None) -> float:
        """Wait until no request is being served and none ended within :attr:`linger`
        seconds (its reply is still being written, on the event loop), ``most`` seconds at
        the most, or until ``stopped()`` says the job stops (asked every
        :data:`STOP_POLL_SECONDS`); at once on a thread that serves one itself (a request's
        own work never waits for itself). Returns the seconds waited."""
        if getattr(self._local, "depth", 0):
            return 0.0
        began = time.monotonic()
        deadline = began + most
        with self._cond:
            while not (stopped is not None and stopped()):
                now = time.monotonic()
                quiet = self._ended + self.linger  # the last reply written, or so
                until = deadline if self._serving else min(deadline, quiet)
                if until <= now:
                    break
                self._cond.wait(
                    until - now if stopped is None else min(until - now, STOP_POLL_SECONDS)
                )
        return time.monotonic() - began

    @property
    def serving_now(self) -> int:
        """The requests being served (for tests and figures)."""
        return self._serving


LINGER_SECONDS = 0.02
"""How long after the last request served ended a background step still waits: the request's
reply is written on the event loop after its work, and a step begun then (a shard's load, a
page of a graph build) holds the interpreter that the reply, and the client's next question,
need."""

REQUESTS = Requests(LINGER_SECONDS)
"""This process's requests (:class:`Requests`): Recall serves within it, and the vector
store's opener and preloads and the graph builds behind step aside for it."""
STEP_ASIDE_SECONDS = 0.5
"""How long a background step waits for the requests being served, at the most."""
STOP_POLL_SECONDS = 0.05
"""How often a step waiting for the requests asks whether its job stops."""

_work = threading.local()


@contextlib.contextmanager
def background() -> Iterator[None]:
    """Around the daemon's own work on the calling thread (the weaver's jobs, a graph build, a
    preload): what it reads is no request's, so the point cache's counts leave it out."""
    before = in_background()
    _work.background = True
    try:
        yield
    finally:
        _work.background = before


def in_background() -> bool:
    """Whether the calling thread is within :func:`background`."""
    return bool(getattr(_work, "background", False))


@contextlib.contextmanager
def resting(share: float) -> Iterator[None]:
    """Within it, a long engine job of the calling thread (a large delete: the engine holds the
    interpreter through each of its calls) rests ``share`` times as long as each of its steps
    took before the next one (:func:`rest_after`), and holds no lock while it rests: other
    threads get the interpreter, and the writers of the same shard their turn, for at least
    ``share / (1 + share)`` of the job's time. Lowering a thread's priority cannot do that: the
    kernel runs it whenever it holds the interpreter, whatever its nice value."""
    before = rest_share()
    _pace.share = share
    try:
        yield
    finally:
        _pace.share = before


def rests() -> bool:
    """Whether the calling thread is within :func:`resting`."""
    return rest_share() > 0


def rest_share() -> float:
    """The share the calling thread rests (:func:`resting`; 0 outside it): what a call to
    another process carries, for its thread to rest as the caller would."""
    return float(getattr(_pace, "share", 0.0))


def rest_after(began: float) -> None:
    """Within :func:`resting`, sleep its share of the time since ``began`` (``perf_counter``):
    the end of a step of the calling thread's job. Outside it, return at once."""
    share = rest_share()
    if share > 0:
        time.sleep((time.perf_counter() - began) * share)


def lower_this_thread(by: int) -> None:
    """Run the calling thread ``by`` nice steps below the process's main thread (the event
    loop's), 19 at most, never higher than it runs now; the threads it starts inherit it.
    Linux only (elsewhere a nice value is the whole process's, so nothing is changed); a
    refusal is logged, never raised."""
    if sys.platform == "linux":
        _below(threading.get_native_id(), os.getpid(), by)  # getpid: the main thread's own


def lowered() -> int:
    """How many nice steps the calling thread runs below the process's main thread (0 where a
    nice value is the whole process's, or when it cannot be read): what a call to another
    process carries, for its thread to run at the caller's priority."""
    if sys.platform != "linux":
        return 0
    try:
        mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return max(0, mine - os.getpriority(os.PRIO_PROCESS, os.getpid()))
    except OSError:
        return 0


def below_parent(by: int) -> None:
    """For a child process, as it starts: run ``by`` nice steps below its parent's main
    thread (whichever of the parent's lowered threads started it), 19 at most, never higher
    than it runs now. A refusal is logged, never raised."""
    _below(0, os.getppid(), by)


def _below(who: int, base: int, by: int) -> None:
    """Set ``who``'s nice value (0: the caller) ``by`` steps below ``base``'s."""
    if by <= 0:
        return
    try:
        target = min(MAX_NICE, os.getpriority(os.PRIO_PROCESS, base) + by)
        now = os.getpriority(os.PRIO_PROCESS, who)
        os.setpriority(os.PRIO_PROCESS, who, max(now, target))
    except OSError as exc:  # a sandbox may refuse it: it runs at the priority it has
        log.debug("priority.unchanged", extra={"fields": {"error": str(exc)}})


def hand_over_sooner() -> None:
    """The process's interpreter switch interval: :data:`SWITCH_INTERVAL_SECONDS` (stratad
    sets it as it starts)."""
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
