"""Generate the Python gRPC stubs in ``stratad_client.pb`` from ``proto/strata/v1/*.proto``, and
the client's kinds of memory (``stratad_client/kinds.py``) from the daemon's one list.

This is the only way the stubs are made::

    python -m daemon.dev.protogen          # regenerate daemon/client/stratad_client/pb, kinds.py
    python -m daemon.dev.protogen --check  # exit 1 if they differ from a fresh generation

protoc writes ``from strata.v1 import memory_pb2``; the imports are rewritten to
``from stratad_client.pb import memory_pb2`` so the stubs live inside the client's package,
which the daemon imports too (a top-level ``strata`` or ``proto`` package would be a name
other projects hold on PyPI).

The kinds of memory (``RecallHit.kind``) are written once, in Tier 3
(``tiers.semantic.vectors.Kind``). The client cannot import the daemon, so its list is written
from that one here, as the stubs are from the ``.proto``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "proto"
PACKAGE_DIR = "strata/v1"
OUT_DIR = ROOT / "daemon" / "client" / "stratad_client" / "pb"
_IMPORT = re.compile(r"^from strata\.v1 import (\w+_pb2)", re.MULTILINE)
_INIT = '"""Generated gRPC stubs (python -m daemon.dev.protogen). Do not edit."""\n'
KINDS_FILE = OUT_DIR.parent / "kinds.py"
_KINDS = '''"""The kinds of memory a Recall hit can be (``RecallHit.kind``,
``RecallRequest.kinds``): the client's list, which the integrations import (the MCP tools'
``kinds`` argument). Generated from the daemon's one list, ``tiers.semantic.vectors.Kind``, by
``python -m daemon.dev.protogen``: do not edit."""

from __future__ import annotations

from typing import Literal, get_args

MemoryKind = Literal[
{kinds}]
MEMORY_KINDS: tuple[str, ...] = get_args(MemoryKind)

__all__ = ["MEMORY_KINDS", "MemoryKind"]
'''


def kinds_module() -> str:
    """The text of the client's ``kinds.py``: the daemon's kinds of memory, in its order."""
    from tiers.semantic.vectors import KINDS

    return _KINDS.format(kinds="".join(f'    "{kind}",\n' for kind in KINDS))


def generate(out_dir: Path) -> list[Path]:
    """Write the stubs for every ``.proto`` in ``proto/strata/v1`` into ``out_dir``."""
    from grpc_tools import protoc

    protos = sorted((PROTO_DIR / PACKAGE_DIR).glob("*.proto"))
    if not protos:
        raise SystemExit(f"no .proto files under {PROTO_DIR / PACKAGE_DIR}")
    well_known = resources.files("grpc_tools") / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "protoc",
            f"-I{PROTO_DIR}",
            f"-I{well_known}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            *(str(p.relative_to(PROTO_DIR)) for p in protos),
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for src in sorted((Path(tmp) / PACKAGE_DIR).iterdir()):
            text = _IMPORT.sub(r"from stratad_client.pb import \1", src.read_text())
            dst = out_dir / src.name
            dst.write_text(text)
            written.append(dst)
    init = out_dir / "__init__.py"
    init.write_text(_INIT)
    return [init, *written]


def drift(out_dir: Path = OUT_DIR) -> list[str]:
    """Names of stub files that differ from (or are missing against) a fresh generation."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.name: p.read_bytes() for p in generate(Path(tmp))}
    current = {p.name: p.read_bytes() for p in out_dir.iterdir() if p.is_file()}
    names = set(fresh) | {n for n in current if n.endswith((".py", ".pyi"))}
    stale = sorted(n for n in names if fresh.get(n) != current.get(n))
    if out_dir == OUT_DIR and (not KINDS_FILE.exists() or KINDS_FILE.read_text() != kinds_module()):
        stale.append(KINDS_FILE.relative_to(OUT_DIR.parent).as_posix())
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m daemon.dev.protogen", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="fail if daemon/client/stratad_client/pb or kinds.py is out of date",
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = drift()
        if stale:
            print("stubs out of date: " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    shutil.rmtree(OUT_DIR, ignore_errors=True)
    for path in generate(OUT_DIR):
        print(path.relative_to(ROOT))
    KINDS_FILE.write_text(kinds_module())
    print(KINDS_FILE.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
