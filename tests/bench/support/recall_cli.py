"""The command line the recall benchmarks share (``tests.bench.locomo``, ``tests.bench.realmem``):
daemon settings, a label, a JSON result, re-rendering an earlier one, and recording it in the
docs."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.bench.support.daemon import write_json

Result = dict[str, Any]


def parse_settings(items: Sequence[str], features: Path | None = None) -> dict[str, str]:
    """``--set KEY=VALUE`` items as ``STRATA_*`` variables (the prefix added when missing);
    with ``features`` (``--features``), the learned fusion off first: its features are those
    of the hand-set order."""
    out: dict[str, str] = {"STRATA_RECALL__LEARNED_FUSION": ""} if features else {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set wants KEY=VALUE, got {item!r}")
        key = key.strip().upper()
        out[key if key.startswith("STRATA_") else f"STRATA_{key}"] = value
    return out


def add_common(parser: argparse.ArgumentParser, docs: Path) -> None:
    """``--set``, ``--label``, ``--report``, ``--write-docs`` and ``--features``."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a daemon setting, e.g. STRATA_WEAVER__CHUNK_TURNS=1 (repeatable)",
    )
    parser.add_argument("--label", default="", help="a name for this configuration")
    parser.add_argument(
        "--report", type=Path, metavar="PATH", help="print the figures of an earlier --json run"
    )
    parser.add_argument(
        "--write-docs", action="store_true", help=f"append the tables to {docs.name}"
    )
    parser.add_argument(
        "--features",
        type=Path,
        metavar="PATH",
        help=(
            "record the learned-fusion features of the full system's hits here "
            "(explain on, learned fusion off: tests.bench.learned_fusion trains on them)"
        ),
    )


def finish(
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace], Result],
    render: Callable[..., str],
    write_docs: Callable[[Result], object],
) -> int:
    """Run (or read ``--report``), write ``--json`` first (a report that fails loses
    nothing), print the tables, and with ``--write-docs`` record them."""
    res: Result = json.loads(args.report.read_text()) if args.report else run(args)
    if args.report and args.label:
        res["params"]["label"] = args.label
    if args.json is not None and not args.report:
        write_json(args.json, res, indent=1)
    print()
    print(render(res, markdown=False))
    if args.json is not None and not args.report:
        print(f"wrote {args.json}")
    if args.write_docs:
        write_docs(res)
    return 0
