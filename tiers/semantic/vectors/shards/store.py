"""Tier 3's default vector store: the embedded engine (qdrant-edge) in shards, every point of a
user in one shard, so that an index build, the load that follows it, a purge and a Forget each
touch one shard, never the whole store.

Layout (:mod:`tiers.semantic.vectors.edge.layout`): ``<data_dir>/vectors/`` holds the sidecar
(model, dim, shard count) and ``shard-NNN/``, each an :class:`EdgeVectorStore` directory with
its own generations, made on its first user's first point. A user's shard is
:func:`~tiers.semantic.vectors.shard_of` of its id, so:

- writes go to the shards of their points' users (an upsert of several users is one write per
  shard; each is durable on return, and every writer's steps are idempotent, so a crash
  between two shards loses nothing acknowledged);
- searches, and every read or delete that names a user (``PointFilter.user_id``, the
  ``user_id`` of :meth:`get` and :meth:`dense`), touch that user's shard alone; reads and
  deletes by ids or episode ids without a user, and counts and scrolls without one, go to
  every shard (a delete counts first, so only shards holding matches are written);
- BM25's IDF is the whole store's: the shards share one :class:`DocumentFrequencies`, so a
  user's keyword scores do not depend on who shares its shard, and one :class:`PointCache`.

Builds and purges (:mod:`tiers.semantic.vectors.shards.ledger` keeps which shards need them):
:meth:`optimize` builds the shards written since their last build (once enough points were
written for the engine to index), one at a time, each in a child process
(:mod:`tiers.semantic.vectors.edge.builds`), so the load of a built copy holds the GIL for one
shard's worth; :meth:`purge` rewrites only the shards deleted from since their last purge
(their marks survive a crash), one at a time. A purge of a shard gives up a build of that shard
only (:class:`~tiers.semantic.vectors.IndexBuildCancelled`); :meth:`optimize` goes on with the
others and raises it at the end. A user's first search preloads its points behind it
(:mod:`tiers.semantic.vectors.shards.preloads`).

At start-up :meth:`ensure` moves a store of an earlier release (one shard) or with another
shard count into this layout (:mod:`tiers.semantic.vectors.edge.resharding`). After a clean
close it opens no shard: each is opened when first asked for, the rest behind
(:mod:`tiers.semantic.vectors.shards.members`), so serving begins whatever the store's size.

Threads: the shards' own locks serialize writes per shard; reads run concurrently. A lock of
this store guards the making of shards and closing; :meth:`optimize`, :meth:`purge` one at a
time. :meth:`interrupt` stops the work that can wait for the next start (a daemon's stop).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from tiers.core.errors import VectorStoreUnavailable
from tiers.semantic.vectors import (
    MAX_SHARDS,
    OPEN_FIRST,
    Hit,
    MemoryPoint,
    PointFilter,
    SparseVector,
    Validity,
    canonical_ids,
    shard_of,
)
from tiers.semantic.vectors.edge import layout
from tiers.semantic.vectors.edge.config import indexable
from tiers.semantic.vectors.edge.filter import require_scope
from tiers.semantic.vectors.edge.resharding import move
from tiers.semantic.vectors.edge.shard import check_model, engine_errors, write_sidecar
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.semantic.vectors.point_cache import POINT_CACHE, PointCache
from tiers.semantic.vectors.shards.ledger import ShardLedger, reported
from tiers.semantic.vectors.shards.members import ShardSet
from tiers.semantic.vectors.shards.preloads import Preloads
from tiers.semantic.vectors.storage import FLOAT32, DenseStorage
from tiers.semantic.vectors.term_frequencies import DocumentFrequencies

__all__ = ["ShardedVectorStore"]

T = TypeVar("T")


class ShardedVectorStore:
    """A :class:`~tiers.semantic.vectors.VectorStore` of ``shards`` embedded shards under ``path``,
    keeping up to ``point_cache`` decoded points (:mod:`tiers.semantic.vectors.point_cache`). Raises
    ``ValueError`` for a shard count outside 1 to :data:`~tiers.semantic.vectors.MAX_SHARDS`."""

    def __init__(
        self,
        path: Path,
        shards: int,
        point_cache: int = POINT_CACHE,
        storage: DenseStorage = FLOAT32,
        *,
        open_behind: bool = True,
        open_first: int = OPEN_FIRST,
        preload: bool = True,
    ) -> None:
        if not 1 <= shards <= MAX_SHARDS:
            raise ValueError(f"a sharded store has 1 to {MAX_SHARDS} shards, not {shards}")
        self.path = path
        self.shards = shards
        self._frequencies = DocumentFrequencies()  # every shard's terms (the keyword IDF)
        self.points = PointCache(point_cache)  # every shard's decoded points (their counts)
        self.preloads = Preloads(self.points, enabled=preload)
        self._set = ShardSet(
            path, shards, self._frequencies, self.points, storage, open_behind=open_behind,
            open_first=open_first,
        )  # fmt: skip
        self._ledger: ShardLedger | None = None
        self._model = ""
        self._dim = 0
        self._closed = False
        self._lock = self._set.lock  # opening the store, closing
        self._optimize_lock = threading.Lock()
        self._purge_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    def ensure(self, model: str, dim: int) -> None:
        with self._lock:
            if self._closed:
                raise VectorStoreUnavailable(f"the vector store at {self.path} is closed")
            if self._ledger is not None:
                check_model(self.path, self._model, self._dim, model, dim)
                return
            with engine_errors(self.path, "open"):
                layout.recover(self.path)  # a move a crash interrupted
                found = layout.inspect(self.path)
                if found.kind == "none":
                    layout.create(self.path, model, dim, self.shards)
            moved = found.kind == "single" or (
                found.kind == "sharded" and found.shards != self.shards
            )
            if found.kind != "none":
                check_model(self.path, found.model, found.dim, model, dim)
                if moved:
                    move(self.path, found, model, dim, self.shards, self._set.storage)
            self._model, self._dim = model, dim
            with engine_errors(self.path, "open"):
                counted = self._frequencies.take(  # a recount a close cut short goes on
                    layout.term_counts(self.path),
                    layout.term_checkpoint(self.path),
                    resume=not moved,
                )
                lazy = layout.build_marks_kept(self.path).exists()
                if lazy and not counted:  # a crash: counted again as the shards open
                    present = layout.shards_present(self.path, self.shards)
                    self._frequencies.recount(present, layout.term_checkpoint(self.path))
            if lazy:
                # Build needs are marks on disk, keyword counts came from their file or are
                # counted shard by shard: nothing needs every shard open (shards.members).
                self._set.open_later(model, dim)
                self._ledger = ShardLedger(self.path, self.shards, ())
                return
            try:
                with_points = self._set.open_all(model, dim, count_terms=not counted)
            except BaseException:
                self._frequencies.clear()
                raise
            self._ledger = ShardLedger(self.path, self.shards, with_points)

    def _checkpoint(self, *, deleted: bool = False) -> None:
        with engine_errors(self.path, "checkpoint"):
            self._frequencies.checkpoint(layout.term_checkpoint(self.path), deleted=deleted)
        self._open_ledger().checkpoint()  # and the points each shard holds unindexed

    def optimize(self) -> None:
        """Build the index of every shard whose build is due (written since its last build
        with enough new points for the engine to index:
        :meth:`~tiers.semantic.vectors.shards.ledger.ShardLedger.to_build`), one at a time (each
        in a child process: :meth:`tiers.semantic.vectors.edge.builds.EdgeBuilds.optimize`). A shard
        whose build fails or gives way to a purge stays unbuilt, the others are built, and
        the first error is raised at the end."""
        with self._optimize_lock:
            ledger = self._open_ledger()
            self._checkpoint()  # first: a round's builds take minutes, and change no count
            error: VectorStoreUnavailable | None = None
            for index in ledger.to_build(lambda points: indexable(points, self._dim)):
                store = self._set.get(index)
                if store is None:
                    continue
                token = ledger.build_began(index)
                try:
                    store.optimize()
                except VectorStoreUnavailable as exc:
                    if self._closed:
                        raise
                    error = reported(error, exc)
                    continue
                ledger.built(index, token)
            if error is not None:
                raise error

    def purge(self) -> None:
        """Rewrite every shard deleted from since its last purge, one at a time
        (:meth:`tiers.semantic.vectors.edge.builds.EdgeBuilds.purge`); deletes made meanwhile leave
        their shard marked for the next purge. A shard whose purge fails stays marked, the
        others are purged, and the first error is raised at the end."""
        with self._purge_lock:
            ledger = self._open_ledger()
            error: VectorStoreUnavailable | None = None
            for index in ledger.to_purge():
                store = self._set.get(index)
                token = ledger.purge_began(index)
                try:
                    if store is not None:
                        store.purge()
                except VectorStoreUnavailable as exc:
                    if self._closed:
                        raise
                    error = error or exc
                    continue
                ledger.purged(index, token)
            self._checkpoint(deleted=True)  # the deletes' terms have left the counts
            if error is not None:
                raise error

    def flush(self) -> None:
        # The shards open: one not opened since the start holds no write (opening each to
        # flush it took minutes at a close at ten million points).
        self._set.flush()

    def copy_to(self, dest: Path) -> None:
        """A consistent, compacted copy of every shard at ``dest`` (not existing yet), in this
        layout, while the store stays open: each shard's live points are written into a new
        shard (:meth:`tiers.semantic.vectors.edge.store.EdgeVectorStore.copy_to`), then the
        sidecar. The caller holds Tier 3's writers off (a backup does), so the shards show one
        moment."""
        stores = self._open_stores()
        with engine_errors(self.path, "backup"):
            dest.mkdir(parents=True)
        for index, store in stores:
            store.copy_to(dest / layout.shard_name(index))
        with engine_errors(self.path, "backup"):
            write_sidecar(dest, self._model, self._dim, self.shards)

    def interrupt(self) -> None:
        """:meth:`ShardSet.interrupt` (:meth:`close` keeps a recount's state), the preloads."""
        self._set.interrupt()
        self.preloads.stop()

    def close(self) -> None:
        with self._lock:
            opened = self._ledger is not None and not self._closed
            self._closed = True
        self.preloads.stop()  # a running one ends before its next step
        self._set.close()
        self.preloads.close()
        if opened and self._ledger is not None:  # nothing is written now: the counts are final
            self._frequencies.keep(layout.term_counts(self.path), unfinished=True)
            self._ledger.keep()

    @property
    def builds(self) -> int:  # index builds swapped in, over every shard (tests, figures)
        return sum(store.builds for _index, store in self._set.opened())

    @property
    def purges(self) -> int:  # purges done, over every shard
        return sum(store.purges for _index, store in self._set.opened())

    def open_shards(self) -> dict[int, EdgeVectorStore]:  # all, opened (tests, benchmarks)
        return dict(self._open_stores())

    @property
    def opened(self) -> list[int]:
        """The shards opened so far (for tests and figures; :meth:`open_shards` opens all)."""
        return [index for index, _store in self._set.opened()]

    # -- writes ------------------------------------------------------------------------------

    def upsert(self, points: Sequence[MemoryPoint]) -> None:
        for p in points:  # before anything is written to any shard
            if p.dense is None:
                raise ValueError(f"memory point {p.id} has no dense vector")
        groups: dict[int, list[MemoryPoint]] = {}
        for p in points:
            groups.setdefault(shard_of(p.scope.user_id, self.shards), []).append(p)
        for index, group in sorted(groups.items()):
            ledger = self._open_ledger()
            ledger.writing(index)  # the build mark is on disk before the engine writes
            try:
                self._writable(index).upsert(group)
            finally:
                ledger.wrote(index, len(group))

    def set_valid_to(self, ids: Sequence[str], validity: Validity, user_id: str = "") -> None:
        wanted = canonical_ids(ids)
        for index, store in self._scoped(user_id):
            held = store.contains(wanted) if wanted else set()
            if held:
                store.set_valid_to(sorted(held), validity, user_id)
                self._open_ledger().wrote(index, len(held))

    def delete(self, flt: PointFilter) -> int:
        removed = 0
        for index, store in self._scoped(flt.user_id):
            if not store.count(flt):
                continue
            ledger = self._open_ledger()
            ledger.deleting(index)  # the purge mark is on disk before the engine deletes
            try:
                removed += store.delete(flt)
            finally:
                ledger.deleted(index)  # a write too (the shard's next build covers it)
        return removed

    # -- reads -------------------------------------------------------------------------------

    def search_dense(self, vector: Sequence[float], flt: PointFilter, limit: int) -> list[Hit]:
        with self._searched(flt) as store:
            return [] if store is None else store.search_dense(vector, flt, limit)

    def search_sparse(self, vector: SparseVector, flt: PointFilter, limit: int) -> list[Hit]:
        with self._searched(flt) as store:
            return [] if store is None else store.search_sparse(vector, flt, limit)

    def weigh(self, vector: SparseVector) -> SparseVector:
        return self._frequencies.weigh(vector)

    def get(self, ids: Sequence[str], user_id: str = "") -> list[MemoryPoint]:
        wanted = canonical_ids(ids)
        found: dict[str, MemoryPoint] = {}
        for _index, store in self._scoped(user_id):
            if wanted:
                found.update((p.id, p) for p in store.get(wanted, user_id))
        return [found[i] for i in wanted if i in found]

    def dense(self, ids: Sequence[str], user_id: str = "") -> dict[str, list[float]]:
        wanted = canonical_ids(ids)
        out: dict[str, list[float]] = {}
        for _index, store in self._scoped(user_id):
            if wanted:
                out.update(store.dense(wanted, user_id))
        return out

    def scroll(self, flt: PointFilter, limit: int = 1000) -> list[MemoryPoint]:
        return self._gathered(flt, limit, EdgeVectorStore.scroll)

    def ids(self, flt: PointFilter, limit: int = 1000) -> list[str]:
        return self._gathered(flt, limit, EdgeVectorStore.ids)

    def episode_ids(self, flt: PointFilter, limit: int = 1000) -> set[str]:
        found: set[str] = set()
        for _index, store in self._scoped(flt.user_id):
            found |= store.episode_ids(flt, limit)
        return found

    def _gathered(
        self,
        flt: PointFilter,
        limit: int,
        read: Callable[[EdgeVectorStore, PointFilter, int], list[T]],
    ) -> list[T]:
        """``read`` of the shards ``flt`` reaches, one after the other, until ``limit``."""
        out: list[T] = []
        for _index, store in self._scoped(flt.user_id):
            if len(out) >= limit:
                break
            out += read(store, flt, limit - len(out))
        return out

    def count(self, flt: PointFilter, *, exact: bool = True) -> int:
        return sum(store.count(flt, exact=exact) for _index, store in self._scoped(flt.user_id))

    # -- internals ---------------------------------------------------------------------------

    def _open_ledger(self) -> ShardLedger:
        ledger = self._ledger
        if self._closed or ledger is None:
            state = "closed" if self._closed else "not open (call ensure() first)"
            raise VectorStoreUnavailable(f"the vector store at {self.path} is {state}")
        return ledger

    def _open_stores(self) -> list[tuple[int, EdgeVectorStore]]:
        """Every shard, those not opened yet opened now."""
        self._open_ledger()
        return self._set.every()

    def _user_store(self, user_id: str) -> EdgeVectorStore | None:
        self._open_ledger()
        return self._set.get(shard_of(user_id, self.shards))

    @contextlib.contextmanager
    def _searched(self, flt: PointFilter) -> Iterator[EdgeVectorStore | None]:
        """The shard a search of ``flt``'s user reads (when made), preloads held off."""
        require_scope(flt)
        store = self._user_store(flt.user_id)
        if store is None:
            yield None
            return
        with self.preloads.searching(flt.user_id, store):
            yield store

    def _scoped(self, user_id: str) -> list[tuple[int, EdgeVectorStore]]:
        """The user's shard (when made) with ``user_id``, else every shard."""
        if not user_id:
            return self._open_stores()
        store = self._user_store(user_id)
        return [] if store is None else [(shard_of(user_id, self.shards), store)]

    def _writable(self, index: int) -> EdgeVectorStore:  # made now if it was not
        self._open_ledger()
        return self._set.make(index)
