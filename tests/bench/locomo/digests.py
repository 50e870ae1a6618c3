"""The digests of the LoCoMo benchmark (:mod:`tests.bench.locomo`) beside the dataset's own
summaries: after the ingest, each conversation's episode summaries and digests
(``tiers.semantic.digests``) are read through the API (Recall of the kinds, GetNode for a
digest's children) and set beside LoCoMo's ``session_summary`` and ``event_summary``:

- ROUGE-L F1 (longest common subsequence of lower-cased words): an episode summary against
  its session's ``session_summary`` and its events; a period digest against the summaries
  (and events) of the sessions it covers, joined; the story against the newest
  ``story_periods`` periods' sessions, joined;
- evidence coverage: the share of the gold evidence turns of the conversation's questions
  that are among the sources of the summaries, of the period digests, of the story.

The figures are of the daemon's configured digests: extractive without an LLM (the bench has
none). Nothing here is tuned: it measures.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from typing import Any

from stratad_client import MemoryClient
from tests.bench.locomo.data import LOCOMO_DIR, Conversation

_WORD = re.compile(r"[a-z0-9']+")


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 of two texts, on lower-cased words."""
    a, b = _WORD.findall(candidate.lower()), _WORD.findall(reference.lower())
    if not a or not b:
        return 0.0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    p, r = lcs / len(a), lcs / len(b)
    return 2 * p * r / (p + r)


def _references(sample_id: str) -> tuple[dict[int, str], dict[int, str]]:
    """Session number -> LoCoMo's session summary, and its events joined."""
    data = json.loads((LOCOMO_DIR / "locomo_dev.json").read_text())
    sample = next(s for s in data if s["sample_id"] == sample_id)
    summaries = {int(k.split("_")[1]): v for k, v in sample["session_summary"].items() if v}
    events = {}
    for key, value in sample["event_summary"].items():
        said = [e for who, es in value.items() if who != "date" for e in es]
        events[int(key.split("_")[-1])] = " ".join(said)
    return summaries, events


def measure(client: MemoryClient, conversations: Sequence[Conversation]) -> dict[str, float]:
    """The figures (means over pieces, or over conversations for coverage and counts)."""
    rows: dict[str, list[float]] = {}
    for conv in conversations:
        for key, values in _conversation(client, conv).items():
            rows.setdefault(key, []).extend(values)
    return {
        k: round(statistics.fmean(v) * (1 if k in COUNTS else 100), 1)
        for k, v in sorted(rows.items())
        if v
    }


COUNTS = ("periods", "story_words", "period_words")


def _listed(client: MemoryClient, user: str, kind: str) -> list[Any]:
    return list(client.recall("what happened", user_id=user, k=100, kinds=[kind]).hits)


def _covered(gold: set[str], hits: Sequence[Any]) -> float:
    found = {s.metadata.get("dia_id") for h in hits for s in h.sources}
    return len(gold & found) / len(gold) if gold else 0.0


def _conversation(client: MemoryClient, conv: Conversation) -> dict[str, list[float]]:
    summaries_ref, events_ref = _references(conv.sample_id)
    number = {conv.session_id(s): s.number for s in conv.sessions}
    user = conv.user_id
    gold = {e for q in conv.questions for e in q.evidence}
    rows: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        rows.setdefault(key, []).append(value)

    def against(prefix: str, text: str, sessions: Sequence[int]) -> None:
        ref = " ".join(summaries_ref[n] for n in sessions if n in summaries_ref)
        if ref:
            add(f"{prefix}_vs_session_summary", rouge_l(text, ref))
        events = " ".join(events_ref[n] for n in sessions if events_ref.get(n))
        if events:
            add(f"{prefix}_vs_events", rouge_l(text, events))

    summaries = _listed(client, user, "summary")
    for h in summaries:
        if h.session_id in number:
            against("summary", h.text, [number[h.session_id]])
    add("summary_evidence", _covered(gold, summaries))
    digests = _listed(client, user, "digest")
    periods = [h for h in digests if h.attrs.get("level") == "period"]
    sessions_of: dict[str, list[int]] = {}
    for h in periods:
        children = client.get_node(h.id, user_id=user).children
        sessions_of[h.id] = sorted(
            {number[c.session_id] for c in children if c.session_id in number}
        )
        against("period", h.text, sessions_of[h.id])
        add("period_words", len(h.text.split()))
    stories = [h for h in digests if h.attrs.get("level") == "story"]
    for h in stories:
        children = client.get_node(h.id, user_id=user).children
        against("story", h.text, sorted({n for c in children for n in sessions_of.get(c.id, [])}))
        add("story_words", len(h.text.split()))
    add("period_evidence", _covered(gold, periods))
    add("story_evidence", _covered(gold, stories))
    add("periods", len(periods))
    return rows
