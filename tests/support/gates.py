"""Forcing an interleaving without sleeping: a thread held at a chosen point until the test
lets it go (:class:`Pause`), a daemon whose embedder and vector store call the test's hooks
at the points where writers race (:class:`Hooks`, through :class:`daemon.wiring.Factories`),
Tier 3's write lock replaced by one that says when a thread waits for it
(:func:`watch_write_lock`), the wait for the weaver's queued jobs (:func:`settled`), a daemon
with all of them (:func:`gated_daemon`), and a request served on a thread of its own for a
block (:func:`served`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from daemon.components import configured_embedder, embedding_description
from daemon.settings import Settings
from daemon.wiring import Factories
from stratad_client import MemoryClient
from tests.support.daemons import ThreadDaemon
from tests.support.settings import QUIET
from tiers.core.models import ModelClient
from tiers.core.priority import REQUESTS, Requests
from tiers.semantic.embedding import Embedder, EmbeddingService, SupportsClose
from tiers.semantic.store import SemanticStore, edge_store_path
from tiers.semantic.vectors import MemoryPoint, PointFilter, VectorStore
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from weaver.jobs.runner import Weaver

# How long a test waits for a thread to reach a pause, and a held thread for its release.
DEADLINE = 60.0


class Pause:
    """A point where the first thread to arrive stops until the test lets it go; later ones
    pass. The test waits with :meth:`reached`, does what must happen at that point, then
    calls :meth:`release`. A thread held for :data:`DEADLINE` raises AssertionError, so a
    test that never releases it fails instead of hanging."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._arrived = threading.Event()
        self._go = threading.Event()
        self._lock = threading.Lock()
        self._taken = False

    def __call__(self) -> None:
        with self._lock:
            first, self._taken = not self._taken, True
        if not first:
            return
        self._arrived.set()
        if not self._go.wait(DEADLINE):
            raise AssertionError(f"held {self.where} for {DEADLINE:g} s: never released")

    def reached(self, timeout: float = DEADLINE) -> None:
        assert self._arrived.wait(timeout), f"no thread got {self.where} in {timeout:g} s"

    def release(self) -> None:
        self._go.set()


def when(test: Callable[[Any], bool], pause: Pause) -> Callable[[Any], None]:
    """A hook that holds its caller at ``pause`` when ``test(argument)`` is true."""

    def hook(arg: Any) -> None:
        if test(arg):
            pause()

    return hook


def holding(point_id: str, text: str) -> Callable[[Sequence[MemoryPoint]], bool]:
    """Whether a write holds the point ``point_id`` with ``text``."""
    return lambda points: any(p.id == point_id and p.text == text for p in points)


@contextmanager
def served(requests: Requests = REQUESTS) -> Iterator[None]:
    """A request served (:meth:`~tiers.core.priority.Requests.serving`) on a thread of its
    own throughout the block: the background steps aside meanwhile."""
    entered, done = threading.Event(), threading.Event()

    def serve() -> None:
        with requests.serving():
            entered.set()
            done.wait()

    thread = threading.Thread(target=serve, name="served-request", daemon=True)
    thread.start()
    assert entered.wait(30)
    try:
        yield
    finally:
        done.set()
        thread.join(30)


class HookedVectors(EdgeVectorStore):
    """The embedded vector store, calling ``before_upsert`` and ``after_upsert`` hooks with
    the points of each upsert, on the writer's thread (which holds Tier 3's write lock: the
    hooks sit between a writer's checks and its write, and between its write and what it
    records after). It logs what each write did to a point, in order: :meth:`history`."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.before_upsert: list[Callable[[Sequence[MemoryPoint]], None]] = []
        self.after_upsert: list[Callable[[Sequence[MemoryPoint]], None]] = []
        self._log: list[tuple[str, str | None]] = []  # (point id, its text; None: deleted)
        self._log_lock = threading.Lock()

    def upsert(self, points: Sequence[MemoryPoint]) -> None:
        for hook in self.before_upsert:
            hook(points)
        with self._log_lock:  # the log in the order the writes landed
            super().upsert(points)
            self._log += [(p.id, p.text) for p in points]
        for hook in self.after_upsert:
            hook(points)

    def delete(self, flt: PointFilter) -> int:
        with self._log_lock:
            removed = super().delete(flt)
            self._log += [(i, None) for i in flt.ids]
        return removed

    def history(self, point_id: str) -> list[str | None]:
        """The texts written to ``point_id``, in order; None for a delete naming it by id."""
        with self._log_lock:
            return [text for i, text in self._log if i == point_id]


class HookedEmbedder:
    """An embedder calling ``before_documents`` hooks with the texts of each document batch
    (the weaver's, before it takes Tier 3's write lock); queries pass as they are. Closing it
    closes the embedder it wraps (the daemon's worker processes)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.before_documents: list[Callable[[list[str]], None]] = []

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        for hook in self.before_documents:
            hook(texts)
        return self.inner.encode_documents(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.inner.encode_queries(texts)

    def close(self) -> None:
        if isinstance(self.inner, SupportsClose):
            self.inner.close()


@dataclass
class Hooks:
    """Daemons started with :attr:`factories` embed through a :class:`HookedEmbedder` and
    store vectors in a :class:`HookedVectors` (``embedder`` and ``vectors``, once made)."""

    embedder: HookedEmbedder | None = None
    vectors: HookedVectors | None = None
    pauses: list[Pause] = field(default_factory=list)

    def pause(self, where: str) -> Pause:
        """A :class:`Pause` that :meth:`release_all` lets go (a failed test's teardown)."""
        self.pauses.append(Pause(where))
        return self.pauses[-1]

    def release_all(self) -> None:
        for pause in self.pauses:
            pause.release()

    def open_vectors(self, settings: Settings) -> HookedVectors:
        self.vectors = HookedVectors(edge_store_path(settings.data_dir))
        return self.vectors

    def embedding_service(self, settings: Settings, client: ModelClient | None) -> EmbeddingService:
        def load() -> HookedEmbedder:
            self.embedder = HookedEmbedder(configured_embedder(settings, client))
            return self.embedder

        return EmbeddingService(load, embedding_description(settings.embedding))

    @property
    def factories(self) -> Factories:
        return Factories(open_vectors=self.open_vectors, embedding_service=self.embedding_service)


class WatchedLock:
    """A reentrant lock (``lock``, or a new one) that counts the threads waiting for it, and
    the callers that would not wait and found it held."""

    def __init__(self, lock: Any = None) -> None:
        self._lock = threading.RLock() if lock is None else lock
        self._cond = threading.Condition()
        self._waiting = 0
        self._refused = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        if not blocking:
            with self._cond:
                self._refused += 1
                self._cond.notify_all()
            return False
        with self._cond:
            self._waiting += 1
            self._cond.notify_all()
        try:
            return self._lock.acquire(True, timeout)
        finally:
            with self._cond:
                self._waiting -= 1

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def waited_for(self, timeout: float = DEADLINE) -> None:
        """Return once a thread waits for the lock; AssertionError after ``timeout``."""
        with self._cond:
            assert self._cond.wait_for(lambda: self._waiting > 0, timeout), (
                f"no thread waited for the lock in {timeout:g} s"
            )

    def refused(self, timeout: float = DEADLINE) -> None:
        """Return once a caller that would not wait found the lock held; AssertionError after
        ``timeout``."""
        with self._cond:
            assert self._cond.wait_for(lambda: self._refused > 0, timeout), (
                f"no caller found the lock held in {timeout:g} s"
            )


def watch_write_lock(semantic: SemanticStore) -> WatchedLock:
    """Replace Tier 3's write lock by a :class:`WatchedLock`, while no thread holds it (right
    after the daemon started). Every writer takes the lock through the store at each step; a
    backup keeps the lock the daemon was wired with, so a test using this makes no backup."""
    lock = WatchedLock()
    semantic.write_lock = lock  # type: ignore[assignment]
    return lock


def settled(weaver: Weaver) -> None:
    """Return once the weaver's worker has run every job queued before this call (it runs
    them in order: a job queued now runs after them)."""
    weaver.submit(lambda: None).result(DEADLINE)


@dataclass
class Gated:
    """A daemon made by :func:`gated_daemon`: its :class:`Hooks`, its watched write lock, its
    weaver and vector store, and a client of it."""

    d: ThreadDaemon
    hooks: Hooks
    lock: WatchedLock
    weaver: Weaver
    vectors: VectorStore
    c: MemoryClient


@contextmanager
def gated_daemon(start_daemon: Callable[..., ThreadDaemon]) -> Iterator[Gated]:
    """A daemon started with :class:`Hooks` and a weaver that runs only when asked, once Tier 3
    is open, its write lock watched (:func:`watch_write_lock`), with a client; when the block
    ends every pause is let go (a failed test leaves no thread held)."""
    hooks = Hooks()
    d = start_daemon(weaver=QUIET, factories=hooks.factories)
    semantic, weaver = d.daemon.parts.semantic, d.daemon.parts.weaver
    assert weaver is not None
    _embedder, vectors = semantic.wait_ready(120)
    lock = watch_write_lock(semantic)
    with d.client(timeout=60) as c:
        try:
            yield Gated(d, hooks, lock, weaver, vectors, c)
        finally:
            hooks.release_all()
