"""GetContext's assembly: a session's anchor, its scope's pinned memories, its window and
the memories recalled for it, within one token budget, as one block of plain text and as
structured items. A function of what the daemon read (:func:`assemble`), plus the rule that
makes a query from the window when the caller gives none (:func:`formulate_query`).

**Order and budget.** ``max_tokens`` is never exceeded; tokens are counted as everywhere in
Strata (:mod:`tiers.core.tokens`) on the exact lines of the block, section headings included
(lines are joined by white space, so the block's count is the sum of its lines'):

1. the session anchor, whole or not at all;
2. the pinned memories, newest pin first, taking at most ``pinned_share`` of ``max_tokens``;
3. what is left is shared by the window and the recalled memories: the window first takes
   up to ``window_share`` of it (the newest messages, contiguous: it stops at the first
   older message that does not fit), the memories then take what the window left (in rank
   order; one that does not fit is skipped and smaller ones after it may still fit), and the
   window then takes what the memories left (older messages again).

**No duplicates.** A recalled memory already in the block as a pin is left out (``pinned``;
a pin left out for its share may still come in as recalled), and so is one whose source
messages are all in the returned window (``in_window``: the same session id and seq). The
engine has merged hits that share their sources already.

**The block.** Sections, each only when it has something, separated by a blank line::

    Session anchor (updated 2025-05-01 10:02 UTC):
    <the anchor's text>

    Pinned: [fact · 2025-04-02 · Alice] Alice is vegetarian.

    From memory: [conversation · 2025-03-30] Alice: I moved to Lisbon.

    Conversation: [2025-05-01 10:01] Alice: Where should we eat tonight?

Memory lines are :func:`recall.pack.format_item`'s; a message line is ``[DATE TIME] Speaker:
text`` (UTC), the speaker being the message's name, else its role, and a tool call shown as
``called name(arguments)``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from recall import Candidate
from recall.pack import format_item
from recall.words import names, tokens
from tiers.core.records import StoredMessage
from tiers.core.tokens import count_tokens
from tiers.keyed.anchors import Anchor
from tiers.semantic.vectors import source_key

ANCHOR_HEADING = "Session anchor (updated {when}):"
PINNED_HEADING = "Pinned:"
MEMORY_HEADING = "From memory:"
CONVERSATION_HEADING = "Conversation:"


@dataclass(frozen=True, slots=True)
class Budget:
    max_tokens: int
    window_share: float  # of what the anchor and the pins leave
    pinned_share: float  # of max_tokens
    per_kind_caps: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Pinned:
    """A pinned memory as read from Tier 3, with why it applies (for explain)."""

    candidate: Candidate
    why: str


@dataclass(frozen=True, slots=True)
class Item:
    candidate: Candidate
    text: str  # its line in the block
    tokens: int
    pinned: bool
    why: str


@dataclass(frozen=True, slots=True)
class Drop:
    id: str  # the memory id; the session id for the anchor
    kind: str  # "anchor", or the memory's kind
    tokens: int
    reason: str  # "budget", "pinned_share", "per_kind_cap", "in_window", "pinned"


@dataclass(frozen=True, slots=True)
class Context:
    text: str
    tokens: int
    anchor: Anchor | None  # when it is in the block
    memories: list[Item]  # pinned first, then recalled, as in the block
    window: list[StoredMessage]  # oldest first
    dropped: list[Drop]


def formulate_query(window: Sequence[StoredMessage], turns: int) -> str:
    """The query GetContext recalls for when the caller gives none: the text of the last
    user message (of the last message with text when no user message has any), followed by
    the names (runs of capitalised words inside a sentence, :func:`recall.words.names`) that
    the newest ``turns`` messages mention and that text does not, newest message first, each
    once. An empty window gives an empty query (nothing is recalled)."""
    said = [m for m in window if m.content.strip()]
    if not said:
        return ""
    base = next((m for m in reversed(said) if m.role == "user"), said[-1]).content.strip()
    known = set(tokens(base))
    extra: list[str] = []
    for message in reversed(window[-turns:]):
        inside, _initial = names(message.content)
        for key in sorted(inside):
            if not set(key.split()) <= known:
                extra.append(_surface(message.content, key))
                known.update(key.split())
    return " ".join([base, *extra])


def _surface(text: str, key: str) -> str:
    """``key`` (a normalised name) as ``text`` writes it."""
    pattern = r"\W+".join(re.escape(word) for word in key.split())
    found = re.search(pattern, text, re.IGNORECASE)
    return found.group() if found else key


def message_line(m: StoredMessage) -> str:
    when = dt.datetime.fromtimestamp(m.created_at_us / 1_000_000, dt.UTC)
    text = m.content
    if m.tool_call is not None:
        call = f"called {m.tool_call.name}({m.tool_call.arguments})"
        text = f"{text} ({call})" if text else call
    return f"[{when:%Y-%m-%d %H:%M}] {m.name or m.role.capitalize()}: {text}"


def anchor_heading(anchor: Anchor) -> str:
    when = dt.datetime.fromtimestamp(anchor.updated_at_us / 1_000_000, dt.UTC)
    return ANCHOR_HEADING.format(when=f"{when:%Y-%m-%d %H:%M} UTC")


class _Section:
    """Lines under a heading; the heading's tokens are charged with the first line."""

    def __init__(self, heading: str) -> None:
        self.heading = heading
        self.lines: list[str] = []
        self.tokens = 0

    def cost(self, tokens: int) -> int:
        return tokens + (0 if self.lines else count_tokens(self.heading))

    def add(self, line: str, tokens: int) -> None:
        self.tokens += self.cost(tokens)
        self.lines.append(line)

    def block(self) -> str:
        return "\n".join([self.heading, *self.lines]) if self.lines else ""


def assemble(
    budget: Budget,
    session_id: str,
    anchor: Anchor | None,
    pinned: Sequence[Pinned],
    window: Sequence[StoredMessage],
    recalled: Sequence[Candidate],
    recalled_why: Mapping[str, str] | None = None,
) -> Context:
    """The context block of the session ``session_id`` for ``budget`` (see the module's
    docstring). ``window`` is the session's window, oldest first (its newest messages are
    kept); ``recalled`` the engine's hits, best first; ``recalled_why`` the explanation of
    each by id (for explain)."""
    total = budget.max_tokens
    dropped: list[Drop] = []

    anchor_part = _Section(anchor_heading(anchor) if anchor is not None else "")
    if anchor is not None:
        cost = anchor_part.cost(count_tokens(anchor.text))
        if cost <= total:
            anchor_part.add(anchor.text, count_tokens(anchor.text))
        else:
            dropped.append(Drop(anchor.session_id, "anchor", cost, "budget"))
    used = anchor_part.tokens

    pins = _Section(PINNED_HEADING)
    items: list[Item] = []
    pin_limit = min(int(budget.pinned_share * total), total - used)
    for pin in pinned:
        line = format_item(pin.candidate)
        tokens_ = count_tokens(line)
        if pins.tokens + pins.cost(tokens_) <= pin_limit:
            pins.add(line, tokens_)
            items.append(Item(pin.candidate, line, tokens_, True, pin.why))
        else:
            fits = used + pins.tokens + pins.cost(tokens_) <= total
            dropped.append(_drop(pin.candidate, tokens_, "pinned_share" if fits else "budget"))
    used += pins.tokens

    rest = total - used
    lines = [message_line(m) for m in window]
    conversation = _Section(CONVERSATION_HEADING)
    start = _extend(conversation, lines, len(lines), int(budget.window_share * rest))

    memory = _Section(MEMORY_HEADING)
    pinned_ids = {i.candidate.point.id for i in items}  # the pins in the block
    in_window = {(session_id, m.seq) for m in window[start:]}
    counts: dict[str, int] = {}
    recalled_items: list[Item] = []
    why = recalled_why or {}
    for c in recalled:
        p = c.point
        line = format_item(c)
        tokens_ = count_tokens(line)
        if p.id in pinned_ids:
            dropped.append(_drop(c, tokens_, "pinned"))
            continue
        if _covered(c, in_window):
            dropped.append(_drop(c, tokens_, "in_window"))
            continue
        cap = budget.per_kind_caps.get(p.kind)
        if cap is not None and counts.get(p.kind, 0) >= cap:
            dropped.append(_drop(c, tokens_, "per_kind_cap"))
            continue
        if conversation.tokens + memory.tokens + memory.cost(tokens_) > rest:
            dropped.append(_drop(c, tokens_, "budget"))
            continue
        memory.add(line, tokens_)
        recalled_items.append(Item(c, line, tokens_, False, why.get(p.id, "")))
        counts[p.kind] = counts.get(p.kind, 0) + 1

    start = _extend(conversation, lines, start, rest - memory.tokens)
    kept = list(window[start:])
    # Older messages the window took last may hold what a memory said: leave it out then.
    in_window = {(session_id, m.seq) for m in kept}
    for item in [i for i in recalled_items if _covered(i.candidate, in_window)]:
        recalled_items.remove(item)
        dropped.append(_drop(item.candidate, item.tokens, "in_window"))
    memory = _Section(MEMORY_HEADING)
    for item in recalled_items:
        memory.add(item.text, item.tokens)

    blocks = [s.block() for s in (anchor_part, pins, memory, conversation)]
    text = "\n\n".join(b for b in blocks if b)
    return Context(
        text=text,
        tokens=count_tokens(text),
        anchor=anchor if anchor_part.lines else None,
        memories=items + recalled_items,
        window=kept,
        dropped=dropped,
    )


def _extend(section: _Section, lines: Sequence[str], start: int, limit: int) -> int:
    """Take older lines (before ``start``) into the conversation while they fit in
    ``limit`` tokens; returns the index of the oldest line taken. The section's lines are
    kept oldest first."""
    taken: list[str] = []
    spent = section.tokens
    while start > 0:
        tokens_ = count_tokens(lines[start - 1])
        cost = tokens_ + (0 if section.lines or taken else count_tokens(section.heading))
        if spent + cost > limit:
            break
        taken.append(lines[start - 1])
        spent += cost
        start -= 1
    section.lines[:0] = reversed(taken)
    section.tokens = spent
    return start


def _covered(c: Candidate, window: set[tuple[str, int]]) -> bool:
    """Whether every source message of ``c`` is in the window (the same session id and
    seq). A keyed document's source names no message: never."""
    keys = [source_key(c.point, s) for s in c.point.sources]
    return bool(keys) and all(k in window for k in keys)


def _drop(c: Candidate, tokens_: int, reason: str) -> Drop:
    return Drop(c.point.id, c.point.kind, tokens_, reason)
