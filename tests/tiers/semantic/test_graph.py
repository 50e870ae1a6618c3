"""The fact graph's entity keys, and how NetworkXGraph reads a user's graph when first asked
for and holds graphs within its budget, on a real RocksDB state store. What every GraphStore
does is the contract suite ``tests/contracts/test_graph_store.py``."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.contracts.stores import BIG, close_broken, full_disk
from tiers.core.records import Scope
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.graph import Edge, normalize
from tiers.semantic.graph.nxgraph import GRAPH_CF, IDS_CF, NetworkXGraph
from tiers.semantic.vectors import Source


def test_normalize():
    assert normalize("The Acme Corp.") == "acme corp"
    assert normalize("  Paris ") == normalize("paris") == "paris"
    assert normalize("a  cat named   Bailey") == "cat named bailey"


# -- NetworkXGraph: a user's graph read when first asked for, and a budget ------------------


def _edges(user: str, n: int) -> list[Edge]:
    scope = Scope(user)
    return [
        Edge(
            id=f"{user}-{i}",
            scope=scope,
            subject=f"Person {i}",
            predicate="likes",
            object=f"Thing {i}",
            fact_text=f"Person {i} likes Thing {i}",
            episode_id="e" * 32,
            sources=[Source("s1", i, f"m{i}", {})],
            created_at_us=i + 1,
            valid_from_us=i + 1,
        )
        for i in range(n)
    ]


@pytest.fixture
def state(tmp_path: Path) -> Iterator[RocksStore]:
    store = RocksStore(tmp_path / "state", STATE_CFS)
    yield store
    close_broken(store)


def test_an_open_reads_no_edge_and_a_call_reads_its_user_only(state: RocksStore) -> None:
    NetworkXGraph(state).add_edges(_edges("alice", 3) + _edges("bob", 4))
    graph = NetworkXGraph(state)
    assert graph.held() == (0, 0)
    assert len(graph.edges_of(Scope("bob"), "Person 1")) == 1
    assert graph.held() == (1, 4)
    assert graph.get("alice-2") is not None and graph.held() == (1, 4)  # one row read
    assert {e.id for e in graph.edges_where(lambda e: True, "alice")} == {
        f"alice-{i}" for i in range(3)
    }
    assert graph.held() == (1, 4)  # read from alice's rows: nothing held
    assert len(graph.edges_about(Scope("alice"), "Person 1", "likes")) == 1
    assert graph.held() == (2, 7)


def test_a_graph_held_gives_the_collector_about_one_object_an_edge(state: RocksStore) -> None:
    NetworkXGraph(state).add_edges(_edges("alice", 2_000))
    graph = NetworkXGraph(state)
    gc.collect()  # twice: a pass untracks the tuples and dicts that hold no container
    gc.collect()
    before = len(gc.get_objects())
    assert len(graph.entities(Scope("alice"))) == 4_000
    gc.collect()
    gc.collect()
    tracked = len(gc.get_objects()) - before
    # 2,000 edges between 4,000 nodes: a dict of keys an edge, two of neighbours a node
    assert 2_000 <= tracked < 2 * 2_000 + 2 * 4_000 + 500, tracked


def test_the_graphs_held_stay_within_the_budget(state: RocksStore) -> None:
    users = [f"u{i}" for i in range(6)]
    graph = NetworkXGraph(state, cache_edges=10)
    graph.add_edges([e for user in users for e in _edges(user, 4)])  # 5 a user with its +1
    for asked, user in enumerate(users * 2, 1):
        assert len(graph.entities(Scope(user))) == 8
        assert graph.held() == (min(asked, 2), 4 * min(asked, 2))
    big = NetworkXGraph(state, cache_edges=1)  # the user asked for is held, whatever its size
    assert len(big.edges_of(Scope("u5"), "Person 1")) == 1 and big.held() == (1, 4)
    graph.close()
    assert graph.held() == (0, 0)


def test_a_held_graph_that_grows_counts_against_the_budget(state: RocksStore) -> None:
    graph = NetworkXGraph(state, cache_edges=10)
    graph.add_edges(_edges("u0", 4) + _edges("u1", 4))
    assert len(graph.edges_of(Scope("u0"), "Person 0")) == 1 and graph.held() == (1, 4)
    graph.add_edges([replace(e, id=f"{e.id}-more") for e in _edges("u0", 6)])
    assert graph.held() == (1, 10)
    assert len(graph.edges_of(Scope("u1"), "Person 0")) == 1
    assert graph.held() == (1, 4)  # u0's 10 edges and u1's 4 are over the budget


def test_a_write_reaches_a_held_graph_and_a_dropped_one(state: RocksStore) -> None:
    graph = NetworkXGraph(state, cache_edges=1)
    graph.add_edges(_edges("alice", 2) + _edges("bob", 2))
    assert len(graph.entities(Scope("alice"))) == 4  # alice held
    graph.close_edges(["alice-0", "bob-0"], 99)  # bob's only in the store
    assert [e.id for e in graph.edges_where(lambda e: not e.current, "bob")] == ["bob-0"]
    assert [e.id for e in graph.edges_where(lambda e: not e.current, "alice")] == ["alice-0"]
    assert graph.remove_edges(["alice-1", "bob-1", "nobody"]) == (2, 4)
    assert graph.counts() == (4, 2)
    assert NetworkXGraph(state).counts() == (4, 2)


def test_a_store_without_id_rows_is_indexed_once_at_open(state: RocksStore) -> None:
    NetworkXGraph(state).add_edges(_edges("alice", 3))
    _drop_id_rows(state)
    graph = NetworkXGraph(state)
    assert state.get(IDS_CF, b"\x00indexed") is not None
    assert graph.get("alice-1") is not None and graph.remove_edges(["alice-2"]) == (1, 2)
    assert state.count_keys(IDS_CF) == 3  # two edges and the mark


def test_a_store_that_refuses_the_index_still_finds_edges_by_id(state: RocksStore) -> None:
    NetworkXGraph(state).add_edges(_edges("alice", 3))
    _drop_id_rows(state)
    batch = state.batch()
    batch.put(GRAPH_CF, b"\xff", BIG.encode())  # the log is past full_disk's limit
    state.write(batch)
    with full_disk():
        graph = NetworkXGraph(state)  # its index cannot be written
        assert state.get(IDS_CF, b"\x00indexed") is None
        found = graph.get("alice-1")
        assert found is not None and found.object == "Thing 1"
        assert graph.get("alice-9") is None


def _drop_id_rows(state: RocksStore) -> None:
    """The graph's rows as a store written before the id rows existed has them."""
    batch = state.batch()
    for key, _value in state.scan(IDS_CF, b""):
        batch.delete(IDS_CF, key)
    state.write(batch)
    assert state.count_keys(IDS_CF) == 0
