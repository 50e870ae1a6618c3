"""Reciprocal Rank Fusion and Maximal Marginal Relevance: small pure functions."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Fused:
    id: str
    score: float
    ranks: dict[str, int]  # channel -> 1-based rank in that channel


def rrf(
    rankings: Mapping[str, Sequence[str]],
    weights: Mapping[str, float] | None = None,
    k: int = 60,
) -> list[Fused]:
    """``score(d) = Σ_c w_c / (k + rank_c(d))`` over the channels ``c`` that ranked ``d``.

    ``rankings`` maps a channel to its ids, best first (a repeated id keeps its best rank);
    a channel without a weight counts 1.0. Ties are broken by the best single rank, then by
    the number of channels, then by id, so the order is deterministic.
    """
    if k < 0:
        raise ValueError("k must not be negative")
    weights = weights or {}
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for channel, ids in rankings.items():
        weight = weights.get(channel, 1.0)
        seen: set[str] = set()
        rank = 0
        for item in ids:
            if item in seen:
                continue
            seen.add(item)
            rank += 1
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            ranks.setdefault(item, {})[channel] = rank
    fused = [Fused(item, score, ranks[item]) for item, score in scores.items()]
    fused.sort(key=lambda f: (-f.score, min(f.ranks.values()), -len(f.ranks), f.id))
    return fused


def mmr(
    ids: Sequence[str],
    relevance: Mapping[str, float],
    similarity: Callable[[str, str], float],
    k: int,
    lambda_: float = 0.7,
) -> list[str]:
    """Pick ``k`` ids maximising ``λ·relevance - (1-λ)·max similarity to those picked``.

    ``lambda_ = 1`` keeps the relevance order; lower values favour diversity. Ties keep the
    input order.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError("lambda_ must be between 0 and 1")
    remaining = list(dict.fromkeys(ids))
    picked: list[str] = []
    while remaining and len(picked) < k:
        best, best_value = remaining[0], float("-inf")
        for item in remaining:
            redundancy = max((similarity(item, p) for p in picked), default=0.0)
            value = lambda_ * relevance.get(item, 0.0) - (1.0 - lambda_) * redundancy
            if value > best_value:
                best, best_value = item, value
        picked.append(best)
        remaining.remove(best)
    return picked
