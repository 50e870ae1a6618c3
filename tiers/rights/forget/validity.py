"""Forget and the validity of the facts left: what a forgotten fact had closed is current
again, or closed at the next value that remains (what supersession would have done without
it). Called by :class:`tiers.rights.forget.cascade.Forgetter` under the write lock, after the
points and edges are deleted; the caches are emptied after, so nothing is told here."""

from __future__ import annotations

from collections.abc import Collection

from tiers.semantic.graph import Edge, normalize
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import PointFilter


def reopen(semantic: SemanticStore, forgotten: Collection[str]) -> int:
    """Make current again the facts that one of the ``forgotten`` (ids) replaced: their
    stored ``replaced_by`` names it. Returns how many."""
    if not forgotten:
        return 0
    _embedder, vectors = semantic.wait_ready(timeout=None)
    flt = PointFilter(replaced_by=tuple(sorted(forgotten)))
    reopened: dict[str, int | None] = {i: None for i in vectors.ids(flt, limit=vectors.count(flt))}
    semantic.close_facts(reopened, notify=False)
    return len(reopened)


def restore_superseded(semantic: SemanticStore, removed: list[Edge]) -> int:
    """Facts that a forgotten fact superseded: for each (scope, subject, predicate) that
    lost a fact (``removed``: its edges), the remaining closed facts are closed at the
    earliest later fact of another value that remains, or made current again when none does.
    Returns how many facts changed."""
    graph = semantic.graph
    changed: dict[str, int | None] = {}
    by: dict[str, str] = {}
    groups = {(e.scope, e.subject, e.predicate) for e in removed}
    for scope, subject, predicate in sorted(groups, key=repr):
        left = sorted(
            graph.edges_about(scope, subject, predicate), key=lambda e: (e.valid_from_us, e.id)
        )
        for i, edge in enumerate(left):
            if edge.valid_to_us is None:
                continue
            later = (e for e in left[i + 1 :] if normalize(e.object) != normalize(edge.object))
            newer = next(later, None)
            valid_to = None if newer is None else newer.valid_from_us
            if valid_to != edge.valid_to_us:
                changed[edge.id] = valid_to
                if newer is not None:
                    by[edge.id] = newer.id
    semantic.close_facts(changed, replaced_by=by, notify=False)
    return len(changed)
