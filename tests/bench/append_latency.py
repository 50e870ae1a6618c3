"""Append latency and throughput of ``stratad`` over gRPC on loopback.

Run as ``python -m tests.bench.append_latency``. For each ``STRATA_SYNC`` mode a fresh daemon
is started and measured twice:

* one client appending sequentially (after a warm-up), sessions of 50 messages each;
* 16 concurrent clients (4 spawned worker processes x 4 asyncio tasks, each task with its own
  :class:`AsyncMemoryClient` and its own sessions) for a fixed duration after a warm-up.

The "floor" row runs the same load against a gRPC server whose Append does nothing: what the
Python gRPC stack alone costs here, so the daemon's own share can be read off.

Targets (printed, not asserted): p99 < 2 ms with one client; >= 3000 appends/s with 16 clients.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
import traceback
from collections.abc import Sequence
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from stratad_client import AsyncMemoryClient, MemoryClient
from tests.bench.support.daemon import (
    command_line,
    cpu_seconds,
    format_machine,
    latency_ms,
    machine_info,
    running_daemon,
    running_floor,
    write_figures,
)

SESSION_MESSAGES = 50
WARMUP_MESSAGES = 200
WORKERS = 4
TASKS_PER_WORKER = 4
CONCURRENT_WARMUP_SECONDS = 2.0
TARGET_P99_MS = 2.0
TARGET_THROUGHPUT = 3000.0
METADATA = {"channel": "web"}
# Realistic short chat turns, about 20 words each.
MESSAGES = (
    "I moved to Berlin last week and I'm still looking for a good bakery somewhere near my new "
    "flat in Prenzlauer Berg.",
    "There are several well-reviewed bakeries in Prenzlauer Berg; would you like me to list a few "
    "that are close to you?",
    "Yes please, ideally one that opens early, since I usually leave for work at around seven in "
    "the morning on weekdays.",
    "Can you remind me on Friday to call the landlord about the broken heating in the kitchen "
    "before the weekend starts?",
    "Sure, I'll set a reminder for Friday morning to call your landlord about the broken kitchen "
    "heating before the weekend.",
    "My sister Anna is visiting next month, so I need a restaurant that handles nut allergies well "
    "and takes reservations.",
    "I prefer vegetarian places, and I'd rather avoid anything too loud, because we want to talk "
    "and catch up properly.",
    "Noted: vegetarian, quiet and nut-allergy friendly. I'll look for places near Alexanderplatz "
    "that take reservations for two.",
)
MODES = {"off": "false", "on": "true"}


def _content(n: int) -> str:
    return MESSAGES[n % len(MESSAGES)]


def _role(n: int) -> str:
    return "user" if n % 2 == 0 else "assistant"


def summarize(samples_s: Sequence[float], seconds: float) -> dict[str, float]:
    """Latency percentiles in ms and the rate, from per-append latencies in seconds."""
    return {
        "count": len(samples_s),
        "seconds": round(seconds, 3),
        "appends_per_s": round(len(samples_s) / seconds, 1) if seconds > 0 else float("nan"),
        **latency_ms((s * 1000.0 for s in samples_s), (50, 90, 99), digits=3),
    }


# -- one client --------------------------------------------------------------------------------
def single_client(address: str, messages: int, warmup: int = WARMUP_MESSAGES) -> dict[str, float]:
    """Sequential appends from one blocking client; latency of each measured append."""
    with MemoryClient(address) as client:
        for i in range(warmup):
            client.append(
                f"warm-{i // SESSION_MESSAGES}",
                _content(i),
                role=_role(i),
                user_id="bench-warm",
                metadata=METADATA,
            )
        samples: list[float] = []
        started = time.perf_counter()
        for i in range(messages):
            session_id = f"seq-{i // SESSION_MESSAGES}"
            t0 = time.perf_counter()
            client.append(
                session_id, _content(i), role=_role(i), user_id="bench-seq", metadata=METADATA
            )
            samples.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
    return summarize(samples, elapsed)


# -- 16 clients --------------------------------------------------------------------------------
async def _client_task(
    address: str, name: str, measure_from: float, measure_until: float
) -> list[float]:
    """Append to this task's own sessions until ``measure_until``; keep the latencies of the
    appends that started and finished inside the measurement window."""
    samples: list[float] = []
    async with AsyncMemoryClient(address) as client:
        n = 0
        while True:
            t0 = time.monotonic()
            if t0 >= measure_until:
                return samples
            await client.append(
                f"{name}-{n // SESSION_MESSAGES}",
                _content(n),
                role=_role(n),
                user_id=f"bench-{name}",
                metadata=METADATA,
            )
            t1 = time.monotonic()
            if t0 >= measure_from and t1 <= measure_until:
                samples.append(t1 - t0)
            n += 1


async def _worker_main(
    address: str, worker: int, tasks: int, warmup: float, duration: float, barrier: Barrier
) -> list[float]:
    # Connect and exercise the code paths before the start line.
    async with AsyncMemoryClient(address) as client:
        await client.append(f"w{worker}-hello", "hello", user_id="bench-hello")
    await asyncio.to_thread(barrier.wait, 120)
    measure_from = time.monotonic() + warmup
    measure_until = measure_from + duration
    per_task = await asyncio.gather(
        *(
            _client_task(address, f"w{worker}t{t}", measure_from, measure_until)
            for t in range(tasks)
        )
    )
    return [s for samples in per_task for s in samples]


def _worker(
    address: str,
    worker: int,
    tasks: int,
    warmup: float,
    duration: float,
    barrier: Barrier,
    results: Queue[tuple[int, list[float], str | None]],
) -> None:
    """Entry point of a spawned worker process: puts (worker, latencies, error) on ``results``."""
    try:
        samples = asyncio.run(_worker_main(address, worker, tasks, warmup, duration, barrier))
        results.put((worker, samples, None))
    except BaseException:
        barrier.abort()
        results.put((worker, [], traceback.format_exc()))


def _cpu_snapshot(daemon_pid: int, client_pids: Sequence[int]) -> tuple[float, float, float]:
    """(now, the daemon's CPU seconds, the client processes' CPU seconds)."""
    return (
        time.monotonic(),
        cpu_seconds(daemon_pid),
        sum(cpu_seconds(pid) for pid in client_pids),
    )


def concurrent_clients(
    address: str,
    daemon_pid: int,
    duration: float,
    workers: int = WORKERS,
    tasks: int = TASKS_PER_WORKER,
    warmup: float = CONCURRENT_WARMUP_SECONDS,
) -> dict[str, float]:
    """``workers`` x ``tasks`` concurrent clients for ``duration`` seconds after ``warmup``."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers + 1)
    results: Queue[tuple[int, list[float], str | None]] = ctx.Queue()
    procs = [
        ctx.Process(
            target=_worker,
            args=(address, w, tasks, warmup, duration, barrier, results),
            name=f"bench-worker-{w}",
            daemon=True,
        )
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    try:
        barrier.wait(120)
        # CPU use of the daemon and of the client processes over (roughly) the measurement
        # window: with few cores they compete, and the clients' share is not the daemon's.
        pids = [p.pid for p in procs if p.pid is not None]
        time.sleep(warmup)
        t0, daemon0, clients0 = _cpu_snapshot(daemon_pid, pids)
        time.sleep(duration)
        t1, daemon1, clients1 = _cpu_snapshot(daemon_pid, pids)
        samples: list[float] = []
        errors: list[str] = []
        for _ in procs:
            _, worker_samples, error = results.get(timeout=duration + 120)
            samples.extend(worker_samples)
            if error:
                errors.append(error)
    except BaseException:
        for proc in procs:
            proc.terminate()
        raise
    finally:
        for proc in procs:
            proc.join(30)
    if errors:
        raise RuntimeError("a benchmark worker failed:\n" + errors[0])
    result = summarize(samples, duration)
    result["clients"] = workers * tasks
    result["daemon_cpu_percent"] = round(100.0 * (daemon1 - daemon0) / (t1 - t0), 1)
    result["clients_cpu_percent"] = round(100.0 * (clients1 - clients0) / (t1 - t0), 1)
    return result


# -- report ------------------------------------------------------------------------------------
def _mark(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(machine: dict[str, Any], params: dict[str, Any], results: dict[str, Any]) -> str:
    lines = [
        "Strata append benchmark: gRPC on loopback, fresh stratad per STRATA_SYNC mode",
        format_machine(machine),
        "",
        f"One client, sequential: {params['messages']} appends after {WARMUP_MESSAGES} warm-up, "
        f"{SESSION_MESSAGES} messages per session, ~20-word messages + 1 metadata entry",
        f"  {'server':<6} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'appends/s':>10}   target p99 < {TARGET_P99_MS:g} ms",
    ]
    for mode, r in results.items():
        s = r["single"]
        lines.append(
            f"  {mode:<6} {s['p50_ms']:>8.3f} {s['p90_ms']:>8.3f} {s['p99_ms']:>8.3f} "
            f"{s['max_ms']:>8.3f} {s['appends_per_s']:>10.0f}   "
            f"{_mark(s['p99_ms'] < TARGET_P99_MS)}"
        )
    lines += [
        "",
        f"{WORKERS * TASKS_PER_WORKER} concurrent clients ({WORKERS} processes x "
        f"{TASKS_PER_WORKER} asyncio tasks): {params['duration']:g} s after "
        f"{CONCURRENT_WARMUP_SECONDS:g} s warm-up",
        f"  {'server':<6} {'appends/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'daemon CPU':>10} {'client CPU':>10}   target >= {TARGET_THROUGHPUT:.0f}/s",
    ]
    for mode, r in results.items():
        c = r["concurrent"]
        lines.append(
            f"  {mode:<6} {c['appends_per_s']:>10.0f} {c['p50_ms']:>8.3f} {c['p99_ms']:>8.3f} "
            f"{c['max_ms']:>8.3f} {c['daemon_cpu_percent']:>9.0f}% "
            f"{c['clients_cpu_percent']:>9.0f}%   "
            f"{_mark(c['appends_per_s'] >= TARGET_THROUGHPUT)}"
        )
    lines.append(
        f"  (CPU in % of one core; the daemon and the client processes share "
        f"{machine['cores']} cores)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.append_latency", __doc__)
    parser.add_argument(
        "--messages", type=int, default=3000, help="measured sequential appends (default 3000)"
    )
    parser.add_argument(
        "--duration", type=float, default=10.0, help="seconds of the 16-client run (default 10)"
    )
    parser.add_argument(
        "--sync", choices=("both", "on", "off"), default="both", help="STRATA_SYNC modes to run"
    )
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the floor: the same load on a gRPC server whose Append does nothing",
    )
    args = parser.parse_args(argv)

    machine = machine_info()
    params = {"messages": args.messages, "duration": args.duration}
    modes = ["off", "on"] if args.sync == "both" else [args.sync]
    if not args.no_floor:
        modes.insert(0, "floor")
    results: dict[str, Any] = {}
    for mode in modes:
        if mode == "floor":
            print("floor: a gRPC server whose Append does nothing", flush=True)
            server = running_floor()
        else:
            print(f"STRATA_SYNC={MODES[mode]}: starting a fresh daemon", flush=True)
            server = running_daemon({"STRATA_SYNC": MODES[mode]})
        with server as daemon:
            print(f"  one client, {args.messages} appends ...", flush=True)
            single = single_client(daemon.address, args.messages)
            print(f"  {WORKERS * TASKS_PER_WORKER} clients, {args.duration:g} s ...", flush=True)
            concurrent = concurrent_clients(daemon.address, daemon.pid, args.duration)
        results[mode] = {"single": single, "concurrent": concurrent}

    print()
    print(report(machine, params, results))
    write_figures(
        args.json,
        "append_latency",
        machine,
        {
            **params,
            "warmup_messages": WARMUP_MESSAGES,
            "session_messages": SESSION_MESSAGES,
            "workers": WORKERS,
            "tasks_per_worker": TASKS_PER_WORKER,
            "concurrent_warmup_seconds": CONCURRENT_WARMUP_SECONDS,
        },
        results,
        targets={
            "single_p99_ms": TARGET_P99_MS,
            "concurrent_appends_per_s": TARGET_THROUGHPUT,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
