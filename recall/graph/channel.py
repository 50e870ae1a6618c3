"""The graph channel: Personalized PageRank over the entity <-> memory graph of the query's
scope ranks **memories** (as in HippoRAG 2).

1. **Seeds.** The entities the query names (:meth:`recall.graph.memory.ScopeGraph.link`:
   n-grams of 1-4 words, possessives stripped, matched against the scope's entity keys) share
   ``entity_seed``; the ``dense_seeds`` memories nearest to the query embedding get
   ``dense_seed`` times their cosine, shared among them. Without either, the channel returns
   nothing.
2. **Walk.** PageRank with teleport to the seeds (:meth:`recall.graph.pagerank.Walk.rank`, on the
   graph's sparse transition matrix) over the scope's graph (:mod:`recall.graph.memory`): memory -
   entity links weighted by how rare the entity is, entity - entity links from the fact graph's
   triplets, and a question turn's link to its reply. Mass flows from a named entity to the
   memories that mention it, from the nearest memories through the names they share to other
   memories about the same people, places and things, and from a question to its answer.
3. **Result.** Memories by PageRank mass, through the query's filter (kinds, time range,
   superseded), fetched from the vector store. A filter that narrows the scope is applied
   before the reads: its kinds from the graph's own features, a time range or a thread's
   episodes by the store's indexes when they admit few points (:data:`NARROW_IDS`,
   :data:`NARROW_SHARE`). The walk is not taken when the filter admits no memory of the
   graph, and its mass is kept to those it admits. Otherwise the leading memories are read in
   batches that grow while the filter skips them, :data:`NARROW_IDS` at most.

Scope is a hard filter: the graph holds only the query's scope (its ``user_id`` and, when it
has one, its ``agent_id``), and every returned point is checked against the query's filter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace

import numpy as np

from recall import QueryContext
from recall.graph.files import FeatureFiles
from recall.graph.memory import MEMORY_KINDS, MemoryGraphs
from recall.graph.pagerank import leading
from recall.graph.scope import REPLY_WEIGHT, ScopeGraph
from tiers.core.records import Scope
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint, PointFilter, VectorStore, admits

NARROW_IDS = 10_000
"""How many points a query's time range or episodes may admit for the walk's mass to be kept to
them (their ids read from the store), and how many of the walk's leading memories a query reads
at most. Before, the leading memories were read a few at a time until enough passed the filter:
every memory of a large scope when none did (7-8 s for the 200,000-point user of the 1M fill
and a time range holding none of its memories, 2026-12-05)."""

NARROW_SHARE = 8
"""The walk's mass is kept to the points a time range or episodes admit only when they are
fewer than 1 / ``NARROW_SHARE`` of the graph's memories: with more, its leading memories pass often
enough that a few growing batches find them, sooner than the admitted ids are read."""


class GraphChannel:
    """Personalized PageRank from the query's entities and nearest memories."""

    name = "graph"

    def __init__(
        self,
        semantic: SemanticStore,
        *,
        entity_seed: float = 1.0,
        dense_seed: float = 1.0,
        dense_seeds: int = 20,
        alpha: float = 0.5,
        refresh_seconds: float = 0.0,
        kinds: tuple[str, ...] = MEMORY_KINDS,
        reply_weight: float = REPLY_WEIGHT,
        cache_bytes: int = 256 * 2**20,
        large_scope: int = 20_000,
        inline_reads: int = 1_000,
        wait_seconds: float = 0.0,
        files: FeatureFiles | None = None,
        warm_bytes: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._semantic = semantic
        self.graphs = MemoryGraphs(
            semantic,
            refresh_seconds=refresh_seconds,
            large_scope=large_scope,
            inline_reads=inline_reads,
            wait_seconds=wait_seconds,
            kinds=kinds,
            reply_weight=reply_weight,
            max_bytes=cache_bytes,
            files=files,
            warm_bytes=warm_bytes,
            clock=clock,
        )
        self.entity_seed = entity_seed
        self.dense_seed = dense_seed
        self.dense_seeds = dense_seeds
        self.alpha = alpha

    def close(self) -> None:
        """Start no more graph builds (:meth:`MemoryGraphs.close`); walks under way finish
        on their own thread. Idempotent."""
        self.graphs.close()

    def deferred(self) -> AbstractContextManager[None]:
        """The builds a query asks for start after it (:meth:`MemoryGraphs.deferred`)."""
        return self.graphs.deferred()

    def forget_scope(self, user_id: str) -> int:
        """Forget's hook: drop the user's cached graphs and their features on disk. Returns
        how many graphs were dropped."""
        return self.graphs.forget_scope(user_id)

    def speakers(self, scope: Scope) -> frozenset[str]:
        """The normalized names of the scope's speakers, short forms included (its graph's:
        built or rebuilt here when a write made it stale). Raises
        :class:`recall.ChannelNotReady` while the scope's first build runs in the background
        (:class:`recall.graph.memory.MemoryGraphs`)."""
        _embedder, vectors = self._semantic.wait_ready(0)
        return self.graphs.get(scope, vectors).speakers

    def walks_large(self, scope: Scope) -> bool:
        """Whether the scope's graph, as held in memory, is large
        (:data:`recall.graph.pagerank.LARGE_NONZEROS` non-zeros); False while none is held.
        Reads nothing: the engine asks it before each query (:class:`recall.engine.RecallEngine`'s
        ``ahead``)."""
        graph = self.graphs.held(scope)
        return graph is not None and graph.walk.large

    def search(self, ctx: QueryContext, limit: int) -> list[tuple[MemoryPoint, float]]:
        if limit <= 0:
            return []
        _embedder, vectors = self._semantic.wait_ready(0)
        graph = self.graphs.get(ctx.query.scope, vectors)
        if not graph.count:
            return []
        flt = ctx.query.filter()
        admitted = self._admitted(graph, vectors, flt)
        if admitted is not None and not admitted.any():
            return []
        seeds = self.seeds(ctx, graph, vectors, flt)
        if not seeds.any():
            return []
        mass = graph.walk.rank(seeds, self.alpha, wanted=graph.count)[: graph.count]
        if admitted is not None:
            mass = np.where(admitted, mass, 0.0)
        drawn = limit
        order = leading(mass, drawn, graph.features.ids)
        out: list[tuple[MemoryPoint, float]] = []
        pos = 0
        while len(out) < limit and pos < NARROW_IDS:
            # points were skipped: as many again as read so far, in the same order
            want = min(max(limit - len(out), pos), NARROW_IDS - pos)
            if pos + want > drawn:
                drawn = max(2 * drawn, pos + want)
                order = leading(mass, drawn, graph.features.ids)
            batch = [int(i) for i in order[pos : pos + want]]
            pos += want
            if not batch:
                break
            wanted = [graph.point_id(i) for i in batch]
            found = {p.id: p for p in vectors.get(wanted, flt.user_id)}
            for i, point_id in zip(batch, wanted, strict=True):
                point = found.get(point_id)
                if point is not None and admits(flt, point):  # gone since the build: skipped
                    out.append((point, float(mass[i])))
        return out[:limit]

    def _admitted(
        self, graph: ScopeGraph, vectors: VectorStore, flt: PointFilter
    ) -> np.ndarray | None:
        """Which of the graph's memories ``flt``'s kinds, episodes and time range may admit
        (a mask), or None: any may. The kinds are read from the graph's features; episodes
        and a time range are counted and read by the store's indexes, and kept to only when
        they hold few points (:data:`NARROW_IDS`, :data:`NARROW_SHARE`). Either way each
        memory is still checked against the whole filter as it is read (the sessions it
        leaves out are few, and they are left out here: no index holds a message's place
        in its session)."""
        ranged = flt.created_from_us is not None or flt.created_to_us is not None
        if not (flt.kinds or flt.episode_ids or ranged):
            return None
        words, kinds = graph.features.words, graph.features.kind
        present = [int(c) for c in np.flatnonzero(np.bincount(kinds))]
        asked = [c for c in present if words[c] in flt.kinds] if flt.kinds else present
        if not asked:
            return np.zeros(graph.count, dtype=bool)
        mask = np.isin(kinds, asked) if len(asked) < len(present) else None
        if not (flt.episode_ids or ranged):
            return mask
        kept = tuple(words[c] for c in asked)
        within = replace(flt, kinds=kept, exclude_sessions=(), exclude_from=())
        counted = vectors.count(within)
        if not counted:
            return np.zeros(graph.count, dtype=bool)
        if counted > min(NARROW_IDS, graph.count // NARROW_SHARE):
            return mask
        found = np.zeros(graph.count, dtype=bool)
        found[graph.nodes(vectors.ids(within, NARROW_IDS))] = True
        return found

    def seeds(
        self, ctx: QueryContext, graph: ScopeGraph, vectors: VectorStore, flt: PointFilter
    ) -> np.ndarray:
        """The personalization vector: the named entities, then the nearest memories."""
        seeds = np.zeros(graph.size)
        linked = graph.link(ctx.query.text)
        for key in linked:
            seeds[graph.entities[key]] += self.entity_seed / len(linked)
        if self.dense_seeds > 0 and self.dense_seed > 0 and ctx.vector is not None:
            kinds = tuple(dict.fromkeys((*self.graphs.kinds, "episode_chunk")))
            hits = ctx.dense_hits(self.dense_seeds, kinds)  # the vector channel's search
            if hits is None:
                hits = vectors.search_dense(
                    ctx.vector.tolist(), replace(flt, kinds=kinds), self.dense_seeds
                )
            for hit in hits:
                i = graph.node(hit.point.id)
                if i is not None and hit.score > 0:
                    seeds[i] += self.dense_seed * hit.score / self.dense_seeds
        return seeds
