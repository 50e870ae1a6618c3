"""Session-level retrieval metrics of the RealMem benchmark (:mod:`tests.bench.realmem`), and
its plain BM25 reference.

A ranked list of memories becomes a ranked list of RealMem sessions: the hits in rank order,
each hit's sources in their order, the session each names (its metadata's ``session``, else
the session id's mapping), de-duplicated (the first occurrence wins), the query's own
session left out. Against a query's gold sessions:

- recall@k: the fraction of the gold sessions among the first k sessions of that list
  (:func:`tests.bench.locomo.metrics.recall_at`);
- any@k: 1 when at least one gold session is among the first k, else 0;
- coverage: the fraction of the gold sessions among a GetContext block's memories' sources.

Each is averaged over the queries of a persona, and over all queries (micro-average).

The reference (:class:`BM25`) is plain Okapi BM25 (k1 = 1.5, b = 0.75, IDF
``ln(1 + (N - df + 0.5) / (df + 0.5))``) in this process: one document per turn of the
sessions before the query's, the query turn as the query, tokens of lowercase letters, digits
and apostrophes (``[a-z0-9']+``: with them it gives the figures of ``../shared/README.md`` to
the decimal; ``\\w+`` gives 48.8 / 62.1 / 59.3 for 48.5 / 62.3 / 58.4).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from tests.bench.locomo.metrics import coverage, recall_at

KS = (5, 10)
ANY_K = 5
_TOKEN = re.compile(r"[a-z0-9']+")
__all__ = ["BM25", "any_at", "coverage", "query_scores", "recall_at", "sessions", "tokens"]


def sessions(
    groups: Iterable[Iterable[tuple[Mapping[str, str], str]]],
    own: str,
    by_session_id: Mapping[str, str] | None = None,
) -> list[str]:
    """The distinct sessions of ranked memories, in rank order, without ``own``. ``groups``
    holds, per memory, ``(metadata, session_id)`` of each of its sources; a source without a
    ``session`` entry in its metadata is mapped through ``by_session_id``."""
    by_session_id = by_session_id or {}
    out: dict[str, None] = {}
    for sources in groups:
        for metadata, session_id in sources:
            name = metadata.get("session") or by_session_id.get(session_id, "")
            if name and name != own:
                out.setdefault(name)
    return list(out)


def any_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    return 1.0 if set(gold).intersection(ranked[:k]) else 0.0


def query_scores(ranked: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """recall@k for :data:`KS` and any@:data:`ANY_K` of one query, as fractions."""
    scores = {f"r@{k}": recall_at(ranked, gold, k) for k in KS}
    scores[f"any@{ANY_K}"] = any_at(ranked, gold, ANY_K)
    return scores


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25:
    """Okapi BM25 over documents added one at a time (each labelled with its session); a
    search scores every document that shares a term with the query."""

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.labels: list[str] = []
        self.lengths: list[int] = []
        self.postings: dict[str, list[tuple[int, int]]] = {}  # term -> (doc, frequency)
        self.total_length = 0

    def add(self, label: str, text: str) -> None:
        doc = len(self.labels)
        terms = tokens(text)
        self.labels.append(label)
        self.lengths.append(len(terms))
        self.total_length += len(terms)
        for term, tf in Counter(terms).items():
            self.postings.setdefault(term, []).append((doc, tf))

    def search(self, query: str) -> list[int]:
        """Documents by descending score (ties: the earlier document), those scoring > 0."""
        n = len(self.labels)
        if not n:
            return []
        avg = self.total_length / n
        scores: dict[int, float] = {}
        for term in tokens(query):  # a repeated query term counts each time
            posting = self.postings.get(term)
            if not posting:
                continue
            df = len(posting)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            for doc, tf in posting:
                norm = self.k1 * (1.0 - self.b + self.b * self.lengths[doc] / avg)
                scores[doc] = scores.get(doc, 0.0) + idf * tf * (self.k1 + 1.0) / (tf + norm)
        return sorted(scores, key=lambda d: (-scores[d], d))

    def ranked_sessions(self, query: str) -> list[str]:
        """The distinct sessions of :meth:`search`'s documents, in rank order."""
        return list(dict.fromkeys(self.labels[d] for d in self.search(query)))
