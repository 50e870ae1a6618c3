"""``weaverctl``: operate a running Strata daemon.

The daemon is chosen by ``--address`` or ``$STRATA_ADDRESS`` (default 127.0.0.1:50051).
Every command prints a human summary, or JSON with ``--json``. Exit codes: 0 success,
1 the daemon refused or failed the request (or the run failed), 2 bad command line,
3 the daemon is unreachable.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from daemon.cli.transfer import TransferError, export_to, import_from, render_export, render_import
from daemon.codec.status import StrataError
from stratad_client import (
    ADDRESS_ENV,
    DEFAULT_ADDRESS,
    MemoryClient,
    StrataClientError,
    UnavailableError,
    default_address,
)

EXIT_OK, EXIT_FAILED, EXIT_UNREACHABLE = 0, 1, 3


def _dict(message: Message) -> dict[str, Any]:
    return MessageToDict(message, always_print_fields_with_no_presence=True)


def _stats(client: MemoryClient, args: argparse.Namespace) -> Message:
    return client.admin.stats()


def _status(client: MemoryClient, args: argparse.Namespace) -> Message:
    return client.admin.weaver_status()


def _backup(client: MemoryClient, args: argparse.Namespace) -> Message:
    return client.admin.backup(str(Path(args.directory).absolute()), timeout=args.timeout)


def _rebuild(client: MemoryClient, args: argparse.Namespace) -> Message:
    return client.admin.rebuild(args.user, timeout=args.timeout)


def _forget(client: MemoryClient, args: argparse.Namespace) -> Message:
    return client.forget(
        user_id=args.user,
        agent_id=args.agent,
        episode_ids=args.episode,
        memory_ids=args.memory,
        timeout=args.timeout,
    )


def _render_stats(d: dict[str, Any]) -> str:
    wm, jr = d.get("workingMemory", {}), d.get("journal", {})
    return "\n".join(
        [
            f"uptime            {float(d.get('uptimeSeconds', 0)):.0f} s",
            f"version           {d.get('version')}",
            f"live sessions     {wm.get('liveSessions', '0')}",
            f"window messages   {wm.get('windowMessages', '0')}",
            f"log messages      {wm.get('logMessages', '0')}",
            f"not embedded yet  {wm.get('unembeddedMessages', '0')} (live sessions' messages)",
            f"episodes          {jr.get('episodes', '0')}",
            f"unindexed         {jr.get('unindexed', '0')} (ended episodes)",
            f"pending           {jr.get('pendingConsolidation', '0')} "
            f"(near expiry: {jr.get('pendingNearExpiry', '0')})",
            f"journal size      {jr.get('sizeBytes', '0')} bytes",
            f"state size        {d.get('stateSizeBytes', '0')} bytes",
            *(f"{kind:<17} {n}" for kind, n in sorted(d.get("records", {}).items())),
        ]
    )


def _render_report(r: dict[str, Any]) -> str:
    state = "ok" if r.get("ok") else "FAILED"
    line = (
        f"run {r.get('runId', '?')} {state}: {r.get('episodes', 0)} episodes, "
        f"{r.get('chunks', 0)} index points, {r.get('summaries', 0)} summaries, "
        f"{r.get('facts', 0)} facts, {r.get('triplets', 0)} triplets, "
        f"{r.get('superseded', 0)} superseded, {r.get('profiles', 0)} profiles, "
        f"{r.get('digests', 0)} digests and threads, "
        f"{r.get('failures', 0)} failures, "
        f"{r.get('fallbacks', 0)} fallbacks, {float(r.get('seconds', 0)):.1f} s"
    )
    return line + (f"\nlast error: {r['error']}" if r.get("error") else "")


def _embedding_state(d: dict[str, Any]) -> str:
    if d.get("embeddingReady"):
        return "ready"
    return f"failed: {d['tier3Error']}" if d.get("tier3Error") else "loading"


def _render_status(d: dict[str, Any]) -> str:
    lines = [
        f"running           {d.get('running')}",
        f"pending           {d.get('pending', 0)} (near expiry: {d.get('pendingNearExpiry', 0)})",
        f"unindexed         {d.get('unindexed', 0)}",
        f"live unindexed    {d.get('liveUnindexed', 0)} messages of "
        f"{d.get('liveSessionsBehind', 0)} live sessions",
        f"extractor         {d.get('extractor', '')}",
        f"embedding         {d.get('embeddingModel', '')} ({_embedding_state(d)})",
        f"next run          {d.get('nextRun', '-')}",
    ]
    if d.get("lastRun", {}).get("runId"):
        lines.append("last run          " + _render_report(d["lastRun"]))
    for w in d.get("workers", []):
        state = f"pid {w['pid']}" if w.get("alive") else "not running"
        lines.append(
            f"worker {w.get('index', 0):<10} {state}, {'busy' if w.get('busy') else 'idle'}, "
            f"{w.get('restarts', 0)} restarts, {w.get('calls', '0')} requests"
            + (f", last exit: {w['lastExit']}" if w.get("lastExit") else "")
        )
    if d.get("workersNote"):
        lines.append(f"workers           {d['workersNote']}")
    if d.get("lastError"):
        lines.append(f"last error        {d['lastError']}")
    return "\n".join(lines)


def _render_backup(d: dict[str, Any]) -> str:
    stores = d.get("stores", [])
    line = (
        f"backup written to {d['path']} "
        f"({', '.join(s for s in stores if s != 'vectors:external')}; "
        f"{d.get('sizeBytes', '0')} bytes)"
    )
    if "vectors:external" in stores:
        line += (
            "\nthe vectors are in an external Qdrant and are not in the backup: snapshot the"
            " collection there, or run `weaverctl rebuild` after restoring"
        )
    return line


def _render_rebuild(d: dict[str, Any]) -> str:
    return (
        f"rebuilt from {d.get('episodes', '0')} journal episodes and "
        f"{d.get('recordsReplayed', '0')} expired episodes' records: "
        f"{d.get('vectorPoints', '0')} vector points, {d.get('graphEdges', '0')} graph edges, "
        f"{float(d.get('seconds', 0)):.1f} s"
    )


def _render_forget(d: dict[str, Any]) -> str:
    return (
        f"forgot {d.get('sessions', '0')} open sessions ({d.get('sessionMessages', '0')} "
        f"messages), {d.get('episodes', '0')} episodes ({d.get('episodeMessages', '0')} "
        f"messages), {d.get('consolidationRecords', '0')} consolidation records, "
        f"{d.get('vectorPoints', '0')} vector points, {d.get('graphEdges', '0')} graph edges, "
        f"{d.get('graphNodes', '0')} graph nodes, {d.get('cacheEntries', '0')} cache entries, "
        f"{d.get('documents', '0')} documents"
    )


COMMANDS: dict[str, tuple[Callable[..., Message], Callable[[dict[str, Any]], str]]] = {
    "stats": (_stats, _render_stats),
    "status": (_status, _render_status),
    "backup": (_backup, _render_backup),
    "rebuild": (_rebuild, _render_rebuild),
    "forget": (_forget, _render_forget),
}


def _transfer(client: MemoryClient, args: argparse.Namespace) -> int:
    """export / import: progress on stderr, the summary on stdout."""
    try:
        if args.command == "export":
            data = export_to(
                client.admin, args.user, args.agent, Path(args.directory), args.timeout
            )
            print(json.dumps(data, indent=2) if args.json else render_export(data))
        else:
            response = import_from(client.admin, Path(args.path), args.user, args.timeout)
            data = _dict(response)
            print(json.dumps(data, indent=2) if args.json else render_import(data))
    except (TransferError, StrataError, OSError) as exc:
        print(f"weaverctl: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _run_now(client: MemoryClient, args: argparse.Namespace) -> int:
    """Stream a run: a progress bar on a terminal, plain lines otherwise."""
    events = client.admin.run_weaver(
        episode_ids=args.episode, user_id=args.user_id, agent_id=args.agent_id
    )
    if args.no_wait:
        first = next(iter(events))
        events.close()  # type: ignore[attr-defined]
        run_id = first.progress.run_id
        print(json.dumps({"runId": run_id}) if args.json else f"run {run_id} started")
        return EXIT_OK
    bar = None
    if sys.stdout.isatty() and not args.json:
        from rich.progress import Progress

        bar = Progress(transient=True)
        bar.start()
        task = bar.add_task("queued", total=None)
    try:
        for event in events:
            if event.HasField("report"):
                report = _dict(event.report)
                if bar is not None:
                    bar.stop()
                print(json.dumps(report, indent=2) if args.json else _render_report(report))
                return EXIT_OK if event.report.ok else EXIT_FAILED
            p = event.progress
            if bar is not None:
                bar.update(task, description=p.stage, completed=p.done, total=p.total or None)
            elif not args.json:
                where = f" {p.episode_id}" if p.episode_id else ""
                print(f"{p.stage} {p.done}/{p.total}{where}", flush=True)
    finally:
        if bar is not None:
            bar.stop()
    print("weaverctl: the run ended without a report", file=sys.stderr)
    return EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="weaverctl", description="Operate a running stratad.")
    parser.add_argument(
        "--address",
        default=default_address(),
        help=f"the daemon's host:port (default ${ADDRESS_ENV} or {DEFAULT_ADDRESS})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds to wait for the daemon (default 60; export and import: no limit)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Every command also takes --json after its name (``weaverctl stats --json``).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )
    run = sub.add_parser(
        "run-now",
        parents=[common],
        help="consolidate pending episodes now, with progress; non-zero exit if the run failed",
    )
    run.add_argument(
        "--episode", action="append", default=[], metavar="ID", help="only this episode (repeat)"
    )
    run.add_argument("--user-id", default="", help="only this user's episodes")
    run.add_argument("--agent-id", default="", help="only this agent's episodes")
    run.add_argument("--no-wait", action="store_true", help="start the run and return at once")
    sub.add_parser(
        "status", parents=[common], help="the weaver: last and next run, pending work, last error"
    )
    sub.add_parser("stats", parents=[common], help="counts per tier, store sizes and uptime")
    backup = sub.add_parser(
        "backup",
        parents=[common],
        help="take a consistent online checkpoint of every store into DIRECTORY",
        description="DIRECTORY must not exist. It is written by the daemon, so it is a path "
        "on the daemon's host; restore with `stratad restore DIRECTORY`.",
    )
    backup.add_argument("directory")
    rebuild = sub.add_parser(
        "rebuild",
        parents=[common],
        help="re-derive Tier 3 (vector points, graph) from the journal and consolidation records",
        description="Deletes and re-derives the vector points and graph edges of every episode "
        "still in the journal (chunks, and summary, facts and edges from its stored record) and "
        "of every episode whose record outlived its journal entry (summary, facts and edges). "
        "No LLM call is made. Not a substitute for a backup. Use a --timeout long enough for "
        "the store's size.",
    )
    rebuild.add_argument("--user", default="", metavar="USER_ID", help="only this user")
    forget = sub.add_parser(
        "forget",
        parents=[common],
        help="delete memories from every tier: a user's (or agent's), episodes or memories",
        description="Give exactly one of: --user (with --agent for one agent of the user), "
        "--episode (repeat), --memory (a hit id; repeat). Deletes working memory, journal, "
        "consolidation state, vector points, graph edges and caches, and keeps tombstones so "
        "that no weaver run or rebuild derives them again. Cannot be undone.",
    )
    forget.add_argument("--user", default="", metavar="USER_ID", help="everything of this user")
    forget.add_argument("--agent", default="", metavar="AGENT_ID", help="only this agent's data")
    forget.add_argument(
        "--episode", action="append", default=[], metavar="ID", help="an episode id (repeat)"
    )
    forget.add_argument(
        "--memory", action="append", default=[], metavar="ID", help="a memory (hit) id (repeat)"
    )
    export = sub.add_parser(
        "export",
        parents=[common],
        help="write a user's memory to DIRECTORY: memory.jsonl and a Markdown tree",
        description="Streams everything of the user (or of one agent of the user) from the "
        "daemon: sessions (open ones with their messages), episodes with their messages, "
        "consolidation records, every Tier 3 point (without vectors) and graph edge. Writes "
        "DIRECTORY/memory.jsonl (re-importable with `weaverctl import`) and a readable tree: "
        "index.md, episodes/, entities/, sessions/. Forgotten data is never exported. "
        "Progress goes to stderr.",
    )
    export.add_argument("--user", required=True, metavar="USER_ID", help="the user to export")
    export.add_argument("--agent", default="", metavar="AGENT_ID", help="only this agent")
    export.add_argument("directory", help="created if missing; must not hold memory.jsonl")
    imp = sub.add_parser(
        "import",
        parents=[common],
        help="import an export (a directory with memory.jsonl, or the file) into the daemon",
        description="Streams the file to the daemon, which checks all of it before writing "
        "anything, then writes episodes, sessions, consolidation records, points (embedded "
        "again with its own model) and graph edges with their original ids: importing twice "
        "duplicates nothing. The user is the one the file holds; --user, when given, must "
        "be the same. Progress goes to stderr.",
    )
    imp.add_argument("--user", default="", metavar="USER_ID", help="check the file holds it")
    imp.add_argument("path", help="an export directory (memory.jsonl in it) or an export file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        timeout = 60.0 if args.timeout is None else args.timeout
        with MemoryClient(args.address, timeout=timeout) as client:
            if args.command == "run-now":
                return _run_now(client, args)
            if args.command in ("export", "import"):
                return _transfer(client, args)
            call, render = COMMANDS[args.command]
            response = call(client, args)
    except StrataClientError as exc:
        print(f"weaverctl: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE if isinstance(exc, UnavailableError) else EXIT_FAILED
    data = _dict(response)
    print(json.dumps(data, indent=2) if args.json else render(data))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
