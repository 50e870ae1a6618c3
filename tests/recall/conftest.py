"""Fixtures of the recall tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.recall.world import World


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A Tier 3 on real stores in ``tmp_path`` (:class:`tests.recall.world.World`)."""
    w = World(tmp_path)
    yield w
    w.close()
