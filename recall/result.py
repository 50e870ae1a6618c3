"""What a recall returns: the ranked hits with their timings and notes.

Its own module so that the engine (:mod:`recall.engine`), which produces it, and the
semantic cache (:mod:`recall.cache`), which keeps it, need not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recall import Candidate


@dataclass(slots=True)
class RecallResult:
    """``weights``: the RRF weight of every list the hits were fused from (the channels',
    and those a query's cues added, :mod:`recall.cues.searches`), for an explanation."""

    hits: list[Candidate]
    timings: dict[str, float] = field(default_factory=dict)
    rerank: str = "none"
    rerank_note: str = ""
    degraded: list[str] = field(default_factory=list)
    cached: bool = False
    weights: dict[str, float] = field(default_factory=dict)
