"""The vector channel: the dense nearest neighbours of the query's embedding."""

from __future__ import annotations

from recall import QueryContext
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import Hit, MemoryPoint
from tiers.semantic.vectors.ranking import order_key


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
        return ordered(hits)


def ordered(hits: list[Hit]) -> list[tuple[MemoryPoint, float]]:
    """Best first; ties by point id (not by storage order):
    :mod:`tiers.semantic.vectors.ranking`."""
    return [(h.point, h.score) for h in sorted(hits, key=lambda h: order_key(h.score, h.point.id))]
