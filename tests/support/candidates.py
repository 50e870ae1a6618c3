"""Recall candidates for the reranker tests (``tests/recall/test_rerank.py``,
``tests/contracts/test_reranker.py``): a point with its channel ranks and its RRF score."""

from __future__ import annotations

from recall import Candidate
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint

T0 = 1_715_000_000 * 1_000_000  # 2024-05-06


def cand(
    pid: str,
    text: str,
    ranks: dict[str, int],
    *,
    kind: str = "fact",
    created_at_us: int = T0,
    valid_to_us: int | None = None,
    dense: list[float] | None = None,
    k: int = 60,
) -> Candidate:
    point = MemoryPoint(
        id=pid,
        kind=kind,
        text=text,
        scope=Scope("u1"),
        episode_id="e1",
        session_id="s1",
        sources=[],
        created_at_us=created_at_us,
        extractor="local",
        valid_to_us=valid_to_us,
        dense=dense,
    )
    fused = sum(1.0 / (k + r) for r in ranks.values())
    return Candidate(point=point, score=fused, fused=fused, ranks=dict(ranks))
