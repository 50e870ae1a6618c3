"""Updates: does Recall tell the current truth, and can the earlier value still be found?

Run as ``python -m tests.bench.updates [--users N] [--split dev|held-out|fresh|both|all] [--set
K=V ...] [--json PATH]`` (``make bench-updates``). The scenarios are
:mod:`tests.bench.updates.data`'s: each user states a fact, talks about other things for
several weeks (sessions a few days apart, each ended), updates the fact, and then asks. A fresh
``stratad`` lives all users' sessions through the gRPC API; each question is asked twice, with
the index stage alone (every session indexed, no consolidation) and after ``RunNow`` (the
weaver's summaries and facts).

Per question (Recall, k 10; a hit holds a value when its text contains it):

- **newest first**: the updated value is found and ranked before any hit holding the old one;
- **newest in the top 5**;
- **past, old in the top 5**: asked about the earlier value ("Which city did I live in
  before?"), a hit holding the old value is in the top 5;
- **stable first**: for a fact of another kind that was never updated (but talked about
  again), a hit holding its value ranks first among the hits holding a value of that kind:
  the control for an update seen where there is none.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
from typing import Any

from stratad_client import MemoryClient, message
from tests.bench.support.daemon import command_line, machine_info, running_daemon, write_json
from tests.bench.support.recall_cli import parse_settings
from tests.bench.updates.data import HALVES, SPLITS, Scenario, kind_named, scenarios
from tests.support import wait_indexed

K = 10
START = dt.datetime(2026, 1, 5, 9, tzinfo=dt.UTC)
SETTINGS = {
    "STRATA_WEAVER__INTERVAL_SECONDS": "86400",
    "STRATA_VECTORS__OPTIMIZE_INTERVAL_SECONDS": "86400",
}


def live(client: MemoryClient, s: Scenario) -> None:
    """The user's sessions, three days apart, each ended."""
    for n, turns in enumerate(s.sessions):
        at = START + dt.timedelta(days=3 * n)
        msgs = [
            message(t, "user", name="User", created_at=at + dt.timedelta(minutes=i))
            for i, t in enumerate(turns)
        ]
        client.append_batch(f"{s.user}-s{n}", msgs, user_id=s.user)
        client.end_session(f"{s.user}-s{n}", user_id=s.user)


def first(texts: list[str], value: str) -> int | None:
    return next((i for i, t in enumerate(texts) if value in t), None)


def ask(client: MemoryClient, s: Scenario) -> dict[str, Any]:
    def texts(q: str) -> list[str]:
        return [h.text for h in client.recall(q, user_id=s.user, k=K).hits]

    now, past, stable = texts(s.now), texts(s.past), texts(s.stable_question)
    new, old = first(now, s.new), first(now, s.old)
    kind = kind_named(s.stable_kind)
    others = [v for pair in kind.values for v in pair if v != s.stable_value]
    stable_at = first(stable, s.stable_value)
    rival = min((i for v in others if (i := first(stable, v)) is not None), default=None)
    return {
        "newest_first": new is not None and (old is None or new < old),
        "newest_top5": new is not None and new < 5,
        "past_old_top5": (o := first(past, s.old)) is not None and o < 5,
        "stable_first": stable_at is not None and (rival is None or stable_at < rival),
        "now_top": now[:5],
        "stable_top": stable[:5],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    splits = {"both": HALVES, "all": SPLITS}.get(args.split, (args.split,))
    cases = [s for split in splits for s in scenarios(split, args.users)]
    settings = {**SETTINGS, **parse_settings(args.set)}
    out: dict[str, Any] = {"machine": machine_info(), "settings": settings, "rows": []}
    with running_daemon(settings) as d, MemoryClient(d.address, timeout=120) as client:
        for s in cases:
            live(client, s)
        wait_indexed(client, 600)
        for stage in ("index only", "after the weaver's run"):
            if stage != "index only":
                for s in cases:
                    for event in client.admin.run_weaver(user_id=s.user, timeout=None):
                        if event.WhichOneof("event") == "report" and event.report.error:
                            raise RuntimeError(event.report.error)
                wait_indexed(client, 600)
            for s in cases:
                row = ask(client, s)
                out["rows"].append({"stage": stage, "split": s.split, "kind": s.kind, **row})
    return out


def render(res: dict[str, Any]) -> str:
    metrics = ("newest_first", "newest_top5", "past_old_top5", "stable_first")
    lines = [
        f"machine    {res['machine']}",
        "stage                  | split    | users | " + " | ".join(metrics),
    ]
    rows = res["rows"]
    for stage in dict.fromkeys(r["stage"] for r in rows):
        for split in dict.fromkeys(r["split"] for r in rows):
            got = [r for r in rows if r["stage"] == stage and r["split"] == split]
            cells = [f"{100 * statistics.fmean(r[m] for r in got):5.1f} %" for m in metrics]
            lines.append(f"{stage:22s} | {split:8s} | {len(got):5d} | " + " | ".join(cells))
    misses: dict[str, int] = {}
    for r in rows:
        if not r["newest_first"]:
            misses[r["kind"]] = misses.get(r["kind"], 0) + 1
    lines.append("newest-first misses by kind: " + ", ".join(f"{k} {n}" for k, n in misses.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.updates", __doc__)
    parser.add_argument("--users", type=int, default=40, help="users per split")
    parser.add_argument(
        "--split",
        choices=(*SPLITS, "both", "all"),
        default="both",
        help="both: dev and held-out; all: with fresh too",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    res = run(args)
    write_json(args.json, res, indent=1)
    print(render(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
