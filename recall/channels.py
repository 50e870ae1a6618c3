"""The vector and keyword channels (the graph channel is in :mod:`recall.graph.channel`).

Each returns its hits best first, points of equal score by id: the engine orders ties by
where the points happen to be stored, and the same memory must rank the same in every daemon
that holds it (an imported copy, a rebuilt store), whatever order it was written in.
"""

from __future__ import annotations

from recall import Query, QueryContext
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import Hit, MemoryPoint


class VectorChannel:
    """Dense nearest neighbours of the query embedding (cosine)."""

    name = "vector"

    def __init__(self, semantic: SemanticStore) -> None:
        self._semantic = semantic

    def search(self, ctx: QueryContext, limit: int) -> list[tuple[MemoryPoint, float]]:
        hits = ctx.dense_hits(limit)
        if hits is None:
            _embedder, vectors = self._semantic.wait_ready(0)
            hits = vectors.search_dense(ctx.vector.tolist(), ctx.query.filter(), limit)
        return _ordered(hits)


class KeywordChannel:
    """BM25 over the same points: sparse vectors with IDF, in the same engine; and over the
    points staged before their embedding (a live session's newest messages,
    :mod:`tiers.semantic.pending`), scored on the same scale and merged by score."""

    name = "keyword"

    def __init__(self, semantic: SemanticStore) -> None:
        self._semantic = semantic

    def search(self, ctx: QueryContext, limit: int) -> list[tuple[MemoryPoint, float]]:
        return self.search_text(ctx.query, limit)

    def search_text(self, query: Query, limit: int) -> list[tuple[MemoryPoint, float]]:
        """The search by the query's words alone (:class:`recall.Textual`): for a large
        graph's scope the engine runs it beside the query's embedding."""
        _embedder, vectors = self._semantic.wait_ready(0)
        sparse = self._semantic.keywords.embed_query(query.text)
        if not sparse.indices:
            return []
        flt = query.filter()
        hits = vectors.search_sparse(sparse, flt, limit)
        pending = self._semantic.pending
        staged = (
            pending.search(vectors.weigh(sparse), flt, limit) if pending.holds(flt.user_id) else []
        )
        if staged:
            stored = {h.point.id for h in hits}
            hits += [h for h in staged if h.point.id not in stored]
        return _ordered(hits)[:limit]


def _ordered(hits: list[Hit]) -> list[tuple[MemoryPoint, float]]:
    """Best first; equal scores by point id (not by storage order)."""
    return [(h.point, h.score) for h in sorted(hits, key=lambda h: (-h.score, h.point.id))]
