"""Tier 3's fact graph: one contract suite for every GraphStore implementation (today
``tiers.semantic.graph.nxgraph.NetworkXGraph``, a networkx graph a user kept in a real RocksDB
state store in tmp_path, with its default memory budget and with one that holds a single
user). Entity names are normalized (``tests/tiers/semantic/test_graph.py`` tests
:func:`normalize`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contracts.stores import BIG, close_broken, full_disk
from tiers.core.errors import StoreUnavailable, Unavailable
from tiers.core.records import Scope
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.graph import Edge, GraphStore
from tiers.semantic.graph.nxgraph import CACHE_EDGES, NetworkXGraph
from tiers.semantic.vectors import Source

A, B = Scope("alice"), Scope("bob")
EP1, EP2 = "1" * 32, "2" * 32


class Graphs:
    """Opens a graph over one storage; ``reopen`` is a restarted daemon's graph."""

    def __init__(self, path: Path, cache_edges: int) -> None:
        self.path = path
        self.cache_edges = cache_edges
        self.state = RocksStore(path / "state", STATE_CFS)
        self.graph: GraphStore = NetworkXGraph(self.state, cache_edges)

    def reopen(self) -> GraphStore:
        self.graph.close()
        self.state.close()
        self.state = RocksStore(self.path / "state", STATE_CFS)
        self.graph = NetworkXGraph(self.state, self.cache_edges)
        return self.graph

    def and_reopened(self) -> Iterator[GraphStore]:
        """The graph, then the graph of a restarted daemon."""
        yield self.graph
        yield self.reopen()

    def close(self) -> None:
        self.graph.close()
        close_broken(self.state)


# "networkx-one-user": a memory budget of one edge, so that every call on another user drops
# the graph held and reads its own again from the store (graph.cache_edges).
@pytest.fixture(params=["networkx", "networkx-one-user"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Graphs]:
    graphs = Graphs(tmp_path, 1 if request.param == "networkx-one-user" else CACHE_EDGES)
    yield graphs
    graphs.close()


def edge(
    edge_id: str,
    scope: Scope,
    s: str,
    p: str,
    o: str,
    valid_from: int = 1,
    *,
    episode: str = "e" * 32,
    text: str = "",
) -> Edge:
    return Edge(
        id=edge_id,
        scope=scope,
        subject=s,
        predicate=p,
        object=o,
        fact_text=text or f"{s} {p} {o}",
        episode_id=episode,
        sources=[Source("s1", 3, "m3", {"dia_id": "D1:3"})],
        created_at_us=valid_from,
        valid_from_us=valid_from,
    )


def objects(edges: list[Edge]) -> list[str]:
    return sorted(e.object for e in edges)


def test_is_a_graph_store(impl):
    assert isinstance(impl.graph, GraphStore)
    assert impl.graph.counts() == (0, 0)
    assert impl.graph.entities(A) == [] and impl.graph.get("nothing") is None


def test_edges_are_durable_scoped_and_closable(impl):
    graph = impl.graph
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
    reopened = impl.reopen()  # rebuilt from RocksDB, not from a pickle
    assert reopened.counts() == (5, 3)
    (paris,) = reopened.edges_about(A, "Alice", "lives_in")
    assert paris.valid_to_us == 99 and not paris.current
    assert paris.sources[0].metadata == {"dia_id": "D1:3"}
    assert reopened.get("3") is not None and reopened.get("3").valid_to_us is None  # type: ignore[union-attr]


def test_add_edges_replaces_by_id(impl):
    graph = impl.graph
    graph.add_edges([])  # nothing to do
    graph.add_edges([edge("1", A, "Alice", "lives_in", "Paris", 10)])
    moved = edge("1", A, "Alice", "lives_in", "Lyon", 20, episode=EP2)
    graph.add_edges([moved])
    for g in impl.and_reopened():
        assert g.get("1") == moved
        assert g.edges_about(A, "alice", "lives_in") == [moved]
        assert g.edges_of(A, "Paris") == [] and g.edges_of(A, "lyon") == [moved]
        assert g.counts()[1] == 1
        assert g.edges_where(lambda e: True) == [moved]


def test_reads_find_entities_by_normalized_name_at_either_end(impl):
    graph = impl.graph
    likes = edge("1", A, "Alice", "likes", "the Jazz", 1)
    loved = edge("2", A, "Bob", "likes", "jazz!", 2)
    works = edge("3", A, "Alice", "works_at", "Acme", 3)
    graph.add_edges([likes, loved, works])
    assert objects(graph.edges_about(A, "  alice ", "likes")) == ["the Jazz"]
    assert graph.edges_about(A, "Alice", "hates") == []
    assert graph.edges_about(A, "Jazz", "likes") == []  # edges leave their subject
    assert graph.edges_about(A, "Carol", "likes") == []
    assert sorted(e.id for e in graph.edges_of(A, "JAZZ")) == ["1", "2"]
    assert sorted(e.id for e in graph.edges_of(A, "alice")) == ["1", "3"]
    assert graph.edges_of(A, "carol") == []
    assert sorted(graph.entities(A)) == [
        ("acme", ["Acme"]),
        ("alice", ["Alice"]),
        ("bob", ["Bob"]),
        ("jazz", ["jazz!", "the Jazz"]),
    ]
    assert graph.counts() == (4, 3)
    assert [e.id for e in graph.edges_where(lambda e: e.predicate == "likes")] in (
        ["1", "2"],
        ["2", "1"],
    )
    assert graph.get("2") == loved and graph.get("4") is None


def test_close_edges_sets_valid_to_and_deletes_nothing(impl):
    graph = impl.graph
    graph.add_edges([edge("1", A, "Alice", "lives_in", "Paris"), edge("2", A, "Alice", "x", "y")])
    graph.close_edges(["1", "unknown"], 50)  # an unknown id is skipped
    graph.close_edges([], 60)
    assert graph.get("1").valid_to_us == 50  # type: ignore[union-attr]
    assert graph.get("2").current and graph.get("unknown") is None  # type: ignore[union-attr]
    assert graph.counts() == (3, 2)
    graph.close_edges(["1"], 70)  # the latest time wins
    assert impl.reopen().get("1").valid_to_us == 70  # type: ignore[union-attr]
    impl.graph.close_edges(["1"], None)  # current again
    assert impl.graph.get("1") == edge("1", A, "Alice", "lives_in", "Paris")
    assert impl.reopen().get("1").current  # type: ignore[union-attr]


def test_remove_edges_counts_what_it_removed_and_drops_orphan_nodes(impl):
    graph = impl.graph
    graph.add_edges(
        [
            edge("1", A, "Alice", "lives_in", "Paris"),
            edge("2", A, "alice", "works_at", "Acme"),
            edge("3", A, "ALICE", "likes", "Paris"),
        ]
    )
    assert graph.remove_edges(["nope"]) == (0, 0) and graph.remove_edges([]) == (0, 0)
    assert graph.remove_edges(["2", "2", "nope"]) == (1, 1)  # acme is left without an edge
    assert graph.get("2") is None
    # Alice stays (two edges), without the surface form only the removed edge had.
    assert sorted(graph.entities(A)) == [("alice", ["ALICE", "Alice"]), ("paris", ["Paris"])]
    assert graph.remove_edges(["1", "3"]) == (2, 2)
    assert graph.counts() == (0, 0) and graph.entities(A) == []
    graph.add_edges([edge("4", A, "Bob", "knows", "Carol")])
    assert impl.reopen().counts() == (2, 1)
    assert impl.graph.get("1") is None and impl.graph.edges_of(A, "Alice") == []


@pytest.mark.parametrize("held", [True, False])
def test_remove_edges_counts_alike_whether_the_graph_is_read_or_not(impl, held):
    """A user's graph read before (by the weaver's calls) or not read at all: the same edges
    and nodes are removed, and the same are left."""
    impl.graph.add_edges(
        [
            edge("1", A, "Alice", "lives_in", "Paris"),
            edge("2", A, "alice", "works_at", "Acme"),
            edge("3", A, "Bob", "likes", "Paris"),
            edge("4", A, "Carol", "knows", "Carol"),
        ]
    )
    graph = impl.reopen()
    if held:
        assert len(graph.entities(A)) == 5
    assert graph.remove_edges(["2", "3", "4", "nope"]) == (3, 3)  # acme, bob, carol
    assert sorted(graph.entities(A)) == [("alice", ["Alice"]), ("paris", ["Paris"])]
    assert graph.remove_edges(["1"]) == (1, 2)
    assert impl.reopen().counts() == (0, 0)


@pytest.mark.parametrize("held", [True, False])
def test_remove_scope_takes_its_edges_and_nodes_alone_read_or_not(impl, held):
    """A scope's Forget: an agent's edges, then a whole user's (every agent's), counted as
    :meth:`remove_edges` counts them; an agent or a user whose id the scope's begins with
    keeps its own. ``episodes_of`` names the scope's episodes alone."""
    planner, ep3 = Scope("alice", "planner"), "3" * 32
    impl.graph.add_edges(
        [
            edge("1", A, "Alice", "lives_in", "Paris", episode=EP1),
            edge("2", A, "alice", "works_at", "Acme", episode=EP2),
            edge("3", planner, "Alice", "owns", "a cat", episode=ep3),
            edge("4", planner, "Alice", "feeds", "a cat", episode=""),
            edge("5", B, "Alice", "lives_in", "Rome", episode=EP1),
            edge("6", Scope("alice2"), "Alice", "knows", "Bob", episode=EP2),
        ]
    )
    graph = impl.reopen()
    if held:
        assert len(graph.entities(A)) == 3 and len(graph.entities(planner)) == 2
    assert graph.episodes_of(planner) == {ep3, ""}
    assert graph.episodes_of(A) == {EP1, EP2, ep3, ""}
    assert graph.episodes_of(Scope("alice", "plan")) == set() == graph.episodes_of(Scope("al"))
    assert graph.remove_scope(Scope("alice", "plan")) == (0, 0)
    assert graph.remove_scope(planner) == (2, 2)  # alice and a cat, of the planner
    assert graph.get("3") is None and graph.entities(planner) == []
    assert graph.episodes_of(A) == {EP1, EP2}
    assert sorted(graph.entities(A)) == [
        ("acme", ["Acme"]),
        ("alice", ["Alice", "alice"]),
        ("paris", ["Paris"]),
    ]
    assert graph.remove_scope(A) == (2, 3)
    assert graph.remove_scope(A) == (0, 0) and graph.episodes_of(A) == set()
    assert graph.entities(A) == [] and graph.edges_where(lambda e: True, "alice") == []
    for g in impl.and_reopened():
        assert sorted(e.id for e in g.edges_where(lambda e: True)) == ["5", "6"]
        assert g.counts() == (4, 2) and g.episodes_of(B) == {EP1}


def test_remove_episodes_by_user_or_everywhere(impl):
    graph = impl.graph
    graph.add_edges(
        [
            edge("1", A, "Alice", "lives_in", "Paris", episode=EP1),
            edge("2", A, "Alice", "works_at", "Acme", episode=EP2),
            edge("3", B, "Bob", "lives_in", "Rome", episode=EP1),
            edge("4", Scope("alice", "planner"), "Alice", "owns", "a cat", episode=EP1),
        ]
    )
    assert graph.remove_episodes(set()) == 0 and graph.remove_episodes({"f" * 32}) == 0
    assert graph.remove_episodes({EP1}, user_id="alice") == 2  # both of alice's agents
    assert sorted(e.id for e in graph.edges_where(lambda e: True)) == ["2", "3"]
    assert dict(graph.entities(A)) == {"alice": ["Alice"], "acme": ["Acme"]}
    assert graph.entities(Scope("alice", "planner")) == []
    assert graph.remove_episodes({EP1, EP2}) == 2  # every user
    assert graph.counts() == (0, 0)
    assert impl.reopen().counts() == (0, 0)


def test_scopes_never_share_an_entity(impl):
    graph = impl.graph
    scopes = [Scope("alice", "a1"), Scope("alice", "a2"), Scope("bob", "a1"), Scope("alice")]
    graph.add_edges(
        [edge(str(i), scope, "Alice", "lives_in", f"City {i}") for i, scope in enumerate(scopes)]
    )
    for g in impl.and_reopened():
        for i, scope in enumerate(scopes):
            assert objects(g.edges_about(scope, "Alice", "lives_in")) == [f"City {i}"]
            assert [e.id for e in g.edges_of(scope, f"city {i}")] == [str(i)]
            assert sorted(g.entities(scope)) == [("alice", ["Alice"]), (f"city {i}", [f"City {i}"])]
        assert g.edges_of(Scope("carol"), "Alice") == []
        assert g.counts() == (8, 4)


def test_edges_where_a_user_finds_its_edges_alone_through_every_change(impl):
    graph = impl.graph
    planner = Scope("alice", "planner")
    graph.add_edges(
        [
            edge("1", A, "Alice", "lives_in", "Paris", episode=EP1),
            edge("2", planner, "Alice", "owns", "a cat", episode=EP2),
            edge("3", B, "Bob", "lives_in", "Rome", episode=EP1),
        ]
    )

    def of(user: str, keep=lambda e: True) -> list[str]:  # type: ignore[no-untyped-def]
        found = sorted(e.id for e in graph.edges_where(keep, user))
        assert found == sorted(
            e.id for e in graph.edges_where(lambda e: e.scope.user_id == user and keep(e))
        )
        return found

    assert of("alice") == ["1", "2"] and of("bob") == ["3"] and of("carol") == []
    assert of("alice", lambda e: e.scope.agent_id == "planner") == ["2"]
    graph.add_edges([edge("1", A, "Alice", "lives_in", "Lyon", episode=EP1)])  # replaced
    graph.close_edges(["2"], 5)
    assert of("alice") == ["1", "2"] and of("alice", lambda e: e.current) == ["1"]
    graph.remove_edges(["1"])
    assert of("alice") == ["2"]
    graph.remove_episodes({EP1})
    assert of("bob") == [] and of("alice") == ["2"]
    assert [e.id for e in impl.reopen().edges_where(lambda e: True, "alice")] == ["2"]


def test_triplets_are_a_scopes_current_edges_as_edges_where_reads_them(impl):
    graph = impl.graph
    planner, writer = Scope("alice", "planner"), Scope("alice", "writer")
    graph.add_edges(
        [
            edge("1", A, "Alice", "lives_in", "Paris"),
            edge("2", planner, "Alice", "owns", "a cat"),
            edge("3", writer, "Alice", "wrote", "a novel"),
            edge("4", B, "Bob", "lives_in", "Rome"),
            edge("5", planner, "Alice", "owns", "a dog"),
        ]
    )
    graph.close_edges(["5"], 7)  # superseded: no longer a triplet

    def expected(scope: Scope) -> list[tuple[str, str, str]]:
        return [
            (e.id, e.subject, e.object)
            for e in graph.edges_where(
                lambda e: e.current and (not scope.agent_id or e.scope == scope), scope.user_id
            )
        ]

    for g in impl.and_reopened():
        graph = g
        assert g.triplets(planner) == [("2", "Alice", "a cat")] == expected(planner)
        assert sorted(g.triplets(A)) == [
            ("1", "Alice", "Paris"),
            ("2", "Alice", "a cat"),
            ("3", "Alice", "a novel"),
        ]
        assert g.triplets(A) == expected(A)  # in the same order
        assert g.triplets(B) == [("4", "Bob", "Rome")] and g.triplets(Scope("carol")) == []
        g.close_edges(["5"], None)  # current again
        assert ("5", "Alice", "a dog") in g.triplets(planner)
        g.close_edges(["5"], 7)
    graph.remove_scope(planner)
    assert [t[0] for t in graph.triplets(A)] == ["1", "3"]


def test_a_refused_write_raises_store_unavailable_and_changes_nothing(impl):
    graph = impl.graph
    kept = edge("1", A, "Alice", "lives_in", "Paris", episode=EP1)
    graph.add_edges([kept])
    with full_disk(), pytest.raises(StoreUnavailable) as info:
        graph.add_edges([edge("2", A, "Alice", "wrote", "a novel", text=BIG)])
    assert isinstance(info.value, Unavailable) and "File too large" in str(info.value)
    assert graph.get("2") is None and graph.counts() == (2, 1)
    # The store refuses every later write (until a restart): still nothing changes.
    with pytest.raises(StoreUnavailable):
        graph.close_edges(["1"], 5)
    with pytest.raises(StoreUnavailable):
        graph.remove_edges(["1"])
    with pytest.raises(StoreUnavailable):
        graph.remove_episodes({EP1})
    with pytest.raises(StoreUnavailable):
        graph.remove_scope(A)
    assert graph.get("1") == kept and graph.edges_about(A, "Alice", "lives_in") == [kept]
    assert graph.counts() == (2, 1)
