"""Tier 3 on the embedded Qdrant engine (``qdrant-edge-py``): one shard in one directory.

The directory holds the engine's files (``edge_config.json``, ``segments/``, ``wal/``) and our
sidecar ``strata_vectors.json`` (``{"model", "dim", "format"}``), which records the embedding
model the vectors came from: the engine only knows the vector size.

Durability: every update goes through the engine's write-ahead log before it returns, so an
acknowledged write survives a crash of the process (verified with ``os._exit``); ``flush()``
writes the segments themselves. The engine has no background threads: HNSW indexes are only
built by :meth:`EdgeVectorStore.optimize`, which the daemon must schedule. ``optimize()``
holds the GIL for its whole run (seconds on large stores), so every other Python thread of
the process waits meanwhile.

Threads: one instance is shared by the writer and the query threads. Reads go to the engine
without a lock (the engine is safe for concurrent readers and writers). Writes are serialized
by a lock, which also makes ``delete``'s count-then-delete atomic with respect to other
writes; ``optimize()`` has its own lock, not the write lock (the engine accepts updates
while it optimizes, though with the GIL held no other Python thread runs meanwhile);
``close()`` takes both. A read racing with ``close()`` fails with
:class:`~tiers.vectors.VectorStoreUnavailable`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from qdrant_edge import (
    CountRequest,
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    Filter,
    HasIdCondition,
    KeywordIndexParams,
    Modifier,
    PayloadSchemaType,
    Point,
    Query,
    QueryRequest,
    ScrollRequest,
    UpdateOperation,
)
from qdrant_edge import SparseVector as EdgeSparseVector

from daemon.errors import StrataError
from tiers.vectors import (
    DENSE,
    SPARSE,
    Hit,
    MemoryPoint,
    PointFilter,
    SparseVector,
    VectorStoreMismatch,
    VectorStoreUnavailable,
    canonical_id,
)
from tiers.vectors.edge_filter import build_filter

if TYPE_CHECKING:
    from qdrant_edge import NamedVector, PayloadSchemaParams

SIDECAR = "strata_vectors.json"
FORMAT = 1
COPY_PAGE = 512  # points per page when a copy is made


def _payload_indexes() -> dict[str, PayloadSchemaType | PayloadSchemaParams]:
    return {
        "kind": PayloadSchemaType.Keyword,
        # Every search is filtered by user: the engine groups a tenant's points.
        "user_id": KeywordIndexParams(is_tenant=True),
        "agent_id": PayloadSchemaType.Keyword,
        "episode_id": PayloadSchemaType.Keyword,
        "session_id": PayloadSchemaType.Keyword,
        "created_at": PayloadSchemaType.Integer,
        "superseded": PayloadSchemaType.Bool,
    }


def _config(dim: int) -> EdgeConfig:
    return EdgeConfig(
        vectors={DENSE: EdgeVectorParams(size=dim, distance=Distance.Cosine)},
        sparse_vectors={SPARSE: EdgeSparseVectorParams(modifier=Modifier.Idf)},
    )


def _require_scope(flt: PointFilter) -> None:
    if not flt.user_id:
        raise ValueError("a vector search needs a user_id: scope is a hard filter")


class EdgeVectorStore:
    """A :class:`~tiers.vectors.VectorStore` in one qdrant-edge shard at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._shard: EdgeShard | None = None
        self._model = ""
        self._dim = 0
        self._closed = False
        self._write_lock = threading.Lock()
        self._optimize_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    def ensure(self, model: str, dim: int) -> None:
        with self._write_lock:
            if self._closed:
                raise VectorStoreUnavailable(f"the vector store at {self.path} is closed")
            if self._shard is not None:
                self._check(self._model, self._dim, model, dim)
                return
            with self._engine("open"):
                sidecar = self._read_sidecar()
                has_shard = (self.path / "edge_config.json").exists()
            if sidecar is None:
                if has_shard:
                    raise VectorStoreMismatch(
                        f"the vector store at {self.path} has no {SIDECAR}, so the embedding"
                        " model of its vectors is unknown: restore the file or rebuild"
                    )
                with self._engine("create"):
                    self._write_sidecar(model, dim)
            else:
                self._check(sidecar["model"], sidecar["dim"], model, dim)
            with self._engine("open"):
                # Loading with the config makes the engine check it against the segments.
                if has_shard:
                    shard = self._load(dim)
                else:
                    shard = EdgeShard.create(str(self.path), _config(dim))
                try:
                    for name, schema in _payload_indexes().items():  # idempotent
                        shard.update(UpdateOperation.create_field_index(name, schema))
                except Exception:
                    shard.close()
                    raise
            self._shard, self._model, self._dim = shard, model, dim

    def optimize(self) -> None:
        with self._optimize_lock, self._engine("optimize"):
            self._open().optimize()

    def flush(self) -> None:
        with self._write_lock, self._engine("flush"):
            self._open().flush()

    def copy_to(self, dest: Path) -> None:
        """A consistent, compacted copy of the shard at ``dest`` (not existing yet), while it
        stays open.

        The engine has no snapshot creation, and its files keep the bytes of deleted points
        (in the WAL and in segment pages) until its optimizer rewrites them. So with writes
        and optimization held off, the live points (vectors and payloads) are written into a
        new shard at ``dest``: a copy never holds what was deleted (forgotten) before it."""
        with self._optimize_lock, self._write_lock, self._engine("backup"):
            shard = self._open()
            shutil.copyfile(self.path / SIDECAR, _make_dir(dest) / SIDECAR)
            copy = EdgeShard.create(str(dest), _config(self._dim))
            try:
                for name, schema in _payload_indexes().items():
                    copy.update(UpdateOperation.create_field_index(name, schema))
                offset: Any = None
                while True:
                    request = ScrollRequest(
                        offset=offset, limit=COPY_PAGE, with_payload=True, with_vector=True
                    )
                    records, offset = shard.scroll(request)
                    points = [
                        Point(id=r.id, vector=r.vector, payload=r.payload)
                        for r in records
                        if r.vector is not None
                    ]
                    if points:
                        copy.update(UpdateOperation.upsert_points(points))
                    if offset is None:
                        break
                copy.flush()
            finally:
                copy.close()

    def close(self) -> None:
        with self._optimize_lock, self._write_lock:
            if self._closed:
                return
            self._closed = True
            shard, self._shard = self._shard, None
            if shard is not None:
                with self._engine("close"):
                    try:
                        shard.flush()
                    finally:
                        shard.close()

    # -- writes ------------------------------------------------------------------------------

    def upsert(self, points: Sequence[MemoryPoint]) -> None:
        if not points:
            return
        edge_points = [_point(p) for p in points]
        with self._write_lock, self._engine("upsert"):
            self._open().update(UpdateOperation.upsert_points(edge_points))

    def set_valid_to(self, ids: Sequence[str], valid_to_us: int) -> None:
        wanted = {i for i in map(canonical_id, ids) if i is not None}
        if not wanted:
            return
        # By filter, so ids that no longer exist are skipped instead of failing the batch.
        flt = Filter(must=[HasIdCondition(set(wanted))])
        payload = {"valid_to": valid_to_us, "superseded": True}
        with self._write_lock, self._engine("set_valid_to"):
            self._open().update(UpdateOperation.set_payload_by_filter(flt, payload))

    def delete(self, flt: PointFilter) -> int:
        engine_filter = build_filter(flt) or Filter()
        with self._write_lock, self._engine("delete"):
            shard = self._open()
            n = shard.count(CountRequest(exact=True, filter=engine_filter))
            if n:
                shard.update(UpdateOperation.delete_points_by_filter(engine_filter))
            return n

    # -- reads -------------------------------------------------------------------------------

    def search_dense(self, vector: Sequence[float], flt: PointFilter, limit: int) -> list[Hit]:
        _require_scope(flt)
        return self._query([float(x) for x in vector], DENSE, flt, limit)

    def search_sparse(self, vector: SparseVector, flt: PointFilter, limit: int) -> list[Hit]:
        _require_scope(flt)
        if not vector.indices:
            return []
        return self._query(EdgeSparseVector(vector.indices, vector.values), SPARSE, flt, limit)

    def get(self, ids: Sequence[str]) -> list[MemoryPoint]:
        wanted = list(dict.fromkeys(i for i in map(canonical_id, ids) if i is not None))
        if not wanted:
            return []
        with self._engine("get"):
            records = self._open().retrieve(list(wanted), True, False)
        found = {str(r.id): r.payload for r in records if r.payload is not None}
        return [MemoryPoint.from_payload(i, found[i]) for i in wanted if i in found]

    def dense(self, ids: Sequence[str]) -> dict[str, list[float]]:
        wanted: list[int | uuid.UUID | str] = list(
            dict.fromkeys(i for i in map(canonical_id, ids) if i is not None)
        )
        if not wanted:
            return {}
        with self._engine("dense"):
            records = self._open().retrieve(wanted, False, True)
        out: dict[str, list[float]] = {}
        for r in records:
            vector = r.vector.get(DENSE) if isinstance(r.vector, dict) else None
            if isinstance(vector, list):
                out[str(r.id)] = [float(x) for x in vector]  # type: ignore[arg-type]
        return out

    def scroll(self, flt: PointFilter, limit: int = 1000) -> list[MemoryPoint]:
        if limit <= 0:
            return []
        request = ScrollRequest(
            limit=limit, filter=build_filter(flt), with_payload=True, with_vector=False
        )
        with self._engine("scroll"):
            records, _ = self._open().scroll(request)
        return [
            MemoryPoint.from_payload(str(r.id), r.payload) for r in records if r.payload is not None
        ]

    def count(self, flt: PointFilter) -> int:
        with self._engine("count"):
            return self._open().count(CountRequest(exact=True, filter=build_filter(flt)))

    # -- internals ---------------------------------------------------------------------------

    def _query(self, vector: NamedVector, using: str, flt: PointFilter, limit: int) -> list[Hit]:
        if limit <= 0:
            return []
        request = QueryRequest(
            limit=limit,
            query=Query.Nearest(vector, using=using),
            filter=build_filter(flt),
            with_payload=True,
        )
        with self._engine("search"):
            scored = self._open().query(request)
        return [
            Hit(MemoryPoint.from_payload(str(s.id), s.payload), s.score)
            for s in scored
            if s.payload is not None
        ]

    def _open(self) -> EdgeShard:
        shard = self._shard
        if shard is None:
            state = "closed" if self._closed else "not open (call ensure() first)"
            raise VectorStoreUnavailable(f"the vector store at {self.path} is {state}")
        return shard

    @contextlib.contextmanager
    def _engine(self, what: str) -> Iterator[None]:
        """Engine (and file system) failures become :class:`VectorStoreUnavailable`."""
        try:
            yield
        except StrataError:
            raise
        except Exception as exc:
            if "WouldBlock" in str(exc):
                raise VectorStoreUnavailable(
                    f"the vector store at {self.path} is in use by another process"
                ) from exc
            raise VectorStoreUnavailable(
                f"vector store {what} failed at {self.path}: {exc}"
            ) from exc

    def _check(self, have_model: str, have_dim: int, model: str, dim: int) -> None:
        if (have_model, have_dim) != (model, dim):
            raise VectorStoreMismatch(
                f"the vector store at {self.path} was created with model {have_model}"
                f" ({have_dim} dims); this daemon uses model {model} ({dim} dims):"
                " use another data directory or rebuild"
            )

    def _load(self, dim: int) -> EdgeShard:
        try:
            return EdgeShard.load(str(self.path), _config(dim))
        except Exception as exc:
            if "incompatible" not in str(exc).lower():
                raise
            raise VectorStoreMismatch(
                f"the vector store at {self.path} does not match its {SIDECAR}"
                f" ({dim} dims): {exc}; rebuild it"
            ) from exc

    def _read_sidecar(self) -> dict[str, Any] | None:
        path = self.path / SIDECAR
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except ValueError as exc:
            raise VectorStoreMismatch(f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            found = doc.get("format") if isinstance(doc, dict) else None
            raise VectorStoreMismatch(
                f"{path} has format {found!r}; this daemon reads format {FORMAT}"
            )
        if not isinstance(doc.get("model"), str) or not isinstance(doc.get("dim"), int):
            raise VectorStoreMismatch(f"{path} does not name a model and a dim: {doc}")
        return cast(dict[str, Any], doc)

    def _write_sidecar(self, model: str, dim: int) -> None:
        """Atomically, before the shard exists: a shard is never left without its sidecar."""
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.path / SIDECAR
        tmp = target.with_suffix(".tmp")
        with tmp.open("w") as f:
            json.dump({"model": model, "dim": dim, "format": FORMAT}, f)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _point(p: MemoryPoint) -> Point:
    if p.dense is None:
        raise ValueError(f"memory point {p.id} has no dense vector")
    vector: dict[str, NamedVector] = {DENSE: [float(x) for x in p.dense]}
    if p.sparse is not None:
        vector[SPARSE] = EdgeSparseVector(p.sparse.indices, p.sparse.values)
    return Point(id=p.id, vector=vector, payload=p.payload())


def _make_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path
