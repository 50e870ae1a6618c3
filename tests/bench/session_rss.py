"""Resident memory of ``stratad`` holding many live sessions.

Run as ``python -m tests.bench.session_rss``. Starts a daemon (``STRATA_SYNC=false``), records
its RSS, opens ``--sessions`` sessions of ``--messages`` ~20-word messages each (one
``AppendBatch`` per session, nothing ended), and records the RSS again, right away and after
2 s idle. ``Stats`` shows the sessions are live.
"""

from __future__ import annotations

import time
from typing import Any

from stratad_client import MemoryClient, message
from tests.bench.support.daemon import (
    command_line,
    format_machine,
    machine_info,
    rss_bytes,
    running_daemon,
    write_figures,
)

IDLE_SECONDS = 2.0
USERS = 50
METADATA = {"channel": "web"}
TEXT = (
    "the quick reply about my trip to Lisbon next spring mentioned cheap flights hotels near "
    "the river and a tram pass for the old town museums markets and late dinners"
)
WORDS = TEXT.split()


def _content(session: int, n: int) -> str:
    """A ~20-word message that differs between messages (no accidental sharing of strings)."""
    start = (session * 7 + n * 3) % len(WORDS)
    words = [WORDS[(start + k) % len(WORDS)] for k in range(19)]
    return " ".join(words) + f" #{session}.{n}"


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def run(sessions: int, messages: int) -> dict[str, Any]:
    with running_daemon({"STRATA_SYNC": "false"}) as daemon, MemoryClient(daemon.address) as client:
        client.admin.stats()  # a first RPC, so the server's connection state is in the baseline
        rss_start = rss_bytes(daemon.pid)
        payload = 0
        started = time.perf_counter()
        for i in range(sessions):
            batch = [
                message(_content(i, n), "user" if n % 2 == 0 else "assistant", metadata=METADATA)
                for n in range(messages)
            ]
            payload += sum(len(m.content.encode()) for m in batch)
            client.append_batch(f"rss-{i}", batch, user_id=f"u{i % USERS}")
        load_seconds = time.perf_counter() - started
        rss_loaded = rss_bytes(daemon.pid)
        time.sleep(IDLE_SECONDS)
        rss_idle = rss_bytes(daemon.pid)
        stats = client.admin.stats()
    grown = rss_idle - rss_start
    return {
        "rss_start_bytes": rss_start,
        "rss_loaded_bytes": rss_loaded,
        "rss_idle_bytes": rss_idle,
        "rss_growth_bytes": grown,
        "bytes_per_session": round(grown / sessions) if sessions else 0,
        "bytes_per_message": round(grown / (sessions * messages)) if sessions * messages else 0,
        "content_bytes": payload,
        "load_seconds": round(load_seconds, 3),
        "live_sessions": stats.working_memory.live_sessions,
        "window_messages": stats.working_memory.window_messages,
        "log_messages": stats.working_memory.log_messages,
        "episodes": stats.journal.episodes,
    }


def report(machine: dict[str, Any], sessions: int, messages: int, r: dict[str, Any]) -> str:
    return "\n".join(
        [
            "Strata live-session memory: RSS of stratad (STRATA_SYNC=false)",
            format_machine(machine),
            "",
            f"{sessions:,} sessions x {messages} messages (~20 words, 1 metadata entry), "
            f"one AppendBatch per session, {USERS} users, loaded in {r['load_seconds']:.1f} s",
            f"  RSS after start          {_mib(r['rss_start_bytes']):>12}",
            f"  RSS after loading        {_mib(r['rss_loaded_bytes']):>12}",
            f"  RSS after {IDLE_SECONDS:g} s idle       {_mib(r['rss_idle_bytes']):>12}",
            f"  growth                   {_mib(r['rss_growth_bytes']):>12}",
            f"  per session              {r['bytes_per_session']:>8,} bytes",
            f"  per message              {r['bytes_per_message']:>8,} bytes"
            f"  (content averages {r['content_bytes'] / max(1, sessions * messages):.0f} bytes)",
            f"  stats: live_sessions={r['live_sessions']:,} window_messages="
            f"{r['window_messages']:,} log_messages={r['log_messages']:,} "
            f"episodes={r['episodes']:,}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.session_rss", __doc__)
    parser.add_argument("--sessions", type=int, default=1000, help="live sessions (default 1000)")
    parser.add_argument(
        "--messages", type=int, default=50, help="messages per session (default 50)"
    )
    args = parser.parse_args(argv)

    machine = machine_info()
    result = run(args.sessions, args.messages)
    print(report(machine, args.sessions, args.messages, result))
    params = {"sessions": args.sessions, "messages": args.messages, "users": USERS}
    write_figures(args.json, "session_rss", machine, params, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
