"""Recall over gRPC for users whose graph is not in memory: the cost of a cold scope.

Run as ``python -m tests.bench.cold.scopes`` (``make bench-cold``). A data directory is filled
offline as ``tests.bench.recall_latency`` fills it (real MiniLM vectors of LoCoMo turns,
jittered, with a fact graph), here over ``--users`` users of ``--points`` points each, with no
index built (a user's graph does not depend on it). A real ``stratad`` is started on it with a
graph budget (``recall.graph_cache_mb``) too small to keep more than one user's graph, and
LoCoMo questions are asked of the users in turn for ``--rounds`` rounds: every Recall after the
first round finds its user's graph evicted, as the 49 users of a 1M-point store did in the
measurement of issue 44. Reported: the first round (no graph and no feature file yet), the
rounds after it (evicted: the features are read from ``<data_dir>/graphs``), and the same after
a restart of the daemon (nothing in memory).
"""

from __future__ import annotations

import dataclasses
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from stratad_client import MemoryClient
from tests.bench.recall_latency import build
from tests.bench.support.daemon import (
    command_line,
    format_machine,
    machine_info,
    summary,
    write_json,
)
from tests.bench.tier3.points import embed_pool
from tests.support import QUIET_ENV, ProcessDaemon, wait_until
from tiers.semantic.vectors import MemoryPoint


def rounds(address: str, users: int, count: int, questions: list[str]) -> list[list[float]]:
    """``count`` rounds of one Recall per user, in turn; the milliseconds of each."""
    rng = random.Random(3)
    out: list[list[float]] = []
    with MemoryClient(address, timeout=120) as c:
        c.recall("warm up", user_id="nobody", k=10)
        for _ in range(count):
            row = []
            for u in range(users):
                t0 = time.perf_counter()
                c.recall(rng.choice(questions), user_id=f"user-{u:02d}", k=10)
                row.append((time.perf_counter() - t0) * 1000)
            out.append(row)
    return out


def serve(data: Path, users: int, count: int, questions: list[str]) -> list[list[float]]:
    proc = ProcessDaemon(data, log_level="warning", **QUIET_ENV, recall__graph_cache_mb="1")
    try:
        with proc.client() as c:
            wait_until(lambda: c.admin.weaver_status().embedding_ready, 600, "for the model")
        return rounds(proc.address, users, count, questions)
    finally:
        proc.terminate()


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.cold.scopes", __doc__)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--points", type=int, default=20_000, help="points per user")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    machine = machine_info()
    texts, pool, questions, _queries, _secs = embed_pool(threads=2)

    def remap(points: list[MemoryPoint]) -> list[MemoryPoint]:
        return [
            dataclasses.replace(
                p,
                scope=dataclasses.replace(
                    p.scope, user_id=f"user-{int(p.scope.user_id[-2:]) % args.users:02d}"
                ),
            )
            for p in points
        ]

    with tempfile.TemporaryDirectory(prefix="strata-cold-") as tmp:
        data = Path(tmp) / "data"
        print(f"filling {args.users} users of {args.points} points ...", flush=True)
        build(data, args.users * args.points, texts, pool, optimize=False, remap=remap)
        first = serve(data, args.users, args.rounds, questions)
        restarted = serve(data, args.users, 1, questions)
        files = sorted((data / "graphs").rglob("*.json"))
        result: dict[str, Any] = {
            "users": args.users,
            "points_per_user": args.points,
            "rounds": args.rounds,
            "first_round": summary(first[0]),
            "evicted": summary([ms for row in first[1:] for ms in row]),
            "after_restart": summary(restarted[0]),
            "feature_files": len(files),
            "feature_file_bytes": sum(f.stat().st_size for f in files),
        }
    print()
    print("Recall over gRPC of users whose graph is not kept (recall.graph_cache_mb = 1)")
    print(format_machine(machine))
    print(f"  {args.users} users of {args.points} points, {args.rounds} rounds, users in turn")
    for name in ("first_round", "evicted", "after_restart"):
        f = result[name]
        print(f"  {name:>14}: p50 {f['p50_ms']:>7} ms  p99 {f['p99_ms']:>7} ms  max {f['max_ms']}")
    print(f"  feature files: {result['feature_files']}, {result['feature_file_bytes']} bytes")
    write_json(args.json, {"machine": machine, "result": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
