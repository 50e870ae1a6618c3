"""Supersession: which stored facts a new one closes, and what an extractor is shown to say so.

A fact is closed (``valid_to`` and ``replaced_by``, :meth:`SemanticStore.close_facts`) when

- a newer fact of the same subject and functional predicate has another value
  (:func:`supersede`: the local extractor's triplets, and an LLM's), or
- the extractor said a new fact updates, corrects or contradicts it (:func:`apply_updates`,
  :attr:`weaver.extractors.Fact.updates`). An extractor that ``reads_known`` is shown the
  scope's current facts nearest to the episode's turns (:func:`known_facts`) and names those.

The caller (:class:`weaver.consolidate.Consolidator`) holds ``SemanticStore.write_lock``.
"""

from __future__ import annotations

from tiers.semantic.graph import Edge, normalize
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint, PointFilter
from weaver.extractors import EpisodeInput, Fact, KnownFact

# The known facts an extractor that reads them is shown: the scope's current facts nearest
# to the episode's turns (KNOWN_PER_TURN per turn, of its last MAX_KNOWN turns).
MAX_KNOWN = 30
KNOWN_PER_TURN = 3


def known_facts(semantic: SemanticStore, episode: EpisodeInput) -> list[KnownFact]:
    """The scope's current facts nearest to the episode's turns, from other episodes, at
    most :data:`MAX_KNOWN`, oldest first. Raises what the embedder and the store raise."""
    turns = [t for t in episode.turns if t.text.strip()][-MAX_KNOWN:]
    if not turns:
        return []
    embedder, vectors = semantic.wait_ready(timeout=None)
    flt = PointFilter(
        user_id=episode.scope.user_id,
        agent_id=episode.scope.agent_id,
        kinds=("fact",),
        include_superseded=False,
    )
    best: dict[str, float] = {}
    found: dict[str, MemoryPoint] = {}
    for vector in embedder.encode_queries([t.text for t in turns]):
        for hit in vectors.search_dense(vector.tolist(), flt, KNOWN_PER_TURN):
            p = hit.point
            if p.episode_id == episode.episode_id or p.scope != episode.scope:
                continue
            if hit.score > best.get(p.id, -2.0):
                best[p.id], found[p.id] = hit.score, p
    nearest = sorted(best, key=lambda i: -best[i])[:MAX_KNOWN]
    known = sorted((found[i] for i in nearest), key=lambda p: (p.created_at_us, p.id))
    return [KnownFact(p.id, p.text, p.created_at_us) for p in known]


def supersede(semantic: SemanticStore, edges: list[Edge], functional: set[str]) -> int:
    """Close the older of two current facts with the same subject and ``functional``
    predicate but a different value. Returns how many facts were closed."""
    closed: dict[str, int | None] = {}
    by: dict[str, str] = {}
    graph = semantic.graph
    for new in edges:
        if new.predicate not in functional:
            continue
        for other in graph.edges_about(new.scope, new.subject, new.predicate):
            if other.id == new.id or normalize(other.object) == normalize(new.object):
                continue
            older, newer = sorted((other, new), key=lambda e: (e.valid_from_us, e.id))
            current = graph.get(older.id)
            if current is not None and current.valid_to_us is None:
                closed[older.id] = newer.valid_from_us
                by[older.id] = newer.id
    semantic.close_facts(closed, replaced_by=by)
    return len(closed)


def apply_updates(semantic: SemanticStore, facts: list[tuple[MemoryPoint, Fact]]) -> int:
    """Close the known facts that the extractor said a new fact (its point, as written)
    updates: ``valid_to`` the new fact's start, ``replaced_by`` its id. Only a current fact
    of the same scope that is not newer than it. Returns how many were closed."""
    wanted = sorted({old for _p, f in facts for old in f.updates})
    if not wanted:
        return 0
    _embedder, vectors = semantic.wait_ready(timeout=None)
    users = {p.scope.user_id for p, _f in facts}
    stored = {p.id: p for user in users for p in vectors.get(wanted, user)}
    closed: dict[str, int | None] = {}
    by: dict[str, str] = {}
    for point, fact in facts:
        for old_id in fact.updates:
            old = stored.get(old_id)
            if (
                old is None
                or old.id == point.id
                or old.kind != "fact"
                or old.scope != point.scope
                or old.valid_to_us is not None
                or old.created_at_us > point.created_at_us
                or old_id in closed
            ):
                continue
            closed[old_id] = point.valid_from_us or point.created_at_us
            by[old_id] = point.id
    owners = {i: stored[i].scope.user_id for i in closed}
    semantic.close_facts(closed, replaced_by=by, owners=owners)
    return len(closed)
