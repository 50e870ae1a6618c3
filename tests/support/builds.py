"""The embedded vector store's index build (:mod:`tiers.vectors.edge_generations`) held back
until a test lets it go."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tiers.vectors import edge_generations as generations


def gated_child(monkeypatch: pytest.MonkeyPatch, gate: Path) -> None:
    """The build's child waits until ``gate`` exists, then builds as usual."""
    real = generations.child_command

    def command(gen: Path, compact_into: Path | None = None) -> list[str]:
        if compact_into is not None:  # a purge's child runs as usual
            return real(gen, compact_into)
        wait = (
            "import os, sys, time\n"
            f"while not os.path.exists({str(gate)!r}): time.sleep(0.01)\n"
            "from tiers.vectors.edge_generations import _build\n"
            "sys.exit(_build(sys.argv[1]))\n"
        )
        return [sys.executable, "-c", wait, *real(gen)[-1:]]

    monkeypatch.setattr(generations, "child_command", command)
