"""Records an agent addresses by key: documents, session anchors, pins and access counts."""

from __future__ import annotations

import time
from collections.abc import Callable

from tiers.changes.log import ChangeLog
from tiers.rocks import RocksStore


class KeyedStore:
    """What the keyed kinds whose writes record changes share: the state store they live in,
    the clock their times come from, and the change log (set by
    :func:`tiers.schema.open_kinds`; None until then)."""

    def __init__(self, state: RocksStore, clock: Callable[[], float] = time.time) -> None:
        self._state = state
        self._clock = clock
        self.changes: ChangeLog | None = None
