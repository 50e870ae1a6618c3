"""The fact graph as one ``networkx.MultiDiGraph`` a user, durable in RocksDB.

Every change is written to the state store (no TTL) before the graph in memory changes; it is
never pickled. A start reads no edge. The weaver's calls on a user
(:meth:`~NetworkXGraph.edges_about`, :meth:`~NetworkXGraph.edges_of`,
:meth:`~NetworkXGraph.entities`) read the user's graph from its rows (a prefix scan) and hold
it, and the least recently used users' graphs are dropped once more than ``cache_edges``
edges are held (``graph.cache_edges``), so the memory held does not grow with the store.
Recall's and Forget's calls (:meth:`~NetworkXGraph.edges_where`,
:meth:`~NetworkXGraph.episodes_of`, :meth:`~NetworkXGraph.remove_scope`) read the user's rows,
and hold nothing (a graph held is walked by every full garbage collection: :class:`UserGraph`).

Key layout (state store, column families):

- ``graph_edges  <user_id> 0x00 <agent_id> 0x00 <edge id>  -> Edge (msgpack)``;
- ``graph_edge_ids  <edge id>  -> <user_id> 0x00 <agent_id>``: where an edge's row is, so that
  the calls given ids (:meth:`NetworkXGraph.get`, :meth:`~NetworkXGraph.close_edges`,
  :meth:`~NetworkXGraph.remove_edges`) read one row each. A store written before it existed
  is indexed once, at the first open (a scan of the keys); the row ``0x00 indexed`` says so.

Nodes are ``(user_id, agent_id, normalized name)`` tuples, so scopes never share a node even
when they share an entity name; a node's ``aliases`` are the surface forms seen.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace

from tiers.core import collector
from tiers.core.errors import StoreUnavailable
from tiers.core.records import Scope, unpack
from tiers.rocks import RocksStore
from tiers.semantic.graph import CACHE_EDGES, Edge, rows
from tiers.semantic.graph.usergraph import Node, UserGraph, node

GRAPH_CF = "graph_edges"
IDS_CF = "graph_edge_ids"
GRAPH_CFS = (GRAPH_CF, IDS_CF)  # state store; tiers.schema
_INDEXED = b"\x00indexed"  # IDS_CF: every edge has its id row
_INDEX_BATCH = 10_000
log = logging.getLogger("strata.semantic")


class NetworkXGraph:
    """Thread-safe: a lock per user guards that user's rows and graph; calls over several
    users take their locks in order. ``cache_edges``: the edges held in memory before the
    least recently used users' graphs are dropped (the user being read is always held)."""

    def __init__(self, state: RocksStore, cache_edges: int = CACHE_EDGES) -> None:
        self._state = state
        self._cache_edges = cache_edges
        self._guard = threading.Lock()  # the three dicts below and _held
        self._locks: dict[str, threading.RLock] = {}
        self._users: OrderedDict[str, UserGraph] = OrderedDict()  # least recently used first
        self._sizes: dict[str, int] = {}  # a held graph's edges when read (+1), for _held
        self._held = 0
        self._indexed = state.get(IDS_CF, _INDEXED) is not None
        if not self._indexed:
            self._index()

    # -- where things are -------------------------------------------------------------------
    def _index(self) -> None:
        """Write the id row of every edge (a store from before they existed), then the mark.
        A store that refuses is left unmarked: ids are then looked for by a scan, and the
        next open tries again."""
        try:
            batch, n = self._state.batch(), 0
            for key, _raw in self._state.scan(GRAPH_CF, b""):
                where, _sep, edge_id = key.rpartition(b"\x00")
                batch.put(IDS_CF, edge_id, where)
                n += 1
                if n % _INDEX_BATCH == 0:
                    self._state.write(batch)
                    batch = self._state.batch()
            batch.put(IDS_CF, _INDEXED, b"1")
            self._state.write(batch)
        except StoreUnavailable as exc:
            log.warning("graph.ids_unindexed", extra={"fields": {"error": str(exc)}})
            return
        self._indexed = True
        log.info("graph.ids_indexed", extra={"fields": {"edges": n}})

    def _places(self, ids: Iterable[str]) -> dict[str, bytes]:
        """``user 0x00 agent`` of each known id's row."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        if self._indexed:
            found = self._state.get_many(IDS_CF, [i.encode() for i in wanted])
            return {i: w for i, w in zip(wanted, found, strict=True) if w is not None}
        keys = {i.encode(): i for i in wanted}
        places = {}
        for key, _raw in self._state.scan(GRAPH_CF, b""):
            where, _sep, edge_id = key.rpartition(b"\x00")
            if edge_id in keys:
                places[keys[edge_id]] = where
        return places

    def _lock(self, user_id: str) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault(user_id, threading.RLock())

    @contextmanager
    def _holding(self, users: Iterable[str]) -> Iterator[None]:
        with ExitStack() as stack:
            for user_id in sorted(set(users)):
                stack.enter_context(self._lock(user_id))
            yield

    def _held_graph(self, user_id: str) -> UserGraph | None:
        """The user's graph if in memory (the caller holds the user's lock)."""
        with self._guard:
            graph = self._users.get(user_id)
            if graph is not None:
                self._users.move_to_end(user_id)
            return graph

    def _graph(self, user_id: str, *, hold: bool = True) -> UserGraph:
        """The user's graph, read from the store if not in memory, and then held when
        ``hold`` (the caller holds the user's lock)."""
        graph = self._held_graph(user_id)
        if graph is not None:
            return graph
        graph = UserGraph()
        with collector.quiet():  # a burst of decoded edges (tiers.core.collector)
            for _key, raw in self._state.scan_prefix(GRAPH_CF, rows.user_prefix(user_id)):
                graph.apply(rows.decode(raw), raw)
        if not hold:
            return graph
        with self._guard:
            self._users[user_id] = graph
            self._sizes[user_id] = len(graph.ends) + 1
            self._held += self._sizes[user_id]
            while self._held > self._cache_edges and len(self._users) > 1:
                user, _dropped = self._users.popitem(last=False)
                self._held -= self._sizes.pop(user)
        return graph

    def _measure(self, users: Iterable[str]) -> None:
        """Count again the edges of these users' graphs held (after a write)."""
        with self._guard:
            for user_id in users:
                graph = self._users.get(user_id)
                if graph is not None:
                    size = len(graph.ends) + 1
                    self._held += size - self._sizes[user_id]
                    self._sizes[user_id] = size

    def _read(self, edge_id: str, where: bytes) -> Edge | None:
        """The edge from its user's graph if held, else from its row (the caller holds the
        user's lock)."""
        graph = self._held_graph(rows.user_of(where))
        if graph is not None:
            return graph.edge(edge_id)
        raw = self._state.get(GRAPH_CF, where + b"\x00" + edge_id.encode())
        return rows.decode(raw) if raw is not None else None

    # -- writes ----------------------------------------------------------------------------
    def add_edges(self, edges: Sequence[Edge]) -> None:
        if not edges:
            return
        with self._holding(e.scope.user_id for e in edges):
            batch, encoded = self._state.batch(), [rows.encode(e) for e in edges]
            for edge, raw in zip(edges, encoded, strict=True):
                batch.put(GRAPH_CF, rows.key(edge.scope, edge.id), raw)
                batch.put(IDS_CF, edge.id.encode(), rows.where(edge.scope))
            self._state.write(batch)
            for edge, raw in zip(edges, encoded, strict=True):
                graph = self._held_graph(edge.scope.user_id)
                if graph is not None:
                    graph.apply(edge, raw)
            self._measure({e.scope.user_id for e in edges})

    def remove_episodes(self, episode_ids: set[str], user_id: str = "") -> int:
        """Delete every edge derived from these episodes (of ``user_id``, or of any user), and
        the nodes left without edges. Returns how many edges were deleted."""
        if not episode_ids:
            return 0
        prefix = rows.user_prefix(user_id) if user_id else b""
        scanned = (
            self._state.scan_prefix(GRAPH_CF, prefix) if prefix else self._state.scan(GRAPH_CF, b"")
        )
        doomed = [
            edge for _key, raw in scanned if (edge := rows.decode(raw)).episode_id in episode_ids
        ]
        if not doomed:
            return 0
        with self._holding(e.scope.user_id for e in doomed):
            batch = self._state.batch()
            for edge in doomed:
                batch.delete(GRAPH_CF, rows.key(edge.scope, edge.id))
                batch.delete(IDS_CF, edge.id.encode())
            self._state.write(batch)
            for user in {e.scope.user_id for e in doomed}:
                graph = self._held_graph(user)
                if graph is not None:
                    graph.drop(e.id for e in doomed if e.scope.user_id == user)
            self._measure({e.scope.user_id for e in doomed})
        return len(doomed)

    def remove_edges(self, ids: Sequence[str]) -> tuple[int, int]:
        """Delete these edges (unknown ids are skipped), then every node of theirs left
        without an edge. Returns (edges, nodes) removed."""
        places = self._places(ids)
        if not places:
            return 0, 0
        by_user: dict[str, list[str]] = {}
        for edge_id, where in places.items():
            by_user.setdefault(rows.user_of(where), []).append(edge_id)
        # A user's graph not held is not built to be dropped (a Forget of a 200,000-point user
        # took 4.4-5.1 s to remove its edges, 1.9 s without): its rows, unpacked in a burst no
        # collection walks (collector.quiet), tell the nodes.
        with self._holding(by_user), collector.quiet():
            held = {user: self._held_graph(user) for user in by_user}
            unheld = {u: self._orphans(u, set(i)) for u, i in by_user.items() if held[u] is None}
            batch = self._state.batch()
            for edge_id, where in places.items():
                batch.delete(GRAPH_CF, where + b"\x00" + edge_id.encode())
                batch.delete(IDS_CF, edge_id.encode())
            self._state.write(batch)
            edges = nodes = 0
            for user, user_ids in by_user.items():
                graph = held[user]
                if graph is None:
                    edges, nodes = edges + unheld[user][0], nodes + unheld[user][1]
                else:
                    edges += sum(i in graph.ends for i in user_ids)
                    nodes += graph.drop(user_ids)
            del held, unheld  # freed here: a collection resumes with the block's end
            self._measure(by_user)
            return edges, nodes

    def _orphans(self, user_id: str, removed: set[str]) -> tuple[int, int]:
        """(edges, nodes) that removing the edges ``removed`` of a user removes, read from its
        rows without building its edges: the nodes they touch that no other edge does."""
        touched: set[Node] = set()
        kept: set[Node] = set()
        edges = 0
        for _key, edge_id, ends in self._row_ends(rows.user_prefix(user_id)):
            edges += edge_id in removed
            (touched if edge_id in removed else kept).update(ends)
        return edges, len(touched - kept)

    def _row_ends(self, prefix: bytes) -> Iterator[tuple[bytes, str, tuple[Node, Node]]]:
        """The rows under ``prefix``: each one's key, its edge's id and its two nodes,
        unpacked without building the edge."""
        for key, raw in self._state.scan_prefix(GRAPH_CF, prefix):
            d = unpack(raw)
            scope = Scope(d["u"], d["a"])
            yield key, d["id"], (node(scope, d["s"]), node(scope, d["o"]))

    def remove_scope(self, scope: Scope) -> tuple[int, int]:
        """The scope's rows, deleted as they are read and unpacked without building edges (a
        200,000-point user's 60,000 edges: 0.5 s where reading them as edges took 1.3 s and
        :meth:`remove_edges` given their ids 1.9 s). A node is its scope's own, so every node
        of theirs is left without an edge."""
        with self._lock(scope.user_id), collector.quiet():
            batch, ids, nodes = self._state.batch(), list[str](), set[Node]()
            for key, edge_id, ends in self._row_ends(rows.scope_prefix(scope)):
                batch.delete(GRAPH_CF, key)
                batch.delete(IDS_CF, edge_id.encode())
                ids.append(edge_id)
                nodes.update(ends)
            if not ids:
                return 0, 0
            self._state.write(batch)
            graph = self._held_graph(scope.user_id)
            if graph is not None:
                graph.drop(ids)
            self._measure([scope.user_id])
            return len(ids), len(nodes)

    def close_edges(self, ids: Sequence[str], valid_to_us: int | None) -> None:
        places = self._places(ids)
        with self._holding(rows.user_of(w) for w in places.values()):
            edges = (self._read(edge_id, where) for edge_id, where in places.items())
            self.add_edges([replace(e, valid_to_us=valid_to_us) for e in edges if e is not None])

    # -- reads -----------------------------------------------------------------------------
    def get(self, edge_id: str) -> Edge | None:
        where = self._places([edge_id]).get(edge_id)
        if where is None:
            return None
        with self._lock(rows.user_of(where)):
            return self._read(edge_id, where)

    def edges_where(self, keep: Callable[[Edge], bool], user_id: str = "") -> list[Edge]:
        """Every edge for which ``keep`` is true: of ``user_id``'s scopes when given (its
        rows, without looking at the other users' edges), else of any scope. Read from the
        rows, holding no graph: a graph held is walked by every full garbage collection, so
        only the calls that come again and again for one user (the weaver's,
        :meth:`edges_about`) hold one, and a held edge would be decoded from its row anyway."""
        with self._holding([user_id] if user_id else []), collector.quiet():
            if user_id:
                scanned = self._state.scan_prefix(GRAPH_CF, rows.user_prefix(user_id))
            else:
                scanned = self._state.scan(GRAPH_CF, b"")
            return [e for _key, raw in scanned if keep(e := rows.decode(raw))]

    def triplets(self, scope: Scope) -> list[tuple[str, str, str]]:
        with self._lock(scope.user_id), collector.quiet():
            scanned = self._state.scan_prefix(GRAPH_CF, rows.scope_prefix(scope))
            return [t for _key, raw in scanned if (t := rows.triplet(raw)) is not None]

    def episodes_of(self, scope: Scope) -> set[str]:
        with self._lock(scope.user_id), collector.quiet():
            scanned = self._state.scan_prefix(GRAPH_CF, rows.scope_prefix(scope))
            return {unpack(raw)["e"] for _key, raw in scanned}

    def edges_about(self, scope: Scope, subject: str, predicate: str) -> list[Edge]:
        with self._lock(scope.user_id):
            return self._graph(scope.user_id).about(node(scope, subject), predicate)

    def edges_of(self, scope: Scope, entity: str) -> list[Edge]:
        with self._lock(scope.user_id):
            return self._graph(scope.user_id).touching(node(scope, entity))

    def entities(self, scope: Scope) -> list[tuple[str, list[str]]]:
        with self._lock(scope.user_id):
            return [
                (node[2], sorted(data["aliases"]))
                for node, data in self._graph(scope.user_id).graph.nodes(data=True)
                if node[1] == scope.agent_id
            ]

    def counts(self) -> tuple[int, int]:
        """(entities, edges) of every user, read from the store."""
        nodes: set[Node] = set()
        edges = 0
        for _key, raw in self._state.scan(GRAPH_CF, b""):
            edge = rows.decode(raw)
            nodes.update((node(edge.scope, edge.subject), node(edge.scope, edge.object)))
            edges += 1
        return len(nodes), edges

    def held(self) -> tuple[int, int]:
        """(users, edges) whose graphs are in memory."""
        with self._guard:
            return len(self._users), sum(len(g.ends) for g in self._users.values())

    def close(self) -> None:
        """Drop the graphs held (the state store is closed by its owner)."""
        with self._guard:
            self._users.clear()
            self._sizes.clear()
            self._held = 0
