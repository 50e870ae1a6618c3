"""Tier 3: what only one VectorStore implementation does (the embedded engine's sidecar and
lock, qdrant-client adopting a collection and routing by shard keys), and the keyword encoder
both share. The contract
every implementation keeps is ``tests/contracts/test_vector_store.py``."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from qdrant_client import QdrantClient, models
from qdrant_edge import EdgeShard, IntegerIndexParams, Memory, PayloadSchemaType, UpdateOperation

from tests.contracts.vectors import (
    BOB,
    DIM,
    INDEXED_DIM,
    KEYWORDS,
    MODEL,
    indexable_points,
    mem,
    unit,
)
from tiers.semantic.vectors import (
    PointFilter,
    SparseVector,
    Validity,
    VectorStoreMismatch,
    VectorStoreUnavailable,
    shard_of,
)
from tiers.semantic.vectors.edge.config import config, payload_indexes
from tiers.semantic.vectors.edge.shard import ensure_payload_indexes
from tiers.semantic.vectors.edge.store import SIDECAR, EdgeVectorStore
from tiers.semantic.vectors.qdrant.collection import META_ID
from tiers.semantic.vectors.qdrant.store import QdrantVectorStore
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.semantic.vectors.storage import DenseStorage


def test_edge_sidecar_and_lock(tmp_path):
    path = tmp_path / "vectors"
    first = EdgeVectorStore(path)
    first.ensure(MODEL, DIM)
    try:
        assert json.loads((path / SIDECAR).read_text()) == {
            "model": MODEL,
            "dim": DIM,
            "format": 1,
        }
        second = EdgeVectorStore(path)
        with pytest.raises(VectorStoreUnavailable, match="in use"):
            second.ensure(MODEL, DIM)
        second.close()
    finally:
        first.close()

    (path / SIDECAR).unlink()
    with pytest.raises(VectorStoreMismatch, match="unknown"):
        EdgeVectorStore(path).ensure(MODEL, DIM)


def test_edge_reports_a_tampered_sidecar(tmp_path):
    path = tmp_path / "vectors"
    first = EdgeVectorStore(path)
    first.ensure(MODEL, DIM)
    first.close()
    (path / SIDECAR).write_text('{"format": 2}')
    with pytest.raises(VectorStoreMismatch, match="format 2"):
        EdgeVectorStore(path).ensure(MODEL, DIM)
    # a sidecar that lies about the size: the engine's own check catches it
    (path / SIDECAR).write_text(json.dumps({"model": MODEL, "dim": 2 * DIM, "format": 1}))
    with pytest.raises(VectorStoreMismatch, match="expected vector size 32, but got 16"):
        EdgeVectorStore(path).ensure(MODEL, 2 * DIM)
    (path / SIDECAR).write_text(json.dumps({"model": MODEL, "dim": DIM, "format": 1}))
    again = EdgeVectorStore(path)
    again.ensure(MODEL, DIM)  # a failed load left the shard unlocked
    again.close()


def test_qdrant_adopts_an_empty_collection_without_metadata():
    client = QdrantClient(":memory:")
    first = QdrantVectorStore(client, "c")
    first.ensure(MODEL, DIM)
    first.upsert([mem("x")])
    client.delete("c", points_selector=[META_ID])
    with pytest.raises(VectorStoreMismatch, match="unknown"):
        QdrantVectorStore(client, "c").ensure(MODEL, DIM)
    first.delete(PointFilter())
    QdrantVectorStore(client, "c").ensure("other-model", DIM)  # empty: adopted
    with pytest.raises(VectorStoreMismatch, match="other-model"):
        QdrantVectorStore(client, "c").ensure(MODEL, DIM)
    client.close()


def test_qdrant_refuses_a_collection_of_another_layout():
    client = QdrantClient(":memory:")
    client.create_collection(  # someone else's: one unnamed vector, by dot product
        "theirs", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.DOT)
    )
    with pytest.raises(VectorStoreMismatch, match="does not have Strata's layout"):
        QdrantVectorStore(client, "theirs").ensure(MODEL, DIM)
    client.close()


# -- the keyword encoder -----------------------------------------------------------------------


def test_keyword_encoder():
    doc = KEYWORDS.embed_document("Alice likes green tea, green tea!")
    assert isinstance(doc, SparseVector) and len(doc.indices) == len(doc.values) == 4
    assert all(type(i) is int for i in doc.indices) and all(type(v) is float for v in doc.values)
    weights = dict(zip(doc.indices, doc.values, strict=True))
    green = KEYWORDS.embed_query("GREEN").indices[0]
    alice_ = KEYWORDS.embed_query("alice").indices[0]
    assert weights[green] > weights[alice_] > 0  # term frequency counts
    query = KEYWORDS.embed_query("liking the teas")  # stemmed, stop words dropped
    assert set(query.indices) <= set(doc.indices) and len(query.indices) == 2
    assert query.values == [1.0, 1.0]
    for empty in ("", "   ", "the and of it", "!!! ..."):
        assert KEYWORDS.embed_document(empty) == SparseVector([], [])
        assert KEYWORDS.embed_query(empty) == SparseVector([], [])


# -- Qdrant's shard keys -------------------------------------------------------------------------


class ShardKeyRecorder:
    """A ``:memory:`` client dressed as a server's, so that the store makes shard keys: it
    records the keys made and the ``shard_key_selector`` (and ``sharding_method``) of every
    call, and passes the calls on (local mode takes the selectors and ignores them). What a
    server does with them is not tested here: no Qdrant server runs in this suite."""

    RECORDED = ("create_collection", "upsert", "query_points", "retrieve", "scroll", "count")
    RECORDED += ("delete", "set_payload", "create_payload_index")

    def __init__(self) -> None:
        self.inner = QdrantClient(":memory:")
        self.init_options = {"url": "http://recorder:6333"}
        self.keys: list[object] = []
        self.calls: list[tuple[str, object]] = []
        self.sharding: object = None
        self.indexes: dict[str, object] = {}

    def create_shard_key(self, collection: str, key: object, **_kw: object) -> bool:
        self.keys.append(key)
        return True

    def list_shard_keys(self, collection: str, **_kw: object) -> models.ShardKeysResponse:
        return models.ShardKeysResponse(
            shard_keys=[models.ShardKeyDescription(key=k) for k in self.keys]  # type: ignore[arg-type]
        )

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.RECORDED:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if name == "create_collection":
                self.sharding = kwargs.get("sharding_method")
            elif name == "create_payload_index":
                self.indexes[kwargs.get("field_name", args[1])] = kwargs.get("field_schema")
            else:
                self.calls.append((name, kwargs.get("shard_key_selector")))
            return attr(*args, **kwargs)

        return call

    def selectors(self, name: str) -> list[object]:
        return [s for n, s in self.calls if n == name]


def test_qdrant_makes_a_collection_with_shard_keys_and_routes_by_user():
    spy = ShardKeyRecorder()
    store = QdrantVectorStore(cast(QdrantClient, spy), "c", shards=4)
    store.ensure(MODEL, DIM)
    assert spy.sharding == models.ShardingMethod.CUSTOM
    assert spy.keys == ["shard-000", "shard-001", "shard-002", "shard-003"]
    assert spy.selectors("upsert") == ["shard-000"]  # the metadata point, under the first key
    on_disk = {n for n, i in spy.indexes.items() if getattr(i, "on_disk", None)}
    assert on_disk == {"episode_id", "session_id", "created_at"}  # as the embedded engine does
    assert getattr(spy.indexes["user_id"], "is_tenant", None) is True
    spy.calls.clear()

    alice_key, bob_key = f"shard-{shard_of('alice', 4):03d}", f"shard-{shard_of('bob', 4):03d}"
    assert alice_key != bob_key
    a, b = mem("alice's note", seed=1), mem("bob's note", scope=BOB, seed=2)
    store.upsert([a, b])
    assert sorted(map(str, spy.selectors("upsert"))) == sorted([alice_key, bob_key])
    spy.calls.clear()
    alice = PointFilter(user_id="alice")
    store.search_dense([float(x) for x in unit(1)], alice, 3)
    store.search_sparse(KEYWORDS.embed_query("note"), alice, 3)
    store.get([a.id], "alice")
    store.dense([a.id], "alice")
    store.scroll(alice)
    store.count(alice)
    store.delete(PointFilter(user_id="alice", ids=(a.id,)))
    assert {s for _n, s in spy.calls} == {alice_key}  # every call named alice's shard alone
    spy.calls.clear()
    store.get([b.id])
    store.count(PointFilter())
    store.set_valid_to([b.id], Validity(5))
    store.delete(PointFilter(episode_ids=("ep-1",)))
    assert {s for _n, s in spy.calls} == {None}  # without a user: every shard
    store.close()


def test_qdrant_keeps_using_a_collection_without_shard_keys_and_the_collections_own_count():
    client = QdrantClient(":memory:")
    old = QdrantVectorStore(client, "old", shards=4)
    old.ensure(MODEL, DIM)
    old.upsert([mem("kept", seed=1)])
    # As a collection made before shard keys: its metadata point names no shard count.
    client.set_payload("old", {"shards": None}, points=[META_ID])
    spy = ShardKeyRecorder()
    spy.inner = client
    again = QdrantVectorStore(cast(QdrantClient, spy), "old", shards=8)
    again.ensure(MODEL, DIM)
    spy.calls.clear()
    again.upsert([mem("more", seed=2)])
    again.search_dense([float(x) for x in unit(1)], PointFilter(user_id="alice"), 3)
    assert {s for _n, s in spy.calls} == {None} and spy.keys == []
    assert again.count(PointFilter()) == 2
    # A collection with 4 shard keys keeps routing by 4, whatever the setting says.
    client.set_payload("old", {"shards": 4}, points=[META_ID])
    third = QdrantVectorStore(cast(QdrantClient, spy), "old", shards=8)
    third.ensure(MODEL, DIM)
    spy.calls.clear()
    third.count(PointFilter(user_id="alice"))
    assert spy.calls == [("count", f"shard-{shard_of('alice', 4):03d}")]
    client.close()


@pytest.mark.parametrize("quantization", ["int8", "none"])
def test_edge_int8_segments_keep_quantized_vectors(tmp_path, quantization):
    """The embedded store's index build writes the int8 copy of its vectors with "int8" (the
    contract suite checks the scores), and none without."""
    store = ShardedVectorStore(tmp_path / "vectors", 4, storage=DenseStorage(quantization))
    store.ensure(MODEL, INDEXED_DIM)
    points, _asked = indexable_points(queries=1)
    for start in range(0, len(points), 1000):
        store.upsert(points[start : start + 1000])
    store.optimize()
    quantized = list((tmp_path / "vectors").rglob("quantized.data"))
    store.close()
    assert bool(quantized) == (quantization == "int8")


def test_a_shard_is_asked_only_for_the_payload_indexes_it_lacks(tmp_path):
    """Asked for an index it has, the engine builds it again over every point (seconds at
    every open of a large shard): a shard of an earlier release gets those it lacks, or holds
    with other settings, and a shard that has them all gets none."""
    shard = EdgeShard.create(str(tmp_path / "shard"), config(DIM))
    try:
        shard.update(UpdateOperation.create_field_index("kind", PayloadSchemaType.Keyword))
        # user_id without the tenant setting: an index with other settings is made again
        shard.update(UpdateOperation.create_field_index("user_id", PayloadSchemaType.Keyword))
        assert ensure_payload_indexes(shard) == len(payload_indexes()) - 1
        schema = shard.info().payload_schema
        assert set(schema) == set(payload_indexes())
        assert getattr(schema["user_id"].params, "is_tenant", None) is True
        assert ensure_payload_indexes(shard) == 0
    finally:
        shard.close()


def test_the_episode_session_and_time_indexes_are_kept_on_disk_and_moved_there_when_asked(
    tmp_path,
):
    """Those three indexes stay on disk (a shard's load holds the GIL, and they were most of
    it); one an earlier release kept in RAM is left so unless ``placement`` is asked for (the
    build child's), as making it again holds the GIL for seconds at 10M."""
    shard = EdgeShard.create(str(tmp_path / "shard"), config(DIM))
    try:
        assert ensure_payload_indexes(shard) == len(payload_indexes())
        schema = shard.info().payload_schema
        on_disk = {n for n, i in schema.items() if getattr(i.params, "memory", None) == Memory.Cold}
        assert on_disk == {"episode_id", "session_id", "created_at"}
        assert schema["created_at"].params.range and schema["created_at"].params.lookup
        assert ensure_payload_indexes(shard) == 0
        shard.update(UpdateOperation.create_field_index("episode_id", PayloadSchemaType.Keyword))
        shard.update(UpdateOperation.create_field_index("created_at", PayloadSchemaType.Integer))
        assert ensure_payload_indexes(shard, placement=False) == 0
        assert shard.info().payload_schema["episode_id"].params is None  # left in RAM
        assert shard.info().payload_schema["created_at"].params is None
        assert ensure_payload_indexes(shard) == 2
        for field in ("episode_id", "created_at"):
            assert shard.info().payload_schema[field].params.memory == Memory.Cold
        # an index of the time without ranges is made again, placement or not
        lookups = IntegerIndexParams(lookup=True, range=False, memory=Memory.Cold)
        shard.update(UpdateOperation.create_field_index("created_at", lookups))
        assert ensure_payload_indexes(shard, placement=False) == 1
        assert shard.info().payload_schema["created_at"].params.range
    finally:
        shard.close()
