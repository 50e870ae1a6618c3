"""Train the learned fusion (:mod:`recall.learned`) on features the recall benchmarks record,
and measure it leave-one-conversation-out.

Run as ``python -m tests.bench.learned_fusion --locomo PATH --realmem PATH [--out PATH]
[--json PATH]`` (``make learned-fusion`` records the features, trains and writes
``recall/learned_fusion.json``). The inputs are the ``--features`` files of
``tests.bench.locomo`` and ``tests.bench.realmem``: every Recall of the full system (the
hand-set fusion: the benchmarks turn the learned one off while they record), each hit's
:data:`recall.learned.FEATURES` (computed from the hit on the wire by the same function the
daemon uses) and what it cites (LoCoMo ``dia_id`` s, RealMem sessions).

A hit is relevant when it cites gold evidence (a gold turn; a gold session). The model is a
logistic regression with L2 regularisation over standardized features (Newton's method in
numpy: no other dependency). It is measured leave-one-group-out over the ten groups (the five
LoCoMo conversations and the five RealMem personas): for each group, a model trained on the
nine others reorders that group's hits as the daemon would (RRF of the hand-set order and the
model's), and the benchmark's own scores are computed before and after. The regularisation
strength is chosen the same way, inside each fold, from :data:`STRENGTHS`; the model written
is trained on all ten groups with the strength most folds chose.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recall import learned
from recall.learned import FEATURES, HitView, LearnedFusion
from tests.bench.locomo.metrics import recall_at
from tests.bench.support.daemon import command_line, machine_info, write_json
from tiers.semantic.graph import normalize

STRENGTHS = (0.001, 0.01, 0.1, 1.0)  # L2 penalty per training row, standardized features
KS = (1, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


# -- recording (the benchmarks call these) ----------------------------------------------------
def view(hit: Any) -> HitView:
    """The :class:`HitView` of a ``strata.v1.Hit`` returned with its explanation."""
    e = hit.explanation
    return HitView(
        hit.kind,
        hit.text,
        hit.score,
        e.fused,
        {c.channel: c.rank for c in e.channels},
        {c.channel: c.score for c in e.channels},
        bool(e.found_via),
        frozenset(normalize(s.speaker) for s in hit.sources if s.speaker),
    )


class FeatureLog:
    """The features of every hit of the Recalls a benchmark makes, and what each cites."""

    def __init__(self, dataset: str) -> None:
        self.dataset = dataset
        self.queries: list[dict[str, Any]] = []

    def add(
        self,
        group: str,
        qid: str,
        query: str,
        named: Iterable[str],
        hits: Sequence[Any],
        keys: Sequence[Sequence[str]],
        gold: Sequence[str],
        **extra: Any,
    ) -> None:
        """One Recall: ``hits`` on the wire, ``keys[i]`` what hit ``i`` cites."""
        words = learned.query_words(query)
        names = frozenset(named)
        rows = [
            {"x": learned.features(words, names, view(h), i), "keys": list(k)}
            for i, (h, k) in enumerate(zip(hits, keys, strict=True))
        ]
        self.queries.append(
            {"group": f"{self.dataset}/{group}", "qid": qid, "gold": list(gold), "hits": rows}
            | extra
        )

    def write(self, path: Path) -> None:
        doc = {"dataset": self.dataset, "features": list(FEATURES), "queries": self.queries}
        write_json(path, doc, indent=None)
        print(f"wrote the features of {len(self.queries)} queries to {path}")


# -- training ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Query:
    dataset: str
    group: str
    gold: frozenset[str]
    own: str  # RealMem: the query's own session (never counted)
    category: int  # LoCoMo: the question's category
    x: np.ndarray  # hits x features, in the hand-set order
    keys: tuple[tuple[str, ...], ...]

    @property
    def labels(self) -> np.ndarray:
        return np.array([1.0 if self.gold.intersection(k) else 0.0 for k in self.keys])


def read(paths: Iterable[Path]) -> list[Query]:
    out = []
    for path in paths:
        doc = json.loads(path.read_text())
        if doc["features"] != list(FEATURES):
            raise SystemExit(f"{path} holds other features than this version's; record again")
        for q in doc["queries"]:
            x = np.array([h["x"] for h in q["hits"]], dtype=float).reshape(-1, len(FEATURES))
            out.append(
                Query(
                    doc["dataset"],
                    q["group"],
                    frozenset(q["gold"]),
                    q.get("own", ""),
                    int(q.get("category", 0)),
                    x,
                    tuple(tuple(h["keys"]) for h in q["hits"]),
                )
            )
    return out


def fit(queries: Sequence[Query], strength: float, steps: int = 50) -> LearnedFusion:
    """Logistic regression of relevance on standardized features, L2 ``strength`` per row,
    by Newton's method."""
    x = np.vstack([q.x for q in queries])
    y = np.concatenate([q.labels for q in queries])
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(z.shape[1])
    penalty = strength * len(x) * np.eye(z.shape[1])
    penalty[0, 0] = 0.0  # the intercept is not shrunk
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        gradient = z.T @ (p - y) + penalty @ w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return LearnedFusion(
        tuple(float(v) for v in w[1:]),
        float(w[0]),
        tuple(float(v) for v in mean),
        tuple(float(v) for v in scale),
    )


def ranked(q: Query, order: Sequence[int]) -> list[str]:
    """What the benchmark scores: the distinct keys of the hits in ``order``."""
    return list(dict.fromkeys(k for i in order for k in q.keys[i] if k and k != q.own))


def reordered(model: LearnedFusion, q: Query) -> list[int]:
    """The hits' order in the daemon: RRF of the hand-set order and the model's (the same
    rule as :meth:`recall.learned.LearnedFusion.reorder`)."""
    n = len(q.keys)
    z = (q.x - np.array(model.mean)) / np.array(model.scale)
    scores = list(z @ np.array(model.coef) + model.intercept)  # model.score, row by row
    by_model = sorted(range(n), key=lambda i: (-scores[i], i))
    place = {i: r for r, i in enumerate(by_model, 1)}
    k = model.mix_k
    return sorted(range(n), key=lambda i: (-(1 / (k + i + 1) + 1 / (k + place[i])), i))


def scores(q: Query, order: Sequence[int]) -> dict[str, float]:
    got = ranked(q, order)
    return {f"r@{k}": recall_at(got, sorted(q.gold), k) for k in KS}


def mean(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    return (
        {k: round(100 * statistics.fmean(r[k] for r in rows), 1) for k in rows[0]} if rows else {}
    )


def choose(train: Sequence[Query]) -> float:
    """The strength that does best leave-one-group-out inside ``train`` (the mean of R@1, R@5
    and R@10 over its groups, each dataset weighted alike)."""
    groups = sorted({q.group for q in train})
    best, best_value = STRENGTHS[0], -1.0
    for strength in STRENGTHS:
        per: dict[str, list[float]] = {}
        for held in groups:
            model = fit([q for q in train if q.group != held], strength)
            for q in (q for q in train if q.group == held):
                s = scores(q, reordered(model, q))
                per.setdefault(q.dataset, []).append(statistics.fmean(s.values()))
        value = statistics.fmean(statistics.fmean(v) for v in per.values())
        if value > best_value:
            best, best_value = strength, value
    return best


def evaluate(queries: Sequence[Query], nested: bool) -> dict[str, Any]:
    """Leave one group out: for each group, the model of the others (its strength chosen
    inside them when ``nested``, else the middle one) on that group, before and after."""
    groups = sorted({q.group for q in queries})
    before: dict[str, list[dict[str, float]]] = {}
    after: dict[str, list[dict[str, float]]] = {}
    chosen: dict[str, float] = {}
    for held in groups:
        train = [q for q in queries if q.group != held]
        strength = choose(train) if nested else STRENGTHS[len(STRENGTHS) // 2]
        chosen[held] = strength
        model = fit(train, strength)
        for q in (q for q in queries if q.group == held):
            keys = [q.dataset, held]
            if q.dataset == "locomo":
                keys.append(f"locomo:{CATEGORIES.get(q.category, q.category)}")
            for key in keys:
                before.setdefault(key, []).append(scores(q, range(len(q.keys))))
                after.setdefault(key, []).append(scores(q, reordered(model, q)))
    return {
        "rows": {k: {"n": len(before[k]), "before": mean(before[k]), "after": mean(after[k])}
                 for k in before},
        "chosen": chosen,
    }  # fmt: skip


# -- report -------------------------------------------------------------------------------------
def render(res: Mapping[str, Any]) -> str:
    lines = [
        f"Learned fusion, leave one group out ({res['date']}, {res['machine']}): "
        f"{res['queries']} queries, {res['hits']:,} hits; R@1 / R@5 / R@10 before -> after",
        "",
        "| rows | n | hand-set fusion | learned (RRF with the hand-set order) |",
        "|---|---|---|---|",
    ]

    def fmt(r: Mapping[str, float]) -> str:
        return " / ".join(f"{r[f'r@{k}']:.1f}" for k in KS)

    def place(key: str) -> tuple[int, str]:
        dataset, _, rest = key.partition(":") if ":" in key else key.partition("/")
        kind = 0 if not rest else 1 if ":" in key else 2
        order = list(CATEGORIES.values())
        return (
            0 if dataset == "locomo" else 1,
            f"{kind}{order.index(rest) if kind == 1 else rest}",
        )

    for key, row in sorted(res["loco"]["rows"].items(), key=lambda kv: place(kv[0])):
        b, a = row["before"], row["after"]
        lines.append(f"| {key} | {row['n']} | {fmt(b)} | {fmt(a)} |")
    chosen = Counter(res["loco"]["chosen"].values())
    lines += [
        "",
        f"Strength chosen inside the folds: {dict(sorted(chosen.items()))}; the model written "
        f"uses {res['strength']}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.learned_fusion", __doc__)
    parser.add_argument("--locomo", type=Path, required=True, help="tests.bench.locomo --features")
    parser.add_argument(
        "--realmem", type=Path, required=True, help="tests.bench.realmem --features"
    )
    parser.add_argument("--out", type=Path, help="write the model trained on every group here")
    args = parser.parse_args(argv)
    queries = [q for q in read([args.locomo, args.realmem]) if q.keys]
    loco = evaluate(queries, nested=True)
    strength = Counter(loco["chosen"].values()).most_common(1)[0][0]
    res = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info().get("cpu", "?"),
        "queries": len(queries),
        "hits": sum(len(q.keys) for q in queries),
        "strength": strength,
        "loco": loco,
    }
    print(render(res))
    write_json(args.json, res, indent=1)
    if args.out:
        model = fit(queries, strength)
        trained = {k: res[k] for k in ("date", "machine", "queries", "hits", "strength")}
        trained["loco"] = {k: v for k, v in loco["rows"].items() if k in ("locomo", "realmem")}
        doc = LearnedFusion(model.coef, model.intercept, model.mean, model.scale,
                            model.mix_k, trained).to_json()  # fmt: skip
        write_json(args.out, doc, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
