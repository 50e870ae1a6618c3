"""An episode as the weaver works on it: its turns, and the provenance of what it derives."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tiers.core.errors import EpisodeNotFound
from tiers.core.records import StoredMessage
from tiers.core.tokens import count_tokens
from tiers.journal.store import Journal
from tiers.semantic.vectors import MemoryPoint, Source, message_line, point_id
from weaver.extractors import EpisodeInput, Turn
from weaver.turn_text import ToolText, turn_text


def load_episode(journal: Journal, episode_id: str, bounds: ToolText | None = None) -> EpisodeInput:
    """The episode's turns from the journal, one per message with content or a tool call,
    its text rendered by :func:`weaver.turn_text.turn_text` within ``bounds`` (the defaults
    of the settings when not given). Raises EpisodeNotFound (unknown or expired)."""
    bounds = bounds or ToolText()
    episode = journal.get(episode_id)
    messages: list[StoredMessage] = []
    while len(messages) < episode.message_count:
        after = messages[-1].seq if messages else 0
        page = journal.messages(episode_id, after_seq=after, limit=1000)
        if not page:
            break
        messages += page
    if not messages:
        raise EpisodeNotFound(f"episode {episode_id!r} has no messages left in the journal")
    return EpisodeInput(
        episode.episode_id, episode.session_id, episode.scope, turns_of(messages, bounds)
    )


def turns_of(messages: Iterable[StoredMessage], bounds: ToolText) -> list[Turn]:
    """The turns of ``messages``: one per message with content or a tool call, its text
    rendered by :func:`weaver.turn_text.turn_text` within ``bounds``."""
    return [
        Turn(
            seq=m.seq,
            speaker=m.name or m.role,
            role=m.role,
            text=text,
            created_at_us=m.created_at_us,
            message_id=m.message_id,
            metadata=m.metadata,
            tool_call=m.tool_call.name if m.tool_call is not None else "",
        )
        for m, text in ((m, turn_text(m, bounds)) for m in messages)
        if text
    ]


def sources(episode: EpisodeInput, seqs: Iterable[int], *, with_text: bool = False) -> list[Source]:
    """Provenance for the turns ``seqs``: session, seq, client message id and metadata,
    speaker and time (and the text itself with ``with_text``)."""
    by_seq = {t.seq: t for t in episode.turns}
    return [
        Source(
            episode.session_id,
            t.seq,
            t.message_id,
            dict(t.metadata),
            t.speaker,
            t.created_at_us,
            t.text if with_text else "",
            t.role if with_text else "",
        )
        for t in (by_seq[s] for s in sorted(set(seqs)) if s in by_seq)
    ]


def latest(episode: EpisodeInput, seqs: Iterable[int]) -> int:
    """The newest event time among the turns ``seqs`` (the episode's last turn if none)."""
    wanted = set(seqs)
    times = [t.created_at_us for t in episode.turns if t.seq in wanted]
    return max(times) if times else episode.turns[-1].created_at_us


def episode_point(
    episode: EpisodeInput,
    kind: str,
    text: str,
    srcs: list[Source],
    created_at_us: int,
    extractor: str,
    *,
    valid_from_us: int | None = None,
    attrs: dict[str, object] | None = None,
) -> MemoryPoint:
    """The ``kind`` point of ``episode`` with this text and provenance, its id derived from
    them (:func:`tiers.semantic.vectors.point_id`)."""
    return MemoryPoint(
        id=point_id(episode.scope, kind, text, srcs),
        kind=kind,
        text=text,
        scope=episode.scope,
        episode_id=episode.episode_id,
        session_id=episode.session_id,
        sources=srcs,
        created_at_us=created_at_us,
        extractor=extractor,
        valid_from_us=valid_from_us,
        attrs={} if attrs is None else attrs,
    )


def chunk(episode: EpisodeInput, turns: int, overlap: int, max_tokens: int) -> list[list[Turn]]:
    """Windows of up to ``turns`` consecutive turns of the episode (:func:`windows`)."""
    return windows(episode.turns, turns, overlap, max_tokens).windows


@dataclass(frozen=True, slots=True)
class Windows:
    """:func:`windows`' answer: the windows, the index of the turn the next window would
    start at, and how many turns (from the start) are in a window."""

    windows: list[list[Turn]]
    start: int
    covered: int


def windows(
    items: Sequence[Turn],
    turns: int,
    overlap: int,
    max_tokens: int,
    *,
    start: int = 0,
    covered: int = 0,
    final: bool = True,
) -> Windows:
    """Windows of up to ``turns`` consecutive turns, ``overlap`` shared with the next window,
    cut short where the text would pass ``max_tokens`` (a longer single turn stands alone).
    A window does not end between a tool call and the tool results right after it unless
    they start the window: it ends before the call instead, and the next window starts there
    (or earlier, by ``overlap``), so a call and its result share a window where sizes allow.

    ``start`` and ``covered`` resume where an earlier call stopped. Not ``final`` (a live
    session, whose later turns are still to come), only the windows that later turns cannot
    change are made: those with all their turns and the turn after them present, so that the
    windows of a session, made a batch at a time and then ``final`` at its end, are the
    windows of its whole episode made at once."""
    out: list[list[Turn]] = []
    while start < len(items):
        if not final and start + turns >= len(items):
            break
        window: list[Turn] = []
        tokens = 0
        for turn in items[start : start + turns]:
            cost = count_tokens(turn.text) + 2
            if window and tokens + cost > max_tokens:
                break
            window.append(turn)
            tokens += cost
        end = start + len(window)
        if end < len(items) and _answers(items[end - 1], items[end]):
            first = end - 1  # back to the call whose results the cut would separate from it
            while first > start and _answers(items[first - 1], items[first]):
                first -= 1
            if first > start:
                if first <= covered:  # what precedes the call is in the last window
                    start = first
                    continue
                window = window[: first - start]
        out.append(window)
        covered = start + len(window)
        if covered >= len(items):
            start = len(items)
            break
        start += max(1, len(window) - overlap)
    return Windows(out, start, covered)


def _answers(before: Turn, turn: Turn) -> bool:
    """``turn`` is a tool's result right after a tool call or another result."""
    return turn.role == "tool" and (bool(before.tool_call) or before.role == "tool")


def chunk_text(window: list[Turn]) -> str:
    return "\n".join(message_line(t.speaker, t.text) for t in window)
