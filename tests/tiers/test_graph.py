"""The fact graph's entity keys. What every GraphStore does, on a real RocksDB state store, is
the contract suite ``tests/contracts/test_graph_store.py``."""

from __future__ import annotations

from tiers.semantic.graph import normalize


def test_normalize():
    assert normalize("The Acme Corp.") == "acme corp"
    assert normalize("  Paris ") == normalize("paris") == "paris"
    assert normalize("a  cat named   Bailey") == "cat named bailey"
