"""The LoCoMo sessions as the weaver benchmark feeds them: ids, turn times, the chunk texts the
index stage embeds, and the messages for the journal and for ``AppendBatch``.

The data comes from :mod:`tests.bench.locomo.data` (every session of every conversation, in
conversation and session order).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from stratad_client import message
from tests.bench.locomo.data import Conversation, Session, load
from tiers.core.records import Message, Scope
from weaver.episodes import chunk, chunk_text
from weaver.extractors import EpisodeInput, Turn
from weaver.settings import WeaverSettings

# A LoCoMo session with its conversation (which names its user and session ids).
LocomoSession = tuple[Conversation, Session]


def locomo_sessions(limit: int = 0) -> list[LocomoSession]:
    """Every session of every conversation (the first ``limit`` if > 0), in order."""
    sessions = load().conversation_sessions()
    return sessions[:limit] if limit else sessions


def turn_time_us(session: Session, index: int) -> int:
    """Turns have no times of their own: the session's time plus one second per turn."""
    return int(session.started_at.timestamp()) * 1_000_000 + index * 1_000_000


def chunk_texts(sessions: list[LocomoSession], weaver: WeaverSettings) -> list[str]:
    """The texts the index stage embeds for these sessions (the same windows)."""
    texts: list[str] = []
    for conv, s in sessions:
        episode = EpisodeInput(
            conv.session_id(s),
            conv.session_id(s),
            Scope(conv.user_id),
            [
                Turn(i, t.speaker, "user", t.text, turn_time_us(s, i))
                for i, t in enumerate(s.turns, start=1)
            ],
        )
        windows = chunk(episode, weaver.chunk_turns, weaver.chunk_overlap, weaver.chunk_max_tokens)
        texts += [chunk_text(w) for w in windows]
    return texts


def journal_messages(session: Session) -> list[Message]:
    """The session's turns as the journal stores them."""
    return [
        Message(
            role="user",
            content=t.text,
            name=t.speaker,
            created_at_us=turn_time_us(session, i),
            metadata={"dia_id": t.dia_id},
        )
        for i, t in enumerate(session.turns, start=1)
    ]


def pb_messages(session: Session) -> list[Any]:
    """The session's turns as ``AppendBatch`` sends them."""
    return [
        message(
            t.text,
            "user",
            name=t.speaker,
            created_at=dt.datetime.fromtimestamp(turn_time_us(session, i) / 1e6, dt.UTC),
            metadata={"dia_id": t.dia_id},
        )
        for i, t in enumerate(session.turns, start=1)
    ]
