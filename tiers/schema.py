"""Every column family of the two RocksDB stores (state and journal), as the daemon opens them."""

from __future__ import annotations

from tiers.journal.store import JOURNAL_CFS
from tiers.keyed.access import ACCESS_CFS
from tiers.keyed.anchors import ANCHOR_CFS
from tiers.keyed.documents import DOCUMENT_CFS
from tiers.keyed.pins import PIN_CFS

STATE_CFS = [
    "sessions",
    "open",
    "log",
    "msgids",
    "pending",
    "unindexed",
    "extractions",
    "graph_edges",
    "forgotten",  # tiers.semantic.tombstones
    *DOCUMENT_CFS,
    *ANCHOR_CFS,
    *PIN_CFS,
    *ACCESS_CFS,
]

__all__ = ["JOURNAL_CFS", "STATE_CFS"]
