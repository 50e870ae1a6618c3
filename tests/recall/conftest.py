"""Fixtures of the recall tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.recall.test_graph_channel import World


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A Tier 3 on real stores in ``tmp_path`` (:class:`tests.recall.test_graph_channel.World`)."""
    w = World(tmp_path)
    yield w
    w.close()
