"""The embedded vector store's next generation (an index build, a purge:
:mod:`tiers.semantic.vectors.edge.generations`) held back until a test lets it go: its child process
(:func:`gated_child`), and the daemon's load of what the child made (:func:`held_load`); a build
or a purge on a thread of its own while its child runs (:func:`child_running`); and shards made
to index a test's few points (:func:`index_small_stores`)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from qdrant_edge import EdgeConfig, EdgeOptimizersConfig

from tests.support.gates import DEADLINE, Pause
from tests.support.polling import wait_until
from tiers.semantic.vectors.edge import builds as edge_builds
from tiers.semantic.vectors.edge import config as edge_config
from tiers.semantic.vectors.edge import generations
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.semantic.vectors.storage import FLOAT32, DenseStorage


def index_small_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards made or loaded from now on index from their first KB of vectors: the engine's
    threshold (about 10 MB, 6,700 points of 384 dims) would leave a test's few points
    unindexed, and a build with nothing to index copies or swaps nothing. The threshold is
    kept in the shard's config, so a build's child process indexes too."""
    real = edge_config.config

    def config(dim: int, **made: Any) -> EdgeConfig:  # edge_config.config's keywords
        base = real(dim, **made)
        return EdgeConfig(
            vectors=base.vectors,
            sparse_vectors=base.sparse_vectors,
            quantization_config=base.quantization_config,
            max_search_threads=base.max_search_threads,
            optimizers=EdgeOptimizersConfig(indexing_threshold=1),
        )

    monkeypatch.setattr(edge_config, "config", config)


def gated_child(
    monkeypatch: pytest.MonkeyPatch, gate: Path, *, purge: bool = False, waiting: Path | None = None
) -> None:
    """The build's child (with ``purge``, the purge's child instead) waits until ``gate``
    exists, then runs as usual; the other kind runs at once. It waits once bound to its
    daemon (:func:`tiers.core.children.bind`, in its ``main``), and first makes ``waiting``
    (when given)."""
    real = generations.child_command

    def command(gen: Path, compact_into: Path | None = None, *made: DenseStorage) -> list[str]:
        if (compact_into is not None) != purge:
            return real(gen, compact_into, *made)
        mark = f"    open({str(waiting)!r}, 'w').close()\n" if waiting is not None else ""
        wait = (
            "import os, sys, time\n"
            "from tiers.semantic.vectors.edge import generations\n"
            "build = generations._build\n"
            "def gated(*args):\n"
            f"{mark}"
            f"    while not os.path.exists({str(gate)!r}): time.sleep(0.01)\n"
            "    return build(*args)\n"
            "generations._build = gated\n"
            "sys.exit(generations.main(sys.argv[1:]))\n"
        )
        args = real(gen, compact_into, *made)[
            3:
        ]  # after: python -m tiers.semantic.vectors.edge.generations
        return [sys.executable, "-c", wait, *args]

    monkeypatch.setattr(generations, "child_command", command)


def held_load(monkeypatch: pytest.MonkeyPatch, pause: Pause) -> None:
    """The daemon's first load of a shard from its files stops at ``pause``: in a new store,
    the load of the generation a build or a purge made, before the writes made meanwhile are
    replayed into it (a store opened from existing files loads it first: arm this after)."""
    real = edge_builds.load_shard

    def load(root: Path, gen: Path, dim: int, storage: DenseStorage = FLOAT32) -> object:
        pause()
        return real(root, gen, dim, storage)

    monkeypatch.setattr(edge_builds, "load_shard", load)


def child_running(
    work: Callable[[], object], shard: EdgeVectorStore, what: str
) -> tuple[threading.Thread, list[BaseException]]:
    """``work`` (a build or a purge) started on a thread of its own, once ``shard``'s child
    process runs (held there by :func:`gated_child`): the thread, and what ``work`` raised
    (complete once the thread has ended)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # the caller's to check
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: shard.live._child is not None, DEADLINE, f"for {what}", interval=0.01)
    return thread, errors
