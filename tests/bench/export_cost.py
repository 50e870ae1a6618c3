"""The cost of Export and Import at 100k Tier 3 points.

Run as ``python -m tests.bench.export_cost``. A data directory is filled offline with
``--points`` synthetic points and their fact graph (``recall_latency``'s data: real MiniLM
embeddings of the LoCoMo turns, mixed and jittered), except that every tenth point is moved
to one big user (``user-big``); the other points stay spread over 50 users. The store has no
journal: points and edges only, as in the other 100k benchmarks. A real ``stratad`` is
started on it, and through ``AdminService.Export``:

- one ordinary user (``user-07``), then the big user, then every user back to back (the
  whole store): records, bytes, the time until the first byte of the file arrived (the
  daemon walks the stores into its spool first, holding Tier 3 writers off), the total time
  and MB/s;
- then the ordinary user's and the big user's files are imported into a fresh daemon (same
  model): every point is embedded again, so import time is embedding time; points/s.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from stratad_client import MemoryClient
from tests.bench.recall_latency import build
from tests.bench.support.daemon import command_line, format_machine, machine_info, write_json
from tests.bench.tier3.points import embed_pool
from tests.support import QUIET_ENV, ProcessDaemon, wait_until
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint

BIG = "user-big"
ORDINARY = "user-07"
USERS = [f"user-{i:02d}" for i in range(50)] + [BIG]


def to_big_user(points: list[MemoryPoint]) -> list[MemoryPoint]:
    """About every tenth point (by its id: the same ones every run) goes to the big user."""
    return [replace(p, scope=Scope(BIG)) if uuid.UUID(p.id).int % 10 == 0 else p for p in points]


def export(client: MemoryClient, user: str) -> tuple[bytes, dict[str, Any]]:
    began = time.perf_counter()
    first = None
    chunks = []
    records: Counter[str] = Counter()
    for chunk in client.admin.export(user):
        if chunk.data and first is None:
            first = time.perf_counter() - began
        chunks.append(chunk.data)
        if chunk.done:
            records = Counter(chunk.progress.records)
    seconds = time.perf_counter() - began
    data = b"".join(chunks)
    return data, {
        "user": user,
        "points": records["point"],
        "edges": records["edge"],
        "bytes": len(data),
        "walk_s": round(first or seconds, 2),
        "total_s": round(seconds, 2),
        "mb_per_s": round(len(data) / 1e6 / seconds, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.export_cost", __doc__)
    parser.add_argument("--points", type=int, default=100_000)
    args = parser.parse_args(argv)
    machine = machine_info()
    texts, pool, _questions, _queries, _secs = embed_pool(threads=2)
    exports: list[dict[str, Any]] = []
    imports: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="strata-export-") as tmp:
        data_dir = Path(tmp) / "data"
        print(f"{args.points} points: building ...", flush=True)
        built = build(data_dir, args.points, texts, pool, optimize=False, remap=to_big_user)
        proc = ProcessDaemon(data_dir, log_level="warning", **QUIET_ENV)
        files: dict[str, bytes] = {}
        try:
            with proc.client(timeout=60) as c:
                wait_until(lambda: c.admin.weaver_status().embedding_ready, 600, "for the model")
                for user in (ORDINARY, BIG):
                    print(f"export {user} ...", flush=True)
                    files[user], figures = export(c, user)
                    exports.append(figures)
                print("export every user ...", flush=True)
                began = time.perf_counter()
                total: Counter[str] = Counter()
                for user in USERS:
                    data, figures = export(c, user)
                    total.update(points=figures["points"], edges=figures["edges"])
                    total["bytes"] += len(data)
                seconds = time.perf_counter() - began
                exports.append(
                    {
                        "user": f"all {len(USERS)} users",
                        "points": total["points"],
                        "edges": total["edges"],
                        "bytes": total["bytes"],
                        "walk_s": None,
                        "total_s": round(seconds, 2),
                        "mb_per_s": round(total["bytes"] / 1e6 / seconds, 1),
                    }
                )
        finally:
            proc.terminate()
        target = ProcessDaemon(Path(tmp) / "fresh", log_level="warning")
        try:
            with MemoryClient(target.address, timeout=60) as c:
                wait_until(lambda: c.admin.weaver_status().embedding_ready, 600, "for the model")
                for user in (ORDINARY, BIG):
                    print(f"import {user} ...", flush=True)
                    began = time.perf_counter()
                    response = c.admin.import_([files[user]])
                    seconds = time.perf_counter() - began
                    points = response.written.records["point"]
                    hits = len(c.recall("What did they talk about?", user_id=user, k=5).hits)
                    imports.append(
                        {
                            "user": user,
                            "points": points,
                            "edges": response.written.records["edge"],
                            "seconds": round(seconds, 1),
                            "points_per_s": round(points / seconds, 1),
                            "recall_hits": hits,
                        }
                    )
        finally:
            target.terminate()
    print()
    print(f"Export and import over gRPC, {args.points} points ({built})")
    print(format_machine(machine))
    print(
        f"  {'export of':>16} {'points':>7} {'edges':>6} {'MB':>7} {'walk s':>7} "
        f"{'total s':>8} {'MB/s':>6}"
    )
    for e in exports:
        walk = "" if e["walk_s"] is None else e["walk_s"]
        print(
            f"  {e['user']:>16} {e['points']:>7} {e['edges']:>6} {e['bytes'] / 1e6:>7.1f} "
            f"{walk:>7} {e['total_s']:>8} {e['mb_per_s']:>6}"
        )
    print(f"  {'import of':>16} {'points':>7} {'edges':>6} {'seconds':>8} {'points/s':>9}")
    for i in imports:
        print(
            f"  {i['user']:>16} {i['points']:>7} {i['edges']:>6} {i['seconds']:>8} "
            f"{i['points_per_s']:>9}  (recall afterwards: {i['recall_hits']} hits)"
        )
    write_json(
        args.json, {"machine": machine, "built": built, "exports": exports, "imports": imports}
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
