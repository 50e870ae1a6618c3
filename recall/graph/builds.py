"""The scopes' graph builds in the background (:class:`BuildQueue`): one thread, the smallest
build waiting first, and a build under way lets the smaller ones waiting run between two of
its pages (:meth:`BuildQueue.between`).

A large user's first build reads every point of theirs: 16 s for 200,000 at 1M points, 31-43 s
at 10M (``docs/benchmarks.md``). Built in turn, the small users asked meanwhile waited that
long for builds of a second or two, and their next visits went without the graph. One thread
still, so the builds take no more of the interpreter than before, only in another order. The
engine holds the interpreter through a page's reads, so before each build and each page the
thread waits while a Recall is served (:data:`~tiers.core.priority.REQUESTS`), at most
:data:`~tiers.core.priority.STEP_ASIDE_SECONDS` at a time.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future

from tiers.core.priority import (
    RECALL_NICE,
    REQUESTS,
    STEP_ASIDE_SECONDS,
    background,
    lower_this_thread,
)

_Waiting = tuple[int, int, "Future[None]", Callable[[], None]]  # size, order, future, build


class BuildQueue:
    """Builds run on a thread of its own (named ``name``), started at the first
    :meth:`submit`, below the event loop's CPU priority. A build's exception is its future's.
    :meth:`submit` raises RuntimeError once :meth:`shutdown`."""

    def __init__(self, name: str = "graph-build") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._waiting: list[_Waiting] = []  # a heap: the smallest first, then the oldest
        self._order = itertools.count()
        self._sizes: list[int] = []  # the builds under way on the thread, the outermost first
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, size: int, build: Callable[[], None]) -> Future[None]:
        """Queue ``build``, of ``size`` (the points it reads, or an estimate)."""
        future: Future[None] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the graph builds are shut down")
            heapq.heappush(self._waiting, (size, next(self._order), future, build))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
            self._wake.notify()
        return future

    def between(self) -> None:
        """Called by a build between two of its pages: on the queue's thread, it steps aside
        for the requests being served (:data:`~tiers.core.priority.REQUESTS`), then the
        waiting builds smaller than the one under way run now, the smallest first. Elsewhere
        (a build on a query's thread) nothing."""
        if threading.current_thread() is not self._thread:
            return
        REQUESTS.step_aside(STEP_ASIDE_SECONDS, self._stopped)
        while (build := self._next(smaller_than=self._sizes[-1])) is not None:
            self._run(build)

    def shutdown(self) -> None:
        """Start no more builds: those waiting are cancelled; the one under way goes on until
        it stops itself. Idempotent."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, []
            self._wake.notify_all()
        for _size, _order, future, _build in waiting:
            future.cancel()

    def _stopped(self) -> bool:
        return self._closed

    def _serve(self) -> None:
        lower_this_thread(RECALL_NICE)
        while True:
            with self._lock:
                while not self._waiting and not self._closed:
                    self._wake.wait()
            REQUESTS.step_aside(STEP_ASIDE_SECONDS, self._stopped)
            build = self._next()
            if build is None:
                return  # shut down
            self._run(build)

    def _next(self, smaller_than: int | None = None) -> _Waiting | None:
        with self._lock:
            if self._closed or not self._waiting:
                return None
            if smaller_than is not None and self._waiting[0][0] >= smaller_than:
                return None
            return heapq.heappop(self._waiting)

    def _run(self, waiting: _Waiting) -> None:
        size, _order, future, build = waiting
        if not future.set_running_or_notify_cancel():
            return
        self._sizes.append(size)
        try:
            with background():  # the daemon's own reads (tiers.core.priority)
                build()
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(None)
        finally:
            self._sizes.pop()
