"""The fact graph as a ``networkx.MultiDiGraph``, durable in RocksDB.

Every change is written to the state store (column family ``graph_edges``, no TTL) before the
in-memory graph changes, and the graph is rebuilt from there at start-up; it is never pickled.

Key layout: ``graph_edges  <user_id> 0x00 <agent_id> 0x00 <edge id>  -> Edge (msgpack)``.
Nodes are ``(user_id, agent_id, normalized name)`` tuples, so scopes never share a node even
when they share an entity name; a node's ``aliases`` are the surface forms seen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

import networkx as nx

from tiers.core.records import Scope, pack, unpack
from tiers.rocks import RocksStore
from tiers.semantic.graph import Edge, normalize
from tiers.semantic.vectors import Source

GRAPH_CF = "graph_edges"
GRAPH_CFS = (GRAPH_CF,)  # state store; tiers.schema
Node = tuple[str, str, str]


def _key(scope: Scope, edge_id: str) -> bytes:
    return f"{scope.user_id}\x00{scope.agent_id}\x00{edge_id}".encode()


def _encode(edge: Edge) -> bytes:
    return pack(
        {
            "id": edge.id,
            "u": edge.scope.user_id,
            "a": edge.scope.agent_id,
            "s": edge.subject,
            "p": edge.predicate,
            "o": edge.object,
            "text": edge.fact_text,
            "e": edge.episode_id,
            "src": [
                [s.session_id, s.seq, s.message_id, s.metadata, s.speaker, s.created_at_us]
                for s in edge.sources
            ],
            "t": edge.created_at_us,
            "vf": edge.valid_from_us,
            "vt": edge.valid_to_us,
            "c": edge.confidence,
            "x": edge.extractor,
            "attrs": edge.attrs,
        }
    )


def _decode(raw: bytes) -> Edge:
    d = unpack(raw)
    return Edge(
        id=d["id"],
        scope=Scope(d["u"], d["a"]),
        subject=d["s"],
        predicate=d["p"],
        object=d["o"],
        fact_text=d["text"],
        episode_id=d["e"],
        sources=[Source(s[0], s[1], s[2], dict(s[3]), s[4], s[5]) for s in d["src"]],
        created_at_us=d["t"],
        valid_from_us=d["vf"],
        valid_to_us=d["vt"],
        confidence=d["c"],
        extractor=d["x"],
        attrs=dict(d["attrs"]),
    )


class NetworkXGraph:
    """Thread-safe: one lock guards the graph and its store writes."""

    def __init__(self, state: RocksStore) -> None:
        self._state = state
        self._lock = threading.RLock()
        self.graph: nx.MultiDiGraph = nx.MultiDiGraph()
        self._ends: dict[str, tuple[Node, Node]] = {}  # edge id -> (subject node, object node)
        self._users: dict[str, set[str]] = {}  # user id -> the ids of its edges
        for _key_bytes, raw in state.scan(GRAPH_CF, b""):
            self._apply(_decode(raw))

    @staticmethod
    def node(scope: Scope, name: str) -> Node:
        return (scope.user_id, scope.agent_id, normalize(name))

    def _apply(self, edge: Edge) -> None:
        if edge.id in self._ends:
            u, v = self._forget(edge.id)
            self.graph.remove_edge(u, v, key=edge.id)
        u, v = self.node(edge.scope, edge.subject), self.node(edge.scope, edge.object)
        for node, alias in ((u, edge.subject), (v, edge.object)):
            if node not in self.graph:
                self.graph.add_node(node, aliases=set())
            self.graph.nodes[node]["aliases"].add(alias)
        self.graph.add_edge(u, v, key=edge.id, edge=edge)
        self._ends[edge.id] = (u, v)
        self._users.setdefault(edge.scope.user_id, set()).add(edge.id)

    def _forget(self, edge_id: str) -> tuple[Node, Node]:
        """Drop an edge id from the indexes (under the lock); returns its ends."""
        u, v = self._ends.pop(edge_id)
        ids = self._users.get(u[0])
        if ids is not None:
            ids.discard(edge_id)
            if not ids:
                del self._users[u[0]]
        return u, v

    def add_edges(self, edges: Sequence[Edge]) -> None:
        if not edges:
            return
        with self._lock:
            batch = self._state.batch()
            for edge in edges:
                batch.put(GRAPH_CF, _key(edge.scope, edge.id), _encode(edge))
            self._state.write(batch)
            for edge in edges:
                self._apply(edge)

    def remove_episodes(self, episode_ids: set[str], user_id: str = "") -> int:
        """Delete every edge derived from these episodes (of ``user_id``, or of any user), and
        the nodes left without edges. Returns how many edges were deleted."""
        if not episode_ids:
            return 0
        prefix = f"{user_id}\x00".encode() if user_id else b""
        rows = (
            self._state.scan_prefix(GRAPH_CF, prefix) if prefix else self._state.scan(GRAPH_CF, b"")
        )
        with self._lock:
            doomed = [
                (key, edge) for key, raw in rows if (edge := _decode(raw)).episode_id in episode_ids
            ]
            if not doomed:
                return 0
            batch = self._state.batch()
            for key, _edge in doomed:
                batch.delete(GRAPH_CF, key)
            self._state.write(batch)
            for _key, edge in doomed:
                if edge.id not in self._ends:
                    continue
                ends = self._forget(edge.id)
                self.graph.remove_edge(ends[0], ends[1], key=edge.id)
                for node in ends:
                    if node in self.graph and self.graph.degree(node) == 0:
                        self.graph.remove_node(node)
            return len(doomed)

    def get(self, edge_id: str) -> Edge | None:
        with self._lock:
            ends = self._ends.get(edge_id)
            if ends is None:
                return None
            edge: Edge = self.graph.edges[ends[0], ends[1], edge_id]["edge"]
            return edge

    def edges_where(self, keep: Callable[[Edge], bool], user_id: str = "") -> list[Edge]:
        """Every edge for which ``keep`` is true: of ``user_id``'s scopes when given (from
        its index, without looking at the other users' edges), else of any scope."""
        with self._lock:
            if not user_id:
                return [d["edge"] for _u, _v, d in self.graph.edges(data=True) if keep(d["edge"])]
            found = []
            for edge_id in self._users.get(user_id, ()):
                u, v = self._ends[edge_id]
                edge: Edge = self.graph.edges[u, v, edge_id]["edge"]
                if keep(edge):
                    found.append(edge)
            return found

    def remove_edges(self, ids: Sequence[str]) -> tuple[int, int]:
        """Delete these edges (unknown ids are skipped), then every node of theirs left
        without an edge. Returns (edges, nodes) removed."""
        with self._lock:
            found = [e for e in map(self.get, dict.fromkeys(ids)) if e is not None]
            if not found:
                return 0, 0
            batch = self._state.batch()
            for edge in found:
                batch.delete(GRAPH_CF, _key(edge.scope, edge.id))
            self._state.write(batch)
            ends: set[Node] = set()
            for edge in found:
                u, v = self._forget(edge.id)
                self.graph.remove_edge(u, v, key=edge.id)
                ends.update((u, v))
            orphans = [n for n in ends if self.graph.degree(n) == 0]
            self.graph.remove_nodes_from(orphans)
            for node in ends.difference(orphans):  # surface forms only forgotten edges had
                out = (d["edge"].subject for _u, _v, d in self.graph.out_edges(node, data=True))
                into = (d["edge"].object for _u, _v, d in self.graph.in_edges(node, data=True))
                self.graph.nodes[node]["aliases"] = {*out, *into}
            return len(found), len(orphans)

    def close_edges(self, ids: Sequence[str], valid_to_us: int | None) -> None:
        with self._lock:
            closed = [
                replace(edge, valid_to_us=valid_to_us)
                for edge in (self.get(i) for i in ids)
                if edge is not None
            ]
            self.add_edges(closed)

    def edges_about(self, scope: Scope, subject: str, predicate: str) -> list[Edge]:
        with self._lock:
            node = self.node(scope, subject)
            if node not in self.graph:
                return []
            return [
                data["edge"]
                for _u, _v, data in self.graph.out_edges(node, data=True)
                if data["edge"].predicate == predicate
            ]

    def edges_of(self, scope: Scope, entity: str) -> list[Edge]:
        with self._lock:
            node = self.node(scope, entity)
            if node not in self.graph:
                return []
            out = [d["edge"] for _u, _v, d in self.graph.out_edges(node, data=True)]
            into = [d["edge"] for _u, _v, d in self.graph.in_edges(node, data=True)]
            return out + into

    def entities(self, scope: Scope) -> list[tuple[str, list[str]]]:
        with self._lock:
            return [
                (node[2], sorted(data["aliases"]))
                for node, data in self.graph.nodes(data=True)
                if node[0] == scope.user_id and node[1] == scope.agent_id
            ]

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return self.graph.number_of_nodes(), self.graph.number_of_edges()

    def close(self) -> None:
        """Nothing to release: the state store is closed by its owner."""
