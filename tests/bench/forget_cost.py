"""What a Forget costs at N points, and how other tenants are served meanwhile.

Run as ``python -m tests.bench.forget_cost [--points N]`` (``make bench-forget`` runs it at
100k and at 400k points). A data directory is filled offline with N points and their fact
graph (``recall_latency``'s data: 50 users, about N/50 points each, in the daemon's layout:
the default ``vectors.shards``) and its index is built, as a daemon that has run for a while
leaves it. A
real ``stratad`` runs on it. From separate threads, each with its own channel, other tenants
are served throughout: ``Append`` every 20 ms (one live session) and ``Recall`` k = 10 back to
back for random users other than the ones forgotten. Then, one after the other:

1. ``Forget`` of a whole user (scope);
2. ``Forget`` of 20 memory ids of another user;
3. ``Forget`` of a third user while its open session holds messages.

Reported per Forget: the time until it returns (RocksDB's memtables flushed: ``forget.done
flush_ms``), RocksDB's compaction behind it (``forget.compacted``), the time until the vector
store's purge is done (``forget.purged``: a child
process rewrote the live points of the forgotten user's shard into a new generation;
``vectors.purged`` gives the shard and its stages),
and the Append and Recall latencies from the first Forget to the last purge, and otherwise.
The vector store has no HNSW index after a purge until the next build: Recall right after is
measured too.
"""

from __future__ import annotations

import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from stratad_client import MemoryClient
from tests.bench.recall_latency import build, measure
from tests.bench.support.daemon import command_line, format_machine, machine_info, write_json
from tests.bench.support.recorders import Recorder, gc_freeze_ms, stop, summary
from tests.bench.tier3.points import embed_pool
from tests.support import ProcessDaemon, wait_until

APPEND_EVERY = 0.020
SETTLE = 3.0
FORGOTTEN = ("user-00", "user-01", "user-02")


def _events(log: str, name: str) -> list[dict[str, str]]:
    return [
        dict(re.findall(r"(\w+)=(\S+)", line))
        for line in log.splitlines()
        if f"event={name} " in line
    ]


def _count(proc: ProcessDaemon, event: str) -> int:
    return proc.log_path.read_text(errors="replace").count(f"event={event} ")


def run(size: int, queries: int, keep_log: Path | None = None) -> dict[str, Any]:
    texts, pool, questions, _q, _secs = embed_pool(threads=2)
    with tempfile.TemporaryDirectory(prefix="strata-forget-") as tmp:
        data = Path(tmp) / "data"
        print(f"{size} points: building the data dir (index built) ...", flush=True)
        built = build(data, size, texts, pool, optimize=True)
        proc = ProcessDaemon(data, log_level="info", weaver__interval_seconds="86400")
        try:
            address = proc.address
            with MemoryClient(address, timeout=120) as c:
                wait_until(lambda: c.admin.weaver_status().embedding_ready, 600, "for the model")
                for q in questions[:20]:
                    c.recall(q, user_id="user-10", k=10)
                before = measure(address, questions, queries)
                c.append("bench-open", "a message the Forget drops", user_id=FORGOTTEN[2])
                memory_ids = [h.id for h in c.recall(questions[0], user_id=FORGOTTEN[1], k=20).hits]
            rng = random.Random(5)
            appends = MemoryClient(address, timeout=60)
            recalls = MemoryClient(address, timeout=60)
            others = [f"user-{i:02d}" for i in range(3, 50)]
            recorders = [
                Recorder(
                    "append",
                    lambda i: appends.append("bench-live", f"message {i}", user_id="bench"),
                    APPEND_EVERY,
                ),
                Recorder(
                    "recall",
                    lambda i: recalls.recall(
                        rng.choice(questions), user_id=rng.choice(others), k=10
                    ),
                    0.0,
                ),
            ]
            for r in recorders:
                r.start()
            time.sleep(SETTLE)
            forgets: list[dict[str, Any]] = []
            calls: list[float] = []
            window = [time.perf_counter(), 0.0]
            with MemoryClient(address, timeout=600) as c:
                for what, kwargs in (
                    ("scope", {"user_id": FORGOTTEN[0]}),
                    ("memory ids", {"memory_ids": memory_ids}),
                    ("scope, open session", {"user_id": FORGOTTEN[2]}),
                ):
                    purged = _count(proc, "forget.purged")
                    t0 = time.perf_counter()
                    calls.append(t0)
                    r = c.forget(**kwargs)  # type: ignore[arg-type]
                    returned = time.perf_counter()
                    wait_until(  # the vector store's purge
                        lambda: _count(proc, "forget.purged") != purged,  # noqa: B023
                        600,
                        "for the purge",
                        interval=0.05,
                    )
                    forgets.append(
                        {
                            "what": what,
                            "ms": round((returned - t0) * 1000, 1),
                            "until_purged_ms": round((time.perf_counter() - t0) * 1000, 1),
                            "vector_points": r.vector_points,
                            "graph_edges": r.graph_edges,
                            "sessions": r.sessions,
                        }
                    )
                    print(f"  forget {what}: {forgets[-1]}", flush=True)
            window[1] = time.perf_counter()
            time.sleep(SETTLE)
            stop(recorders)
            appends.close()
            recalls.close()
            after = measure(address, questions, queries)  # no HNSW index until the next build
        finally:
            proc.terminate()
        log = proc.log_path.read_text(errors="replace")
        if keep_log is not None:
            keep_log.write_text(log)
    done = _events(log, "forget.done")
    purged = _events(log, "vectors.purged")
    compacted = _events(log, "forget.compacted")
    for f, d, p in zip(forgets, done, purged, strict=False):
        f["rocksdb_flush_ms"] = float(d.get("flush_ms", "nan"))
        f["vector_purge_stages_ms"] = {
            k: float(p[k]) for k in ("copy", "child", "load", "replay") if k in p
        }
        f["vector_purge_shard"] = p.get("store", "")
    for f, c in zip(forgets, compacted, strict=False):  # coalesced: fewer than the Forgets
        f["rocksdb_compaction_ms"] = float(c.get("ms", "nan"))
    return {
        "points": size,
        **built,
        "forgets": forgets,
        **{r.name: summary(r.samples, window[0], window[1]) for r in recorders},
        "errors": {r.name: r.errors[:5] for r in recorders if r.errors},
        "recall_before": before,
        "recall_after_purge": after,
        # Where the slowest requests of the window fell: seconds after each Forget's call.
        "slowest_in_window": {
            r.name: [
                (round(ms, 1), [round(t - c, 2) for c in calls if c <= t][-1:])
                for t, ms in sorted(r.samples, key=lambda x: -x[1])
                if window[0] <= t <= window[1]
            ][:5]
            for r in recorders
        },
        "gc_pauses_ms": sorted((float(e["ms"]) for e in _events(log, "gc.pause")), reverse=True)[
            :10
        ],
        "gc_freeze_ms": gc_freeze_ms(log),
    }


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.forget_cost", __doc__)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keep-log", type=Path, metavar="PATH", help="the daemon's log")
    args = parser.parse_args(argv)
    machine = machine_info()
    result = run(args.points, args.queries, args.keep_log)
    print()
    print(f"Forget at {result['points']} points")
    print(format_machine(machine))
    for f in result["forgets"]:
        print(
            f"  {f['what']:>20}: returned in {f['ms']} ms (RocksDB flush"
            f" {f.get('rocksdb_flush_ms')} ms, compaction behind it"
            f" {f.get('rocksdb_compaction_ms')} ms); vector store purged {f['until_purged_ms']} ms"
            f" after the call ({f.get('vector_purge_shard')}, stages"
            f" {f.get('vector_purge_stages_ms')}); {f['vector_points']}"
            f" points, {f['graph_edges']} edges, {f['sessions']} sessions"
        )
    print(
        f"  {'rpc':>7} {'during: n':>10} {'p50':>7} {'p99':>7} {'max':>8} | "
        f"{'otherwise: n':>12} {'p50':>7} {'p99':>7} {'max':>8}"
    )
    for name in ("append", "recall"):
        d, o = result[name]["during_build"], result[name]["otherwise"]
        print(
            f"  {name:>7} {d.get('n', 0):>10} {d.get('p50', '-'):>7} {d.get('p99', '-'):>7} "
            f"{d.get('max', '-'):>8} | {o.get('n', 0):>12} {o.get('p50', '-'):>7} "
            f"{o.get('p99', '-'):>7} {o.get('max', '-'):>8}"
        )
    if result["errors"]:
        print(f"  errors: {result['errors']}")
    print(
        f"  slowest in the window (ms, s after the Forget's call): {result['slowest_in_window']};"
        f" gc passes of 50 ms or more: {result['gc_pauses_ms']}; the collection before the"
        f" freeze at start-up: {result['gc_freeze_ms']} ms"
    )
    b, a = result["recall_before"], result["recall_after_purge"]
    print(
        f"  Recall, one client: before p50 {b['recall_p50_ms']} / p95 {b['recall_p95_ms']} ms;"
        f" after the purges (no HNSW until the next build) p50 {a['recall_p50_ms']} /"
        f" p95 {a['recall_p95_ms']} ms"
    )
    write_json(args.json, {"machine": machine, "result": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
