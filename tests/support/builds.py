"""The embedded vector store's index build (:mod:`tiers.vectors.edge_generations`) held back
until a test lets it go, and made to index a test's few points."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from qdrant_edge import EdgeConfig, EdgeOptimizersConfig

from tiers.vectors import edge_generations as generations
from tiers.vectors import edge_shard


def index_small_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards made or loaded from now on index from their first KB of vectors: the engine's
    threshold (about 10 MB, 6,700 points of 384 dims) would leave a test's few points
    unindexed, and a build with nothing to index copies or swaps nothing. The threshold is
    kept in the shard's config, so a build's child process indexes too."""
    real = edge_shard.config

    def config(dim: int) -> EdgeConfig:
        base = real(dim)
        return EdgeConfig(
            vectors=base.vectors,
            sparse_vectors=base.sparse_vectors,
            max_search_threads=base.max_search_threads,
            optimizers=EdgeOptimizersConfig(indexing_threshold=1),
        )

    monkeypatch.setattr(edge_shard, "config", config)


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
