"""Pack: the best memories for a query within a token budget, formatted for a prompt.

Each item is one line block: ``[kind · date · speaker] text`` (a keyed document:
``[document · date · namespace/key] text``); a superseded fact says since when it no longer
holds. Items are taken in rank order while they fit; one that does not fit is skipped and
smaller ones after it may still fit. Tokens are counted as everywhere in Strata
(:mod:`tiers.core.tokens`), and the block never exceeds the budget. The Pack call
(:func:`pack_recalled`) packs a recall's hits on the engine's request thread and counts what
the block hands out (:mod:`recall.context.access`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from recall import Candidate
from recall.context.access import record_handed
from recall.result import RecallResult
from tiers.core.tokens import count_tokens
from tiers.keyed.access import AccessCounts

LABELS = {
    "fact": "fact",
    "summary": "summary",
    "episode_chunk": "conversation",
    "episode_turn": "conversation",
}


@dataclass(frozen=True, slots=True)
class PackItem:
    candidate: Candidate
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Packed:
    text: str
    tokens: int
    items: list[PackItem]
    degraded: list[str]  # channels that failed: the block holds what the others found


def _date(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1_000_000, dt.UTC).strftime("%Y-%m-%d")


def format_item(c: Candidate) -> str:
    p = c.point
    when = p.valid_from_us if p.kind == "fact" and p.valid_from_us else p.created_at_us
    parts = [LABELS.get(p.kind, p.kind), _date(when)]
    speakers = list(dict.fromkeys(s.speaker for s in p.sources if s.speaker))
    if p.kind == "fact" and speakers:
        parts.append(speakers[0])
    if p.kind == "document":  # its namespace and key, as a path
        parts.append("/".join([*p.attrs.get("namespace", []), p.attrs.get("key", "")]))
    text = p.text
    if p.valid_to_us is not None:
        text += f" (no longer true since {_date(p.valid_to_us)})"
    return f"[{' · '.join(parts)}] {text}"


def pack(
    candidates: list[Candidate],
    max_tokens: int,
    per_kind_caps: Mapping[str, int] | None = None,
    degraded: Sequence[str] = (),
) -> Packed:
    caps = dict(per_kind_caps or {})
    used = 0
    counts: dict[str, int] = {}
    items: list[PackItem] = []
    for c in candidates:
        kind = c.point.kind
        if kind in caps and counts.get(kind, 0) >= caps[kind]:
            continue
        text = format_item(c)
        tokens = count_tokens(text)
        if used + tokens > max_tokens:
            continue
        items.append(PackItem(c, text, tokens))
        used += tokens
        counts[kind] = counts.get(kind, 0) + 1
    block = "\n".join(i.text for i in items)
    return Packed(block, count_tokens(block), items, list(degraded))


def pack_recalled(
    access: AccessCounts | None,
    result: RecallResult,
    max_tokens: int,
    per_kind_caps: Mapping[str, int] | None = None,
) -> Packed:
    """Pack: a recall's hits packed into ``max_tokens``, and the memories of the block
    counted (:func:`recall.context.access.record_handed`) before the answer goes out. Blocking:
    on the engine's request thread (``RecallEngine.submit_then``), after the recall."""
    packed = pack(result.hits, max_tokens, per_kind_caps, result.degraded)
    record_handed(access, [i.candidate for i in packed.items])
    return packed
