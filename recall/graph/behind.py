"""The scopes' graph builds behind the queries (:class:`Behind`): which scopes have one
pending, those a query asks for started once it has answered (:meth:`Behind.deferred`), and
the others queued at once on the one build thread (:class:`~recall.graph.builds.BuildQueue`),
for :class:`~recall.graph.memory.MemoryGraphs`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager

from recall.graph.builds import BuildQueue

Key = tuple[str, str]  # a scope's (user_id, agent_id)


class Behind:
    """The builds in the background, guarded by ``lock`` (the owner's: the methods said to be
    called with it held are; the others take it). A build pending is queued, running, or
    held until the end of the query that asked for it."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._idle = threading.Condition(lock)  # notified as a build ends or is dropped
        self._pending: dict[Key, Future[None]] = {}
        self._queue: BuildQueue | None = None  # started at the first build
        self._local = threading.local()  # ``asked``: the builds a query defers
        self.closed = False

    def pending(self, key: Key) -> bool:
        """Whether the scope has a build pending (the lock held)."""
        return key in self._pending

    def start(self, key: Key, size: int, build: Callable[[], None]) -> None:
        """Queue the scope's ``build`` (of ``size`` memories: the smallest run first), unless
        one is pending or the builds are closed; within a :meth:`deferred` block, at the
        block's end (the lock held). ``build`` calls :meth:`done` as it ends."""
        if key in self._pending or self.closed:
            return
        asked = getattr(self._local, "asked", None)
        if asked is not None:  # at the end of the query's block
            held: Future[None] = Future()
            asked.append((key, size, build, held))
            self._pending[key] = held
            return
        if self._queue is None:
            self._queue = BuildQueue("graph-build")
        self._pending[key] = self._queue.submit(size, build)

    def done(self, key: Key) -> None:
        """The scope's build has ended, however (the lock held)."""
        self._pending.pop(key, None)
        self._idle.notify_all()

    def wait(self, key: Key, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the scope's build to end (the lock held: it is
        let go meanwhile)."""
        self._idle.wait_for(lambda: key not in self._pending, timeout)

    def idle(self, timeout: float) -> bool:
        """Wait until no build is pending; False if one still is after ``timeout`` seconds."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._pending, timeout)

    @contextmanager
    def deferred(self, enabled: bool = True) -> Iterator[None]:
        """Within the block (one query, on its thread), a build this thread starts begins at
        the block's end; nested blocks start them at the outermost one's end. Not when
        ``enabled`` is False."""
        if getattr(self._local, "asked", None) is not None or not enabled:
            yield
            return
        asked: list[tuple[Key, int, Callable[[], None], Future[None]]] = []
        self._local.asked = asked
        try:
            yield
        finally:
            self._local.asked = None
            with self._lock:
                for key, size, build, held in asked:
                    if self._pending.get(key) is held:  # not dropped by close meanwhile
                        del self._pending[key]
                        self.start(key, size, build)
                self._idle.notify_all()

    def between(self) -> None:
        """Called by a build before each page it reads (:meth:`BuildQueue.between`)."""
        queue = self._queue
        if queue is not None:
            queue.between()

    def close(self) -> None:
        """Start no more builds; those waiting their turn are dropped, the one under way
        stops at its next page (it sees :attr:`closed`). Idempotent."""
        with self._lock:
            self.closed = True
            queue, self._queue = self._queue, None
        if queue is not None:
            queue.shutdown()
        with self._lock:
            for key, future in list(self._pending.items()):
                if future.cancel() or future.cancelled():  # queued, or deferred (not running)
                    del self._pending[key]
            self._idle.notify_all()
