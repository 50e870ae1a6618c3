"""Entity linking for the graph channel: which entities of the query's scope a query names
or resembles.

Query n-grams of 1-4 words (possessives stripped: "Caroline's" -> "caroline") are looked up
among the normalized names and aliases of the entities of the query's scope; then the query
embedding is compared with the embeddings of the entity names (computed lazily with
``encode_documents`` and cached by name) and the best few above a threshold join as weaker
seeds. The entity index of each scope is rebuilt when the graph changes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from recall import QueryContext
from recall.words import mentions
from tiers.embedding import Embedder
from tiers.graph import normalize
from tiers.graph.nxgraph import NetworkXGraph, Node
from tiers.records import Scope
from tiers.semantic import SemanticStore


def in_scope(node: Node, scope: Scope) -> bool:
    return node[0] == scope.user_id and (not scope.agent_id or node[1] == scope.agent_id)


@dataclass(slots=True)
class _ScopeIndex:
    """The entities of one scope at one graph version."""

    signature: tuple[int, int]
    keys: dict[str, list[Node]]  # normalized name or alias -> nodes
    names: list[str]  # distinct node names, the rows of ``matrix``
    by_name: dict[str, list[Node]]
    matrix: np.ndarray | None = None  # name embeddings, built on first use
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True, slots=True)
class Link:
    node: Node
    weight: float  # personalization weight: 1.0 for a name match, the cosine otherwise
    how: str  # "name" or "embedding"


class EntityLinker:
    """Links queries to the entities of their scope; caches each scope's entity index and the
    embeddings of entity names."""

    def __init__(
        self,
        semantic: SemanticStore,
        *,
        link_threshold: float = 0.5,
        link_top: int = 3,
        max_ngram: int = 4,
        max_scopes: int = 256,
    ) -> None:
        self._semantic = semantic
        self.link_threshold = link_threshold
        self.link_top = link_top
        self.max_ngram = max_ngram
        self._max_scopes = max_scopes
        self._lock = threading.Lock()  # guards the caches below (never held with the graph's)
        self._snapshot: tuple[tuple[int, int], dict[str, list[tuple[Node, tuple[str, ...]]]]] = (
            (-1, -1),
            {},
        )
        self._indexes: OrderedDict[tuple[str, str], _ScopeIndex] = OrderedDict()
        self._name_vectors: dict[str, np.ndarray] = {}
        self._name_model = ""

    def forget_scope(self, user_id: str) -> int:
        """Forget's hook: drop the user's entity indexes and the cached embeddings of entity
        names no longer in the graph. Returns how many entries were dropped."""
        with self._graph._lock:
            names = {node[2] for node in self._graph.graph.nodes}
        with self._lock:
            self._snapshot = ((-1, -1), {})
            stale = [k for k in self._indexes if k[0] == user_id]
            for key in stale:
                del self._indexes[key]
            gone = [n for n in self._name_vectors if n not in names]
            for name in gone:
                del self._name_vectors[name]
            return len(stale) + len(gone)

    @property
    def _graph(self) -> NetworkXGraph:
        return self._semantic.graph

    def link(self, ctx: QueryContext, embedder: Embedder) -> dict[Node, Link]:
        """The entities the query names (weight 1.0) or whose names resemble it (the cosine,
        at most ``link_top`` above ``link_threshold``), in the query's scope."""
        index = self._scope_index(ctx.query.scope)
        if not index.names:
            return {}
        links: dict[Node, Link] = {}
        spans: list[tuple[int, int]] = []
        for start, end, key in mentions(ctx.query.text, self.max_ngram):
            nodes = index.keys.get(key)
            if not nodes or any(
                s <= start and end <= e and (s, e) != (start, end) for s, e in spans
            ):
                continue
            spans.append((start, end))
            for node in nodes:
                links[node] = Link(node, 1.0, "name")
        if self.link_top > 0 and ctx.vector is not None and ctx.vector.size:
            for name, sim in self._similar_names(index, ctx.vector, embedder):
                for node in index.by_name[name]:
                    if node not in links:
                        links[node] = Link(node, sim, "embedding")
        return links

    def _similar_names(
        self, index: _ScopeIndex, vector: np.ndarray, embedder: Embedder
    ) -> list[tuple[str, float]]:
        matrix = self._name_matrix(index, embedder)
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if matrix.shape[0] == 0 or matrix.shape[1] != query.shape[0]:
            return []
        norm = float(np.linalg.norm(query))
        if norm == 0.0:
            return []
        sims = matrix @ (query / norm)
        top = min(self.link_top, sims.shape[0])
        best = np.argpartition(-sims, top - 1)[:top]
        out = [(index.names[i], float(sims[i])) for i in best if sims[i] >= self.link_threshold]
        return sorted(out, key=lambda item: (-item[1], item[0]))

    def _name_matrix(self, index: _ScopeIndex, embedder: Embedder) -> np.ndarray:
        with index.lock:  # one builder per index; other scopes go on
            if index.matrix is not None:
                return index.matrix
            with self._lock:
                if self._name_model != embedder.model_name:
                    self._name_vectors.clear()
                    self._name_model = embedder.model_name
                missing = [n for n in index.names if n not in self._name_vectors]
            fresh: dict[str, np.ndarray] = {}
            for i in range(0, len(missing), 256):
                batch = missing[i : i + 256]
                rows = np.asarray(embedder.encode_documents(batch), dtype=np.float32)
                fresh.update(zip(batch, rows, strict=True))
            with self._lock:
                self._name_vectors.update(fresh)
                rows_all = [self._name_vectors.get(n) for n in index.names]
            dim = embedder.dim
            matrix = np.zeros((len(index.names), dim), dtype=np.float32)
            for i, row in enumerate(rows_all):
                if row is not None and row.shape == (dim,):
                    matrix[i] = row
            index.matrix = matrix
            return matrix

    def _scope_index(self, scope: Scope) -> _ScopeIndex:
        signature, by_user = self._entities()
        key = (scope.user_id, scope.agent_id)
        with self._lock:
            index = self._indexes.get(key)
            if index is not None and index.signature == signature:
                self._indexes.move_to_end(key)
                return index
        keys: dict[str, list[Node]] = {}
        by_name: dict[str, list[Node]] = {}
        for node, aliases in by_user.get(scope.user_id, []):
            if not in_scope(node, scope):
                continue
            by_name.setdefault(node[2], []).append(node)
            for k in dict.fromkeys((node[2], *(normalize(a) for a in aliases))):
                if k:
                    keys.setdefault(k, []).append(node)
        index = _ScopeIndex(signature, keys, sorted(by_name), by_name)
        with self._lock:
            self._indexes[key] = index
            self._indexes.move_to_end(key)
            while len(self._indexes) > self._max_scopes:
                self._indexes.popitem(last=False)
        return index

    def _entities(self) -> tuple[tuple[int, int], dict[str, list[tuple[Node, tuple[str, ...]]]]]:
        """Every node with its aliases, grouped by user, at the graph's current version (one
        pass over the graph each time it changes, shared by every scope)."""
        graph = self._graph
        with graph._lock:
            ends = getattr(graph, "_ends", None)
            edges = len(ends) if ends is not None else graph.graph.number_of_edges()
            signature = (graph.graph.number_of_nodes(), edges)
            snapshot = self._snapshot
            if snapshot[0] == signature:
                return snapshot
            by_user: dict[str, list[tuple[Node, tuple[str, ...]]]] = {}
            for node, data in graph.graph.nodes(data=True):
                by_user.setdefault(node[0], []).append((node, tuple(data.get("aliases", ()))))
            self._snapshot = (signature, by_user)
            return self._snapshot
