"""Digest expansion: a digest or story thread among the hits brings its children after it.

A digest (``tiers.semantic.digests``) or a thread (``tiers.semantic.threads``) answers "what
happened" in a few lines, and cites many messages; its children (the episode summaries of a
period or a topic, the period digests of the story) say it in more detail. With the recipe's
``expand_digests``, each such hit among the first ``k`` is followed by its children that pass
the query's filter, newest first, each once (a child already ranked moves up to its parent),
before the hits are cut to ``k``. It is the engine's last step (after the learned fusion),
so the children stay right after their digest.
"""

from __future__ import annotations

from collections.abc import Sequence

from recall import Candidate
from tiers.semantic.vectors import MemoryPoint, PointFilter, VectorStore, admits

PARENTS = ("digest", "thread")
STEP = 1e-6  # a child scores this much below the hit before it


def expand(
    candidates: Sequence[Candidate], k: int, vectors: VectorStore, flt: PointFilter
) -> list[Candidate]:
    """``candidates`` (best first) with the children of the digests and threads among the
    first ``k`` after each (see the module's text); a child that is a digest itself (the
    story's periods) brings its own children after it."""
    ranked = {c.point.id: c for c in candidates}
    found: dict[str, MemoryPoint] = {}
    parents = [c.point for c in candidates[:k] if c.point.kind in PARENTS]
    for _level in range(2):  # the story's periods, then their summaries
        wanted = [i for p in parents for i in _children(p) if i not in found]
        if not wanted:
            break
        new = vectors.get(list(dict.fromkeys(wanted)), flt.user_id)
        found.update((p.id, p) for p in new)
        parents = [p for p in new if p.kind in PARENTS]
    if not found:
        return list(candidates)
    out: list[Candidate] = []
    placed: set[str] = set()

    def emit(c: Candidate, depth: int) -> None:
        out.append(c)
        placed.add(c.point.id)
        if c.point.kind not in PARENTS or depth > 1:
            return
        for child_id in _children(c.point):
            child = found.get(child_id)
            if child is None or child.id in placed or not admits(flt, child):
                continue
            known = ranked.get(child.id)
            score = out[-1].score - STEP
            emit(known or Candidate(child, score, c.fused, found_via=c.point.id), depth + 1)

    for position, c in enumerate(candidates):
        if c.point.id not in placed:
            emit(c, 0 if position < k else 2)
    return out


def _children(point: MemoryPoint) -> list[str]:
    """A digest's or thread's children, newest first."""
    return [str(i) for i in reversed(point.attrs.get("children") or [])]
