"""Digest expansion: a digest or story thread among the hits brings its children after it.

A digest (``tiers.semantic.digests``) or a thread (``tiers.semantic.threads``) answers "what
happened" in a few lines, and cites many messages; its children (the episode summaries of a
period or a topic, the period digests of the story) say it in more detail. With the recipe's
``expand_digests``, each such hit among the first ``k`` is followed by its children that pass
the query's filter, newest first, each once (a child already ranked moves up to its parent),
before the hits are cut to ``k``.
"""

from __future__ import annotations

from collections.abc import Sequence

from recall import Candidate
from tiers.semantic.vectors import PointFilter, VectorStore, admits

PARENTS = ("digest", "thread")
STEP = 1e-6  # a child scores this much below the hit before it


def expand(
    candidates: Sequence[Candidate], k: int, vectors: VectorStore, flt: PointFilter
) -> list[Candidate]:
    """``candidates`` (best first) with the children of the digests and threads among the
    first ``k`` after each (see the module's text)."""
    top = list(candidates[:k])
    parents = {c.point.id for c in top if c.point.kind in PARENTS}
    if not parents:
        return list(candidates)
    wanted = [
        str(i)
        for c in top
        if c.point.id in parents
        for i in reversed(c.point.attrs.get("children") or [])
    ]
    found = {p.id: p for p in vectors.get(list(dict.fromkeys(wanted)), flt.user_id)}
    ranked = {c.point.id: c for c in candidates}
    out: list[Candidate] = []
    placed: set[str] = set()
    for c in candidates:
        if c.point.id in placed:
            continue
        out.append(c)
        placed.add(c.point.id)
        if c.point.id not in parents:
            continue
        score = c.score
        for child_id in reversed(c.point.attrs.get("children") or []):
            child = found.get(str(child_id))
            if child is None or child.id in placed or not admits(flt, child):
                continue
            score -= STEP
            known = ranked.get(child.id)
            out.append(
                Candidate(child, score, c.fused, found_via=c.point.id) if known is None else known
            )
            placed.add(child.id)
    return out
