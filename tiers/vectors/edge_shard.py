"""The embedded engine's shard as Tier 3 lays it out: its config (dense cosine + sparse IDF),
payload indexes, point conversion, the sidecar that names the embedding model, and a copy of
the live points.

The sidecar ``strata_vectors.json`` (``{"model", "dim", "format"}``) records the embedding
model the vectors came from: the engine only knows the vector size. The model's name
includes the back-end where its vectors differ (``<model>@onnx-int8``,
:attr:`tiers.embedding.SentenceTransformerEmbedder.model_name`), so a store is never filled
with vectors of two kinds.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from qdrant_edge import (
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    KeywordIndexParams,
    Modifier,
    PayloadSchemaType,
    Point,
    ScrollRequest,
    UpdateOperation,
)
from qdrant_edge import SparseVector as EdgeSparseVector

from tiers.errors import StrataError
from tiers.vectors import DENSE, SPARSE, MemoryPoint, VectorStoreMismatch, VectorStoreUnavailable

if TYPE_CHECKING:
    from qdrant_edge import NamedVector, PayloadSchemaParams

SIDECAR = "strata_vectors.json"
FORMAT = 1
COPY_PAGE = 512  # points per page when a copy is made


def payload_indexes() -> dict[str, PayloadSchemaType | PayloadSchemaParams]:
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


def config(dim: int) -> EdgeConfig:
    return EdgeConfig(
        vectors={DENSE: EdgeVectorParams(size=dim, distance=Distance.Cosine)},
        sparse_vectors={SPARSE: EdgeSparseVectorParams(modifier=Modifier.Idf)},
    )


def to_point(p: MemoryPoint) -> Point:
    if p.dense is None:
        raise ValueError(f"memory point {p.id} has no dense vector")
    vector: dict[str, NamedVector] = {DENSE: [float(x) for x in p.dense]}
    if p.sparse is not None:
        vector[SPARSE] = EdgeSparseVector(p.sparse.indices, p.sparse.values)
    return Point(id=p.id, vector=vector, payload=p.payload())


def copy_points(shard: EdgeShard, dest: Path, dim: int) -> None:
    """Write the live points (vectors and payloads) of ``shard`` into a new shard at ``dest``:
    the copy holds none of the bytes of deleted points that the engine's files keep."""
    copy = EdgeShard.create(str(dest), config(dim))
    try:
        for name, schema in payload_indexes().items():
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


def check_model(path: Path, have_model: str, have_dim: int, model: str, dim: int) -> None:
    if (have_model, have_dim) != (model, dim):
        raise VectorStoreMismatch(
            f"the vectors in {path} are of {have_model} ({have_dim} dims), this daemon's of"
            f" {model} ({dim} dims): set that model again, or stop, move the directory aside,"
            " restart and run `weaverctl rebuild`"
        )


def read_sidecar(store: Path) -> dict[str, Any] | None:
    path = store / SIDECAR
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise VectorStoreMismatch(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise VectorStoreMismatch(f"{path} has format {found!r}; this daemon reads format {FORMAT}")
    if not isinstance(doc.get("model"), str) or not isinstance(doc.get("dim"), int):
        raise VectorStoreMismatch(f"{path} does not name a model and a dim: {doc}")
    return cast(dict[str, Any], doc)


def write_sidecar(store: Path, model: str, dim: int) -> None:
    """Atomically, before the shard exists: a shard is never left without its sidecar."""
    store.mkdir(parents=True, exist_ok=True)
    target = store / SIDECAR
    tmp = target.with_suffix(".tmp")
    with tmp.open("w") as f:
        json.dump({"model": model, "dim": dim, "format": FORMAT}, f)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    fd = os.open(store, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def engine_errors(path: Path, what: str) -> Iterator[None]:
    """Engine (and file system) failures become :class:`VectorStoreUnavailable`."""
    try:
        yield
    except StrataError:
        raise
    except Exception as exc:
        if "WouldBlock" in str(exc):
            raise VectorStoreUnavailable(
                f"the vector store at {path} is in use by another process"
            ) from exc
        raise VectorStoreUnavailable(f"vector store {what} failed at {path}: {exc}") from exc


def load_shard(path: Path, gen: Path, dim: int) -> EdgeShard:
    """Open the generation ``gen`` of the store at ``path``, checking it against ``dim``."""
    try:
        return EdgeShard.load(str(gen), config(dim))
    except Exception as exc:
        if "incompatible" not in str(exc).lower():
            raise
        raise VectorStoreMismatch(
            f"the vector store at {path} does not match its {SIDECAR} ({dim} dims): {exc};"
            " rebuild it"
        ) from exc
