"""The table ``python -m tests.bench.load`` prints: per RPC, errors, RSS (the daemon's, its
workers', after ingest stops), stores per minute, CPU and what the weaver did."""

from __future__ import annotations

from typing import Any

from tests.bench.support.daemon import format_machine


def report(machine: dict[str, Any], r: dict[str, Any]) -> str:
    lines = [
        f"Strata load: {r['clients']} concurrent clients ({r['processes']} processes), "
        f"{r['seconds']:g} s measured after {r['warmup']:g} s warm-up, weaver every 10 s",
        format_machine(machine),
        "",
        f"  {'rpc':<11} {'calls':>7} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}",
    ]
    for rpc, v in r["rpcs"].items():
        lines.append(
            f"  {rpc:<11} {v['calls']:>7} {v['per_s']:>8.1f} {v['p50_ms']:>8.2f} "
            f"{v['p99_ms']:>8.2f} {v['max_ms']:>8.2f}"
        )
    w = r.get("watch")
    if w and w["watchers"]:
        lines.append(
            f"  Watch: {w['watchers']} watchers, {w['events']} changes delivered "
            f"({w['per_s']:.1f}/s); lag commit -> delivery p50 {w['lag_p50_ms']:.2f} ms, "
            f"p99 {w['lag_p99_ms']:.2f} ms, max {w['lag_max_ms']:.2f} ms"
        )
    total = sum(r["errors"].values())
    lines.append(f"  errors: {total}" + (f" {r['errors']}" if total else " (target 0)"))
    rss = r["rss_mib"]
    lines.append(
        f"  daemon RSS MiB: before load {rss['before_load']}, warm {rss['warm']}, "
        f"end {rss['end']}, peak {rss['peak']}"
    )
    lines.append("  RSS samples (s: MiB): " + ", ".join(f"{t:g}: {m:g}" for t, m in rss["samples"]))
    if rss.get("anon"):
        lines.append(
            "  of which anonymous (not mapped files) MiB: "
            + ", ".join(f"{t:g}: {m:g}" for t, m in rss["anon"])
        )
    if rss.get("workers"):
        lines.append(
            "  workers' RSS MiB: start "
            f"{rss['workers'][0][1]}, end {rss['workers'][-1][1]}, peak "
            f"{max(m for _, m in rss['workers'])}"
        )
    q = r.get("query_phase")
    if q:
        lines.append(
            f"  queries only for {q['seconds']:g} s after ingest stopped: daemon RSS "
            f"{q['rss_min']}-{q['rss_max']} MiB (mean {q['rss_mean']}): spread {q['spread_pct']} % "
            f"(target <= 5 %); anonymous {q['anon_min']}-{q['anon_max']} MiB: spread "
            f"{q['anon_spread_pct']} %"
        )
    if r["stores"]:
        lines.append("  per minute (means): RSS MiB | vectors MiB | RocksDB MiB | unindexed at end")
        by_minute: dict[int, list[dict[str, Any]]] = {}
        for row in r["stores"]:
            by_minute.setdefault(int(row["s"] // 60), []).append(row)
        for minute, rows in sorted(by_minute.items()):

            def mean(key: str, rows: list[dict[str, Any]] = rows) -> float:
                return round(sum(x[key] for x in rows) / len(rows), 1)

            lines.append(
                f"    min {minute + 1:>3}: {mean('rss_mib'):>8} | {mean('vectors_mib'):>8} | "
                f"{mean('rocksdb_mib'):>8} | {rows[-1]['unindexed']:>6}"
            )
    lines.append(
        f"  CPU: daemon {r['daemon_cpu_percent']:.0f}%, clients {r['clients_cpu_percent']:.0f}% "
        f"(of one core; {machine['cores']} cores shared)"
    )
    w = r["weaver"]
    if w["runs_seen"]:
        error = f", {w['last_run_error']}" if w["last_run_error"] else ""
        last = (
            f"last consolidation run {w['last_run_episodes']} episodes in "
            f"{w['last_run_seconds']} s (ok {w['last_run_ok']}{error})"
        )
    else:
        last = "no consolidation run finished"
    lines.append(
        f"  weaver: {last}; at the end {w['pending_at_end']} pending, "
        f"{w['unindexed_at_end']} unindexed; {r['episodes_at_end']} episodes in the journal"
    )
    return "\n".join(lines)
