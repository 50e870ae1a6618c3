"""Tier 3 query latency on the embedded engine (qdrant-edge) at 10k and 100k points.

Run as ``python -m tests.bench.tier3.query``. Needs the LoCoMo file of the shared data beside
the checkout. Realistic vectors, not i.i.d. noise (on which HNSW behaves very differently):

* every LoCoMo turn (``"Speaker: text"``, ~2.8k) is embedded once with the daemon's model
  (``encode_documents``), and every LoCoMo question with ``encode_queries``;
* each of the N points is a convex combination of two of those turn embeddings, the first
  weighted ``1 - w`` with ``w ~ U(0, 0.5)``, plus Gaussian noise (sigma 0.005 per dimension,
  about 0.1 in norm) and re-normalised: clustered like real embeddings, no two identical;
* each point is a real :class:`MemoryPoint` with the daemon's payload schema, spread over 50
  user ids and the three kinds (60 % episode chunks, 10 % summaries, 30 % facts), and with the
  BM25 sparse vector of its text from :class:`KeywordEncoder` (chunks and summaries carry both
  turns' texts, facts the first's);
* queries are LoCoMo questions, each filtered by one of the 50 user ids (scope is a hard filter,
  as in Recall), ``--limit`` hits, through ``EdgeVectorStore.search_dense`` / ``search_sparse``
  (so the time includes building the filter and decoding the payloads).

Per size, in a fresh store in a temporary directory: upsert time (batches of 1,000), query
latency before ``optimize()`` (plain segments: exact search), ``optimize()`` time, and query
latency after it. While ``optimize()`` runs, a thread that sleeps 1 ms per tick counts how often
it gets to run: few ticks means the engine holds the GIL. The dense hits after ``optimize()``
are compared with those before it (exact), as recall@limit of the HNSW index.

The vectors and points are made in :mod:`tests.bench.tier3.points`; this module measures and
reports.
"""

from __future__ import annotations

import itertools
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, get_args

import numpy as np

from tests.bench.locomo.data import LOCOMO, require
from tests.bench.support.daemon import (
    command_line,
    format_machine,
    latency_ms,
    machine_info,
    write_figures,
)
from tests.bench.tier3.points import (
    KIND_WEIGHTS,
    MIX_MAX,
    NOISE_SIGMA,
    POINT_KINDS,
    USERS,
    PointMaker,
    embed_pool,
)
from tiers.semantic.vectors import PointFilter, SparseVector
from tiers.semantic.vectors.bm25 import KeywordEncoder
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.semantic.vectors.storage import DenseStorage, Quantization
from tiers.settings import EmbeddingSettings

BATCH = 1000
TICK_SECONDS = 0.001
CALIBRATE_SECONDS = 1.0
WARMUP_QUERIES = 20


# -- measuring ---------------------------------------------------------------------------------
class Ticker:
    """A thread that sleeps ``TICK_SECONDS`` per tick and records when it woke up."""

    def __init__(self) -> None:
        self.ticks: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-ticker", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            time.sleep(TICK_SECONDS)
            self.ticks.append(time.perf_counter())

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def window(self, start: float, end: float) -> dict[str, float]:
        """Ticks in [start, end] and the longest stretch without one (ms)."""
        inside = [t for t in self.ticks if start <= t <= end]
        marks = [start, *inside, end]
        gaps = [b - a for a, b in itertools.pairwise(marks)]
        return {
            "ticks": len(inside),
            "longest_gap_ms": round(1000.0 * max(gaps), 1),
            "time_in_gaps_over_10ms_s": round(sum(g for g in gaps if g > 0.010), 3),
        }


def optimize_with_ticker(store: EdgeVectorStore) -> dict[str, Any]:
    """``optimize()`` while a 1 ms ticker runs; the ticker's rate is calibrated first."""
    with Ticker() as ticker:
        time.sleep(0.1)
        c0 = time.perf_counter()
        time.sleep(CALIBRATE_SECONDS)
        c1 = time.perf_counter()
        rate = ticker.window(c0, c1)["ticks"] / (c1 - c0)
        t0 = time.perf_counter()
        store.optimize()
        t1 = time.perf_counter()
        time.sleep(0.05)
    seconds = t1 - t0
    got = ticker.window(t0, t1)
    expected = rate * seconds
    return {
        "seconds": round(seconds, 3),
        "ticker_rate_per_s": round(rate, 1),
        "ticks_expected": round(expected),
        "ticks": got["ticks"],
        "ticks_percent": round(100.0 * got["ticks"] / expected, 2) if expected else 0.0,
        "longest_gap_ms": got["longest_gap_ms"],
        "gil_held_estimate_s": got["time_in_gaps_over_10ms_s"],
    }


def latencies(
    search: Callable[[int], list[str]], n: int
) -> tuple[dict[str, float], list[list[str]]]:
    """``search(i)`` for i in range(n) after a warm-up; percentiles in ms and the hit ids."""
    for i in range(min(WARMUP_QUERIES, n)):
        search(i)
    samples: list[float] = []
    hits: list[list[str]] = []
    for i in range(n):
        t0 = time.perf_counter()
        ids = search(i)
        samples.append(time.perf_counter() - t0)
        hits.append(ids)
    return {
        "queries": n,
        **latency_ms((s * 1000.0 for s in samples), (50, 95, 99), digits=3),
        "mean_hits": round(sum(len(h) for h in hits) / n, 1),
    }, hits


def overlap(exact: Sequence[Sequence[str]], approx: Sequence[Sequence[str]]) -> float:
    """Mean fraction of the exact hits that the approximate search also returned."""
    fractions = [len(set(e) & set(a)) / len(e) for e, a in zip(exact, approx, strict=True) if e]
    return round(sum(fractions) / len(fractions), 4) if fractions else float("nan")


def dir_bytes(path: Path) -> int:
    """Bytes allocated on disk (as ``du`` counts them; the engine's files are sparse)."""
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def measure_size(
    size: int,
    texts: list[str],
    pool: np.ndarray,
    questions: list[str],
    query_vectors: np.ndarray,
    n_queries: int,
    limit: int,
    seed: int,
    storage: DenseStorage,
) -> dict[str, Any]:
    keywords = KeywordEncoder()
    rng = np.random.default_rng(seed + 1)
    picks = rng.integers(len(questions), size=n_queries)
    users = [f"user-{int(u):02d}" for u in rng.integers(USERS, size=n_queries)]
    dense_q = [query_vectors[int(p)].tolist() for p in picks]
    sparse_q: list[SparseVector] = [keywords.embed_query(questions[int(p)]) for p in picks]

    with tempfile.TemporaryDirectory(prefix="strata-bench-tier3-") as tmp:
        store = EdgeVectorStore(Path(tmp) / "vectors", storage=storage)
        store.ensure(EmbeddingSettings().model, int(pool.shape[1]))
        try:

            def dense(i: int) -> list[str]:
                flt = PointFilter(user_id=users[i])
                return [h.point.id for h in store.search_dense(dense_q[i], flt, limit)]

            def sparse(i: int) -> list[str]:
                flt = PointFilter(user_id=users[i])
                return [h.point.id for h in store.search_sparse(sparse_q[i], flt, limit)]

            maker = PointMaker(texts, pool, seed)
            build = upsert = 0.0
            while maker.made < size:
                t0 = time.perf_counter()
                points = maker.batch(min(BATCH, size - maker.made))
                t1 = time.perf_counter()
                store.upsert(points)
                t2 = time.perf_counter()
                build += t1 - t0
                upsert += t2 - t1
            t0 = time.perf_counter()
            store.flush()
            flush = time.perf_counter() - t0
            print(f"  {size}: upserted in {upsert:.1f} s; queries before optimize ...", flush=True)
            dense_before, exact_hits = latencies(dense, n_queries)
            sparse_before, sparse_hits_before = latencies(sparse, n_queries)
            print(f"  {size}: optimize() ...", flush=True)
            optimize = optimize_with_ticker(store)
            print(f"  {size}: optimize() took {optimize['seconds']:.1f} s; queries ...", flush=True)
            dense_after, hnsw_hits = latencies(dense, n_queries)
            sparse_after, sparse_hits_after = latencies(sparse, n_queries)
            store.flush()
            disk = dir_bytes(Path(tmp) / "vectors")
            rss = rss_mib()
        finally:
            store.close()
    return {
        "points": size,
        "quantization": storage.quantization,
        "rescore": storage.rescore,
        "rss_mib": rss,
        "build_seconds": round(build, 3),
        "upsert_seconds": round(upsert, 3),
        "upsert_points_per_s": round(size / upsert, 1),
        "flush_seconds": round(flush, 3),
        "optimize": optimize,
        "dense_before": dense_before,
        "sparse_before": sparse_before,
        "dense_after": dense_after,
        "sparse_after": sparse_after,
        "dense_recall_vs_exact": overlap(exact_hits, hnsw_hits),
        "sparse_same_as_before": overlap(sparse_hits_before, sparse_hits_after),
        "disk_mib": round(disk / 2**20, 1),
    }


def rss_mib() -> dict[str, float]:
    """This process's resident memory now: anonymous and file-backed (mapped files), MiB."""
    found: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("RssAnon", "RssFile"):
            found[name] = round(int(value.split()[0]) / 1024, 1)
    return found


# -- report ------------------------------------------------------------------------------------
def report(machine: dict[str, Any], params: dict[str, Any], results: list[dict[str, Any]]) -> str:
    lines = [
        "Strata Tier 3 query latency: qdrant-edge (EdgeVectorStore), one process",
        format_machine(machine),
        f"vectors    {params['model']} embeddings of {params['pool']} LoCoMo turns, mixed "
        f"(w ~ U(0, {MIX_MAX}), noise sigma {NOISE_SIGMA}); {params['questions']} LoCoMo "
        f"questions as queries (embedding took {params['embed_seconds']:.1f} s)",
        f"points     {USERS} user ids, kinds {dict(zip(POINT_KINDS, KIND_WEIGHTS, strict=True))}, "
        f"BM25 sparse vectors; upserts of {BATCH}",
        f"queries    {params['queries']} per figure after {WARMUP_QUERIES} warm-up, "
        f"filtered by user_id, limit {params['limit']}",
        "",
        f"  {'points':>7} {'upsert s':>9} {'pts/s':>7} {'optimize s':>10} {'disk MiB':>9}",
    ]
    for r in results:
        lines.append(
            f"  {r['points']:>7} {r['upsert_seconds']:>9.2f} {r['upsert_points_per_s']:>7.0f} "
            f"{r['optimize']['seconds']:>10.2f} {r['disk_mib']:>9.1f}"
        )
    lines += [
        "",
        f"  {'points':>7} {'search':<7} {'before optimize p50/p95 ms':>27} "
        f"{'after optimize p50/p95 ms':>26}",
    ]
    for r in results:
        for kind in ("dense", "sparse"):
            b, a = r[f"{kind}_before"], r[f"{kind}_after"]
            lines.append(
                f"  {r['points']:>7} {kind:<7} {b['p50_ms']:>17.3f} / {b['p95_ms']:<7.3f} "
                f"{a['p50_ms']:>16.3f} / {a['p95_ms']:<7.3f}"
            )
    lines += [
        "",
        "  dense recall@limit after optimize vs before (exact): "
        + ", ".join(f"{r['points']}: {r['dense_recall_vs_exact']:.3f}" for r in results),
        "  sparse hits after optimize vs before: "
        + ", ".join(f"{r['points']}: {r['sparse_same_as_before']:.3f}" for r in results),
        "",
        f"GIL during optimize(): a thread sleeping {TICK_SECONDS * 1000:g} ms per tick",
        f"  {'points':>7} {'optimize s':>10} {'ticks':>7} {'expected':>9} {'% of exp.':>9} "
        f"{'longest gap ms':>15}",
    ]
    for r in results:
        o = r["optimize"]
        lines.append(
            f"  {r['points']:>7} {o['seconds']:>10.2f} {o['ticks']:>7} {o['ticks_expected']:>9} "
            f"{o['ticks_percent']:>8.1f}% {o['longest_gap_ms']:>15.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.tier3.query", __doc__)
    parser.add_argument(
        "--sizes", default="10000,100000", help="comma-separated point counts (10000,100000)"
    )
    parser.add_argument(
        "--queries", type=int, default=300, help="queries per latency figure (default 300)"
    )
    parser.add_argument("--limit", type=int, default=20, help="hits per query (default 20)")
    parser.add_argument(
        "--threads", type=int, default=2, help="torch threads for embedding the pool (default 2)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--quantization",
        default="none",
        choices=get_args(Quantization),
        help="the store's vectors.quantization (none)",
    )
    parser.add_argument(
        "--no-rescore",
        action="store_true",
        help="with int8: the store's vectors.rescore false (rescored by default)",
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    require(LOCOMO)
    machine = machine_info()
    print(f"embedding the LoCoMo turns and questions (threads={args.threads}) ...", flush=True)
    texts, pool, questions, query_vectors, embed_seconds = embed_pool(args.threads)
    params = {
        "model": EmbeddingSettings().model,
        "pool": len(texts),
        "questions": len(questions),
        "embed_seconds": round(embed_seconds, 2),
        "queries": args.queries,
        "limit": args.limit,
        "users": USERS,
        "kind_weights": dict(zip(POINT_KINDS, KIND_WEIGHTS, strict=True)),
        "mix_max": MIX_MAX,
        "noise_sigma": NOISE_SIGMA,
        "batch": BATCH,
        "seed": args.seed,
    }
    results = []
    for size in sizes:
        print(f"{size} points", flush=True)
        results.append(
            measure_size(
                size,
                texts,
                pool,
                questions,
                query_vectors,
                args.queries,
                args.limit,
                args.seed,
                DenseStorage(args.quantization, rescore=not args.no_rescore),
            )
        )

    print()
    print(report(machine, params, results))
    write_figures(args.json, "tier3_query", machine, params, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
