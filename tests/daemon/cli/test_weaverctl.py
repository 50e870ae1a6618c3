"""``weaverctl`` as an operator runs it, a process per command: it starts with the client and
nothing of the daemon's stores, so ``status`` or ``--help`` answers in a fraction of a second.
Its commands against a daemon are tested with their subjects (backup, export, forget)."""

from __future__ import annotations

from tests.support import ROOT, daemon_env
from tests.support.daemons import python

# What the daemon's side would bring: the fact graph, the archive's format, the stores' engines.
HEAVY = ("networkx", "numpy", "rocksdict", "qdrant_edge", "tiers.schema", "weaver.markdown_tree")


def test_weaverctl_imports_none_of_the_daemons_stores(tmp_path):
    probe = (
        "import sys\n"
        "import daemon.cli.weaverctl\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = python("-c", probe, env=daemon_env(tmp_path / "unused"), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
