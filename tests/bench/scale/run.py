"""A store of a million points or more on one machine: start, memory, disk, Recall per user,
a restart and a Forget of the largest user (issue 44's table).

Run as ``python -m tests.bench.scale`` (``make bench-scale``; ``SCALE="--points 10000000"``).

**Fill** (offline, in ``--workers`` processes, :mod:`tests.bench.scale.fill`; the points are
made as ``tests.bench.recall_latency`` makes them: the real model's vectors of the LoCoMo
turns, jittered, 60 % chunks, 10 % summaries and 30 % facts with a fact graph edge
each, in the daemon's layout and default settings), over ``--users`` users with a skew: the
``--big-users`` largest hold ``--big-points`` points each (at most 60 % of the store between
them), the rest share what is left by a log-uniform weight between 1 and 10 (at 10M points
and 1,000 users: 2.5k to 25k points each). The index is built unless ``--no-index``.

**Then a real** ``stratad`` on it (log level info, to read ``gc.*`` and ``vectors.built``):

- the time from ``stratad serve`` to its ready file, and to the first Recall answered;
- its resident memory (anonymous and file-backed) after start and after the queries;
- the data dir's size (apparent and allocated), per point;
- Recall (k 10, all channels) of the big users and of ``--sample`` small ones asked in turn
  for ``--rounds`` rounds: the first visit of each and the later ones apart, with the answers
  that went without a channel (``degraded``: a user's graph is built in the background
  after its first visit; the later visits wait until it is, ``settled_s``, so that they are
  answered by every channel: a small user's later visits asked at once went without their
  graph, 16 of 20 on an AVX2 machine on 2026-12-07);
- a restart: the shards rebuilt in its first ``--settle`` seconds (index builds every 20 s),
  its start times, a first Recall of each big user, and the seconds until their graphs are
  built again (from their feature files on disk, ``graphs_built_s``);
- a Forget of the largest user while a thread recalls small users and another appends to a
  session of one of them (once the opener is done and they were asked twice): its duration,
  its stages, and the others' Recalls and appends meanwhile; RocksDB's compaction after it
  (``compacted_after_ms``); then, its points deleted after it returned
  (``tiers.semantic.erasures``), the seconds until that ended (``erased_s``, from the
  Forget's start) and the others' calls meanwhile (``*_while_erased``);
- the garbage collector: the start-up freeze and every pass over 50 ms (``gc.pause``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import random
import re
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import grpc
import numpy as np

from stratad_client import MemoryClient, StrataClientError
from tests.bench.scale.fill import fill
from tests.bench.scale.readings import disk, forget_stages, log_figures, rss
from tests.bench.support.daemon import (
    command_line,
    format_machine,
    latency_ms,
    machine_info,
    summary,
    write_json,
)
from tests.bench.tier3.points import embed_pool
from tests.support import QUIET_ENV, ProcessDaemon
from tiers.semantic.vectors.storage import Originals
from tiers.settings import VectorsSettings


def sizes(points: int, users: int, big_users: int, big_points: int, seed: int) -> list[int]:
    """Points per user, the big users first; they add up to ``points``."""
    big = [min(big_points, int(0.6 * points) // max(1, big_users))] * big_users
    rest, small = points - sum(big), users - big_users
    weights = np.exp(np.random.default_rng(seed).uniform(0.0, math.log(10.0), size=small))
    counts = np.floor(weights / weights.sum() * rest).astype(int)
    counts[: rest - int(counts.sum())] += 1
    return big + counts.tolist()


def name(index: int, big_users: int) -> str:
    return f"big-{index}" if index < big_users else f"user-{index:04d}"


OPENER_TIMEOUT = 1800.0  # at 10M the opener rests three times each load: minutes
ERASE_TIMEOUT = 1800.0  # a large user's points deleted after its Forget
FIRST_RECALL_TIMEOUT = 900.0  # at 10M, a small user's first Recall ever took over 60 s


def start(data: Path, **settings: str) -> tuple[ProcessDaemon, dict[str, float]]:
    """A daemon on ``data``, with the seconds to its ready file and to a first Recall."""
    t0 = time.perf_counter()
    proc = ProcessDaemon(data, log_level="info", **QUIET_ENV, **settings)
    ready = time.perf_counter() - t0
    with MemoryClient(proc.address, timeout=FIRST_RECALL_TIMEOUT) as c:
        while True:
            try:
                c.recall("what did we talk about", user_id="user-0999", k=10)
                break
            except StrataClientError as exc:
                if exc.code != grpc.StatusCode.UNAVAILABLE:
                    raise
                time.sleep(0.05)
    return proc, {"ready_s": round(ready, 1), "first_recall_s": round(time.perf_counter() - t0, 1)}


GRAPH_TIMEOUT = 900.0  # a 200k user's graph, built in the background: 20-30 s at 1M


def graphs_built(proc: ProcessDaemon, users: list[str]) -> float:
    """Wait until the daemon logged the background build of each of ``users``' graphs
    (``recall.graph_built``; ``GRAPH_TIMEOUT`` at most); the seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < GRAPH_TIMEOUT:
        text = proc.log_path.read_text(errors="replace")
        if all(f"event=recall.graph_built user_id={u} " in text for u in users):
            break
        time.sleep(0.5)
    return round(time.perf_counter() - t0, 1)


def in_turn(
    address: str,
    users: list[str],
    rounds: int,
    questions: list[str],
    settle: Callable[[list[str]], float] | None = None,
) -> dict[str, Any]:
    """Each user asked once a round; after the first round, ``settle`` of the users answered
    without a channel (its seconds reported as ``settled_s``). Beside each figure the daemon's
    stage ``speakers`` (``speakers_p50_ms`` ...): a first visit's opening of the user's vectors
    and loading or building of their graph, before the query is embedded."""
    rng = random.Random(5)
    first: list[float] = []
    later: list[float] = []
    speakers: tuple[list[float], list[float]] = ([], [])  # the stage, first visits and later
    degraded: list[str] = []  # first visits without a channel (their graph building)
    degraded_later = 0
    settled = None
    with MemoryClient(address, timeout=120) as c:
        for r in range(rounds):
            for user in users:
                t0 = time.perf_counter()
                answer = c.recall(rng.choice(questions), user_id=user, k=10)
                (first if r == 0 else later).append((time.perf_counter() - t0) * 1000)
                stage = [t.ms for t in answer.timings if t.stage == "speakers"]
                speakers[r > 0].extend(stage)
                if answer.degraded_channels and r == 0:
                    degraded.append(user)
                degraded_later += bool(answer.degraded_channels) and r > 0
            if r == 0 and settle is not None:
                settled = settle(degraded)
    return {
        "first_visit": {**summary(first), **stage_of(speakers[0]), "degraded": len(degraded)},
        "later": {**summary(later), **stage_of(speakers[1]), "degraded": degraded_later},
        **({"settled_s": settled} if settled is not None else {}),
    }


def stage_of(ms: list[float]) -> dict[str, float]:
    """The ``speakers`` stage's p50, p99 and max (nothing when no answer had it)."""
    return latency_ms(ms, (50, 99), digits=1, prefix="speakers_") if ms else {}


def forget_largest(
    proc: ProcessDaemon, big: str, small: list[str], questions: list[str]
) -> dict[str, Any]:
    """Forget ``big`` while one thread recalls the small users and another appends to one of
    theirs ten times a second; its duration and theirs. First the opener ends and the small
    users are asked twice (the second round once the graphs built behind the first are:
    ``others_before``), so that their calls measure the Forget, not cold shards or builds."""
    t0 = time.perf_counter()
    while "event=vectors.opened" not in proc.log_path.read_text(errors="replace"):
        if time.perf_counter() - t0 > OPENER_TIMEOUT:
            raise TimeoutError(f"no vectors.opened within {OPENER_TIMEOUT:g} s")
        time.sleep(1.0)
    waited = time.perf_counter() - t0
    warm = in_turn(proc.address, small, 2, questions, functools.partial(graphs_built, proc))
    address = proc.address
    done = threading.Event()
    others: list[float] = []
    appends: list[float] = []

    def recalls() -> None:
        rng = random.Random(9)
        with MemoryClient(address, timeout=120) as c:
            while not done.is_set():
                t0 = time.perf_counter()
                c.recall(rng.choice(questions), user_id=rng.choice(small), k=10)
                others.append((time.perf_counter() - t0) * 1000)

    def appender() -> None:
        with MemoryClient(address, timeout=120) as c:
            while not done.is_set():
                t0 = time.perf_counter()
                c.append("during-forget", f"note {len(appends)}", user_id=small[0])
                appends.append((time.perf_counter() - t0) * 1000)
                done.wait(0.1)

    threads = [threading.Thread(target=recalls), threading.Thread(target=appender)]
    erased_before = proc.log_path.read_text(errors="replace").count("event=forget.erased")
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    with MemoryClient(address, timeout=600) as c:
        t0 = time.perf_counter()
        c.forget(user_id=big)
        seconds = time.perf_counter() - t0
        marks = (len(others), len(appends))
    # A large user's points are deleted after the Forget returns (tiers.semantic.erasures):
    # the others' calls go on being measured until that erasure is logged.
    log = proc.log_path.read_text
    later = int(re.findall(r"event=forget\.done .*?erased_later=(\d+)", log())[-1])
    while later and log().count("event=forget.erased") <= erased_before:
        if time.perf_counter() - t0 > ERASE_TIMEOUT:
            raise TimeoutError(f"no forget.erased within {ERASE_TIMEOUT:g} s")
        time.sleep(0.2)
    erased = time.perf_counter() - t0
    time.sleep(1.0)
    done.set()
    for thread in threads:
        thread.join()
    return {
        "forget_s": round(seconds, 2),
        "erased_s": round(erased, 2),
        "others": summary(others[: marks[0]]),
        "appends": summary(appends[: marks[1]]),
        "others_while_erased": summary(others[marks[0] :]),
        "appends_while_erased": summary(appends[marks[1] :]),
        "others_before": warm["later"],
        "opener_waited_s": round(waited, 1),
        "graphs_waited_s": warm.get("settled_s"),
        "stages_ms": forget_stages(proc.log_path.read_text(errors="replace")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.scale", __doc__)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--big-users", type=int, default=3)
    parser.add_argument("--big-points", type=int, default=200_000)
    parser.add_argument("--sample", type=int, default=20, help="small users asked in turn")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--settle", type=float, default=60.0, help="seconds after a restart")
    parser.add_argument("--workers", type=int, default=2, help="fill processes (a core each)")
    parser.add_argument("--no-index", action="store_true", help="fill without building the index")
    parser.add_argument(
        "--originals",
        choices=get_args(Originals),
        default=VectorsSettings().originals,
        help="the filled shards' original vectors (default: the daemon's vectors.originals)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        help="fill DIR/data and keep it; a DIR filled before is measured without a fill (each "
        "measurement forgets the largest user left, DIR/forgotten.json: fill again after the last)",
    )
    parser.add_argument("--fill-only", action="store_true", help="with --dir: fill, measure later")
    parser.add_argument(
        "--set", action="append", default=[], metavar="STRATA_KEY=VALUE", help="a daemon setting"
    )
    args = parser.parse_args(argv)
    for setting in args.set:
        if not setting.startswith("STRATA_") or "=" not in setting:
            parser.error(f"--set wants STRATA_NAME=value, not {setting!r}")
    settings = {
        k.removeprefix("STRATA_").lower(): v for k, v in (s.split("=", 1) for s in args.set)
    }
    machine = machine_info()
    texts, pool, questions, _queries, _secs = embed_pool(threads=2)
    counts = sizes(args.points, args.users, args.big_users, args.big_points, seed=11)
    result: dict[str, Any] = {
        "points": args.points,
        "users": args.users,
        "big_users": args.big_users,
        "points_of_big_users": counts[: args.big_users],
        "small_users_points": [min(counts[args.big_users :]), max(counts[args.big_users :])],
    }
    with contextlib.ExitStack() as stack:
        if args.dir is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="strata-scale-")))
        else:
            root = args.dir
        data, filled = root / "data", root / "filled.json"
        if filled.exists():
            result["fill"] = json.loads(filled.read_text())
        else:
            print(f"filling {args.points} points over {args.users} users ...", flush=True)
            t0 = time.perf_counter()
            result["fill"] = fill(
                data,
                [name(i, args.big_users) for i in range(len(counts))],
                counts,
                texts,
                pool,
                workers=args.workers,
                optimize=not args.no_index,
                storage=VectorsSettings(originals=args.originals).storage,
            )
            result["fill"]["seconds"] = round(time.perf_counter() - t0, 1)
            filled.write_text(json.dumps(result["fill"]))
            if args.fill_only:
                print(json.dumps(result["fill"]))
                return 0
        result["disk"] = disk(data)
        # Per point, both: the blocks the files take on disk (what fills it: `du`) and their
        # sizes (`ls`; the engine's files are sparse, preallocated).
        for size in ("allocated", "apparent"):
            per_point = result["disk"][f"{size}_gb"] * 1e9 / args.points
            result["disk"][f"{size}_bytes_per_point"] = round(per_point)
        rng = random.Random(4)
        small = [name(i, args.big_users) for i in range(args.big_users, args.users)]
        # A kept store's big users forgotten by earlier runs hold nothing: asked no more.
        forgotten_file = root / "forgotten.json"
        forgotten = json.loads(forgotten_file.read_text()) if forgotten_file.exists() else []
        big = [name(i, args.big_users) for i in range(args.big_users)]
        big = [user for user in big if user not in forgotten]
        result["big_users_forgotten_before"] = len(forgotten)
        asked = big + rng.sample(small, min(args.sample, len(small)))
        print("starting stratad ...", flush=True)
        (root / "data.log").unlink(missing_ok=True)  # the figures are this run's
        proc, result["start"] = start(data, **settings)
        try:
            result["rss_after_start_mib"] = rss(proc.pid)
            print("asking in turn ...", flush=True)
            # Later visits once the big users' graphs are built (behind their first visits).
            built = functools.partial(graphs_built, proc)
            result["recall_big"] = in_turn(
                proc.address, asked[: len(big)], args.rounds, questions, built
            )
            result["recall_small"] = in_turn(
                proc.address, asked[len(big) :], args.rounds, questions, built
            )
            result["rss_after_queries_mib"] = rss(proc.pid)
        finally:
            proc.terminate(120)
        result["first_run_log"] = log_figures(proc.log_path.read_text(errors="replace"))
        print("restarting ...", flush=True)
        proc.log_path.unlink()
        # A build round soon after the start (every 20 s): what a restart rebuilds shows.
        proc, result["restart"] = start(
            data, **{**settings, "vectors__optimize_interval_seconds": "20"}
        )
        try:
            time.sleep(args.settle)
            result["restart"].update(log_figures(proc.log_path.read_text(errors="replace")))
            # A big user's first visit after a restart: its graph from its feature file.
            built = functools.partial(graphs_built, proc)  # the restarted daemon's log
            visits = in_turn(proc.address, asked[: len(big)], 1, questions, built)
            result["restart"]["recall_big_first_visit"] = visits["first_visit"]
            result["restart"]["graphs_built_s"] = visits.get("settled_s")
            if big:
                print(f"forgetting the largest user left ({big[0]}) ...", flush=True)
                result["forget"] = forget_largest(proc, big[0], asked[len(big) :], questions)
                forgotten_file.write_text(json.dumps([*forgotten, big[0]]))
            else:
                print("no big user left to forget: fill again for a Forget", flush=True)
        finally:
            proc.terminate(120)
    print()
    print(f"A store of {args.points} points over {args.users} users on one machine")
    print(format_machine(machine))
    print(f"settings: {args.set or 'defaults'}")
    print(json.dumps(result, indent=2))
    write_json(args.json, {"machine": machine, "settings": args.set, "result": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
