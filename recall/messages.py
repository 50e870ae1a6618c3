"""Hits of one message each, and the graph channel fused over messages.

Recall is judged, and read, by the messages its hits cite: a chunk of three turns spends
three evidence slots. With the recipe's ``per_message`` on, the engine's ranked candidates
(vector and keyword fused over points, sources ordered best first) are flattened into the
messages they cite, in order; the graph channel's memories are flattened the same way and
join that order by RRF over messages (:func:`fuse_messages`: a message both find adds up,
whichever points found it). Each message then becomes one hit (:func:`message_hits`): the
candidate that cites it alone (its ``episode_turn`` point, or a fact drawn from it), or its
``episode_turn`` point fetched from the store; a message without one (turns not indexed)
keeps the multi-message hit that cites it, once.

With the recipe's ``answers_first`` (on by default), a reply ranks just above the question it
answers when both are hits (:func:`answers_first`): a question finds the turn that asked it,
whose words it echoes, while what the asker learned is in the next turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from recall import Candidate
from recall.fusion import rrf
from tiers.semantic.vectors import (
    STANDALONE,
    MemoryPoint,
    PointFilter,
    VectorStore,
    admits,
    source_key,
    turn_point_id,
)

Key = tuple[
    str, int
]  # (session_id, seq); a keyed document's own (tiers.semantic.vectors.source_key)


def flatten(points: Sequence[MemoryPoint]) -> list[Key]:
    """The messages the points cite, in order, each once."""
    return list(dict.fromkeys(source_key(p, s) for p in points for s in p.sources))


def fuse_messages(
    ranked: Sequence[Candidate],
    graph: Sequence[tuple[MemoryPoint, float]],
    graph_weight: float,
    k: int,
) -> list[tuple[Key, float]]:
    """RRF over messages of the fused candidates (weight 1) and the graph channel's
    memories (``graph_weight``), best first (pure)."""
    lists = {"fused": flatten([c.point for c in ranked]), "graph": flatten([p for p, _ in graph])}
    names = {f"{s}\x00{q}": (s, q) for keys in lists.values() for s, q in keys}
    rankings = {name: [f"{s}\x00{q}" for s, q in keys] for name, keys in lists.items()}
    return [(names[f.id], f.score) for f in rrf(rankings, {"graph": graph_weight}, k)]


def message_hits(
    order: Sequence[tuple[Key, float]],
    candidates: Sequence[Candidate],
    vectors: VectorStore,
    flt: PointFilter,
    k: int,
) -> list[Candidate]:
    """Up to ``k`` hits, one per message of ``order`` (see the module's text)."""
    alone: dict[Key, Candidate] = {}
    within: dict[Key, Candidate] = {}
    for c in candidates:
        if len(c.point.sources) == 1 or (c.point.sources and c.point.kind in STANDALONE):
            alone.setdefault(source_key(c.point, c.point.sources[0]), c)
        for s in c.point.sources:
            within.setdefault(source_key(c.point, s), c)
    wanted = [m for m, _ in order[:k] if m not in alone and m in within]
    turns_ok = not flt.kinds or "episode_turn" in flt.kinds
    turns = _turn_points(vectors, flt, [(m, within[m]) for m in wanted]) if turns_ok else {}
    out: list[Candidate] = []
    covered: set[Key] = set()
    used: set[str] = set()
    for message, score in order:
        if len(out) >= k:
            break
        if message in covered:
            continue
        hit = alone.get(message)
        if hit is None and message in turns:
            source = within[message]
            hit = replace(source, point=turns[message], merged_ids=[], found_via=source.point.id)
        if hit is None:
            hit = within.get(message)
            if hit is None:
                continue
        if hit.point.id in used:
            continue
        used.add(hit.point.id)
        covered.update(source_key(hit.point, s) for s in hit.point.sources)
        out.append(replace(hit, score=score))
    return out


def answers_first(hits: Sequence[Candidate]) -> list[Candidate]:
    """``hits`` with each reply moved just above the question turn it answers: a hit that is
    one ``episode_turn`` whose text holds a question mark, and the hit of the next message of
    its session, when that ranks lower. One level: a moved reply brings nothing of its own up.
    The scores stay where they were, in order (the moved hit takes its new place's). Pure."""
    turns: dict[Key, int] = {}
    for i, h in enumerate(hits):
        if h.point.kind == "episode_turn" and len(h.point.sources) == 1:
            turns.setdefault(source_key(h.point, h.point.sources[0]), i)
    reply_of: dict[int, int] = {}
    for (session, seq), i in turns.items():
        reply = turns.get((session, seq + 1))
        if reply is not None and reply > i and "?" in hits[i].point.text:
            reply_of[i] = reply
    placed: set[int] = set()
    order: list[int] = []
    for i in range(len(hits)):
        if i in placed:
            continue
        reply = reply_of.get(i)
        if reply is not None and reply not in placed:
            order.append(reply)
            placed.add(reply)
        order.append(i)
        placed.add(i)
    return [replace(hits[i], score=h.score) for i, h in zip(order, hits, strict=True)]


def _turn_points(
    vectors: VectorStore, flt: PointFilter, holders: Sequence[tuple[Key, Candidate]]
) -> dict[Key, MemoryPoint]:
    """The ``episode_turn`` points of these messages, by id (computed from the holders'
    sources, which carry the text on chunk points), through the filter."""
    ids: dict[str, Key] = {}
    for message, holder in holders:
        for s in holder.point.sources:
            if source_key(holder.point, s) == message and s.text:
                ids[turn_point_id(holder.point.scope, s)] = message
    if not ids:
        return {}
    found = vectors.get(list(ids), flt.user_id)
    return {ids[p.id]: p for p in found if p.id in ids and admits(flt, p)}
