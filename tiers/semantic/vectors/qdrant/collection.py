"""A Qdrant collection as Tier 3 lays it out: its config (dense cosine + sparse IDF), payload
indexes, its shard keys, the metadata point that names the embedding model, point conversion
and filters.

The collection config records the vector size; the embedding model is recorded in a reserved
*metadata point* (id :data:`META_ID`, payload ``{"kind": "_meta", "model", "dim", "shards"}``,
a unit dense vector and no user). Every filter :func:`build_filter` makes excludes it, even
the empty one, so it never shows in searches, scrolls, counts or deletes.

**Shard keys.** A collection is created with Qdrant's user-defined sharding
(``sharding_method=custom``) and one shard key per shard, :func:`shard_key` of 0 to
``shards - 1`` (``"shard-000"``, ...); the metadata point records ``shards`` and lives under
the first key. A user's points live under the key of :func:`tiers.semantic.vectors.shard_of` (see
:class:`tiers.semantic.vectors.qdrant.store.QdrantVectorStore`). A collection made before (its
metadata point without ``shards``) has no shard keys and is used as it is. ``qdrant-client``'s local
mode (``:memory:``, a path) has no sharding: it takes ``sharding_method`` and every
``shard_key_selector`` and ignores them, and raises ``NotImplementedError`` for shard key
management, so no key is made there (:func:`ensure_shard_keys`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from qdrant_client import QdrantClient, models

from tiers.semantic.vectors import (
    DENSE,
    SPARSE,
    MemoryPoint,
    PointFilter,
    VectorStoreMismatch,
    canonical_ids,
)
from tiers.semantic.vectors.storage import FLOAT32, RESCORE_OVERSAMPLING, DenseStorage

META_ID = "3e62f972-db6b-57ff-91c2-261afcab54d9"  # uuid5(NAMESPACE_URL, "strata:vectors:meta")
META_KIND = "_meta"

_PAYLOAD_INDEXES: dict[
    str, models.PayloadSchemaType | models.KeywordIndexParams | models.IntegerIndexParams
] = {
    "kind": models.PayloadSchemaType.KEYWORD,
    # Every search is filtered by user: the server co-locates a tenant's points.
    "user_id": models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
    "agent_id": models.PayloadSchemaType.KEYWORD,
    # Few queries filter by these (the time's: only a time range): on the server's disk, as
    # the embedded engine keeps them (edge_config.payload_indexes). ``on_disk`` rather than
    # ``memory``: servers older than ``memory`` read it, newer ones take it as cold. A
    # collection made by an earlier release keeps its indexes as they are.
    "episode_id": models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, on_disk=True),
    "session_id": models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, on_disk=True),
    "created_at": models.IntegerIndexParams(
        type=models.IntegerIndexType.INTEGER, lookup=True, range=True, on_disk=True
    ),
    "superseded": models.PayloadSchemaType.BOOL,
}

_NOT_META = models.FieldCondition(key="kind", match=models.MatchValue(value=META_KIND))


def build_filter(flt: PointFilter) -> models.Filter:
    """The Qdrant filter for ``flt``; it always excludes the metadata point."""
    must: list[models.Condition] = []
    if flt.user_id:
        must.append(
            models.FieldCondition(key="user_id", match=models.MatchValue(value=flt.user_id))
        )
    if flt.agent_id:
        must.append(
            models.FieldCondition(key="agent_id", match=models.MatchValue(value=flt.agent_id))
        )
    if flt.kinds:
        must.append(models.FieldCondition(key="kind", match=models.MatchAny(any=list(flt.kinds))))
    if flt.episode_ids:
        must.append(
            models.FieldCondition(
                key="episode_id", match=models.MatchAny(any=list(flt.episode_ids))
            )
        )
    if flt.created_from_us is not None or flt.created_to_us is not None:
        must.append(
            models.FieldCondition(
                key="created_at",
                range=models.Range(gte=flt.created_from_us, lt=flt.created_to_us),
            )
        )
    if not flt.include_superseded:
        must.append(models.FieldCondition(key="superseded", match=models.MatchValue(value=False)))
    if flt.replaced_by:
        replaced = models.MatchAny(any=list(flt.replaced_by))
        must.append(models.FieldCondition(key="replaced_by", match=replaced))
    if flt.ids:
        must.append(models.HasIdCondition(has_id=wanted_ids(flt.ids)))
    must_not: list[models.Condition] = [_NOT_META]
    if flt.exclude_sessions:
        sessions = models.MatchAny(any=list(flt.exclude_sessions))
        must_not.append(models.FieldCondition(key="session_id", match=sessions))
    for session_id, first, last in flt.exclude_from:
        session = models.FieldCondition(key="session_id", match=models.MatchValue(value=session_id))
        later = models.FieldCondition(key="sources[].seq", range=models.Range(gte=first, lte=last))
        must_not.append(models.Filter(must=[session, later]))
    return models.Filter(must=must or None, must_not=must_not)


def shard_key(index: int) -> str:
    """The shard key of shard ``index``."""
    return f"shard-{index:03d}"


def quantization_config(storage: DenseStorage) -> models.ScalarQuantization | None:
    """The collection's quantization for ``storage`` (its ``vectors.quantization``; as the
    embedded store's: :func:`tiers.semantic.vectors.edge.config.config`)."""
    if storage.quantization != "int8":
        return None
    return models.ScalarQuantization(
        scalar=models.ScalarQuantizationConfig(
            type=models.ScalarType.INT8, quantile=0.99, always_ram=True
        )
    )


def search_params(storage: DenseStorage) -> models.SearchParams:
    """A dense search's: with int8, rescored on the original vectors unless not ``rescore``;
    the originals only otherwise (:func:`tiers.semantic.vectors.edge.config.search_params`)."""
    if storage.quantization == "int8" and not storage.rescore:
        return models.SearchParams(quantization=models.QuantizationSearchParams(rescore=False))
    if storage.quantization == "int8":
        return models.SearchParams(
            quantization=models.QuantizationSearchParams(
                rescore=True, oversampling=RESCORE_OVERSAMPLING
            )
        )
    return models.SearchParams(quantization=models.QuantizationSearchParams(ignore=True))


def ensure_quantization(client: QdrantClient, collection: str, storage: DenseStorage) -> None:
    """Quantize an existing collection that is not yet, if ``storage`` asks for int8 (its server
    builds the int8 vectors in the background); one that is stays so with ``"none"``, whose
    searches do not use them."""
    if (
        storage.quantization == "int8"
        and client.get_collection(collection).config.quantization_config is None
    ):
        client.update_collection(collection, quantization_config=quantization_config(storage))


def create_collection(
    client: QdrantClient,
    collection: str,
    model: str,
    dim: int,
    shards: int,
    *,
    local: bool,
    storage: DenseStorage = FLOAT32,
) -> None:
    """The collection with Strata's layout, custom sharding with ``shards`` shard keys (none
    made in ``local`` mode), its dense vectors kept as ``storage`` says (local mode does not
    apply the originals' type), its payload indexes and its metadata point. One that another
    process created first is left as it is, for
    :meth:`tiers.semantic.vectors.qdrant.store.QdrantVectorStore.ensure` to check."""
    int8 = storage.quantization == "int8"
    half = models.Datatype.FLOAT16 if storage.originals == "float16" else None
    vectors = models.VectorParams(
        size=dim, distance=models.Distance.COSINE, on_disk=int8 or None, datatype=half
    )
    sparse = models.SparseVectorParams(modifier=models.Modifier.IDF)
    try:
        client.create_collection(
            collection,
            vectors_config={DENSE: vectors},
            sparse_vectors_config={SPARSE: sparse},
            sharding_method=models.ShardingMethod.CUSTOM,
            quantization_config=quantization_config(storage),
        )
    except Exception:
        if client.collection_exists(collection):
            return  # another process created it first: ensure() checks it
        raise
    if not local:
        for index in range(shards):
            client.create_shard_key(collection, shard_key(index))
    with warnings.catch_warnings():
        # Local mode warns that payload indexes have no effect there.
        warnings.filterwarnings("ignore", "Payload indexes have no effect", UserWarning)
        for name, schema in _PAYLOAD_INDEXES.items():
            client.create_payload_index(collection, name, field_schema=schema, wait=True)
    write_meta(client, collection, model, dim, shards)


def check_layout(
    dense: models.VectorParams | None, sparse: models.SparseVectorParams | None, where: str
) -> models.VectorParams:
    """``dense``, once a collection's vectors (``where``: which) are found to be Strata's: a
    cosine ``dense`` and a ``sparse`` one with IDF; else raise
    :class:`~tiers.semantic.vectors.VectorStoreMismatch`."""
    if (
        dense is None
        or dense.distance != models.Distance.COSINE
        or sparse is None
        or sparse.modifier != models.Modifier.IDF
    ):
        raise VectorStoreMismatch(
            f"{where} does not have Strata's layout (a cosine vector {DENSE!r}"
            f" and an IDF sparse vector {SPARSE!r}): use another collection"
        )
    return dense


def ensure_shard_keys(client: QdrantClient, collection: str, shards: int) -> None:
    """Make the shard keys of ``shards`` shards that a collection with custom sharding lacks
    (a server's only: local mode has no shard keys); for one whose creation was cut short."""
    listed = client.list_shard_keys(collection).shard_keys or []
    have = {k.key for k in listed}
    for index in range(shards):
        if shard_key(index) not in have:
            client.create_shard_key(collection, shard_key(index))


def write_meta(client: QdrantClient, collection: str, model: str, dim: int, shards: int) -> None:
    """The metadata point; with ``shards`` (a collection with shard keys), under the first."""
    unit = [1.0] + [0.0] * (dim - 1)  # cosine rejects (or cannot rank) a zero vector
    payload: dict[str, Any] = {"kind": META_KIND, "model": model, "dim": dim}
    if shards:
        payload["shards"] = shards
    point = models.PointStruct(id=META_ID, vector={DENSE: unit}, payload=payload)
    selector = shard_key(0) if shards else None
    client.upsert(collection, points=[point], wait=True, shard_key_selector=selector)


def read_meta(client: QdrantClient, collection: str) -> dict[str, Any] | None:
    """The metadata point's payload (None: there is none)."""
    records = client.retrieve(collection, ids=[META_ID], with_payload=True)
    if not records or not records[0].payload:
        return None
    return records[0].payload


def to_point(p: MemoryPoint) -> models.PointStruct:
    if p.dense is None:
        raise ValueError(f"memory point {p.id} has no dense vector")
    vector: dict[str, models.Vector] = {DENSE: [float(x) for x in p.dense]}
    if p.sparse is not None:
        vector[SPARSE] = models.SparseVector(
            indices=list(p.sparse.indices), values=list(p.sparse.values)
        )
    return models.PointStruct(id=p.id, vector=vector, payload=p.payload())


def wanted_ids(ids: Sequence[str]) -> list[str]:
    """The canonical forms of ``ids`` that are UUIDs (never the metadata point's), in order."""
    return [i for i in canonical_ids(ids) if i != META_ID]


def owned_by(payload: dict[str, Any] | None, user_id: str) -> bool:
    """Whether a retrieved payload is ``user_id``'s (any user's when it is empty)."""
    return not user_id or (payload or {}).get("user_id") == user_id


def require_scope(flt: PointFilter) -> None:
    if not flt.user_id:
        raise ValueError("a vector search needs a user_id: scope is a hard filter")
