"""The fleet benchmark's verdict and table (:mod:`tests.bench.fleet`): whether a fleet size
meets issue 27's targets, and the lines printed for the sizes run."""

from __future__ import annotations

from typing import Any

from tests.bench.fleet import live as live
from tests.bench.support.daemon import format_machine

TURNS = 20  # an agent's turns a session
P_RECALL = 0.2  # the share of turns followed by a Recall
RPCS = ("Append", "EndSession", "Recall")


def meets(r: dict[str, Any]) -> bool:
    pct = r["recallable_within_60s_pct"]
    return (
        r["rpcs"]["Append"]["p99_ms"] <= 20
        and r["rpcs"]["Recall"]["p99_ms"] <= 300
        and pct is not None
        and pct >= 95
        and not r["errors"]
        and (not r.get("live") or live.live_meets(r["live"], r["agents"]))
    )


def report(machine: dict[str, Any], results: list[dict[str, Any]]) -> str:
    first = results[0]
    lines = [
        f"Strata fleet: agents appending a turn every {first['pace_s']:g} s, {TURNS} turns a "
        f"session, Recall after {P_RECALL:.0%} of turns; {first['seconds']:g} s measured after "
        f"{first['warmup']:g} s warm-up, each size on a fresh daemon (defaults)",
        format_machine(machine),
        "",
        "  agents | Append p50/p99/max ms | EndSession p50/p99 ms | Recall p50/p99/max ms | "
        "errors | ended | recallable <= 60 s | lag p50/p95 s | unindexed at end | RSS daemon "
        "(anonymous) / workers MiB (start -> end) | meets",
    ]
    for r in results:
        a, e, q = (r["rpcs"][k] for k in RPCS)
        s0, s1 = r["samples"][0], r["samples"][-1]
        lines.append(
            f"  {r['agents']:>6} | {a['p50_ms']:.1f} / {a['p99_ms']:.1f} / {a['max_ms']:.0f} | "
            f"{e['p50_ms']:.1f} / {e['p99_ms']:.1f} | {q['p50_ms']:.1f} / {q['p99_ms']:.1f} / "
            f"{q['max_ms']:.0f} | {sum(r['errors'].values())} | {r['sessions_ended']} | "
            f"{r['recallable_within_60s_pct']} % of {r['sessions_judged']} | "
            f"{r['lag_p50_s']} / {r['lag_p95_s']} | {s1['unindexed']} | "
            f"{s0['daemon_mib']:.0f} -> {s1['daemon_mib']:.0f} ({s0['daemon_anon_mib']:.0f} -> "
            f"{s1['daemon_anon_mib']:.0f}) / {s0['workers_mib']:.0f} -> "
            f"{s1['workers_mib']:.0f} | {'yes' if meets(r) else 'no'}"
        )
    lines.extend(live.report_lines(results))
    for r in results:
        if gc := r.get("gc_pauses"):
            lines.append(
                f"  {r['agents']} agents, GC passes of 50 ms or more: {gc['over_50ms']} "
                f"({gc['over_100ms']} of 100 ms or more, the longest {gc['max_ms']:.0f} ms); "
                f"{gc['wall_ms']:.0f} ms in all, {gc['cpu_ms']:.0f} ms of it on a CPU"
            )
        for rpc, minutes in r.get("slow_by_minute", {}).items():
            counts = ", ".join(f"{m}: {n}" for m, n in minutes.items())
            lines.append(f"  {r['agents']} agents, {rpc} of 100 ms or more by minute: {counts}")
    best = [r["agents"] for r in results if meets(r)]
    lines.append(f"  largest fleet meeting the targets: {max(best) if best else 'none'}")
    return "\n".join(lines)
