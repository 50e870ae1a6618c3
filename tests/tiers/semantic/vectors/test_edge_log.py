"""The engine's write-ahead log as an embedded shard keeps it (tiers.semantic.vectors.edge's
config and shard): in small segments that a flush drops, with every acknowledged write kept over a
hard exit, and written in parts of ``WRITE_POINTS`` points (what a load decodes again is the
last part, not a whole large upsert); a flush asks the engine only when the shard was written
since its last one (tiers.semantic.vectors.edge.builds)."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

from qdrant_edge import EdgeShard

from tests.contracts.vectors import DIM, KEYWORDS, MODEL, T0, mem
from tests.support import ROOT
from tiers.semantic.vectors import MemoryPoint, PointFilter, Validity
from tiers.semantic.vectors.edge import generations
from tiers.semantic.vectors.edge.config import CONFIG_FILE, WAL_SEGMENT_BYTES, config
from tiers.semantic.vectors.edge.shard import (
    WRITE_POINTS,
    ensure_payload_indexes,
    to_point,
    upserts,
)
from tiers.semantic.vectors.edge.store import EdgeVectorStore

T1 = T0 + 1_000_000
# About 2.6 kB a point in the log: 1,800 of them are more than four segments.
FILLER = "a sentence of some length about the garden, the market and the weather. " * 30


def many(n: int, start: int = 0) -> list[MemoryPoint]:
    return [mem(f"point {i} {FILLER}", seq=i, seed=i) for i in range(start, start + n)]


def allocated(directory: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in directory.iterdir() if f.is_file())


def opened(path: Path) -> EdgeVectorStore:
    store = EdgeVectorStore(path)
    store.ensure(MODEL, DIM)
    return store


def acknowledged(gen: Path) -> int:
    """The engine's last acknowledged operation (its log's ``first-index`` file)."""
    return int(json.loads((gen / "wal" / "first-index").read_text())["ack_index"])


def test_a_shards_log_is_kept_in_small_segments_that_a_flush_drops(tmp_path):
    written = many(1800)
    store = opened(tmp_path / "store")
    try:
        for start in range(0, len(written), 300):
            store.upsert(written[start : start + 300])
        store.flush()
        gen = generations.current(tmp_path / "store")
    finally:
        store.close()
    made = json.loads((gen / CONFIG_FILE).read_text())
    assert made["wal_options"]["segment_capacity"] == WAL_SEGMENT_BYTES

    # The same writes into a shard made with the engine's defaults (32 MiB segments).
    default = EdgeShard.create(str(tmp_path / "default"), config(DIM))
    try:
        ensure_payload_indexes(default)
        for op in upserts([to_point(p) for p in written]):
            default.update(op)
        default.flush()
    finally:
        default.close()
    assert allocated(tmp_path / "default" / "wal") > 4 * WAL_SEGMENT_BYTES  # what was written
    # What a flush leaves: the last segment closed and the open one.
    assert allocated(gen / "wal") <= 3 * WAL_SEGMENT_BYTES, sorted((gen / "wal").iterdir())

    store = opened(tmp_path / "store")
    try:
        assert store.count(PointFilter()) == len(written)
    finally:
        store.close()


HARD_EXIT = """
import os, sys
from pathlib import Path
from tests.contracts.vectors import DIM, MODEL
from tests.tiers.semantic.vectors.test_edge_log import many
from tiers.semantic.vectors.edge.store import EdgeVectorStore

store = EdgeVectorStore(Path(sys.argv[1]))
store.ensure(MODEL, DIM)
store.upsert(many(700))
store.flush()
for start in range(700, 1800, 220):  # several segments written after the flush
    store.upsert(many(220, start))
print("written", flush=True)
os._exit(9)  # as a SIGKILL: no flush, no close
"""


def test_a_flush_asks_the_engine_after_each_kind_of_write_and_never_without_one(tmp_path):
    store = opened(tmp_path / "store")
    try:
        gen = generations.current(tmp_path / "store")
        points = many(3)
        writes = {
            "upsert": lambda: store.upsert(points),
            "validity": lambda: store.set_valid_to([points[0].id], Validity(T1), "alice"),
            "delete": lambda: store.delete(PointFilter(ids=(points[1].id,))),
        }
        store.flush()  # what the open wrote (its payload indexes)
        for name, write in writes.items():
            flushed, before = store.live.flushes, acknowledged(gen)
            store.flush()  # nothing written since the last one: the engine is not asked
            assert store.live.flushes == flushed, name
            write()
            store.flush()
            assert store.live.flushes == flushed + 1, name
            assert acknowledged(gen) > before, name  # the engine did flush the write
    finally:
        store.close()
    store = opened(tmp_path / "store")
    try:
        got = {p.id: p.valid_to_us for p in store.get([p.id for p in points])}
        assert got == {points[0].id: T1, points[2].id: None}
    finally:
        store.close()


def test_every_acknowledged_write_survives_a_hard_exit_over_many_segments(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", HARD_EXIT, str(tmp_path / "store")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 9 and "written" in done.stdout, done.stderr
    store = opened(tmp_path / "store")
    try:
        assert store.count(PointFilter()) == 1800
        expected = many(1800)
        last = [p.id for p in expected[-3:]] + [expected[0].id, expected[699].id]
        got = {p.id: p.text for p in store.get(last)}
        assert got == {p.id: p.text for p in expected if p.id in last}
    finally:
        store.close()


def test_an_upsert_is_written_in_parts_and_a_point_in_two_parts_counts_once(tmp_path):
    store = opened(tmp_path / "store")
    try:
        store.upsert(many(10))
        store.flush()
        gen = generations.current(tmp_path / "store")
        before = acknowledged(gen)
        batch = many(1000, 10)
        # The batch's first point again, in its last part, with other words.
        words = "the cat sat on the mat"
        again = dataclasses.replace(batch[0], text=words, sparse=KEYWORDS.embed_document(words))
        store.upsert([*batch, again])
        store.flush()
        assert acknowledged(gen) - before == math.ceil(1001 / WRITE_POINTS) > 1

        got = _keywords(store, again.id)
    finally:
        store.close()
    reference = opened(tmp_path / "reference")  # the same points, each written once
    try:
        reference.upsert([*many(10), again, *batch[1:]])
        want = _keywords(reference, again.id)
    finally:
        reference.close()
    assert got == want


def _keywords(store: EdgeVectorStore, point_id: str) -> tuple[list[float], float]:
    """A query's weights by the store's counts (words of the point's first text and of its
    second), and the point's score for it."""
    query = KEYWORDS.embed_query("the cat sat in the garden")
    weights = [round(v, 6) for v in store.weigh(query).values]
    hits = store.search_sparse(KEYWORDS.embed_query("cat mat"), PointFilter(user_id="alice"), 5)
    (score,) = [round(h.score, 6) for h in hits if h.point.id == point_id]
    return weights, score
