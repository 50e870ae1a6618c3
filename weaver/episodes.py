"""An episode as the weaver works on it: its turns, and the provenance of what it derives."""

from __future__ import annotations

from collections.abc import Iterable

from tiers.errors import EpisodeNotFound
from tiers.journal import Journal
from tiers.records import StoredMessage
from tiers.tokens import count_tokens
from tiers.vectors import Source, message_line
from weaver.extractors import EpisodeInput, Turn


def load_episode(journal: Journal, episode_id: str) -> EpisodeInput:
    """The episode's turns from the journal. Raises EpisodeNotFound (unknown or expired)."""
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
    turns = [
        Turn(
            seq=m.seq,
            speaker=m.name or m.role,
            role=m.role,
            text=m.content,
            created_at_us=m.created_at_us,
            message_id=m.message_id,
            metadata=m.metadata,
        )
        for m in messages
        if m.content
    ]
    return EpisodeInput(episode.episode_id, episode.session_id, episode.scope, turns)


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


def chunk(episode: EpisodeInput, turns: int, overlap: int, max_tokens: int) -> list[list[Turn]]:
    """Windows of up to ``turns`` consecutive turns, ``overlap`` shared with the next window,
    cut short where the text would pass ``max_tokens`` (a longer single turn stands alone)."""
    out: list[list[Turn]] = []
    start = 0
    items = episode.turns
    while start < len(items):
        window: list[Turn] = []
        tokens = 0
        for turn in items[start : start + turns]:
            cost = count_tokens(turn.text) + 2
            if window and tokens + cost > max_tokens:
                break
            window.append(turn)
            tokens += cost
        out.append(window)
        if start + len(window) >= len(items):
            break
        start += max(1, len(window) - overlap)
    return out


def chunk_text(window: list[Turn]) -> str:
    return "\n".join(message_line(t.speaker, t.text) for t in window)
