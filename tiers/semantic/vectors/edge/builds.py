"""Index builds and purges of the embedded store
(:class:`tiers.semantic.vectors.edge.store.EdgeVectorStore`).

The engine has no background threads: HNSW indexes are only built by the engine's ``optimize()``,
which holds the GIL for its whole run (seconds on large stores): :meth:`EdgeBuilds.optimize`
therefore runs it in a child process on a copy of the shard and swaps the built copy in
(:mod:`tiers.semantic.vectors.edge.generations`), so the daemon's threads run on meanwhile. Loading
the built copy still holds the GIL once, for its whole run (0.6-1.6 s measured at 100k points with
the payload indexes and sparse vectors). A shard with fewer points than the engine's indexing
threshold (about 10 MB of vectors: 6,700 points of 384 dims) has nothing to build: it is not copied.
When the child finds nothing to build (the new points since the last build are below the threshold),
it says so and nothing is loaded or swapped. A purge (Forget's, :mod:`tiers.rights.forget.purge`)
goes the same way, its child writing the copy's live points into a new shard, so no deleted point's
bytes stay in the files.

Threads: one instance is shared by the writer and the query threads. Reads go to the engine
without a lock (the engine is safe for concurrent readers and writers). Writes are serialized
by a lock, which also makes ``delete``'s count-then-delete atomic with respect to other
writes; while a build runs, every write is also recorded, to be replayed into the built copy.
``optimize()`` has its own lock and takes the write lock only to copy and to swap; ``close()``
stops a running build and takes both. A read holds a lease on the shard it reads, so a
swapped-out generation is closed only after its last read. A read racing with ``close()``
fails with :class:`~tiers.semantic.vectors.VectorStoreUnavailable`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from qdrant_edge import CountRequest, EdgeShard, UpdateOperation

from tiers.core import children
from tiers.core.priority import REQUESTS, STEP_ASIDE_SECONDS
from tiers.semantic.vectors import IndexBuildCancelled, VectorStoreUnavailable
from tiers.semantic.vectors.edge import generations
from tiers.semantic.vectors.edge.config import indexable
from tiers.semantic.vectors.edge.shard import READ_PAGE, engine_errors, load_shard, read_ahead
from tiers.semantic.vectors.storage import FLOAT32, DenseStorage

log = logging.getLogger("strata.vectors")

# A read of this share of a shard's points or more reads the shard's files ahead: that costs
# about 1.5 us a point of the shard, and a read from a cold cache about 28 us a point read
# (payloads; 2026-11-30), so it pays past a twentieth; an eighth leaves a margin.
READ_AHEAD_SHARE = 0.125


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 1)


class EdgeBuilds:
    """The live shard of an edge store (:class:`~tiers.semantic.vectors.edge.store.EdgeVectorStore`
    holds one) with its locks and read leases, and the making of its next generation (an
    index build or a purge) in a child process, swapped in when done. Raises
    :class:`~tiers.semantic.vectors.VectorStoreUnavailable` once closed, or for what the engine
    refused."""

    def __init__(self, path: Path, storage: DenseStorage = FLOAT32) -> None:
        self.path = path
        self.storage = storage  # how its shards keep their dense vectors (a purge's copy too)
        self._shard: EdgeShard | None = None
        self._dim = 0
        self._closed = False
        self.write_lock = threading.Lock()
        self._optimize_lock = threading.Lock()
        self._dir = path  # the current generation's directory (edge_generations)
        # Writes made while a build runs, replayed into the built copy (under write_lock).
        self._recorded: list[UpdateOperation] | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._child_purges = False  # the running child makes a purge's copy (not a build)
        self._readers = threading.Condition()  # guards _shard swaps and _leases
        self._leases: dict[int, int] = {}  # id(shard) -> reads in progress
        self.builds = 0  # index builds swapped in (for tests and figures)
        self.builds_unneeded = 0  # builds whose child found nothing to build
        self.purges = 0
        self.flushes = 0  # the engine's flushes of the live shard (for tests and figures)
        # Written since the live shard's last flush: a flush of a shard without writes is
        # skipped (9 ms of the engine holding the GIL on a shard at 10M points, for nothing).
        self._dirty = False
        self._purging = 0  # purges waiting or running: a build gives up (IndexBuildCancelled)

    # -- the live shard ----------------------------------------------------------------------

    @property
    def opened(self) -> bool:
        """Whether a shard is live (:meth:`start` was called, and not :meth:`close`)."""
        return self._shard is not None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def dim(self) -> int:
        """The live shard's vector size (0 before :meth:`start`)."""
        return self._dim

    def start(self, shard: EdgeShard, dim: int, gen: Path) -> None:
        """Make ``shard`` (of ``dim`` dims, the generation at ``gen``) the live one; the
        caller holds :attr:`write_lock`."""
        self._shard, self._dim, self._dir = shard, dim, gen
        self._dirty = True  # its open may have written (payload indexes)

    def flush(self) -> bool:
        """Flush the live shard's segments, if it was written since its last flush (a write is
        durable on return either way: the engine's write-ahead log); returns whether it did."""
        with self.write_lock, self.engine("flush"):
            return self._flush()

    def _flush(self) -> bool:
        """:meth:`flush`, under the write lock."""
        if not self._dirty:
            return False
        self.current().flush()
        self._dirty = False
        self.flushes += 1
        return True

    @contextlib.contextmanager
    def held(self, what: str) -> Iterator[EdgeShard]:
        """The live shard with writes and builds held off (a backup's copy)."""
        with self._optimize_lock, self.write_lock, self.engine(what):
            yield self.current()

    def close(self) -> None:
        """Stop a running build or purge (its copy is removed by its thread), then flush and
        close the live shard; idempotent."""
        with self._readers:
            self._closed = True  # a build starting now stops at once
            if self._child is not None:
                self._child.kill()
        with self._optimize_lock, self.write_lock:
            shard, self._shard = self._shard, None
            if shard is not None:
                with self.engine("close"):
                    try:
                        if self._dirty:
                            shard.flush()
                    finally:
                        shard.close()

    # -- builds and purges -------------------------------------------------------------------

    def optimize(self) -> None:
        """Build the index in a child process on a copy, then swap the copy in (module doc).
        Blocks the calling thread until the swap; other threads run on meanwhile. A shard
        too small for the engine to index anything
        (:func:`tiers.semantic.vectors.edge.shard.indexable`) is left as it is, without a copy or a
        child."""
        with self._optimize_lock:
            with self.engine("optimize"):
                points = self.current().count(CountRequest(exact=True))
            if not indexable(points, self._dim):
                self.builds_unneeded += 1
                return
            self._regenerate(purge=False)

    def purge(self) -> None:
        """Rewrite the live points into a new generation, make it current and delete the old
        one: no byte of a deleted point stays in the files (the engine keeps them in its WAL
        and segment pages). As a build: the live shard's files are copied, a child process
        writes that copy's live points into a new shard (no HNSW index: the next build makes
        it; queries are exact meanwhile, within each scope's points), the daemon loads it,
        replays the writes made meanwhile and swaps it in. A build that is running is given up
        (its copy predates the deletes). A delete made during the purge is in the old files
        and replayed into the new ones: purge again after it."""
        with self._readers:
            self._purging += 1
            if self._child is not None and not self._child_purges:
                self._child.kill()  # a build: its copy predates the deletes
        try:
            with self._optimize_lock:
                self._regenerate(purge=True)
        finally:
            with self._readers:
                self._purging -= 1

    def _regenerate(self, *, purge: bool) -> None:
        """A new generation made by a child process from a copy of the live one (an index
        build, or a purge's compacted copy), loaded, brought up to date and swapped in."""
        what = "purge" if purge else "optimize"
        ms: dict[str, float] = {}
        t = time.perf_counter()
        with self.write_lock, self.engine(what):
            self._flush()  # the copy below is of the files
            old_gen = self._dir
            copy = generations.following(self.path, old_gen)
            gen = generations.following(self.path, copy) if purge else copy
            for stale in {copy, gen}:
                shutil.rmtree(stale, ignore_errors=True)
            generations.copy(old_gen, self.path, copy)
            self._recorded = []
        ms["copy"], t = _ms(t), time.perf_counter()
        try:
            command = (
                generations.child_command(copy, gen, self.storage)
                if purge
                else generations.child_command(gen)
            )
            if not self._build(command, gen, purge):  # nothing to build: the live one stays
                with self.write_lock:
                    self._recorded = None
                generations.remove(gen, self.path)
                self.builds_unneeded += 1
                ms["child"] = _ms(t)
                log.info(
                    "vectors.build_unneeded", extra={"fields": {"store": self.path.name, **ms}}
                )
                return
            if purge:
                generations.remove(copy, self.path)
            ms["child"], t = _ms(t), time.perf_counter()
            # The load holds the interpreter but for its reads ahead (0.6-1.6 s at 100k; a
            # shard of the 10M store 0.1-0.8 s in all): none starts while a Recall is served.
            REQUESTS.step_aside(STEP_ASIDE_SECONDS, lambda: self._closed)
            if self._closed:  # closed meanwhile: the built copy is not loaded (removed below)
                raise VectorStoreUnavailable(f"the vector store at {self.path} is closed")
            ms["aside"], t = _ms(t), time.perf_counter()
            with self.engine(what):
                built = self.load(gen, self._dim)
            ms["load"], t = _ms(t), time.perf_counter()
            with self.write_lock, self.engine(what):
                replayed = len(self._recorded)
                try:
                    for op in self._recorded:
                        built.update(op)
                    generations.switch(self.path, gen)
                except BaseException:
                    built.close()
                    raise
                old = self._swap(built, gen)
                self._recorded = None
        except BaseException:
            with self.write_lock:
                self._recorded = None
            for stale in {copy, gen}:
                if self._dir != stale:
                    generations.remove(stale, self.path)
            raise
        ms["replay"] = _ms(t)
        if purge:
            self.purges += 1
        else:
            self.builds += 1
        self._retire(old, old_gen)
        log.info(
            "vectors.purged" if purge else "vectors.built",
            extra={
                "fields": {
                    "store": self.path.name,
                    "generation": gen.name,
                    "replayed_writes": replayed,
                    **ms,
                }
            },
        )

    def _swap(self, shard: EdgeShard, gen: Path) -> EdgeShard | None:
        """Make ``shard`` (at ``gen``, named by CURRENT already) the live one; returns the
        old one. Under the write lock."""
        with self._readers:
            old, self._shard, self._dir = self._shard, shard, gen
        self._dirty = True  # the writes replayed into it
        return old

    def _build(self, command: list[str], gen: Path, purging: bool) -> bool:
        """Run the child ``command`` that makes ``gen``; a build gives way to a purge. Returns
        whether it made ``gen`` (False: a build's child found nothing to build)."""
        with self._readers:
            if self._closed:
                raise VectorStoreUnavailable(f"the vector store at {self.path} is closed")
            self._child_purges = purging
            if self._purging and not purging:
                raise IndexBuildCancelled(f"the index build of {gen} gave way to a purge")
            child = self._child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                **children.spawn_options(),  # its own group; killed if the daemon dies
            )
        try:
            _, err = child.communicate()
        finally:
            with self._readers:
                self._child = None
        if child.returncode == generations.UNCHANGED and not purging:
            return False
        if child.returncode != 0:
            lines = err.decode(errors="replace").strip().splitlines()
            why = lines[-1] if lines else f"exit code {child.returncode}"
            if self._closed:
                why = "the store was closed"
            elif self._purging and not purging:
                raise IndexBuildCancelled(f"the index build of {gen} gave way to a purge")
            raise VectorStoreUnavailable(f"making {gen} failed: {why}")
        return True

    def _retire(self, shard: EdgeShard | None, gen: Path) -> None:
        """Close a swapped-out shard once its last read is done, and delete its files."""
        if shard is not None:
            with self._readers:
                self._readers.wait_for(lambda: id(shard) not in self._leases, timeout=60)
            with contextlib.suppress(Exception):
                shard.close()
        generations.remove(gen, self.path)

    # -- what the store's calls use ------------------------------------------------------------

    def apply(self, op: UpdateOperation) -> None:
        """Apply a write (under the write lock); recorded while a build runs."""
        self.current().update(op)
        self._dirty = True
        if self._recorded is not None:
            self._recorded.append(op)

    @contextlib.contextmanager
    def read(self, what: str) -> Iterator[EdgeShard]:
        """The current shard, leased for one read (a swap closes it only after)."""
        with self.engine(what):
            with self._readers:
                shard = self.current()
                key = id(shard)
                self._leases[key] = self._leases.get(key, 0) + 1
            try:
                yield shard
            finally:
                with self._readers:
                    left = self._leases.pop(key) - 1
                    if left:
                        self._leases[key] = left
                    else:
                        self._readers.notify_all()

    def current(self) -> EdgeShard:
        shard = self._shard
        if shard is None:
            state = "closed" if self._closed else "not open (call ensure() first)"
            raise VectorStoreUnavailable(f"the vector store at {self.path} is {state}")
        return shard

    def engine(self, what: str) -> contextlib.AbstractContextManager[None]:
        return engine_errors(self.path, what)

    def load(self, gen: Path, dim: int) -> EdgeShard:
        return load_shard(self.path, gen, dim, self.storage)

    def read_ahead(
        self,
        shard: EdgeShard,
        wanted: int,
        parts: Iterable[str],
        share: float = READ_AHEAD_SHARE,
        between: Callable[[], None] | None = None,
    ) -> int:
        """Before ``wanted`` points of ``shard`` (the live one, leased) are read in pages: when
        they are ``share`` of its points or more, its files under ``parts`` are read into
        the page cache first (:func:`~tiers.semantic.vectors.edge.shard.read_ahead`, with
        ``between``); a smaller read takes the few pages it needs. Returns the bytes read
        ahead (0: none)."""
        if wanted >= READ_PAGE and wanted >= shard.info().points_count * share:
            return read_ahead(self._dir, parts, between)
        return 0
