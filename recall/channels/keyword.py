"""The keyword channel: BM25 over the stored points and those staged before their
embedding."""

from __future__ import annotations

from recall import Query, QueryContext
from recall.channels.vector import ordered
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint


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
        return ordered(hits)[:limit]
