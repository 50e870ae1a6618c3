"""``vectors.originals`` in the embedded store: the type its shards' original dense vectors are
kept in on disk, fixed when a shard is made (:mod:`tiers.semantic.vectors.edge.config`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.contracts.vectors import INDEXED_DIM, MODEL, alice, ids, indexable_points
from tiers.semantic.vectors import PointFilter
from tiers.semantic.vectors.edge import generations
from tiers.semantic.vectors.edge.config import made_with
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.semantic.vectors.storage import DenseStorage, Originals


def originals_bytes(path: Path) -> int:
    """The bytes of the current generation's original dense vectors (every segment's)."""
    gen = generations.current(path)
    return sum(f.stat().st_size for f in gen.glob("segments/*/vector_storage-dense/matrix.dat"))


def quantized(path: Path) -> bool:
    """Whether the current generation holds an int8 copy of its dense vectors."""
    return any(generations.current(path).glob("segments/*/vector_storage-dense/quantized.*"))


def made(tmp_path: Path, name: str, originals: Originals) -> tuple[Path, EdgeVectorStore]:
    path = tmp_path / name
    store = EdgeVectorStore(path, storage=DenseStorage("int8", originals))
    store.ensure(MODEL, INDEXED_DIM)
    points, _ = indexable_points(queries=4)
    for start in range(0, len(points), 1000):
        store.upsert(points[start : start + 1000])
    store.optimize()
    return path, store


def test_float16_originals_take_half_the_disk_of_float32(tmp_path):
    sizes = {}
    for originals in ("float32", "float16"):
        path, store = made(tmp_path, originals, originals)
        try:
            assert made_with(generations.current(path)).originals == originals
            assert quantized(path)  # indexed: the int8 copy is made as with float32
            sizes[originals] = originals_bytes(path)
        finally:
            store.close()
    points = len(indexable_points(queries=4)[0])
    assert sizes["float32"] >= points * INDEXED_DIM * 4
    assert sizes["float16"] == pytest.approx(sizes["float32"] / 2, rel=0.02)


def test_a_purge_makes_its_copy_with_the_settings(tmp_path):
    """A store made with float32 originals, opened with float16 ones: its shard stays float32
    until a purge rewrites it, whose copy is float16, made with the int8 quantization, and
    quantized once built."""
    path, store = made(tmp_path, "store", "float32")
    store.close()
    store = EdgeVectorStore(path, storage=DenseStorage("int8", "float16"))
    try:
        store.ensure(MODEL, INDEXED_DIM)
        assert made_with(generations.current(path)).originals == "float32"
        _, asked = indexable_points(queries=4)
        before = [ids(store.search_dense(list(q), alice(), limit=5)) for q in asked]
        gone = before[3][-1]
        assert store.delete(PointFilter(ids=(gone,))) == 1
        store.purge()
        gen = generations.current(path)
        assert made_with(gen).originals == "float16"
        doc = json.loads((gen / "edge_config.json").read_text())
        assert "int8" in json.dumps(doc.get("quantization_config"))
        after = [ids(store.search_dense(list(q), alice(), limit=5)) for q in asked]
        assert [hits[0] for hits in after] == [hits[0] for hits in before]
        assert gone not in {i for hits in after for i in hits}
        store.optimize()
        assert quantized(path)
        assert store.count(alice()) == len(indexable_points(queries=4)[0]) - 1
    finally:
        store.close()
    again = EdgeVectorStore(path, storage=DenseStorage("int8", "float32"))
    try:  # opened with the other setting again: the shard keeps what it was made with
        again.ensure(MODEL, INDEXED_DIM)
        hits = again.search_dense(list(np.asarray(asked[0])), alice(), limit=5)
        assert ids(hits)[0] == before[0][0]
    finally:
        again.close()
