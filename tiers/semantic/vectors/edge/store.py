"""Tier 3 on the embedded Qdrant engine (``qdrant-edge-py``): one shard in one directory.

The directory holds the current generation of the shard (``gen-NNNNNN/`` named by ``CURRENT``:
:mod:`tiers.semantic.vectors.edge.generations`) and our sidecar ``strata_vectors.json``, which
records the embedding model the vectors came from (:mod:`tiers.semantic.vectors.edge.shard`).

Durability: every update goes through the engine's write-ahead log before it returns, so an
acknowledged write survives a crash of the process (verified with ``os._exit``); ``flush()``
writes the segments themselves. Index builds and purges make a new generation in a child
process and swap it in; they, the locks and the read leases are the store's live shard
(:class:`~tiers.semantic.vectors.edge.builds.EdgeBuilds`, its ``live``), which this store's
:class:`~tiers.semantic.vectors.VectorStore` API (opening, writes, reads, backup copies and
closing) goes through.

The keyword channel's IDF is the store's, not the engine's: the shard's sparse vectors have no
modifier, every write and delete updates a
:class:`~tiers.semantic.vectors.term_frequencies.DocumentFrequencies` (the shards of a sharded store
share one), and :meth:`EdgeVectorStore.search_sparse` weighs the query's terms with it. A shard made
with the engine's modifier (an earlier release) is rewritten without it when it opens.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qdrant_edge import (
    CountRequest,
    Filter,
    Point,
    Query,
    QueryRequest,
    ScrollRequest,
    UpdateOperation,
)
from qdrant_edge import SparseVector as EdgeSparseVector

from tiers.core.errors import VectorStoreMismatch, VectorStoreUnavailable
from tiers.core.priority import rest_after
from tiers.semantic.vectors import (
    DENSE,
    SPARSE,
    Hit,
    MemoryPoint,
    PointFilter,
    SparseVector,
    Validity,
    canonical_ids,
    episodes_of,
)
from tiers.semantic.vectors.edge import generations
from tiers.semantic.vectors.edge.builds import EdgeBuilds
from tiers.semantic.vectors.edge.config import made_with, search_params
from tiers.semantic.vectors.edge.delete import delete_points
from tiers.semantic.vectors.edge.filter import build_filter, require_scope
from tiers.semantic.vectors.edge.ids import texts
from tiers.semantic.vectors.edge.shard import (
    READ_PAGE,
    SIDECAR,
    WRITE_POINTS,
    check_model,
    copy_points,
    create_shard,
    ensure_payload_indexes,
    read_sidecar,
    records_terms,
    to_point,
    write_sidecar,
)
from tiers.semantic.vectors.point_cache import POINT_CACHE, PointCache
from tiers.semantic.vectors.ranking import best
from tiers.semantic.vectors.storage import FLOAT32, DenseStorage
from tiers.semantic.vectors.term_frequencies import DocumentFrequencies, Tally

if TYPE_CHECKING:
    from qdrant_edge import EdgeShard, NamedVector, Record

__all__ = ["SIDECAR", "EdgeVectorStore"]

log = logging.getLogger("strata.vectors")


def _of(record: Record, user_id: str) -> bool:
    """Whether a retrieved record is ``user_id``'s (any user's when it is empty)."""
    return not user_id or (record.payload or {}).get("user_id") == user_id


class EdgeVectorStore:
    """A :class:`~tiers.semantic.vectors.VectorStore` in one qdrant-edge shard at ``path``. Its
    points' terms are counted in ``frequencies``, its decoded points kept in ``points``
    (:mod:`tiers.semantic.vectors.point_cache`): both shared by a sharded store's shards."""

    def __init__(
        self,
        path: Path,
        frequencies: DocumentFrequencies | None = None,
        points: PointCache | None = None,
        storage: DenseStorage = FLOAT32,
        *,
        count_terms: bool = True,
        interrupted: threading.Event | None = None,
    ) -> None:
        self.path = path
        self.storage = storage  # how its dense vectors are kept and searched
        # the live shard, its builds and purges; shards made from now on keep ``storage``
        self.live = EdgeBuilds(path, storage)
        self._count_terms = count_terms  # at open (False: the sharded store read its counts)
        self._interrupted = interrupted or threading.Event()  # :meth:`interrupt` (shared)
        self._model = ""
        self._frequencies = frequencies if frequencies is not None else DocumentFrequencies()
        self._points = points if points is not None else PointCache(POINT_CACHE)

    # -- lifecycle ---------------------------------------------------------------------------

    def ensure(self, model: str, dim: int) -> None:
        with self.live.write_lock:
            if self.live.closed:
                raise VectorStoreUnavailable(f"the vector store at {self.path} is closed")
            if self.live.opened:
                check_model(self.path, self._model, self.live.dim, model, dim)
                return
            with self.live.engine("open"):
                generations.sweep(self.path)  # what a crash during a build left behind
                sidecar = read_sidecar(self.path)
                gen = generations.current(self.path)
                has_shard = (gen / "edge_config.json").exists()
            if sidecar is None:
                if has_shard:
                    raise VectorStoreMismatch(
                        f"the vector store at {self.path} has no {SIDECAR}, so the embedding"
                        " model of its vectors is unknown: restore the file or rebuild"
                    )
                with self.live.engine("create"):
                    write_sidecar(self.path, model, dim)
            else:
                check_model(self.path, sidecar["model"], sidecar["dim"], model, dim)
            with self.live.engine("open"):
                # Loading with the config makes the engine check it against the segments.
                if has_shard:
                    if made_with(gen).idf:
                        gen = generations.without_engine_idf(self.path, gen, dim)
                    shard = self.live.load(gen, dim)
                    try:
                        # An earlier release's lacked some; its indexes' placement is
                        # changed by its next build, off this process (edge_generations).
                        ensure_payload_indexes(shard, placement=False)
                    except Exception:
                        shard.close()
                        raise
                else:
                    if gen == self.path:
                        gen = generations.first(self.path)
                        generations.switch(self.path, gen)
                    shard = create_shard(gen, dim, self.storage)
                try:
                    if self._count_terms:  # whole or not at all: a stop may cut it short
                        tally = Tally.of_shard(shard, self._interrupted, self.path)
                        self._frequencies.count_opened(tally)
                except Exception:
                    shard.close()
                    raise
            self.live.start(shard, dim, gen)
            self._model = model

    def optimize(self) -> None:
        """Build the index (:meth:`tiers.semantic.vectors.edge.builds.EdgeBuilds.optimize`)."""
        self.live.optimize()

    def purge(self) -> None:
        """Rewrite the live points (:meth:`tiers.semantic.vectors.edge.builds.EdgeBuilds.purge`)."""
        self.live.purge()

    @property
    def builds(self) -> int:
        """Index builds swapped in (for tests and figures)."""
        return self.live.builds

    @property
    def builds_unneeded(self) -> int:  # builds that found nothing to build
        return self.live.builds_unneeded

    @property
    def purges(self) -> int:
        return self.live.purges

    def flush(self) -> None:  # a shard not written since its last flush is left as it is
        self.live.flush()

    def copy_to(self, dest: Path) -> None:
        """A consistent, compacted copy of the shard at ``dest`` (not existing yet), while it
        stays open.

        The engine has no snapshot creation, and its files keep the bytes of deleted points
        (in the WAL and in segment pages) until its optimizer rewrites them. So with writes
        and optimization held off, the live points (vectors and payloads) are written into a
        new shard at ``dest``: a copy never holds what was deleted (forgotten) before it."""
        with self.live.held("backup") as shard:
            dest.mkdir(parents=True)
            shutil.copyfile(self.path / SIDECAR, dest / SIDECAR)
            copy_points(shard, dest, self.live.dim, self.storage)

    def interrupt(self) -> None:
        self._interrupted.set()  # a term count at open, under way or to come, gives up

    def close(self) -> None:
        self.live.close()

    # -- writes ------------------------------------------------------------------------------

    def upsert(self, points: Sequence[MemoryPoint]) -> None:
        if not points:
            return
        converted = [to_point(p) for p in points]  # a point it refuses: nothing is written
        with self.live.write_lock, self.live.engine("upsert"):
            # In writes of WRITE_POINTS: other threads get the GIL between two.
            for start in range(0, len(points), WRITE_POINTS):
                end = start + WRITE_POINTS
                self._upsert(points[start:end], converted[start:end])

    def _upsert(self, points: Sequence[MemoryPoint], converted: list[Point]) -> None:
        """One write of the engine (under the write lock)."""
        ids = canonical_ids([p.id for p in points])
        # The terms of the points replaced stop counting: read them before the write.
        replaced = list(records_terms(self.live.current().retrieve(list(ids), False, [SPARSE])))
        self.live.apply(UpdateOperation.upsert_points(converted))
        self._frequencies.remove(replaced)
        latest = {p.id: p for p in points}  # an id written twice is one point
        self._frequencies.add(p.sparse for p in latest.values() if p.sparse is not None)
        self._points.invalidate(latest)

    def set_valid_to(self, ids: Sequence[str], validity: Validity, user_id: str = "") -> None:
        wanted = canonical_ids(ids)
        if not wanted:
            return
        # By filter, so ids that no longer exist are skipped instead of failing the batch.
        flt = build_filter(PointFilter(user_id=user_id, ids=tuple(wanted))) or Filter()
        payload = validity.payload()
        with self.live.write_lock, self.live.engine("set_valid_to"):
            self.live.apply(UpdateOperation.set_payload_by_filter(flt, payload))
            self._points.invalidate(wanted)

    def delete(self, flt: PointFilter) -> int:
        return delete_points(self.live, build_filter(flt) or Filter(), self._uncount)

    def _uncount(self, records: list[Record], ids: list[Any]) -> None:
        """The deleted ``records`` (their ``ids``) out of the term counts and the point cache."""
        self._frequencies.remove(records_terms(records))
        self._points.invalidate(map(str, ids))

    # -- reads -------------------------------------------------------------------------------

    def search_dense(self, vector: Sequence[float], flt: PointFilter, limit: int) -> list[Hit]:
        require_scope(flt)
        return self._query([float(x) for x in vector], DENSE, flt, limit)

    def search_sparse(self, vector: SparseVector, flt: PointFilter, limit: int) -> list[Hit]:
        require_scope(flt)
        if not vector.indices:
            return []
        weighed = self._frequencies.weigh(vector)
        return self._query(EdgeSparseVector(weighed.indices, weighed.values), SPARSE, flt, limit)

    def weigh(self, vector: SparseVector) -> SparseVector:
        return self._frequencies.weigh(vector)

    def get(self, ids: Sequence[str], user_id: str = "") -> list[MemoryPoint]:
        wanted = canonical_ids(ids)
        if not wanted:
            return []
        snapshot = self._points.snapshot()
        try:
            with self.live.read("get") as shard:
                found = self._decoded(shard, wanted, snapshot)
        finally:
            self._points.release(snapshot)
        return [
            found[i]
            for i in wanted
            if i in found and (not user_id or found[i].scope.user_id == user_id)
        ]

    def dense(self, ids: Sequence[str], user_id: str = "") -> dict[str, list[float]]:
        wanted = canonical_ids(ids)
        if not wanted:
            return {}
        with self.live.read("dense") as shard:
            records = shard.retrieve(list(wanted), ["user_id"] if user_id else False, True)
        out: dict[str, list[float]] = {}
        for r in records:
            vector = r.vector.get(DENSE) if isinstance(r.vector, dict) else None
            if isinstance(vector, list) and _of(r, user_id):
                out[str(r.id)] = [float(x) for x in vector]  # type: ignore[arg-type]
        return out

    def contains(self, ids: Sequence[str]) -> set[str]:
        """The canonical ids among ``ids`` that name a point here (a sharded store finds
        which shards to write to by id)."""
        wanted = canonical_ids(ids)
        if not wanted:
            return set()
        with self.live.read("contains") as shard:
            return {str(r.id) for r in shard.retrieve(list(wanted), False, False)}

    def scroll(self, flt: PointFilter, limit: int = 1000) -> list[MemoryPoint]:
        return [
            MemoryPoint.from_payload(str(r.id), r.payload)
            for page in self._pages(flt, limit, payload=True)
            for r in page
            if r.payload is not None
        ]

    def ids(self, flt: PointFilter, limit: int = 1000) -> list[str]:
        return texts([r.id for page in self._pages(flt, limit, payload=False) for r in page])

    def episode_ids(self, flt: PointFilter, limit: int = 1000) -> set[str]:
        found: set[str] = set()
        for page in self._pages(flt, limit, payload=["episode_id"]):
            found |= episodes_of(r.payload for r in page)  # a page's records freed as it goes
        return found

    def _pages(
        self, flt: PointFilter, limit: int, *, payload: bool | list[str]
    ) -> Iterator[list[Record]]:
        """Up to ``limit`` records matching ``flt``, with their payloads or not, a page at a
        time: the engine holds the GIL through a call, and one call over a large user's points
        would stall every other thread for a second. A read of payloads that may take many
        pages counts them first, and one that is a large share of the shard reads its payload
        files ahead (:meth:`EdgeBuilds.read_ahead`)."""
        offset: Any = None
        engine_filter = build_filter(flt)
        left = limit
        if payload and limit >= 16 * READ_PAGE:
            with self.live.read("scroll") as shard:
                wanted = shard.count(CountRequest(exact=True, filter=engine_filter))
                self.live.read_ahead(shard, min(wanted, limit), ["payload_storage"])
        while left > 0:
            began = time.perf_counter()
            request = ScrollRequest(
                offset=offset,
                limit=min(READ_PAGE, left),
                filter=engine_filter,
                with_payload=payload,
                with_vector=False,
            )
            with self.live.read("scroll") as shard:
                records, offset = shard.scroll(request)
            left -= len(records)
            yield records
            if offset is None:
                break
            rest_after(began)  # a caller resting (an erasure): tiers.core.priority.resting

    def count(self, flt: PointFilter, *, exact: bool = True) -> int:
        with self.live.read("count") as shard:
            return shard.count(CountRequest(exact=exact, filter=build_filter(flt)))

    # -- internals ---------------------------------------------------------------------------

    def _query(self, vector: NamedVector, using: str, flt: PointFilter, limit: int) -> list[Hit]:
        if limit <= 0:
            return []
        query, engine_filter = Query.Nearest(vector, using=using), build_filter(flt)
        params = search_params(self.storage) if using == DENSE else None

        def search(shard: EdgeShard, n: int) -> list[tuple[str, float]]:
            # The points come from the cache, the missing ones by id.
            asked = QueryRequest(
                n, query=query, filter=engine_filter, params=params, with_payload=False
            )
            return [(str(s.id), s.score) for s in shard.query(asked)]

        snapshot = self._points.snapshot()
        try:
            with self.live.read("search") as shard:
                scored = best(partial(search, shard), limit, using)
                found = self._decoded(shard, [pid for pid, _score in scored], snapshot)
        finally:
            self._points.release(snapshot)
        # A point deleted between the search and the fetch is left out.
        return [Hit(found[pid], score) for pid, score in scored if pid in found]

    def _decoded(self, shard: EdgeShard, ids: list[str], snapshot: int) -> dict[str, MemoryPoint]:
        """The points of ``ids`` that exist: from the cache, the others fetched and kept."""
        found = self._points.get(ids)
        missing = [pid for pid in ids if pid not in found]
        if missing:
            fetched = [
                MemoryPoint.from_payload(str(r.id), r.payload)
                for r in shard.retrieve(list(missing), True, False)
                if r.payload is not None
            ]
            self._points.put(fetched, snapshot)
            found.update((p.id, p) for p in fetched)
        return found
