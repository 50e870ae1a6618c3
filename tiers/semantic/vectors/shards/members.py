"""The shards of a :class:`~tiers.semantic.vectors.shards.store.ShardedVectorStore`, each an
:class:`~tiers.semantic.vectors.edge.store.EdgeVectorStore`, opened as they are needed.

Opening a shard takes 50-100 ms (the engine loads its segments), so a store of a hundred
shards would take seconds to open. After a clean close nothing needs them all at start (the
keyword counts were kept in their file, the build needs are marks on disk), so
:meth:`ShardSet.open_later` opens none but the largest: a shard is opened when it is first
asked for (:meth:`ShardSet.get`), and a thread of its own opens the others one after another,
those written last first (:func:`~tiers.semantic.vectors.edge.layout.last_written`), so
serving begins in the time of a few shards, whatever the store's size. The largest shards,
whose loads alone would make a Recall miss 100 ms (those of :attr:`ShardSet.open_first` bytes
or more on disk), are opened before :meth:`ShardSet.open_later` returns, largest first,
starting none after :data:`OPEN_FIRST_SECONDS`: so a large user's first Recall after a start
waits for no load (its shard of 280,000 points took 354-543 ms to load at ten million
points), and the start is longer by their loads alone. The engine holds the GIL
through a load (about 0.6 s for a shard of 78,000 points at ten million, 47 ms at the median for
the shards of a million; from a cold cache, with what the engine reads whole read first:
:func:`~tiers.semantic.vectors.edge.shard.warm`), so that thread rests :data:`OPENER_REST` times
the CPU time each load took before the next: requests run between loads, never behind a queue of
them (at ten million points, an opener without rests held the GIL 95 % of its first two
minutes, and Appends waited seconds); and it starts no load while a Recall is served
(:data:`~tiers.core.priority.REQUESTS`, :data:`~tiers.core.priority.STEP_ASIDE_SECONDS` at
the most). What needs every shard
(:meth:`ShardSet.every`: a count or a scroll without a user, a backup) opens those not open
yet. After a crash :meth:`ShardSet.open_all` opens every shard at once, counting its terms.

Threads: a lock per shard guards its opening and making, so a request for one shard waits
for that shard alone, never for the thread opening the others (a single lock would let that
thread take it again shard after shard, and a request wait for all of them);
:attr:`ShardSet.lock` guards closing. A shard once opened is read without a lock.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from tiers.core.priority import REQUESTS, STEP_ASIDE_SECONDS, rest_after
from tiers.semantic.vectors import OPEN_FIRST, PointFilter, VectorStoreUnavailable
from tiers.semantic.vectors.edge import layout
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.semantic.vectors.point_cache import PointCache
from tiers.semantic.vectors.storage import DenseStorage
from tiers.semantic.vectors.term_frequencies import DocumentFrequencies

log = logging.getLogger("strata.vectors")

# The opener's rest after a load, in the CPU time the load took on its thread (the engine's
# work, holding the GIL; not the reads ahead of it, which let it go): a quarter of the GIL at most
OPENER_REST = 3.0
# Shards of :data:`~tiers.semantic.vectors.OPEN_FIRST` bytes or more are opened at the start
# (module text), the largest first, none started after this long: a bound on the start,
# whatever the store holds
OPEN_FIRST_SECONDS = 10.0


@dataclass(eq=False, slots=True)
class ShardSet:
    """The ``count`` shards under ``path``, sharing ``frequencies`` and ``points``. Raises
    :class:`~tiers.semantic.vectors.VectorStoreUnavailable` once closed, and what
    :meth:`EdgeVectorStore.ensure` raises for a shard that cannot be opened."""

    path: Path
    count: int
    frequencies: DocumentFrequencies
    points: PointCache
    storage: DenseStorage
    _: KW_ONLY
    open_behind: bool = True
    open_first: int = OPEN_FIRST  # bytes on disk (module text); 0: none
    # closing (and the owner's opening of the store)
    lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)
    _locks: list[threading.Lock] = field(init=False, repr=False)  # opening or making shard i
    _stores: list[EdgeVectorStore | None] = field(init=False, repr=False)
    # on disk, not opened yet
    _unopened: set[int] = field(init=False, repr=False, default_factory=set)
    _opener: threading.Thread | None = field(init=False, repr=False, default=None)
    # wakes the opener from its rest (a close, a stop)
    _stopping: threading.Event = field(init=False, repr=False, default_factory=threading.Event)
    # :meth:`interrupt`, shared with the shards
    _interrupted: threading.Event = field(init=False, repr=False, default_factory=threading.Event)
    _model: str = field(init=False, repr=False, default="")
    _dim: int = field(init=False, repr=False, default=0)
    _closed: bool = field(init=False, repr=False, default=False)

    def __post_init__(self) -> None:
        self._locks = [threading.Lock() for _ in range(self.count)]
        self._stores = [None] * self.count

    def open_all(self, model: str, dim: int, *, count_terms: bool) -> list[int]:
        """Open every shard on disk now (before any other call), counting its terms if told;
        returns those holding points. On an error none stays open."""
        self._model, self._dim = model, dim
        with_points = []
        try:
            for index in layout.shards_present(self.path, self.count):
                store = self._open(index, count_terms=count_terms)
                if store.count(PointFilter()):
                    with_points.append(index)
        except BaseException:
            self._close_opened()
            self._stores = [None] * self.count
            raise
        return with_points

    def open_later(self, model: str, dim: int) -> None:
        """Open the largest shards now, the others each when asked for and the rest behind
        (module text)."""
        self._model, self._dim = model, dim
        self._unopened = set(layout.shards_present(self.path, self.count))
        self._open_first()
        if self.open_behind and self._unopened:
            self._opener = threading.Thread(
                target=self._open_rest, name="vectors-open", daemon=True
            )
            self._opener.start()

    def get(self, index: int) -> EdgeVectorStore | None:
        """Shard ``index`` (opened now if it is on disk and was not), or None when it was
        never made."""
        store = self._stores[index]
        if store is not None or index not in self._unopened:
            return store
        with self._locks[index]:
            self._check_open()
            store = self._stores[index]
            if store is None and index in self._unopened:
                store = self._open(index, count_terms=False)
            self._unopened.discard(index)
            return store

    def make(self, index: int) -> EdgeVectorStore:
        """Shard ``index``, made now if it was not."""
        store = self.get(index)
        if store is not None:
            return store
        with self._locks[index]:
            self._check_open()
            return self._stores[index] or self._open(index, count_terms=True)

    def opened(self) -> list[tuple[int, EdgeVectorStore]]:
        """The shards open now, by index."""
        return [(i, s) for i, s in enumerate(self._stores) if s is not None]

    def flush(self) -> None:
        """Flush the shards open and written since their last flush, one at a time; a caller
        within :func:`~tiers.core.priority.resting` (the weaver's build round) rests after each
        shard flushed: each holds the GIL (9-47 ms a shard at ten million points), and back to
        back they held the event loop's Appends 100 ms or more for seconds."""
        for _index, store in self.opened():
            began = time.perf_counter()
            if store.live.flush():
                rest_after(began)

    def every(self) -> list[tuple[int, EdgeVectorStore]]:
        """Every shard made, those not opened yet opened now."""
        for index in sorted(self._unopened):
            self.get(index)
        return self.opened()

    def interrupt(self) -> None:
        """Stop the opener (after the shard it is opening) and every count of a shard's terms
        at its open, under way or to come (:meth:`EdgeVectorStore.interrupt`): such a shard
        stays closed and uncounted, for the next start."""
        self._interrupted.set()
        self._stopping.set()

    def close(self) -> None:
        """Stop the opener and the term counts (:meth:`interrupt`), wait for the shards being
        opened by others, and close every open shard; idempotent."""
        with self.lock:
            self._closed = True
        self.interrupt()
        if self._opener is not None:
            self._opener.join()
        for lock in self._locks:  # an open under way ends; none starts after this
            with lock:
                pass
        self._close_opened()

    def _check_open(self) -> None:
        if self._closed:
            raise VectorStoreUnavailable(f"the vector store at {self.path} is closed")

    def _open_first(self) -> None:
        """Open the shards of :attr:`open_first` bytes or more on disk, the largest first,
        until :data:`OPEN_FIRST_SECONDS` have passed (module text); one that cannot be opened
        is left to whoever asks for it. Logs ``vectors.opened_first`` when it opened any."""
        if not self.open_first:
            return
        started = time.perf_counter()
        sizes = {index: layout.disk_bytes(self.path, index) for index in self._unopened}
        large = sorted((i for i in sizes if sizes[i] >= self.open_first), key=lambda i: -sizes[i])
        opened = []
        for index in large:
            if self._interrupted.is_set() or time.perf_counter() - started > OPEN_FIRST_SECONDS:
                break
            try:
                self.get(index)
            except Exception as exc:  # the shard's reader gets it again
                self._unopenable(index, exc)
                continue
            opened.append(index)
        if opened:
            fields = {
                "store": self.path.name,
                "shards": len(opened),
                "of": len(large),
                "mb": round(sum(sizes[i] for i in opened) / (1 << 20)),
                "seconds": round(time.perf_counter() - started, 2),
            }
            log.info("vectors.opened_first", extra={"fields": fields})

    def _open_rest(self) -> None:
        """Open the shards not asked for yet, one after another, until closed (a shard that
        cannot be opened is logged, and raises to whoever asks for it), resting between
        loads (module text); logs ``vectors.opened`` at the end."""
        started, loaded = time.perf_counter(), 0
        # The shards written last first: after a restart, their users are the likeliest to
        # come back soon, and a request that finds its shard open waits for no load.
        for index in sorted(self._unopened, key=lambda i: (-layout.last_written(self.path, i), i)):
            if self._stores[index] is None:  # a load of its own (a request may have opened it)
                # A load holds the interpreter throughout: none starts while a Recall is served.
                REQUESTS.step_aside(STEP_ASIDE_SECONDS, self._stopping.is_set)
            if self._closed or self._interrupted.is_set():
                return
            began = time.thread_time()  # the load's work, not its reads ahead (GIL let go)
            try:
                if self._stores[index] is None:
                    self.get(index)
                    loaded += 1
                    self._stopping.wait((time.thread_time() - began) * OPENER_REST)
            except Exception as exc:  # the shard's reader gets it again
                if self._closed or self._interrupted.is_set():
                    return
                self._unopenable(index, exc)
        seconds = round(time.perf_counter() - started, 1)
        fields = {"store": self.path.name, "opened_behind": loaded, "seconds": seconds}
        log.info("vectors.opened", extra={"fields": fields})

    def _unopenable(self, index: int, exc: Exception) -> None:
        fields = {"store": self.path.name, "shard": index, "error": str(exc)}
        log.warning("vectors.shard_unopened", extra={"fields": fields})

    def _open(self, index: int, *, count_terms: bool) -> EdgeVectorStore:
        """Open (or make) shard ``index``, counting its terms if told or if a recount has yet
        to count them (:meth:`DocumentFrequencies.recount`); under its lock."""
        recount = self.frequencies.uncounted(index)
        store = EdgeVectorStore(
            self.path / layout.shard_name(index),
            self.frequencies,
            self.points,
            self.storage,
            count_terms=count_terms or recount,
            interrupted=self._interrupted,
        )
        try:
            store.ensure(self._model, self._dim)
        except BaseException:
            store.close()
            raise
        if recount:
            self.frequencies.counted(index)
        self._stores[index] = store
        return store

    def _close_opened(self) -> None:
        for _index, store in self.opened():
            store.close()
