"""A learned fusion: a small model that reorders Recall's hits, shipped as recipe data.

The hand-set fusion (RRF over channels, :mod:`recall.fusion`) ranks the hits; this module
scores each of them with a linear model over what the engine already knows of it
(:data:`FEATURES`: its rank and scores, the channels that found it and where, its kind, how
many of the query's content words it holds, whether it asks a question, whether the query
names its speaker or another one), and fuses the two orders by RRF: a hit both orders rank
high stays first, one only the model likes moves up a little. The fused order's scores stay
where they were, in order.

The model is a file (:class:`LearnedFusion`): the features it was trained on by name, their
standardization, its weights, and how it was measured. ``tests/bench/learned_fusion.py``
trains it, leave-one-conversation-out, on features the benchmarks record
(``--features``) and writes it; the one shipped (:data:`BUILTIN`, recipe value
``"builtin"``) was trained on the LoCoMo dev split and the RealMem dev personas. The recipe's
``learned_fusion`` names it (empty: off, the hand-set order alone).

:func:`features` reads a :class:`HitView`, built from an engine candidate
(:meth:`HitView.of`) or, by the training script, from a hit on the wire with its
explanation: one function for both, so the model sees in the daemon what it was trained on.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from recall import Candidate
from recall.fusion import rrf
from recall.words import content_words
from tiers.semantic.graph import normalize

FORMAT = "strata.learned_fusion/1"
BUILTIN = Path(__file__).with_name("learned_fusion.json")
RANK_K = 20  # the k of a channel rank's reciprocal (as RRF's)
CHANNELS = ("vector", "keyword", "graph", "vector:neutral", "keyword:neutral")
COSINE = ("vector", "vector:neutral")  # channels whose own score is bounded (a cosine)
KINDS = ("episode_turn", "episode_chunk", "summary", "fact", "profile", "document")
FEATURES: tuple[str, ...] = (
    "inverse_position",
    "log_position",
    "score",
    "fused",
    *(f"{c}.reciprocal_rank" for c in CHANNELS),
    *(f"{c}.found" for c in CHANNELS),
    *(f"{c}.cosine" for c in COSINE),
    *(f"kind.{k}" for k in KINDS),
    "found_via",
    "query_overlap",
    "log_length",
    "asks",
    "names_a_speaker",
    "names_its_speaker",
    "names_another_speaker",
)


class LearnedFusionError(ValueError):
    """A learned fusion file that cannot be used: missing, unreadable, of another format, or
    trained on other features than :data:`FEATURES`."""


@dataclass(frozen=True, slots=True)
class HitView:
    """What :func:`features` reads of one hit."""

    kind: str
    text: str
    score: float
    fused: float
    ranks: Mapping[str, int]  # channel -> 1-based rank
    channel_scores: Mapping[str, float]  # channel -> its own score
    found_via: bool  # the hit is a message another hit (a chunk, a summary) brought in
    speakers: frozenset[str]  # its sources' speakers, normalized

    @classmethod
    def of(cls, c: Candidate) -> HitView:
        return cls(
            c.point.kind,
            c.point.text,
            c.score,
            c.fused,
            c.ranks,
            c.channel_scores,
            bool(c.found_via),
            frozenset(normalize(s.speaker) for s in c.point.sources if s.speaker),
        )


def features(
    query_words: set[str], named: Collection[str], hit: HitView, position: int
) -> list[float]:
    """The values of :data:`FEATURES` for ``hit`` at 0-based ``position`` of the fused
    order. ``query_words``: the query's content stems (:func:`query_words`); ``named``: the
    scope's speakers the query names (:func:`recall.cues.speakers.mentioned`)."""
    out = [1.0 / (1 + position), math.log1p(position), hit.score, hit.fused]
    out += [1.0 / (RANK_K + hit.ranks[c]) if c in hit.ranks else 0.0 for c in CHANNELS]
    out += [1.0 if c in hit.ranks else 0.0 for c in CHANNELS]
    out += [hit.channel_scores.get(c, 0.0) if c in hit.ranks else 0.0 for c in COSINE]
    out += [1.0 if hit.kind == k else 0.0 for k in KINDS]
    found = content_words(hit.text, among=query_words) if query_words else set()
    overlap = len(found) / len(query_words) if query_words else 0.0
    out += [1.0 if hit.found_via else 0.0, overlap, math.log1p(len(hit.text))]
    out.append(1.0 if "?" in hit.text else 0.0)
    its = bool(named) and not hit.speakers.isdisjoint(named)
    out += [1.0 if named else 0.0, 1.0 if its else 0.0, 1.0 if named and not its else 0.0]
    return out


def query_words(text: str) -> set[str]:
    return content_words(text)


@dataclass(frozen=True, slots=True)
class LearnedFusion:
    """A linear model over standardized :data:`FEATURES`, and the k of the RRF that fuses its
    order with the hand-set one."""

    coef: tuple[float, ...]
    intercept: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    mix_k: int = RANK_K
    trained: Mapping[str, Any] = field(default_factory=dict)  # how it was made and measured

    def score(self, values: Sequence[float]) -> float:
        return self.intercept + sum(
            c * (v - m) / s
            for c, v, m, s in zip(self.coef, values, self.mean, self.scale, strict=True)
        )

    def reorder(
        self, hits: Sequence[Candidate], query_text: str, named: Collection[str]
    ) -> list[Candidate]:
        """``hits`` (the fused order, best first) in the order of RRF over that order and the
        model's; ties keep the fused order; the scores stay where they were. Pure."""
        if len(hits) < 2:
            return list(hits)
        words = query_words(query_text)
        scores = [self.score(features(words, named, HitView.of(h), i)) for i, h in enumerate(hits)]
        ids = [str(i) for i in range(len(hits))]
        learned = sorted(ids, key=lambda i: (-scores[int(i)], int(i)))
        fused = {f.id: f.score for f in rrf({"fused": ids, "learned": learned}, None, self.mix_k)}
        order = sorted(range(len(hits)), key=lambda i: (-fused[str(i)], i))
        return [replace(hits[i], score=h.score) for i, h in zip(order, hits, strict=True)]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "features": list(FEATURES),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "mean": list(self.mean),
            "scale": list(self.scale),
            "mix_k": self.mix_k,
            "trained": dict(self.trained),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LearnedFusion:
        """Raises :class:`LearnedFusionError` for another format or other features."""
        if doc.get("format") != FORMAT:
            raise LearnedFusionError(f"format is {doc.get('format')!r}, not {FORMAT!r}")
        if list(doc.get("features", [])) != list(FEATURES):
            raise LearnedFusionError(
                "trained on other features than this version computes; train it again "
                "(tests/bench/learned_fusion.py)"
            )
        try:
            n = len(FEATURES)
            values = {k: tuple(float(x) for x in doc[k]) for k in ("coef", "mean", "scale")}
            if any(len(v) != n for v in values.values()):
                raise ValueError(f"coef, mean and scale need {n} values each")
            if any(not s > 0 for s in values["scale"]):
                raise ValueError("every scale must be > 0")
            mix_k = int(doc.get("mix_k", RANK_K))
            if mix_k < 0:
                raise ValueError("mix_k must not be negative")
            return cls(
                values["coef"],
                float(doc["intercept"]),
                values["mean"],
                values["scale"],
                mix_k,
                dict(doc.get("trained", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise LearnedFusionError(f"not a learned fusion model: {exc}") from exc


_lock = threading.Lock()
_loaded: dict[str, LearnedFusion] = {}


def load(name: str) -> LearnedFusion:
    """The model a recipe's ``learned_fusion`` names: ``"builtin"`` (:data:`BUILTIN`) or a
    file's path; read once per process. Raises :class:`LearnedFusionError`."""
    path = BUILTIN if name == "builtin" else Path(name).expanduser()
    key = str(path)
    with _lock:
        found = _loaded.get(key)
    if found is not None:
        return found
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise LearnedFusionError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise LearnedFusionError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise LearnedFusionError(f"{path} holds no JSON object")
    try:
        model = LearnedFusion.from_json(doc)
    except LearnedFusionError as exc:
        raise LearnedFusionError(f"{path}: {exc}") from exc
    with _lock:
        _loaded[key] = model
    return model
