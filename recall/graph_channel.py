"""The graph channel: the entities a query mentions, Personalized PageRank around them, and
the facts (with their source chunks) on the strongest edges.

1. **Linking.** Query n-grams of 1-4 words (possessives stripped: "Caroline's" -> "caroline")
   are looked up among the normalized names and aliases of the entities of the query's scope;
   then the query embedding is compared with the embeddings of the entity names (computed
   lazily with ``encode_documents`` and cached by name) and the best few above a threshold
   join as weaker seeds (:mod:`recall.entities`; the words: :mod:`recall.words`).
2. **Expansion.** The ``hops``-hop neighbourhood of the seeds (undirected, inside the scope
   only: nodes are ``(user_id, agent_id, name)`` and every node outside the query's scope is
   skipped) is copied out under the graph's lock, and Personalized PageRank runs on it with
   the seeds as its personalization (:func:`recall.pagerank.personalized_pagerank`: the
   iteration of ``networkx.pagerank``, on numpy arrays). A superseded fact's edge weighs less
   in the walk.
3. **Result.** Each edge scores the PageRank mass of its two ends (normalised to the best
   edge), plus small bonuses for a current fact and for predicate/object words the query
   uses. The best edges' fact points come from the vector store (edge id == fact point id),
   each followed by the ``episode_chunk`` points of its episode that hold its source
   messages, all through the query's filter.

Scope is a hard filter: the entity index, the walk and every returned point are checked
against the query's ``user_id`` and, when it has one, its ``agent_id`` (an empty ``agent_id``
covers every agent of the user, as in :meth:`recall.Query.filter`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

import numpy as np

from recall import QueryContext
from recall.entities import EntityLinker, Link, in_scope
from recall.pagerank import personalized_pagerank
from recall.words import content_stems, edge_words, tokens
from tiers.graph import Edge
from tiers.graph.nxgraph import NetworkXGraph, Node
from tiers.records import Scope
from tiers.semantic import SemanticStore
from tiers.vectors import MemoryPoint, PointFilter, VectorStore


def admits(flt: PointFilter, point: MemoryPoint) -> bool:
    """Whether ``point`` passes ``flt`` (scope, kinds, time range, superseded)."""
    if point.scope.user_id != flt.user_id:
        return False
    if flt.agent_id and point.scope.agent_id != flt.agent_id:
        return False
    if flt.kinds and point.kind not in flt.kinds:
        return False
    if flt.episode_ids and point.episode_id not in flt.episode_ids:
        return False
    if flt.created_from_us is not None and point.created_at_us < flt.created_from_us:
        return False
    if flt.created_to_us is not None and point.created_at_us >= flt.created_to_us:
        return False
    return flt.include_superseded or point.valid_to_us is None


class GraphChannel:
    """Entity linking + Personalized PageRank over the fact graph of the query's scope."""

    name = "graph"

    def __init__(
        self,
        semantic: SemanticStore,
        *,
        link_threshold: float = 0.5,
        link_top: int = 3,
        max_ngram: int = 4,
        hops: int = 2,
        alpha: float = 0.85,
        current_bonus: float = 0.1,
        overlap_bonus: float = 0.2,
        superseded_weight: float = 0.5,
        chunks_per_fact: int = 2,
        chunk_factor: float = 0.99,
        max_edges: int = 20_000,
        max_scopes: int = 256,
    ) -> None:
        self._semantic = semantic
        self._linker = EntityLinker(
            semantic,
            link_threshold=link_threshold,
            link_top=link_top,
            max_ngram=max_ngram,
            max_scopes=max_scopes,
        )
        self.hops = hops
        self.alpha = alpha
        self.current_bonus = current_bonus
        self.overlap_bonus = overlap_bonus
        self.superseded_weight = superseded_weight
        self.chunks_per_fact = chunks_per_fact
        self.chunk_factor = chunk_factor
        self.max_edges = max_edges

    def forget_scope(self, user_id: str) -> int:
        """Forget's hook: drop the user's entity indexes and the cached embeddings of entity
        names no longer in the graph. Returns how many entries were dropped."""
        return self._linker.forget_scope(user_id)

    @property
    def _graph(self) -> NetworkXGraph:
        return self._semantic.graph

    # -- the channel -------------------------------------------------------------------------

    def search(self, ctx: QueryContext, limit: int) -> list[tuple[MemoryPoint, float]]:
        if limit <= 0:
            return []
        embedder, vectors = self._semantic.wait_ready(0)
        links = self._linker.link(ctx, embedder)
        if not links:
            return []
        scope = ctx.query.scope
        edges = self._neighbourhood(links, scope)
        if not edges:
            return []
        ranked = self._rank(edges, links, ctx.query.text, 3 * limit)
        return self._assemble(ranked, ctx.query.filter(), vectors, limit)

    def link(self, ctx: QueryContext) -> list[Link]:
        """The entities the query links to, strongest first (for explanations and tests)."""
        embedder, _vectors = self._semantic.wait_ready(0)
        links = self._linker.link(ctx, embedder)
        return sorted(links.values(), key=lambda lk: (-lk.weight, lk.node))

    # -- 2. expansion ------------------------------------------------------------------------

    def _neighbourhood(self, seeds: Iterable[Node], scope: Scope) -> list[tuple[Node, Node, Edge]]:
        """The edges within ``hops`` hops of the seeds (either direction), inside ``scope``,
        copied out under the graph's lock (the Edge records themselves are immutable)."""
        graph = self._graph
        found: dict[str, tuple[Node, Node, Edge]] = {}
        with graph._lock:
            g = graph.graph
            # networkx's own dict-of-dicts (its views cost ~10x more per step on hubs)
            succ, pred = g._succ, g._pred
            frontier = [n for n in seeds if in_scope(n, scope) and n in succ]
            visited = set(frontier)
            for _hop in range(self.hops):
                following: list[Node] = []
                for node in frontier:
                    for adjacency, outgoing in ((succ[node], True), (pred[node], False)):
                        for other, keyed in adjacency.items():
                            if not in_scope(other, scope):
                                continue
                            u, v = (node, other) if outgoing else (other, node)
                            for edge_id, data in keyed.items():
                                found[edge_id] = (u, v, data["edge"])
                            if other not in visited:
                                visited.add(other)
                                following.append(other)
                    if len(found) >= self.max_edges:
                        break
                frontier = following
                if len(found) >= self.max_edges:
                    break
        return list(found.values())

    # -- 3. result ---------------------------------------------------------------------------

    def _rank(
        self,
        edges: Sequence[tuple[Node, Node, Edge]],
        links: dict[Node, Link],
        text: str,
        top: int,
    ) -> list[tuple[Edge, float]]:
        """The ``top`` best edges with their scores, best first."""
        index: dict[Node, int] = {node: i for i, node in enumerate(links)}
        src = np.empty(len(edges), dtype=np.int64)
        dst = np.empty(len(edges), dtype=np.int64)
        weight = np.empty(len(edges), dtype=np.float64)
        for i, (u, v, edge) in enumerate(edges):
            src[i] = index.setdefault(u, len(index))
            dst[i] = index.setdefault(v, len(index))
            weight[i] = 1.0 if edge.current else self.superseded_weight
        seeds = np.zeros(len(index))
        for node, link in links.items():
            seeds[index[node]] = link.weight
        mass = personalized_pagerank(len(index), src, dst, weight, seeds, self.alpha)
        base = mass[src] + mass[dst]
        base /= base.max() or 1.0
        # The linked entities' own names are not "overlap": only what the query asks about.
        linked = {w for node in links for w in content_stems(node[2].split())}
        asked = content_stems(tokens(text)) - linked
        scored: list[tuple[float, str, int]] = []
        for i, (_u, _v, edge) in enumerate(edges):
            score = float(base[i])
            if edge.current:
                score += self.current_bonus
            if asked and self.overlap_bonus:
                words = edge_words(edge.predicate, edge.object)
                if words:
                    score += self.overlap_bonus * len(words & asked) / len(words)
            scored.append((-score, edge.id, i))
        best = heapq.nsmallest(top, scored)
        return [(edges[i][2], -neg) for neg, _id, i in best]

    def _assemble(
        self,
        ranked: list[tuple[Edge, float]],
        flt: PointFilter,
        vectors: VectorStore,
        limit: int,
    ) -> list[tuple[MemoryPoint, float]]:
        """Each edge's fact, then its source chunks, through the filter, up to ``limit``."""
        facts_ok = not flt.kinds or "fact" in flt.kinds
        chunks_ok = self.chunks_per_fact > 0 and (not flt.kinds or "episode_chunk" in flt.kinds)
        if not facts_ok and not chunks_ok:
            return []
        per_edge = int(facts_ok) + (self.chunks_per_fact if chunks_ok else 0)
        out: list[tuple[MemoryPoint, float]] = []
        seen: set[str] = set()
        facts: dict[str, MemoryPoint] = {}
        chunks: dict[str, list[MemoryPoint]] = {}
        pos = 0
        while len(out) < limit and pos < len(ranked):
            # the edges that may still fit (at least one point each), fetched together
            group = ranked[pos : pos + max(4, -(-(limit - len(out)) // per_edge))]
            pos += len(group)
            facts.update((p.id, p) for p in vectors.get([edge.id for edge, _ in group]))
            if chunks_ok:
                episodes = {e.episode_id for e, _ in group if e.episode_id not in chunks}
                chunks.update(self._chunks(vectors, flt, episodes))
            for edge, score in group:
                fact = facts.get(edge.id)
                if fact is None or fact.scope.user_id != flt.user_id:
                    continue  # forgotten since (the graph keeps the edge), or not ours
                if fact.id not in seen and admits(flt, fact):
                    seen.add(fact.id)
                    out.append((fact, score))
                for chunk in self._chunks_of(edge, chunks):
                    if len(out) >= limit:
                        break
                    if chunk.id not in seen:
                        seen.add(chunk.id)
                        out.append((chunk, score * self.chunk_factor))
                if len(out) >= limit:
                    break
        result: list[tuple[MemoryPoint, float]] = []
        floor = float("inf")
        for point, score in out:  # scores never rise: chunks rank just after their fact
            floor = min(floor, score)
            result.append((point, floor))
        return result

    def _chunks(
        self, vectors: VectorStore, flt: PointFilter, episodes: Iterable[str]
    ) -> dict[str, list[MemoryPoint]]:
        """The admitted ``episode_chunk`` points of these episodes, by episode."""
        wanted = tuple(sorted(e for e in episodes if e))
        if not wanted:
            return {}
        points = vectors.scroll(
            PointFilter(
                user_id=flt.user_id,
                agent_id=flt.agent_id,
                kinds=("episode_chunk",),
                episode_ids=wanted,
                created_from_us=flt.created_from_us,
                created_to_us=flt.created_to_us,
            ),
            limit=max(1000, 200 * len(wanted)),
        )
        by_episode: dict[str, list[MemoryPoint]] = {e: [] for e in wanted}
        for point in points:
            if point.kind == "episode_chunk" and admits(flt, point):
                by_episode.setdefault(point.episode_id, []).append(point)
        return by_episode

    def _chunks_of(self, edge: Edge, chunks: dict[str, list[MemoryPoint]]) -> list[MemoryPoint]:
        """The chunks of the edge's episode holding its source messages, best covering first."""
        seqs = {s.seq for s in edge.sources}
        if not seqs:
            return []
        found: list[tuple[int, int, str, MemoryPoint]] = []
        for chunk in chunks.get(edge.episode_id, []):
            if chunk.scope != edge.scope:
                continue
            chunk_seqs = {s.seq for s in chunk.sources}
            common = len(seqs & chunk_seqs)
            if common:
                found.append((-common, min(chunk_seqs), chunk.id, chunk))
        found.sort(key=lambda item: item[:3])
        return [item[3] for item in found[: self.chunks_per_fact]]
