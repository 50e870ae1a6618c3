"""Evidence-retrieval metrics of the LoCoMo recall benchmark: pure functions over dia_ids.

A Recall answer becomes one ranked list of LoCoMo turn ids: the hits in rank order, each hit's
sources in their order, the ``dia_id`` of each source's metadata, de-duplicated (the first
occurrence wins). Against a question's gold ids:

- recall@k: the fraction of the gold ids among the first k ids of that list;
- nDCG@10: binary relevance over the same list (each gold id counts once);
- recall at a token budget: the fraction of the gold ids among the sources of a Pack's items.

Each is averaged per question, then per category and over all questions.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tests.bench.locomo.data import CATEGORIES
from tests.bench.support.daemon import percentile

KS = (1, 5, 10, 25)
NDCG_K = 10


def dia_ids(groups: Iterable[Iterable[Mapping[str, str]]]) -> list[str]:
    """The ``dia_id`` of every source's metadata, hits in rank order, de-duplicated."""
    ids = (m["dia_id"] for sources in groups for m in sources if m.get("dia_id"))
    return list(dict.fromkeys(ids))


def recall_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    wanted = set(gold)
    return len(wanted.intersection(ranked[:k])) / len(wanted) if wanted else 0.0


def coverage(found: Iterable[str], gold: Sequence[str]) -> float:
    wanted = set(gold)
    return len(wanted.intersection(found)) / len(wanted) if wanted else 0.0


def ndcg_at(ranked: Sequence[str], gold: Sequence[str], k: int = NDCG_K) -> float:
    wanted = set(gold)
    if not wanted:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in wanted)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(wanted))))
    return dcg / ideal


def question_scores(ranked: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    scores = {f"r@{k}": recall_at(ranked, gold, k) for k in KS}
    scores[f"ndcg@{NDCG_K}"] = ndcg_at(ranked, gold)
    return scores


def by_category(rows: Sequence[tuple[int, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """``(category, per-question scores)`` rows -> mean scores (in %) and ``n`` per category
    name and ``"overall"``."""
    groups: dict[str, list[dict[str, float]]] = {"overall": []}
    for category, scores in rows:
        groups.setdefault(CATEGORIES.get(category, str(category)), []).append(scores)
        groups["overall"].append(scores)
    out: dict[str, dict[str, float]] = {}
    for name in [*CATEGORIES.values(), "overall"]:
        items = groups.get(name, [])
        if not items:
            continue
        means = {key: round(100.0 * statistics.fmean(s[key] for s in items), 1) for key in items[0]}
        out[name] = {"n": len(items), **means}
    return out


def latency(samples_ms: Sequence[float]) -> dict[str, float]:
    ms = sorted(samples_ms)
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "mean_ms": round(statistics.fmean(ms), 2) if ms else float("nan"),
    }


def stage_timings(per_request: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """stage -> mean and p50 ms over the requests that reported it (and how many did)."""
    stages: dict[str, list[float]] = {}
    for timings in per_request:
        for stage, ms in timings.items():
            stages.setdefault(stage, []).append(ms)
    return {
        stage: {
            "n": len(values),
            "mean_ms": round(statistics.fmean(values), 2),
            "p50_ms": round(percentile(sorted(values), 50), 2),
        }
        for stage, values in stages.items()
    }


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], markdown: bool = False) -> str:
    """A plain aligned table (first column left, the others right), or a Markdown one."""
    cells = [[_cell(v) for v in row] for row in rows]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in cells]
        return "\n".join(lines)
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]

    def line(values: Sequence[str]) -> str:
        first = f"{values[0]:<{widths[0]}}"
        rest = (f"{v:>{w}}" for v, w in zip(values[1:], widths[1:], strict=True))
        return "  " + "  ".join([first, *rest])

    return "\n".join([line([str(h) for h in header]), *(line(r) for r in cells)])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.1f}"
    return str(value)
