"""The fact graph on a real RocksDB state store."""

from __future__ import annotations

from pathlib import Path

from tiers.graph import Edge, normalize
from tiers.graph.nxgraph import NetworkXGraph
from tiers.records import Scope
from tiers.rocks import RocksStore
from tiers.vectors import Source
from tiers.working import STATE_CFS

A, B = Scope("alice"), Scope("bob")


def edge(edge_id: str, scope: Scope, s: str, p: str, o: str, valid_from: int = 1) -> Edge:
    return Edge(
        id=edge_id,
        scope=scope,
        subject=s,
        predicate=p,
        object=o,
        fact_text=f"{s} {p} {o}",
        episode_id="e" * 32,
        sources=[Source("s1", 3, "m3", {"dia_id": "D1:3"})],
        created_at_us=valid_from,
        valid_from_us=valid_from,
    )


def test_normalize():
    assert normalize("The Acme Corp.") == "acme corp"
    assert normalize("  Paris ") == normalize("paris") == "paris"
    assert normalize("a  cat named   Bailey") == "cat named bailey"


def test_edges_are_durable_scoped_and_closable(tmp_path: Path):
    state = RocksStore(tmp_path / "state", STATE_CFS)
    graph = NetworkXGraph(state)
    graph.add_edges(
        [
            edge("1", A, "Alice", "lives_in", "Paris", 10),
            edge("2", A, "alice", "works_at", "The Acme Corp", 10),
            edge("3", B, "Alice", "lives_in", "Rome", 10),  # another tenant's Alice
        ]
    )
    graph.add_edges([edge("1", A, "Alice", "lives_in", "Paris", 10)])  # idempotent
    assert graph.counts() == (5, 3)
    assert [e.object for e in graph.edges_about(A, "ALICE", "lives_in")] == ["Paris"]
    assert [e.object for e in graph.edges_about(B, "Alice", "lives_in")] == ["Rome"]
    assert {e.id for e in graph.edges_of(A, "acme corp")} == {"2"}
    names = dict(graph.entities(A))
    assert names["alice"] == ["Alice", "alice"] and "rome" not in names

    graph.close_edges(["1"], 99)
    state.close()
    state = RocksStore(tmp_path / "state", STATE_CFS)
    reopened = NetworkXGraph(state)  # rebuilt from RocksDB, not from a pickle
    assert reopened.counts() == (5, 3)
    (paris,) = reopened.edges_about(A, "Alice", "lives_in")
    assert paris.valid_to_us == 99 and not paris.current
    assert paris.sources[0].metadata == {"dia_id": "D1:3"}
    assert reopened.get("3") is not None and reopened.get("3").valid_to_us is None  # type: ignore[union-attr]
    state.close()
