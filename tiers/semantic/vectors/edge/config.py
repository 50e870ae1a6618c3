"""The embedded engine's shard config as Tier 3 sets it: what the engine is told when a shard is
made or opened (vectors, quantization, payload indexes, search threads), the parameters of a
dense search, and what a shard's own ``edge_config.json`` says it was made with.

Some of a shard's config is fixed when it is made: the type of its original dense vectors
(``vectors.originals``) and, in a release before :mod:`tiers.semantic.vectors.term_frequencies`,
the engine's IDF modifier. A shard is always opened with what it was made with
(:func:`made_with`); a setting changed since applies to the shards made from then on, and to
those a purge rewrites.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, cast

from qdrant_edge import (
    Distance,
    EdgeConfig,
    EdgeOptimizersConfig,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    IntegerIndexParams,
    KeywordIndexParams,
    Memory,
    Modifier,
    PayloadSchemaType,
    QuantizationSearchParams,
    ScalarQuantizationConfig,
    ScalarType,
    SearchParams,
    VectorStorageDatatype,
)

from tiers.semantic.vectors import DENSE, SPARSE
from tiers.semantic.vectors.storage import FLOAT32, RESCORE_OVERSAMPLING, DenseStorage, Originals

if TYPE_CHECKING:
    from qdrant_edge import PayloadSchemaParams

CONFIG_FILE = "edge_config.json"  # the engine's record of a shard's config
SEARCH_THREADS = 2
INDEXING_THRESHOLD_KB = 10_000  # the engine's default (measured: 6,000 points of 384 dims stay
# unindexed, 6,700 are indexed); it counts the originals' bytes, so a float16 shard is given
# half, and its segments are indexed from as many points as a float32 shard's
BYTES = {"float32": 4, "float16": 2}  # an original value's size
# The engine's write-ahead log is kept in segments of this size. A segment is deleted once a
# flush has put what it holds into the shard's segments, but for the last one closed, and a
# load maps what is left (it decodes the last acknowledged write again: edge_shard's
# WRITE_POINTS). The engine's default is 32 MiB: 51 MB a shard at 10M points, 0.69 kB a
# point; at 1M, 1.22 GB of a 3.69 GB store, 0.18 GB with 1 MiB (docs/benchmarks.md,
# 2026-12-01). A record larger than a segment gets a segment of its own.
WAL_SEGMENT_BYTES = 1 << 20


class Made(NamedTuple):
    """What a shard's files say it was made with."""

    idf: bool  # the engine's IDF modifier on the sparse vectors (an earlier release)
    originals: Originals


def payload_indexes() -> dict[str, PayloadSchemaType | PayloadSchemaParams]:
    """The payload indexes of a shard. Those of the episode and the session stay on disk
    (``Memory.Cold``): a value for every few points, so that held in RAM they were most
    of a shard's load, which holds the GIL (a shard of the 10M store: 290-685 ms against
    127-160 ms, warm cache, 2026-12-02), and few queries filter by them (a thread, GetContext's
    own session, a Forget of episodes: as fast either way, measured the same day). So does the
    time's (``created_at``): a value for every point, whose index in RAM (a histogram and a
    tree the engine builds at each load) was half of a large shard's load (the 200,000-point
    shard of the 1M fill: 308-336 ms against 144-145 ms, 2026-12-05); only a time range
    filters by it (a query naming a date or a period, a digest's period). The fields every
    search filters by stay in RAM (all on disk doubled later visits' Recall, 2026-11-29)."""
    return {
        "kind": PayloadSchemaType.Keyword,
        # Every search is filtered by user: the engine groups a tenant's points.
        "user_id": KeywordIndexParams(is_tenant=True),
        "agent_id": PayloadSchemaType.Keyword,
        "episode_id": KeywordIndexParams(memory=Memory.Cold),
        "session_id": KeywordIndexParams(memory=Memory.Cold),
        "created_at": IntegerIndexParams(lookup=True, range=True, memory=Memory.Cold),
        "superseded": PayloadSchemaType.Bool,
    }


def config(dim: int, *, idf: bool = False, storage: DenseStorage = FLOAT32) -> EdgeConfig:
    """Strata's shard config. Two search threads per shard: the engine's default pool (8
    threads on 2 cores) multiplies with the shards of a sharded store; two answered filtered
    queries as fast, 4 at a time, and kept writes going under 8 reading threads (measured
    2026-11-25). One is too few: a stream of searches starved the writes (the contract
    suite's concurrent writer took 9 s instead of 0.4 s).

    The sparse vectors have no modifier: the store weighs a query's terms by IDF over all its
    shards (:mod:`tiers.semantic.vectors.term_frequencies`). ``idf`` gives the config of a shard
    written before that, whose engine applied IDF itself, to open it and move its points.

    ``storage.quantization = "int8"``: the engine keeps a scalar (int8) copy of the dense vectors of
    each segment it indexes, in memory, and the original vectors on disk (mapped, read only
    to rescore: :func:`search_params`); 0.99 of the values set the int8 range. ``"none"``
    leaves a shard's quantization as it is (the engine has no way to drop it once made);
    searches then read the original vectors only.

    ``storage.originals``: the original vectors' type, fixed when the shard is made (the engine
    refuses to open a shard with another: :func:`made_with` says which it has)."""
    int8 = storage.quantization == "int8"
    half = storage.originals == "float16"
    return EdgeConfig(
        vectors={
            DENSE: EdgeVectorParams(
                size=dim,
                distance=Distance.Cosine,
                memory=Memory.Cold if int8 else None,
                datatype=VectorStorageDatatype.Float16 if half else None,
            )
        },
        sparse_vectors={SPARSE: EdgeSparseVectorParams(modifier=Modifier.Idf if idf else None)},
        quantization_config=(
            ScalarQuantizationConfig(type=ScalarType.Int8, quantile=0.99, memory=Memory.Cached)
            if int8
            else None
        ),
        max_search_threads=SEARCH_THREADS,
        optimizers=(
            EdgeOptimizersConfig(
                indexing_threshold=INDEXING_THRESHOLD_KB * BYTES["float16"] // BYTES["float32"]
            )
            if half
            else None
        ),
    )


def search_params(storage: DenseStorage) -> SearchParams:
    """A dense search's parameters: with ``"int8"`` and ``rescore``, the candidates found on
    the int8 vectors (:data:`RESCORE_OVERSAMPLING` times the limit) are scored again on the
    original vectors, so every score is the cosine of the originals; without ``rescore``, the
    hits and their scores are the int8 vectors' (no original is read); with ``"none"``, the
    int8 vectors are not used."""
    if storage.quantization == "int8" and not storage.rescore:
        return SearchParams(quantization=QuantizationSearchParams(rescore=False))
    if storage.quantization == "int8":
        return SearchParams(
            quantization=QuantizationSearchParams(rescore=True, oversampling=RESCORE_OVERSAMPLING)
        )
    return SearchParams(quantization=QuantizationSearchParams(ignore=True))


def indexable(points: int, dim: int) -> bool:
    """Whether a shard of ``points`` points of ``dim`` dims can hold a segment the engine
    would index: one whose dense vectors pass its indexing threshold (10,000 KB of float32
    originals unless the config says otherwise: 6,667 points of 384 dims, as many of float16
    as its halved threshold)."""
    optimizers = config(dim).optimizers
    threshold_kb = (optimizers.indexing_threshold if optimizers else None) or INDEXING_THRESHOLD_KB
    return points * dim * BYTES["float32"] > threshold_kb * 1024


def set_wal_options(gen: Path, segment_bytes: int = WAL_SEGMENT_BYTES) -> None:
    """Record in the config file of the shard at ``gen`` (closed) that its write-ahead log is
    kept in segments of ``segment_bytes``. The Python API has no parameter for it; the engine
    reads ``wal_options`` from this file and applies them when it makes a log (a log it has
    already keeps its segments)."""
    path = gen / CONFIG_FILE
    doc = json.loads(path.read_text())
    doc["wal_options"] = {
        "segment_capacity": segment_bytes,
        "segment_queue_len": 0,  # the engine's default: one next segment made ahead
        "retain_closed": 1,  # the engine's default
    }
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(doc))
    partial.replace(path)


def made_with(gen: Path) -> Made:
    """What the shard at ``gen`` was made with, from the engine's ``edge_config.json`` (none
    yet: the engine's defaults, float32 originals and no IDF modifier)."""
    try:
        doc = json.loads((gen / CONFIG_FILE).read_text())
    except (FileNotFoundError, ValueError):
        doc = None
    doc = doc if isinstance(doc, dict) else {}
    sparse = _entry(_entry(doc, "sparse_vectors"), SPARSE)
    dense = _entry(_entry(doc, "vectors"), DENSE)
    datatype = str(dense.get("datatype", "float32")).lower()
    return Made(
        idf=str(sparse.get("modifier", "")).lower() == "idf",
        originals="float16" if datatype == "float16" else "float32",
    )


def _entry(doc: dict[str, object], key: str) -> dict[str, object]:
    value = doc.get(key)
    return cast(dict[str, object], value) if isinstance(value, dict) else {}
