"""``weaverctl``: operate a running Strata daemon.

The daemon is chosen by ``--address`` or ``$STRATA_ADDRESS`` (default 127.0.0.1:50051).
Every command prints a human summary, or JSON with ``--json``. Exit codes: 0 success,
1 the daemon refused or failed the request, 2 bad command line, 3 the daemon is unreachable.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from daemon.client import ADDRESS_ENV, DEFAULT_ADDRESS, MemoryClient, default_address

EXIT_OK, EXIT_FAILED, EXIT_UNREACHABLE = 0, 1, 3


def _stats(client: MemoryClient, args: argparse.Namespace) -> Message:
    return client.stats()


def _backup(client: MemoryClient, args: argparse.Namespace) -> Message:
    return client.backup(str(Path(args.directory).absolute()), timeout=args.timeout)


def _render_stats(d: dict[str, Any]) -> str:
    wm, jr = d.get("workingMemory", {}), d.get("journal", {})
    return "\n".join(
        [
            f"uptime            {float(d.get('uptimeSeconds', 0)):.0f} s",
            f"version           {d.get('version')}",
            f"live sessions     {wm.get('liveSessions', '0')}",
            f"window messages   {wm.get('windowMessages', '0')}",
            f"log messages      {wm.get('logMessages', '0')}",
            f"episodes          {jr.get('episodes', '0')}",
            f"pending           {jr.get('pendingConsolidation', '0')}",
            f"journal size      {jr.get('sizeBytes', '0')} bytes",
            f"state size        {d.get('stateSizeBytes', '0')} bytes",
        ]
    )


def _render_backup(d: dict[str, Any]) -> str:
    return (
        f"backup written to {d['path']} ({', '.join(d.get('stores', []))}; "
        f"{d.get('sizeBytes', '0')} bytes)"
    )


COMMANDS: dict[str, tuple[Callable[..., Message], Callable[[dict[str, Any]], str]]] = {
    "stats": (_stats, _render_stats),
    "backup": (_backup, _render_backup),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="weaverctl", description="Operate a running stratad.")
    parser.add_argument(
        "--address",
        default=default_address(),
        help=f"the daemon's host:port (default ${ADDRESS_ENV} or {DEFAULT_ADDRESS})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the daemon (default 60)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("stats", help="counts per tier, store sizes and uptime")
    backup = sub.add_parser(
        "backup",
        help="take a consistent online checkpoint of every store into DIRECTORY",
        description="DIRECTORY must not exist. It is written by the daemon, so it is a path "
        "on the daemon's host; restore with `stratad restore DIRECTORY`.",
    )
    backup.add_argument("directory")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    call, render = COMMANDS[args.command]
    try:
        with MemoryClient(args.address, timeout=args.timeout) as client:
            response = call(client, args)
    except grpc.RpcError as exc:
        code = exc.code()
        print(f"weaverctl: {code.name}: {exc.details()}", file=sys.stderr)
        return EXIT_UNREACHABLE if code == grpc.StatusCode.UNAVAILABLE else EXIT_FAILED
    data = MessageToDict(response)
    print(json.dumps(data, indent=2) if args.json else render(data))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
