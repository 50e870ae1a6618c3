"""Mixed load on one ``stratad``: 32 concurrent agents appending, ending sessions, recalling
and packing, with the weaver consolidating in the background.

Run as ``python -m tests.bench.load`` (``make bench-load``; ``--seconds`` for shorter runs).
A fresh daemon with the embedded defaults is started, the weaver on a short interval
(``weaver.interval_seconds`` = 10) so that consolidation runs during the test. Each client is
an agent with its own user replaying a LoCoMo conversation (read from
``../shared/data/locomo/``) turn by turn: ``Append`` per turn, ``EndSession`` at the end of each
LoCoMo session, and after a turn a ``Recall`` (k = 10, probability 0.2) or a ``Pack`` (1,000
tokens, probability 0.05) with one of the conversation's questions. Closed loop, no think time:
the clients run as fast as the daemon answers.

Reported: per RPC the calls, calls/s, p50/p99/max over the measured window (after a warm-up),
the errors (status codes, over the whole run; target 0), the daemon's RSS sampled every few
seconds (warm = first sample after the warm-up, then end and peak) and its workers' beside it,
CPU of the daemon and of the clients, and what the weaver did meanwhile.

With ``--watchers N`` (10 by default) a process of its own follows N of the agents' users with
``MemoryService.Watch`` meanwhile: the changes delivered per second and the lag of each from
its commit (the change's time) to its delivery, p50 / p99 / max over the measured window.

With ``--query-seconds S`` the clients then stop appending and go on with Recall and Pack
alone for S seconds: whether RSS levels off once the data stops growing (the spread of the
RSS samples over that phase, against their mean; target: within 5 %).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import random
import time
import traceback
from collections import Counter
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from stratad_client import AsyncMemoryClient, MemoryClient, StrataClientError
from tests.bench.load.report import report
from tests.bench.load.watch import Result, watch_figures, watchers_process
from tests.bench.locomo.data import load
from tests.bench.support.daemon import (
    command_line,
    cpu_seconds,
    latency_ms,
    machine_info,
    rss_bytes,
    running_daemon,
    write_json,
)
from tests.bench.support.sampler import Sampler
from tests.bench.support.tally import Tally as BaseTally
from tests.support import wait_until

RPCS = ("Append", "EndSession", "Recall", "Pack")
P_RECALL, P_PACK = 0.2, 0.05
CALL_TIMEOUT = 60.0
# (session number, [(speaker, text), ...]) per session, and the questions, per conversation
Script = tuple[list[tuple[int, list[tuple[str, str]]]], list[str]]


def scripts() -> list[Script]:
    data = load()
    out: list[Script] = []
    for conv in data.conversations:
        sessions = [(s.number, [(t.speaker, t.text) for t in s.turns]) for s in conv.sessions]
        out.append((sessions, [q.text for q in conv.questions] or ["What happened?"]))
    return out


# -- the clients (spawned worker processes, asyncio tasks) ------------------------------------


class Tally(BaseTally):
    """The clients' calls inside the measured window; the queries alone go on until
    ``queries_until``."""

    def __init__(self, measure_from: float, measure_until: float, queries_until: float) -> None:
        super().__init__(RPCS, measure_from, measure_until)
        self.queries_until = queries_until


async def _agent(address: str, client: int, script: Script, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    sessions, questions = script
    user = f"load-user-{client:02d}"
    names = sorted({speaker for _, turns in sessions for speaker, _ in turns})

    async def ingest(c: AsyncMemoryClient) -> None:
        round_ = 0
        while True:
            for number, turns in sessions:
                sid = f"{user}-r{round_}-s{number}"
                for speaker, text in turns:
                    if time.monotonic() >= tally.measure_until:
                        return
                    role = "user" if speaker == names[0] else "assistant"
                    await tally.timed(
                        "Append", c.append(sid, text, role=role, user_id=user, name=speaker)
                    )
                    draw = rng.random()
                    if draw < P_RECALL:
                        q = rng.choice(questions)
                        await tally.timed("Recall", c.recall(q, user_id=user, k=10))
                    elif draw < P_RECALL + P_PACK:
                        q = rng.choice(questions)
                        await tally.timed("Pack", c.pack(q, user_id=user, max_tokens=1000))
                await tally.timed("EndSession", c.end_session(sid))
            round_ += 1

    async with AsyncMemoryClient(address, timeout=CALL_TIMEOUT) as c:
        await ingest(c)
        # Ingest stops; queries go on (not in the figures: they measure the mixed load).
        while time.monotonic() < tally.queries_until:
            q = rng.choice(questions)
            try:
                if rng.random() < P_RECALL / (P_RECALL + P_PACK):
                    await c.recall(q, user_id=user, k=10)
                else:
                    await c.pack(q, user_id=user, max_tokens=1000)
            except StrataClientError as exc:
                tally.errors[f"query phase {exc.code.name}"] += 1


def _worker(
    address: str,
    worker: int,
    clients: list[int],
    script_list: list[Script],
    warmup: float,
    duration: float,
    query_seconds: float,
    barrier: Barrier,
    results: Queue[tuple[dict[str, list[float]], Counter[str], str | None]],
) -> None:
    async def run() -> Tally:
        await asyncio.to_thread(barrier.wait, 120)
        now = time.monotonic()
        tally = Tally(
            now + warmup, now + warmup + duration, now + warmup + duration + query_seconds
        )
        await asyncio.gather(
            *(
                _agent(address, i, script_list[i % len(script_list)], tally, seed=1000 * worker + i)
                for i in clients
            )
        )
        return tally

    try:
        tally = asyncio.run(run())
        results.put((tally.ms, tally.errors, None))
    except BaseException:
        barrier.abort()
        results.put(({}, Counter(), traceback.format_exc()))


# -- the driver ------------------------------------------------------------------------------


def run_load(
    seconds: float,
    clients: int,
    processes: int,
    warmup: float,
    sample_every: float,
    query_seconds: float = 0.0,
    watchers: int = 0,
) -> dict[str, Any]:
    script_list = scripts()
    settings = {"STRATA_WEAVER__INTERVAL_SECONDS": "10"}
    with running_daemon(settings) as daemon:
        with MemoryClient(daemon.address, timeout=30) as c:
            wait_until(lambda: c.admin.weaver_status().embedding_ready, 180, "for the model")
        rss_start = rss_bytes(daemon.pid) / 2**20
        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(processes + 1 + (1 if watchers else 0))
        results: Queue[tuple[dict[str, list[float]], Counter[str], str | None]] = ctx.Queue()
        watched: Queue[Result] = ctx.Queue()
        users = [f"load-user-{i:02d}" for i in range(min(watchers, clients))]
        groups = [list(range(clients))[w::processes] for w in range(processes)]
        procs = [
            ctx.Process(
                target=_worker,
                args=(
                    daemon.address,
                    w,
                    groups[w],
                    script_list,
                    warmup,
                    seconds,
                    query_seconds,
                    barrier,
                    results,
                ),
                name=f"load-worker-{w}",
                daemon=True,
            )
            for w in range(processes)
        ]
        if watchers:
            procs.append(
                ctx.Process(
                    target=watchers_process,
                    args=(daemon.address, users, warmup, seconds, barrier, watched),
                    name="load-watchers",
                    daemon=True,
                )
            )
        for proc in procs:
            proc.start()
        ms: dict[str, list[float]] = {r: [] for r in RPCS}
        errors: Counter[str] = Counter()
        failures: list[str] = []
        try:
            barrier.wait(120)
            t0 = time.monotonic()
            sampler = Sampler(daemon, sample_every, t0)
            sampler.sample()
            sampler.start()
            pids = [p.pid for p in procs if p.pid is not None]
            time.sleep(warmup)
            cpu0 = (time.monotonic(), cpu_seconds(daemon.pid), sum(map(cpu_seconds, pids)))
            time.sleep(seconds)
            cpu1 = (time.monotonic(), cpu_seconds(daemon.pid), sum(map(cpu_seconds, pids)))
            for _ in range(processes):
                worker_ms, worker_errors, failure = results.get(
                    timeout=seconds + query_seconds + 300
                )
                for rpc, values in worker_ms.items():
                    ms[rpc].extend(values)
                errors.update(worker_errors)
                if failure:
                    failures.append(failure)
            lags: list[float] = []
            if watchers:
                lags, watch_errors, failure = watched.get(timeout=seconds + 300)
                errors.update(watch_errors)
                if failure:
                    failures.append(failure)
            sampler.finish()
        finally:
            for proc in procs:
                proc.join(30)
                if proc.is_alive():
                    proc.terminate()
        if failures:
            raise RuntimeError("a load worker failed:\n" + failures[0])
        with MemoryClient(daemon.address, timeout=30) as c:
            status = c.admin.weaver_status()
            stats = c.admin.stats()
    span = cpu1[0] - cpu0[0]
    rows = sampler.samples
    warm = next((r.rss_mib for r in rows if r.s >= warmup), rows[0].rss_mib)
    ingest_end = warmup + seconds
    phase = [r.rss_mib for r in rows if r.s >= ingest_end]
    anon = [r.anon_mib for r in rows if r.s >= ingest_end]
    query_phase = (
        {
            "seconds": query_seconds,
            "rss_min": round(min(phase), 1),
            "rss_max": round(max(phase), 1),
            "rss_mean": round(sum(phase) / len(phase), 1),
            "spread_pct": round(100 * (max(phase) - min(phase)) / (sum(phase) / len(phase)), 1),
            "anon_min": round(min(anon), 1),
            "anon_max": round(max(anon), 1),
            "anon_spread_pct": round(100 * (max(anon) - min(anon)) / (sum(anon) / len(anon)), 1),
        }
        if query_seconds and phase
        else None
    )
    return {
        "seconds": seconds,
        "warmup": warmup,
        "clients": clients,
        "processes": processes,
        "rpcs": {
            rpc: {
                "calls": len(v),
                "per_s": round(len(v) / seconds, 1),
                **latency_ms(v),
            }
            for rpc, v in ms.items()
        },
        "errors": dict(errors),
        "watch": watch_figures(len(users), lags, seconds),
        "rss_mib": {
            "before_load": round(rss_start, 1),
            "warm": round(warm, 1),
            "end": round(rows[-1].rss_mib, 1),
            "peak": round(max(r.rss_mib for r in rows), 1),
            "samples": [(round(r.s, 1), round(r.rss_mib, 1)) for r in rows],
            "anon": [(round(r.s, 1), round(r.anon_mib, 1)) for r in rows],
            "workers": [(round(r.s, 1), round(r.workers_mib, 1)) for r in rows],
        },
        "query_phase": query_phase,
        "stores": [
            {
                "s": round(r.s, 1),
                "rss_mib": round(r.rss_mib, 1),
                "vectors_mib": round(r.vectors_mib, 1),
                "rocksdb_mib": round(r.rocksdb_mib, 1),
                "unindexed": r.unindexed,
                "pending": r.pending,
            }
            for r in rows
        ],
        "daemon_cpu_percent": round(100 * (cpu1[1] - cpu0[1]) / span, 1),
        "clients_cpu_percent": round(100 * (cpu1[2] - cpu0[2]) / span, 1),
        "weaver": {
            "runs_seen": status.last_run.run_id != "",
            "last_run_episodes": status.last_run.episodes,
            "last_run_ok": status.last_run.ok,
            "last_run_seconds": round(status.last_run.seconds, 1),
            "last_run_error": status.last_run.error,
            "pending_at_end": status.pending,
            "unindexed_at_end": status.unindexed,
        },
        "episodes_at_end": stats.journal.episodes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.load", __doc__)
    parser.add_argument("--seconds", type=float, default=120.0, help="measured duration")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--processes", type=int, default=4, help="client processes")
    parser.add_argument("--sample-seconds", type=float, default=5.0, help="RSS sampling")
    parser.add_argument(
        "--query-seconds",
        type=float,
        default=0.0,
        help="then queries alone for this long (RSS once the data stops growing)",
    )
    parser.add_argument(
        "--watchers", type=int, default=10, help="users followed with Watch meanwhile (0: none)"
    )
    args = parser.parse_args(argv)
    machine = machine_info()
    result = run_load(
        args.seconds,
        args.clients,
        args.processes,
        args.warmup,
        args.sample_seconds,
        args.query_seconds,
        args.watchers,
    )
    print(report(machine, result))
    write_json(args.json, {"machine": machine, "result": result})
    total_errors = sum(result["errors"].values())
    return 1 if total_errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
