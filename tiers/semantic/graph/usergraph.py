"""One user's fact graph in memory (:class:`UserGraph`), as
:class:`~tiers.semantic.graph.nxgraph.NetworkXGraph` holds it for the weaver's calls, and its
nodes: ``(user_id, agent_id, normalized name)`` tuples, so that scopes never share a node even
when they share an entity name."""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from tiers.core.records import Scope
from tiers.semantic.graph import Edge, normalize, rows

Node = tuple[str, str, str]


def node(scope: Scope, name: str) -> Node:
    """The node of the entity ``name`` in ``scope``."""
    return (scope.user_id, scope.agent_id, normalize(name))


class UserGraph:
    """One user's edges in memory; changed under that user's lock only.

    An edge's data is its row as stored, with its subject, predicate and object beside it,
    and a node's aliases a tuple: nothing the garbage collector has to walk but the graph's
    own dicts (about one object an edge, where decoded edges were six). An edge is decoded
    when read."""

    __slots__ = ("ends", "graph")

    def __init__(self) -> None:
        self.graph: nx.MultiDiGraph = nx.MultiDiGraph()
        self.ends: dict[str, tuple[Node, Node]] = {}  # edge id -> (subject node, object node)

    def apply(self, edge: Edge, raw: bytes) -> None:
        """Insert ``edge`` (``raw``: its row) or replace the edge of its id."""
        if edge.id in self.ends:
            u, v = self.ends.pop(edge.id)
            self.graph.remove_edge(u, v, key=edge.id)
        u, v = node(edge.scope, edge.subject), node(edge.scope, edge.object)
        for end, alias in ((u, edge.subject), (v, edge.object)):
            if end not in self.graph:
                self.graph.add_node(end, aliases=(alias,))
            elif alias not in (aliases := self.graph.nodes[end]["aliases"]):
                self.graph.nodes[end]["aliases"] = (*aliases, alias)
        s, p, o = edge.subject, edge.predicate, edge.object
        self.graph.add_edge(u, v, key=edge.id, raw=raw, s=s, p=p, o=o)
        self.ends[edge.id] = (u, v)

    def edge(self, edge_id: str) -> Edge | None:
        ends = self.ends.get(edge_id)
        if ends is None:
            return None
        return rows.decode(self.graph.edges[ends[0], ends[1], edge_id]["raw"])

    def about(self, node: Node, predicate: str) -> list[Edge]:
        """The edges from ``node`` with ``predicate``."""
        if node not in self.graph:
            return []
        out = self.graph.out_edges(node, data=True)
        return [rows.decode(d["raw"]) for _u, _v, d in out if d["p"] == predicate]

    def touching(self, node: Node) -> list[Edge]:
        """The edges from ``node``, then those to it."""
        if node not in self.graph:
            return []
        out = [rows.decode(d["raw"]) for _u, _v, d in self.graph.out_edges(node, data=True)]
        return out + [rows.decode(d["raw"]) for _u, _v, d in self.graph.in_edges(node, data=True)]

    def drop(self, edge_ids: Iterable[str]) -> int:
        """Remove these edges (unknown ids skipped), then the nodes left without one, and the
        surface forms only removed edges had. Returns how many nodes were removed."""
        touched: set[Node] = set()
        for edge_id in edge_ids:
            ends = self.ends.pop(edge_id, None)
            if ends is not None:
                self.graph.remove_edge(ends[0], ends[1], key=edge_id)
                touched.update(ends)
        orphans = [n for n in touched if self.graph.degree(n) == 0]
        self.graph.remove_nodes_from(orphans)
        for node in touched.difference(orphans):
            out = (d["s"] for _u, _v, d in self.graph.out_edges(node, data=True))
            into = (d["o"] for _u, _v, d in self.graph.in_edges(node, data=True))
            self.graph.nodes[node]["aliases"] = tuple(dict.fromkeys((*out, *into)))
        return len(orphans)
