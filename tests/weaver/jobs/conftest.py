"""The weaver's worker on real stores (:mod:`tests.support.worker`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.worker import World, worker_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with worker_world(tmp_path) as made:
        yield made
