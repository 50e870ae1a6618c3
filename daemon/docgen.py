"""Generate the parts of the docs that must match the code::

    python -m daemon.docgen          # rewrite them
    python -m daemon.docgen --check  # exit 1 if the docs are stale (a test runs this)

- ``docs/cli.md``: the ``--help`` of ``stratad`` and ``weaverctl`` and their subcommands.
- ``docs/configuration.md``: the settings table between the ``settings:begin/end`` markers.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
CLI_DOC = ROOT / "docs" / "cli.md"
CONFIG_DOC = ROOT / "docs" / "configuration.md"
BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"


def _helps(parser: argparse.ArgumentParser, name: str) -> list[tuple[str, str]]:
    out = [(name, parser.format_help())]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                out.append((f"{name} {sub_name}", sub.format_help()))
    return out


def cli_doc() -> str:
    from daemon.cli import build_parser as stratad
    from weaver.ctl import build_parser as weaverctl

    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal width
    lines = [
        "# Command line reference",
        "",
        "Generated from the code by `python -m daemon.docgen`; a test fails when it drifts.",
        "",
    ]
    for parser, name in ((stratad(), "stratad"), (weaverctl(), "weaverctl")):
        for title, text in _helps(parser, name):
            lines += [f"## `{title}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


def _rows(model: type[BaseModel], section: str = "") -> list[str]:
    rows = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows += _rows(annotation, f"{section}{name}.")
            continue
        toml = f"{section}{name}"
        env = "STRATA_" + toml.upper().replace(".", "__")
        default = info.default
        if isinstance(default, bool):
            shown = f"`{str(default).lower()}`"
        elif isinstance(default, str | Path):
            shown = f'`"{default}"`'
        else:
            shown = f"`{default}`"
        rows.append(f"| `{toml}` | `{env}` | {shown} | {info.description or ''} |")
    return rows


def settings_table() -> str:
    from daemon.settings import Settings

    head = ["| setting (TOML) | environment | default | meaning |", "|---|---|---|---|"]
    return "\n".join(head + _rows(Settings))


def config_doc(current: str) -> str:
    before, _, rest = current.partition(BEGIN)
    _, _, after = rest.partition(END)
    return f"{before}{BEGIN}\n{settings_table()}\n{END}{after}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daemon.docgen")
    parser.add_argument("--check", action="store_true", help="fail if the docs are stale")
    args = parser.parse_args(argv)
    wanted = {CLI_DOC: cli_doc(), CONFIG_DOC: config_doc(CONFIG_DOC.read_text())}
    stale = [p for p, text in wanted.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for path in stale:
            print(
                f"{path.relative_to(ROOT)} is stale: run python -m daemon.docgen", file=sys.stderr
            )
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
