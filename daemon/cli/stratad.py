"""``stratad``: run the Strata memory daemon.

Exit codes: 0 clean shutdown, 1 unexpected failure, 2 bad command line, 74 a store could not be
opened (for example another stratad holds the data directory), 78 invalid configuration,
130 forced exit on a second signal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import signal
import sys
from pathlib import Path

from pydantic import ValidationError

from daemon.server import logs
from daemon.server.auth import token_hash
from daemon.settings import Settings, load_settings
from daemon.settings.security import RIGHTS, TokenEntry
from tiers.core.errors import ConfigError, StrataError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_STORAGE = 74
EXIT_CONFIG = 78
EXIT_FORCED = 130

log = logging.getLogger("strata.daemon")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stratad",
        description="Strata memory daemon: working memory, episodic journal and semantic store "
        "for AI agents, over gRPC.",
        epilog="Settings: defaults, then the TOML file, then STRATA_* environment variables "
        "(see docs/configuration.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="run the daemon until SIGTERM or SIGINT")
    serve.add_argument("--config", type=Path, help="a strata.toml file (or $STRATA_CONFIG)")
    serve.add_argument(
        "--ready-file",
        type=Path,
        help="write {address, pid} as JSON to this file once the server accepts requests",
    )
    restore = sub.add_parser(
        "restore", help="restore a backup (from weaverctl backup) into the data directory"
    )
    restore.add_argument("backup_dir", type=Path, help="the backup directory")
    restore.add_argument("--config", type=Path, help="a strata.toml file (or $STRATA_CONFIG)")
    token = sub.add_parser(
        "token",
        help="make a random bearer token; print it and its [[auth.tokens]] entry (its hash)",
    )
    token.add_argument("--name", required=True, help="a label for the token (shown in logs)")
    token.add_argument(
        "--tenant",
        action="append",
        required=True,
        help='a user_id the token may act for (repeatable); "*" for every user',
    )
    token.add_argument(
        "--right",
        action="append",
        choices=RIGHTS,
        help="append, recall, forget or admin (repeatable; default: append and recall)",
    )
    return parser


def make_token(name: str, tenants: list[str], rights: list[str]) -> tuple[str, str]:
    """A new random token and the TOML entry that grants it (with its SHA-256 only)."""
    token = "strata_" + secrets.token_urlsafe(32)
    entry = TokenEntry(name=name, sha256=token_hash(token), tenants=tenants, rights=rights)
    toml = "\n".join(
        [
            "[[auth.tokens]]",
            f"name = {json.dumps(entry.name)}",
            f'sha256 = "{entry.sha256}"',
            f"tenants = {json.dumps(entry.tenants)}",
            f"rights = {json.dumps(list(entry.rights))}",
        ]
    )
    return token, toml


async def serve(settings: Settings, ready_file: Path | None = None) -> int:
    from daemon.app import Daemon
    from tiers.core import collector, priority

    collector.watch()  # passes that pause the daemon, in its log
    collector.tune()  # young collections rarer: short-lived objects die before one
    priority.hand_over_sooner()  # the event loop takes the interpreter back sooner
    daemon = Daemon(settings, freeze_gc=True)
    loop = asyncio.get_running_loop()
    signals_seen = 0
    stopping: set[asyncio.Task[None]] = set()

    def on_signal(signum: int) -> None:
        nonlocal signals_seen
        signals_seen += 1
        name = signal.Signals(signum).name
        if signals_seen > 1:
            log.warning("server.forced_exit", extra={"fields": {"signal": name}})
            logging.shutdown()
            os._exit(EXIT_FORCED)
        log.info("server.signal", extra={"fields": {"signal": name}})
        stopping.add(loop.create_task(daemon.stop()))

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    address = await daemon.start()
    if ready_file is not None:
        tmp = ready_file.with_name(ready_file.name + ".tmp")
        tmp.write_text(json.dumps({"address": address, "pid": os.getpid()}))
        tmp.replace(ready_file)
    await daemon.wait_stopped()
    return EXIT_FAILURE if daemon.stop_failures else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "token":
        try:
            token, toml = make_token(args.name, args.tenant, args.right or ["append", "recall"])
        except ValidationError as exc:
            print(f"stratad: token: {exc.errors()[0]['msg']}", file=sys.stderr)
            return EXIT_USAGE
        print(
            f"# the token: give it to the client (STRATA_TOKEN); it is not stored anywhere\n{token}"
        )
        print(f"\n# add to strata.toml (the daemon keeps only the hash):\n{toml}")
        return EXIT_OK
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"stratad: invalid configuration: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    logs.configure(settings.log_level, settings.log_format)

    if args.command == "restore":
        from tiers.rights.backup import restore_backup

        try:
            stores = restore_backup(args.backup_dir, settings.data_dir)
        except StrataError as exc:
            print(f"stratad: restore failed: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        print(f"restored {', '.join(stores)} into {settings.data_dir}")
        return EXIT_OK

    from tiers.core.errors import StoreUnavailable

    try:
        return asyncio.run(serve(settings, args.ready_file))
    except StoreUnavailable as exc:
        print(f"stratad: cannot open the stores: {exc}", file=sys.stderr)
        return EXIT_STORAGE
    except OSError as exc:
        print(f"stratad: {exc}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
