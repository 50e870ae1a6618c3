"""A fleet of agents talking at a human pace to one ``stratad``: how many it serves.

Run as ``python -m tests.bench.fleet [--agents 32 64 100 ...] [--seconds 360]``. For each
fleet size N, a fresh daemon with the defaults (weaver on a short interval, so consolidation
runs too) and N agents, each with its own user, replaying LoCoMo turns: one ``Append`` every
``--pace`` seconds (2 by default; the agents start spread over one pace), ``EndSession`` after
every 20 turns, and after a turn a ``Recall`` (k = 10, one of the conversation's questions)
with probability 0.2. Each session's last turn carries a word of its own, so an outside
prober can tell when the session is recallable: from its ``EndSession`` on, every
``PROBE_SECONDS`` a ``Recall`` of that word (keyword channel, turns) until a hit cites the
session. The prober's calls are not in the agents' figures.

Reported per N: Append, EndSession and Recall p50/p99/max over the measured window (after the
warm-up), errors, sessions ended, the share recallable within 60 s (of those ended at least
60 s before the probing stopped: the agents stop, the probes go on 60 s more), the lag p50 /
p95, the unindexed backlog over time, and the RSS of the daemon and of its workers. The
target (issue 27): Append p99 <= 20 ms, Recall p99 <= 300 ms, 95 % recallable within 60 s.

Live sessions: ``--long-share F`` keeps that share of the agents in ONE session for the whole
run (never ended); ``--probe-every N`` has each agent append, every ~N turns, a probe message
instead of a LoCoMo turn, and times how soon it is findable by its exact words and by its
meaning, while its session lives (:mod:`tests.bench.fleet.live`). The issue's run:
``--agents 100 --long-share 0.5 --probe-every 15``. ``--set KEY=VALUE``: a daemon setting.
``--data-dir DIR``: serve DIR (kept) instead of a fresh data dir, e.g. a store filled by
:mod:`tests.bench.scale`, to see the fleet beside millions of points.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing as mp
import random
import threading
import time
import traceback
from collections import Counter
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from stratad_client import AsyncMemoryClient, MemoryClient, StrataClientError
from tests.bench.fleet import live as live
from tests.bench.fleet.report import P_RECALL, RPCS, TURNS, report
from tests.bench.locomo.data import load
from tests.bench.support.daemon import (
    command_line,
    latency_ms,
    machine_info,
    percentile,
    running_daemon,
    write_json,
)
from tests.bench.support.recall_cli import parse_settings
from tests.bench.support.recorders import gc_summary
from tests.bench.support.sampler import Sampler
from tests.bench.support.tally import Tally as BaseTally
from tests.support import wait_until

PROBE_SECONDS = 2.0
WINDOW = 60.0  # "recallable within" this
CALL_TIMEOUT = 60.0
SLOW_MS = 100.0  # calls this slow are counted by the minute they began in
Script = tuple[list[tuple[str, str]], list[str]]  # turns (speaker, text), questions


def scripts() -> list[Script]:
    out: list[Script] = []
    for conv in load().conversations:
        turns = [(t.speaker, t.text) for s in conv.sessions for t in s.turns]
        out.append((turns, [q.text for q in conv.questions] or ["What happened?"]))
    return out


def marker(agent: int, session: int) -> str:
    """A word no other session says (letters only: the keyword encoder keeps it whole)."""
    return f"qu{live.spell(agent)}o{live.spell(session)}vek"


# -- the agents (spawned processes, asyncio tasks) -----------------------------------------


class Tally(BaseTally):
    """The agents' calls that began after the warm-up (those still running at ``until`` too),
    and the slow ones among them."""

    def __init__(self, measure_from: float, until: float) -> None:
        super().__init__(RPCS, measure_from)
        self.until = until
        self.slow: list[tuple[str, float, float]] = []  # rpc, monotonic start, ms (>= SLOW_MS)

    def measured(self, rpc: str, began: float, ms: float) -> None:
        super().measured(rpc, began, ms)
        if ms >= SLOW_MS:
            self.slow.append((rpc, began, ms))


async def _agent(
    address: str, agent: int, script: Script, pace: float, tally: Tally, ended: Queue[Any],
    probing: live.Probing | None = None,
) -> None:  # fmt: skip
    rng = random.Random(agent)
    turns, questions = script
    user = f"fleet-{agent:03d}"
    speakers = sorted({s for s, _ in turns})
    position = rng.randrange(len(turns))
    next_at = time.monotonic() + rng.random() * pace
    probing = probing or live.Probing(agent, False, 0, None)
    long = probing.long  # one session for the whole run
    async with AsyncMemoryClient(address, timeout=CALL_TIMEOUT) as c:
        session = 0
        while True:
            sid = f"{user}-s{session}"
            for n in itertools.count() if long else range(TURNS):
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                if time.monotonic() >= tally.until:
                    return
                next_at += pace
                if probing.due(last=not long and n == TURNS - 1):
                    await probing.append(c, user, sid, speakers[0], tally)
                else:
                    speaker, text = turns[position % len(turns)]
                    position += 1
                    if n == TURNS - 1:
                        text = f"{text} ({marker(agent, session)})"
                    role = "user" if speaker == speakers[0] else "assistant"
                    await tally.timed(
                        "Append", c.append(sid, text, role=role, user_id=user, name=speaker)
                    )
                if rng.random() < P_RECALL:
                    q = rng.choice(questions)
                    await tally.timed("Recall", c.recall(q, user_id=user, k=10))
            if await tally.timed("EndSession", c.end_session(sid, user_id=user)) is not None:
                ended.put((user, sid, marker(agent, session), time.monotonic()))
            session += 1


def _agents(
    address: str,
    agents: list[int],
    script_list: list[Script],
    pace: float,
    warmup: float,
    seconds: float,
    barrier: Barrier,
    ended: Queue[Any],
    results: Queue[Any],
    live_opts: tuple[int, int, Queue[Any] | None] = (0, 0, None),  # long agents, probe every, to
) -> None:
    long_agents, probe_every, probes = live_opts

    async def run() -> Tally:
        await asyncio.to_thread(barrier.wait, 120)
        now = time.monotonic()
        tally = Tally(now + warmup, now + warmup + seconds)
        await asyncio.gather(
            *(
                _agent(
                    address,
                    a,
                    script_list[a % len(script_list)],
                    pace,
                    tally,
                    ended,
                    live.Probing(a, a < long_agents, probe_every, probes),
                )
                for a in agents
            )
        )
        return tally

    try:
        tally = asyncio.run(run())
        results.put((tally.ms, tally.slow, tally.errors, None))
    except BaseException:
        barrier.abort()
        results.put(({}, [], Counter(), traceback.format_exc()))


# -- the prober and the sampler (threads of the driver) --------------------------------------


class Prober(threading.Thread):
    """Recalls each ended session's word until a hit cites the session."""

    def __init__(self, address: str, ended: Queue[Any], stop_at: list[float]) -> None:
        super().__init__(daemon=True)
        self.client = MemoryClient(address, timeout=CALL_TIMEOUT)
        self.ended, self.stop_at = ended, stop_at
        self.waiting: list[tuple[str, str, str, float, float]] = []  # user, sid, word, t, next
        self.lags: dict[str, float | None] = {}  # sid -> seconds (None: not found yet)
        self.ended_at: dict[str, float] = {}

    def run(self) -> None:
        while time.monotonic() < self.stop_at[0]:
            while not self.ended.empty():
                user, sid, word, t = self.ended.get()
                self.waiting.append((user, sid, word, t, t))
                self.lags[sid], self.ended_at[sid] = None, t
            now = time.monotonic()
            due = [w for w in self.waiting if w[4] <= now]
            for item in due:
                user, sid, word, t, _ = item
                self.waiting.remove(item)
                try:
                    hits = self.client.recall(
                        word, user_id=user, k=3, channels=["keyword"], kinds=["episode_turn"]
                    ).hits
                except StrataClientError:
                    hits = []
                if any(h.session_id == sid for h in hits):
                    self.lags[sid] = time.monotonic() - t
                else:
                    self.waiting.append((user, sid, word, t, time.monotonic() + PROBE_SECONDS))
            time.sleep(0.05)
        self.client.close()


# -- one fleet -------------------------------------------------------------------------------


def run_fleet(
    n: int, seconds: float, warmup: float, pace: float, processes: int,
    long_share: float = 0.0, probe_every: int = 0, settings: dict[str, str] | None = None,
    data_dir: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    script_list = scripts()
    long_agents = round(long_share * n)  # agents 0.. (spread over the processes)
    settings = {"STRATA_WEAVER__INTERVAL_SECONDS": "60", **(settings or {})}
    with running_daemon(settings, data_dir) as daemon:
        with MemoryClient(daemon.address, timeout=30) as c:
            wait_until(lambda: c.admin.weaver_status().embedding_ready, 180, "for the model")
        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(processes + 1)
        ended: Queue[Any] = ctx.Queue()
        results: Queue[Any] = ctx.Queue()
        probes: Queue[Any] = ctx.Queue()
        groups = [list(range(n))[w::processes] for w in range(processes)]
        procs = [
            ctx.Process(
                target=_agents,
                args=(
                    daemon.address,
                    g,
                    script_list,
                    pace,
                    warmup,
                    seconds,
                    barrier,
                    ended,
                    results,
                    (long_agents, probe_every, probes),
                ),
                daemon=True,
            )
            for g in groups
        ]
        for proc in procs:
            proc.start()
        barrier.wait(120)
        t0 = time.monotonic()
        stop_at = [t0 + warmup + seconds + WINDOW + 2 * PROBE_SECONDS]
        prober = Prober(daemon.address, ended, stop_at)
        sampler = Sampler(daemon, 10.0, t0)
        sampler.sample()
        prober.start()
        sampler.start()
        live_prober = live.LiveProber(daemon.address, probes, t0) if probe_every else None
        if live_prober:
            live_prober.start()
        ms: dict[str, list[float]] = {r: [] for r in RPCS}
        errors: Counter[str] = Counter()
        slow: dict[str, Counter[int]] = {r: Counter() for r in RPCS}
        for _ in procs:
            got_ms, got_slow, got_errors, failure = results.get(timeout=warmup + seconds + 300)
            if failure:
                raise RuntimeError("an agent process failed:\n" + failure)
            for rpc, values in got_ms.items():
                ms[rpc].extend(values)
            for rpc, began, _ms in got_slow:  # the clock is the machine's: offsets from t0
                slow[rpc][int((began - t0) // 60)] += 1
            errors.update(got_errors)
        for proc in procs:
            proc.join(30)
        agents_done = time.monotonic()
        if live_prober:
            live_prober.finish()  # each probe given up by its own deadline (60 s at most)
        prober.join()
        sampler.finish()
        pauses = gc_summary(daemon.log_text())  # the start-up's and the run's
    judged = [s for s, t in prober.ended_at.items() if t <= stop_at[0] - WINDOW - PROBE_SECONDS]
    lags = sorted(prober.lags[s] or float("inf") for s in judged)
    within = sum(1 for lag in lags if lag <= WINDOW)
    out: dict[str, Any] = {
        "agents": n,
        "long_share": long_share,
        "long_agents": long_agents,
        "probe_every": probe_every,
        "pace_s": pace,
        "seconds": seconds,
        "warmup": warmup,
        "rpcs": {rpc: {"calls": len(v), **latency_ms(v)} for rpc, v in ms.items()},
        "errors": dict(errors),
        "gc_pauses": pauses,
        # calls of SLOW_MS or more, by the minute of the run they began in (0: the first)
        "slow_by_minute": {rpc: dict(sorted(c.items())) for rpc, c in slow.items() if c},
        "sessions_ended": len(prober.ended_at),
        "sessions_judged": len(judged),
        "recallable_within_60s_pct": round(100 * within / len(judged), 1) if judged else None,
        "lag_p50_s": round(percentile(lags, 50), 1) if lags else None,
        "lag_p95_s": round(percentile(lags, 95), 1) if lags else None,
        "probing_after_agents_s": round(stop_at[0] - agents_done, 1),
        "samples": [
            {
                "s": round(r.s, 1),
                "daemon_mib": round(r.rss_mib, 1),
                "daemon_anon_mib": round(r.anon_mib, 1),
                "workers_mib": round(r.workers_mib, 1),
                "unindexed": r.unindexed,
            }
            for r in sampler.samples
        ],
    }
    if live_prober:
        out["live"] = live.summarize(live_prober, warmup, agents_done - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.fleet", __doc__)
    parser.add_argument("--agents", type=int, nargs="+", default=[32, 64, 100, 128])
    parser.add_argument("--seconds", type=float, default=360.0, help="measured, per fleet size")
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--pace", type=float, default=2.0, help="seconds between an agent's turns")
    parser.add_argument("--processes", type=int, default=2, help="agent processes")
    parser.add_argument(
        "--long-share", type=float, default=0.0, metavar="F",
        help="share of the agents in one long session for the whole run (0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--probe-every", type=int, default=0, metavar="N",
        help="a probe message every ~N turns of each agent, timed until findable (0: none)",
    )  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="serve this data dir (kept; e.g. one filled by tests.bench.scale) instead of a "
        "fresh one for each fleet size",
    )
    args = parser.parse_args(argv)
    settings = parse_settings(args.set)
    machine = machine_info() | ({"settings": settings} if settings else {})
    results = []
    for n in args.agents:
        results.append(run_fleet(n, args.seconds, args.warmup, args.pace, args.processes,
                                 args.long_share, args.probe_every, settings,
                                 args.data_dir))  # fmt: skip
        print(report(machine, results[-1:]), flush=True)
    print()
    print(report(machine, results))
    write_json(args.json, {"machine": machine, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
