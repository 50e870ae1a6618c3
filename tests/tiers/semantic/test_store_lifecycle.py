"""The semantic store's start and close (:mod:`tiers.semantic.store`), on real stores: a close
while Tier 3 still opens is a stop, logged as one, not a fault."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from tests.contracts.models_kit import minilm
from tests.support.polling import wait_until
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.embedding import Embedder, EmbeddingService, EmbeddingUnavailable
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors.edge.store import EdgeVectorStore


def test_a_close_while_the_model_loads_is_logged_as_a_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loading, gate = threading.Event(), threading.Event()

    def load() -> Embedder:
        loading.set()
        gate.wait(30)  # the model's load outlasts the start of the daemon's stop
        return minilm()

    state = RocksStore(tmp_path / "state", STATE_CFS)
    semantic = SemanticStore(
        state, EmbeddingService(load, "gated"), lambda: EdgeVectorStore(tmp_path / "vectors")
    )
    caplog.set_level(logging.INFO, logger="strata.semantic")
    try:
        semantic.start()
        assert loading.wait(30)
        closer = threading.Thread(target=semantic.close)
        closer.start()
        # the model's service is closed, its load still under way: it ends in a closed model
        wait_until(lambda: semantic.embeddings._closed.is_set(), 10, "for the model's close")
        gate.set()
        closer.join(60)
        assert not closer.is_alive()
        with pytest.raises(EmbeddingUnavailable, match="was closed"):
            semantic.wait_ready(30)
    finally:
        gate.set()
        semantic.close()
        state.close()
    events = [r.getMessage() for r in caplog.records if r.name == "strata.semantic"]
    assert "tier3.open_stopped" in events
    faults = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert faults == []
