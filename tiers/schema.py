"""Every column family of the two RocksDB stores (state and journal), each with its owner.

A store declares its own column families, as a constant in its own module; this module only
composes them, in the order the daemon opens them, and records each family's owner
(:class:`ColumnFamily`). ``tests/tiers/test_schema.py`` fails when a store opens a family that
no owner declares, or when a declared one is not opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

from tiers.journal import store as journal
from tiers.keyed import access, anchors, documents, pins
from tiers.semantic import tombstones
from tiers.semantic.graph import nxgraph
from tiers.working import session

Store = Literal["state", "journal"]


@dataclass(frozen=True, slots=True)
class ColumnFamily:
    name: str
    store: Store  # "state" (``<data_dir>/state``, no TTL) or "journal" (with the TTL)
    owner: str  # the module that declares it and reads and writes it


def _owned(store: Store, owner: ModuleType, names: Sequence[str]) -> tuple[ColumnFamily, ...]:
    return tuple(ColumnFamily(name, store, owner.__name__) for name in names)


FAMILIES: tuple[ColumnFamily, ...] = (
    *_owned("state", session, session.WORKING_CFS),
    *_owned("state", journal, journal.CONSOLIDATION_CFS),
    *_owned("state", nxgraph, nxgraph.GRAPH_CFS),
    *_owned("state", tombstones, tombstones.TOMBSTONE_CFS),
    *_owned("state", documents, documents.DOCUMENT_CFS),
    *_owned("state", anchors, anchors.ANCHOR_CFS),
    *_owned("state", pins, pins.PIN_CFS),
    *_owned("state", access, access.ACCESS_CFS),
    *_owned("journal", journal, journal.JOURNAL_CFS),
)
STATE_CFS = [cf.name for cf in FAMILIES if cf.store == "state"]
JOURNAL_CFS = [cf.name for cf in FAMILIES if cf.store == "journal"]

__all__ = ["FAMILIES", "JOURNAL_CFS", "STATE_CFS", "ColumnFamily"]
