"""The daemon while its vector index builds at 100k points: how long do requests wait?

Run as ``python -m tests.bench.index.build`` (``make bench-build``). A data directory is filled
offline with N points (the clustered synthetic points of ``recall_latency``, 50 users, with
their fact graph) and left *unoptimized*, as a daemon leaves it after ingesting. A real
``stratad`` is started on it with ``vectors.optimize_interval_seconds = 5`` and consolidation
out of the way. Then, from separate threads of this process, each with its own channel:

- an appender: ``Append`` one message every 20 ms (one live session);
- a recaller: ``Recall`` k = 10, one after another, LoCoMo questions for random users;
- a pinger: ``grpc.health.v1.Health/Check`` every 50 ms.

Then ``--backlog`` sessions of 20 LoCoMo turns are ended at once (``AppendBatch`` + ``EndSession``),
so the weaver indexes while the next scheduled build runs over all N points (the situation of
``../shared/notes/scale.md``: pauses while indexing, and a build that never ran behind an index
backlog). The store is in shards (the default ``vectors.shards``): the first build after the start
goes over every shard that holds points, one at a time, and its window runs from its start to its
end (the weaver's ``vectors.optimized`` log line and its ``ms``). Each shard's own window, from its
next generation's directory appearing to its ``CURRENT`` naming it
(``tiers.semantic.vectors.edge.generations``), is recorded too; a shard whose child finds nothing to
index swaps nothing in and has none. Reported: the window, and inside and outside it the number, p99
and maximum of the Append and Recall latencies and the longest health answer, the shards' windows
and loads (``vectors.built``), and the daemon's ``gc.pause`` log lines (collections of 50 ms or
more). Targets: no Append over 50 ms and no Recall over 250 ms during the build. Afterwards, with
the index built, single-client Recall p50/p95 and the server stages (target p50 <= 15 ms, p95 <= 40
ms).
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from stratad_client import MemoryClient, message
from tests.bench.recall_latency import build, measure
from tests.bench.support.daemon import command_line, format_machine, machine_info, write_json
from tests.bench.support.recorders import (
    BuildWatcher,
    Recorder,
    events,
    first_round,
    gc_freeze_ms,
    gc_pauses,
    stop,
    summary,
)
from tests.bench.tier3.points import embed_pool
from tests.support import ProcessDaemon, wait_until
from tiers.semantic.embedding import SentenceTransformerEmbedder
from tiers.settings import EmbeddingSettings

APPEND_EVERY = 0.020
PING_EVERY = 0.050
AFTER_SWAP = 5.0
BUILD_DEADLINE = 900.0


def drain_rate(seen: list[tuple[float, int]]) -> dict[str, Any]:
    """Episodes indexed per second while the backlog lasted (from ``unindexed`` samples)."""
    draining = [(t, n) for t, n in seen if n > 0]
    if len(draining) < 2:
        return {"episodes_per_s": None}
    (t0, n0), (t1, n1) = max(draining, key=lambda x: x[1]), draining[-1]
    rate = (n0 - n1) / (t1 - t0) if t1 > t0 else 0.0
    return {"episodes_per_s": round(rate, 2), "from": n0, "to": n1, "seconds": round(t1 - t0, 1)}


def index_capacity(log: str) -> dict[str, Any]:
    """What the index stage did per second of its own work (``weaver.indexed`` lines): the
    EndSession rate it keeps up with."""
    jobs = events(log, "weaver.indexed")
    seconds = sum(float(e["ms"]) for e in jobs) / 1000
    episodes = sum(int(e["episodes"]) for e in jobs)
    points = sum(int(e["points"]) for e in jobs)
    if not seconds:
        return {"jobs": 0}
    return {
        "jobs": len(jobs),
        "episodes": episodes,
        "points": points,
        "busy_s": round(seconds, 1),
        "episodes_per_s": round(episodes / seconds, 2),
        "points_per_s": round(points / seconds, 1),
    }


def raw_throughput(texts: list[str]) -> float:
    """Texts per second the daemon's default embedder (``EmbeddingSettings()``) manages alone
    in this process, on LoCoMo turns in batches of 16 (the weaver's slices)."""
    e = EmbeddingSettings()
    with tempfile.TemporaryDirectory(prefix="strata-models-") as tmp:
        embedder = SentenceTransformerEmbedder(
            e.model, backend=e.backend, threads=e.threads, cache_dir=Path(tmp)
        )
        sample = texts[:800]
        embedder.encode_documents(sample[:32])  # warm-up
        t0 = time.perf_counter()
        for i in range(0, len(sample), 16):
            embedder.encode_documents(sample[i : i + 16])
        return len(sample) / (time.perf_counter() - t0)


def quiet_index_rate(texts: list[str], sessions: int) -> dict[str, Any]:
    """The index stage's rate on a quiet daemon (fresh data dir, no other load): ``sessions``
    sessions of 20 turns ended at once, timed until none is unindexed. The EndSession rate
    the weaver keeps up with, with nothing else to do."""
    with tempfile.TemporaryDirectory(prefix="strata-index-") as tmp:
        proc = ProcessDaemon(Path(tmp) / "data", log_level="warning")
        try:
            with MemoryClient(proc.address, timeout=60) as c:
                wait_until(lambda: c.admin.weaver_status().embedding_ready, 600, "for the model")
                t0 = time.perf_counter()
                for i in range(sessions):
                    c.append_batch(
                        f"quiet-{i}",
                        [message(texts[(i * 20 + j) % len(texts)]) for j in range(20)],
                        user_id=f"user-{i % 50:02d}",
                    )
                    c.end_session(f"quiet-{i}")
                ingest = time.perf_counter() - t0
                wait_until(lambda: not c.admin.weaver_status().unindexed, 3600, "for the backlog")
                seconds = time.perf_counter() - t0
        finally:
            proc.terminate()
    return {
        "sessions": sessions,
        "ingest_s": round(ingest, 1),
        "indexed_after_s": round(seconds, 1),
        "sessions_per_s": round(sessions / seconds, 2),
    }


def run(size: int, queries: int, backlog: int, keep_log: Path | None) -> dict[str, Any]:
    texts, pool, questions, _q, _secs = embed_pool(threads=2)
    raw = raw_throughput(texts)
    quiet = quiet_index_rate(texts, backlog)
    print(f"index stage on a quiet daemon: {quiet}", flush=True)
    with tempfile.TemporaryDirectory(prefix="strata-build-") as tmp:
        data = Path(tmp) / "data"
        print(f"{size} points: building the data dir (not optimized) ...", flush=True)
        built = build(data, size, texts, pool, optimize=False)
        proc = ProcessDaemon(
            data,
            log_level="info",  # weaver.indexed, vectors.built and gc.pause are read back
            weaver__interval_seconds="86400",
            vectors__optimize_interval_seconds="5",
        )
        try:
            address = proc.address
            with MemoryClient(address, timeout=60) as c:
                wait_until(lambda: c.admin.weaver_status().embedding_ready, 600, "for the model")
                for q in questions[:20]:  # warm-up: the graph channel's scopes, the model
                    c.recall(q, user_id="user-00", k=10)
            rng = random.Random(5)
            appends = MemoryClient(address, timeout=60)
            recalls = MemoryClient(address, timeout=60)
            channel = grpc.insecure_channel(address)
            health = health_pb2_grpc.HealthStub(channel)
            recorders = [
                Recorder(
                    "append",
                    lambda i: appends.append(
                        "bench-live", f"message number {i} of the live session", user_id="bench"
                    ),
                    APPEND_EVERY,
                ),
                Recorder(
                    "recall",
                    lambda i: recalls.recall(
                        rng.choice(questions), user_id=f"user-{rng.randrange(50):02d}", k=10
                    ),
                    0.0,
                ),
                Recorder(
                    "health",
                    lambda i: health.Check(health_pb2.HealthCheckRequest(service=""), timeout=60),
                    PING_EVERY,
                ),
            ]
            status = MemoryClient(address, timeout=60)
            backlog_seen: list[tuple[float, int]] = []
            recorders.append(
                Recorder(
                    "backlog",
                    lambda i: backlog_seen.append(
                        (time.perf_counter(), status.admin.weaver_status().unindexed)
                    ),
                    1.0,
                )
            )
            for r in recorders:
                r.start()
            watcher = BuildWatcher(data / "vectors")
            watcher.start()
            with MemoryClient(address, timeout=60) as c:
                for i in range(max(1, backlog)):
                    c.append_batch(
                        f"backlog-{i}",
                        [message(texts[(i * 20 + j) % len(texts)]) for j in range(20)],
                        user_id=f"user-{i % 50:02d}",
                    )
                    c.end_session(f"backlog-{i}")
            start, end = first_round(proc, BUILD_DEADLINE)
            time.sleep(AFTER_SWAP)
            watcher.stop.set()
            stop(recorders)
            appends.close()
            recalls.close()
            status.close()
            channel.close()
            print(f"{size} points: measuring Recall with the index built ...", flush=True)
            with MemoryClient(address, timeout=60) as c:
                unindexed = c.admin.weaver_status().unindexed
            steady = measure(address, questions, queries)
        finally:
            proc.terminate()
        log = proc.log_path.read_text(errors="replace")
        if keep_log is not None:
            keep_log.write_text(log)
        pauses = gc_pauses(log)
    return {
        "points": size,
        **built,
        "build_window_s": round(end - start, 2),
        "backlog_sessions": backlog,
        "unindexed_after": unindexed,
        "gc_pauses_ms": sorted(pauses, reverse=True)[:10],
        "gc_pauses": len(pauses),
        "gc_freeze_ms": gc_freeze_ms(log),
        "shard_builds_s": [
            (shard, round(b - a, 2)) for shard, a, b in watcher.windows if a <= end + 0.05
        ],
        "later_builds_s": [round(b - a, 1) for _shard, a, b in watcher.windows if a > end + 0.05],
        **{r.name: summary(r.samples, start, end) for r in recorders},
        "errors": {r.name: r.errors[:5] for r in recorders if r.errors},
        "index_rate": drain_rate(backlog_seen),
        "index_capacity": index_capacity(log),
        "quiet_index_rate": quiet,
        "builds": events(log, "vectors.built"),
        "raw_texts_per_s": round(raw, 1),
        "steady": steady,
    }


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.index.build", __doc__)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--backlog", type=int, default=300, help="sessions ended at once")
    parser.add_argument("--keep-log", type=Path, metavar="PATH", help="the daemon's log")
    args = parser.parse_args(argv)
    machine = machine_info()
    result = run(args.points, args.queries, args.backlog, args.keep_log)
    print()
    print(f"The daemon while its vector index builds ({result['points']} points)")
    print(format_machine(machine))
    print(
        f"  first build over the shards: {result['build_window_s']} s; the shards swapped in"
        f" (copy, child optimize, load, swap): {result['shard_builds_s']}; later builds in the"
        f" run (inside 'otherwise'): {result['later_builds_s']} s"
    )
    print(
        f"  {'rpc':>7} {'during: n':>10} {'p50':>7} {'p99':>7} {'max':>8} | "
        f"{'otherwise: n':>12} {'p50':>7} {'p99':>7} {'max':>8}"
    )
    for name in ("append", "recall", "health"):  # the backlog sampler is not a target
        d, o = result[name]["during_build"], result[name]["otherwise"]
        print(
            f"  {name:>7} {d.get('n', 0):>10} {d.get('p50', '-'):>7} {d.get('p99', '-'):>7} "
            f"{d.get('max', '-'):>8} | {o.get('n', 0):>12} {o.get('p50', '-'):>7} "
            f"{o.get('p99', '-'):>7} {o.get('max', '-'):>8}"
        )
    print("  targets during the build: Append max <= 50 ms, Recall max <= 250 ms")
    print(
        f"  backlog: {result['backlog_sessions']} sessions ended at the start, "
        f"{result['unindexed_after']} still unindexed {AFTER_SWAP:g} s after the swap"
    )
    print(
        f"  index stage: {result['index_capacity']} (its own busy time; 20-turn sessions);"
        f" backlog drain {result['index_rate']}; the embedder alone:"
        f" {result['raw_texts_per_s']} texts/s"
    )
    print(
        f"  index stage on a quiet daemon: {result['quiet_index_rate']} (the embedder alone: "
        f"{result['raw_texts_per_s']} texts/s; a 20-turn session is about 30 texts)"
    )
    print(f"  builds: {result['builds']}")
    print(
        f"  gc passes of 50 ms or more: {result['gc_pauses']}, longest "
        f"{result['gc_pauses_ms'][:5]} ms; the collection before the freeze at start-up "
        f"{result['gc_freeze_ms']} ms"
    )
    if result["errors"]:
        print(f"  errors: {result['errors']}")
    s = result["steady"]
    print(
        f"  after the build, one client: Recall p50 {s['recall_p50_ms']} ms, "
        f"p95 {s['recall_p95_ms']} ms (target 15 / 40); Pack p50 {s['pack_p50_ms']} ms"
    )
    print(f"  server stages (mean ms): {s['stages_mean_ms']}")
    write_json(args.json, {"machine": machine, "result": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
