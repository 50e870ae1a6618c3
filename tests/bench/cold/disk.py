"""A user's first Recall with nothing of theirs in the page cache: what the disk costs.

Run as ``python -m tests.bench.cold.disk --dir DIR`` (``make bench-cold-disk``) on a store that
``make bench-scale`` filled and kept (``SCALE="--dir DIR --fill-only"``). It drops the kernel's
page cache, so it must run as root (``/proc/sys/vm/drop_caches``).

A real ``stratad`` is started on the store (``--set STRATA_...=value`` adds settings, e.g.
``STRATA_VECTORS__RESCORE=true``) and the opener waited for. Then ``--sample`` small users are
asked one at a time (k 10, all channels): before each, the background graph build the previous
one started (if it did) is waited for, the page cache is dropped and a user with no data is asked
(the model and the shared files read again). Reported: those first visits, a second visit of
each (warm), a later visit of each with another question, ``--settle`` seconds after the
second ones (the users' points preloaded meanwhile: ``vectors.preload``), and the server's
stages of each, p50 / p90 / max.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from stratad_client import MemoryClient
from tests.bench.scale.run import OPENER_TIMEOUT, name, start
from tests.bench.support.daemon import command_line, format_machine, machine_info, write_json

DROP_CACHES = Path("/proc/sys/vm/drop_caches")
QUESTIONS = (
    "what did we talk about last week",
    "where does she work now",
    "what are the plans for the trip",
    "what is his favourite food",
    "when did they move house",
    "how is the new job going",
)
VISITS = ("cold", "warm", "later")
BUILD_WAIT = 300.0  # a small user's graph, built behind: seconds at 10M


def drop_page_cache() -> None:
    os.sync()
    DROP_CACHES.write_text("3\n")


def wait_logged(log: Path, text: str, timeout: float) -> None:
    began = time.perf_counter()
    while text not in log.read_text(errors="replace"):
        if time.perf_counter() - began > timeout:
            raise TimeoutError(f"{text!r} not logged within {timeout:.0f} s")
        time.sleep(0.2)


def figures(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 1),
        "p90": round(ordered[math.ceil(0.9 * len(ordered)) - 1], 1),
        "max": round(ordered[-1], 1),
    }


def visits(args: Any) -> dict[str, Any]:
    data = args.dir / "data"
    users = [name(i, args.big_users) for i in range(args.big_users, args.users)]
    random.Random(args.seed).shuffle(users)
    sample = users[: args.sample]
    settings = {
        k.removeprefix("STRATA_").lower(): v for k, v in (s.split("=", 1) for s in args.set)
    }
    (data.parent / f"{data.name}.log").unlink(missing_ok=True)  # the opener's line is this run's
    proc, started = start(data, **settings)
    try:
        wait_logged(proc.log_path, "event=vectors.opened", OPENER_TIMEOUT)
        out: dict[str, Any] = {"start": started}
        with MemoryClient(proc.address, timeout=600) as c:
            for visit in VISITS:
                if visit == "later":
                    time.sleep(args.settle)
                ms: list[float] = []
                stages: dict[str, list[float]] = defaultdict(list)
                behind = ""  # the user whose graph is being built behind their first visit
                for i, user in enumerate(sample):
                    if visit == "cold":
                        if behind:
                            built = f"event=recall.graph_built user_id={behind} "
                            wait_logged(proc.log_path, built, BUILD_WAIT)
                        drop_page_cache()
                        c.recall("the model and the shared files", user_id="nobody", k=10)
                    began = time.perf_counter()
                    asked = QUESTIONS[(i + (visit == "later")) % len(QUESTIONS)]
                    reply = c.recall(asked, user_id=user, k=10)
                    ms.append((time.perf_counter() - began) * 1000)
                    behind = user if "graph" in reply.degraded_channels else ""
                    for stage in reply.timings:
                        stages[stage.stage].append(stage.ms)
                out[visit] = {
                    "ms": figures(ms),
                    "stages": {s: figures(v) for s, v in stages.items()},
                }
        out["preloaded"] = proc.log_path.read_text(errors="replace").count("vectors.preloaded ")
        return out
    finally:
        proc.terminate(120)


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.cold.disk", __doc__)
    parser.add_argument("--dir", type=Path, required=True, help="a store bench-scale kept")
    parser.add_argument("--users", type=int, default=1000, help="the fill's --users")
    parser.add_argument("--big-users", type=int, default=3, help="the fill's --big-users")
    parser.add_argument("--sample", type=int, default=30, help="small users asked")
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--settle", type=float, default=15.0, help="seconds before later visits")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    for setting in args.set:
        if not setting.startswith("STRATA_") or "=" not in setting:
            parser.error(f"--set wants STRATA_NAME=value, not {setting!r}")
    if not os.access(DROP_CACHES, os.W_OK):
        parser.error(f"dropping the page cache needs root: {DROP_CACHES} is not writable")
    machine = machine_info()
    result = visits(args)
    print(format_machine(machine))
    print(f"settings: {args.set or 'defaults'}; {args.sample} small users of {args.dir}")
    print(f"users preloaded: {result['preloaded']}")
    for visit in VISITS:
        row = result[visit]
        print(f"{visit} visits: {row['ms']} ms")
        for stage, f in row["stages"].items():
            print(f"  {stage:<10} {f}")
    write_json(args.json, {"machine": machine, "settings": args.set, "result": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
