"""Precise provenance: each hit lists first the source messages that match the query best.

A chunk cites every turn of its window, a summary the turns it was drawn from; a reader (or an
agent drilling down, or an evaluation counting turns) wants the turn that answers first. Each
source is scored by the query's content words it contains, each weighted by how rare it is
among the candidate turns (an IDF over the turns at hand, so no corpus statistics are kept).
A source's text comes from the candidates themselves: chunk points carry their turns' text,
and a summary's or fact's source borrows it from any candidate that cites the same turn.
Sources that match nothing keep their conversation order, after the ones that match. A hit
whose sources are all a better hit's is the same evidence: it merges into that one
(:func:`merge_by_sources`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from recall import Candidate
from recall.expansion import PARENTS
from recall.words import content_stems, stem, tokens
from tiers.semantic.vectors import Source, source_key

Key = tuple[str, int]  # (session_id, seq)


_WORD = re.compile(r"[\w']+")


def _found(text: str, wanted: set[str]) -> set[str]:
    """The stems of ``wanted`` that ``text`` contains (a lean pass: this runs on every source
    of every returned hit, so only words that could be wanted are stemmed)."""
    initials = {w[0] for w in wanted}
    out = set()
    for word in _WORD.findall(text.replace("\u2019", "'").lower()):
        if word[0] in initials:
            root = stem(word.strip("'"))
            if root in wanted:
                out.add(root)
    return out


def source_scores(query: str, texts: dict[Key, str]) -> dict[Key, float]:
    """Each turn's IDF-weighted count of the query's content words (pure)."""
    wanted = content_stems(tokens(query))
    if not wanted:
        return {}
    words = {key: _found(text, wanted) for key, text in texts.items()}
    df = Counter(w for found in words.values() for w in found)
    n = len(texts) + 1
    return {key: sum(math.log(n / df[w]) for w in found) for key, found in words.items()}


def order_sources(candidates: Sequence[Candidate], query: str) -> list[Candidate]:
    """The candidates with each point's sources ordered by :func:`source_scores`, best first
    (a stable sort: ties keep their order). Points are copied, never changed in place."""
    texts: dict[Key, str] = {}
    for c in candidates:
        for s in c.point.sources:
            if s.text:
                texts.setdefault((s.session_id, s.seq), s.text)
    scores = source_scores(query, texts)
    if not scores:
        return list(candidates)

    def rank(s: Source) -> float:
        return -scores.get((s.session_id, s.seq), 0.0)

    out = []
    for c in candidates:
        sources = c.point.sources
        ordered = sorted(sources, key=rank)
        if len(sources) > 1 and ordered != sources:
            c = replace(c, point=replace(c.point, sources=ordered))
        out.append(c)
    return out


def merge_by_sources(candidates: list[Candidate]) -> list[Candidate]:
    """A hit whose source messages are all among a better hit's sources is the same
    evidence: it merges into the better one (ids kept in ``merged_ids``), which keeps its
    text. Digests and threads neither merge nor take others in: each tells its own part of
    the story over many messages. Candidates must be sorted best first.

    A better hit that holds all of a hit's sources holds its first: only the hits kept so far
    that cite that message are compared, the best first. The candidates of 300 Recalls of the
    1M store's 200,000-point user (135 each on average), replayed: 0.26 ms at p50, against
    0.57 comparing each hit with every better one (2026-12-07)."""
    kept: list[Candidate] = []
    keys_of: list[set[Key]] = []
    citing: dict[Key, list[int]] = {}  # a message -> the kept hits that cite it, best first
    for candidate in candidates:
        point = candidate.point
        if point.kind in PARENTS or not point.sources:
            kept.append(candidate)
            keys_of.append(set())
            continue
        keys = {source_key(point, s) for s in point.sources}
        for better in citing.get(source_key(point, point.sources[0]), ()):
            if keys <= keys_of[better]:
                kept[better].merged_ids.append(point.id)
                break
        else:
            for key in keys:
                citing.setdefault(key, []).append(len(kept))
            kept.append(candidate)
            keys_of.append(keys)
    return kept
