"""Tier 3: what only one VectorStore implementation does (the embedded engine's sidecar and
lock, qdrant-client adopting a collection), and the keyword encoder both share. The contract
every implementation keeps is ``tests/contracts/test_vector_store.py``."""

from __future__ import annotations

import json

import pytest
from qdrant_client import QdrantClient

from tests.contracts.vectors import DIM, KEYWORDS, MODEL, mem
from tiers.vectors import PointFilter, SparseVector, VectorStoreMismatch, VectorStoreUnavailable
from tiers.vectors.edge import SIDECAR, EdgeVectorStore
from tiers.vectors.qdrant import QdrantVectorStore
from tiers.vectors.qdrant_collection import META_ID


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
