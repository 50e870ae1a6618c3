"""How far a live session is indexed: the live index stage's marks (``weaver.live``).

A live session's messages are indexed in small batches while it lives, as ``episode_turn``
points and the chunks whose turns all exist, under the episode id the session will get when
it ends (:meth:`tiers.working.session.Session.episode_id`). The mark of a session's current
generation says what is embedded so far, so that a restart resumes after it and the index of
the ended episode embeds only the rest::

    live_index  <episode_id>  -> {t: last seq embedded as a turn, c: seq of the next chunk's
                                  first turn (0: the first), v: seq of the first turn in no
                                  chunk yet (0: none), u, a: scope, s: session_id}

A mark is written after its points (in the batch of its ``session.indexed`` change), deleted
with the ended episode's ``unindexed`` mark, and by Forget. The messages themselves, durable
in the session's log (and its ``open`` mark) before their append is acknowledged, are what the
stage resumes from: everything past the mark is indexed again, by the same point ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tiers.changes import log as changelog
from tiers.changes.log import Change, ChangeLog
from tiers.core.records import Scope, pack, unpack
from tiers.rocks import Batch, RocksStore

LIVE_CF = "live_index"
PROGRESS_CFS = (LIVE_CF,)  # state store; tiers.schema


@dataclass(frozen=True, slots=True)
class Progress:
    """What of a live session's generation is embedded (seqs; 0: nothing)."""

    scope: Scope
    session_id: str
    turns_through: int = 0  # the newest seq embedded as a turn (every one before it too)
    chunk_from: int = 0  # the seq of the next chunk window's first turn (0: the first turn)
    covered_from: int = 0  # the seq of the first turn in no window yet (0: none is)

    def encode(self) -> bytes:
        return pack(
            {
                "t": self.turns_through,
                "c": self.chunk_from,
                "v": self.covered_from,
                "u": self.scope.user_id,
                "a": self.scope.agent_id,
                "s": self.session_id,
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> Progress:
        d = unpack(raw)
        return cls(Scope(d["u"], d["a"]), d["s"], d["t"], d["c"], d["v"])


class LiveProgress:
    """The ``live_index`` marks of one state store. Each write is one batch; raises
    StoreUnavailable with nothing changed."""

    def __init__(self, state: RocksStore, changes: ChangeLog | None = None) -> None:
        self._state = state
        self._changes = changes

    def get(self, episode_id: str) -> Progress | None:
        raw = self._state.get(LIVE_CF, episode_id.encode())
        return None if raw is None else Progress.decode(raw)

    def put(self, episode_id: str, progress: Progress, points: int) -> None:
        """Store the mark, with its ``session.indexed`` change."""
        batch = self._state.batch()
        batch.put(LIVE_CF, episode_id.encode(), progress.encode())
        attrs = {
            "session_id": progress.session_id,
            "episode_id": episode_id,
            "through_seq": progress.turns_through,
            "count": points,
        }
        change = Change(progress.scope, "session.indexed", attrs)
        changelog.write(self._state, batch, self._changes, [change])

    def delete_into(self, batch: Batch, episode_ids: Iterable[str]) -> None:
        for episode_id in episode_ids:
            batch.delete(LIVE_CF, episode_id.encode())

    def delete(self, episode_ids: Iterable[str]) -> None:
        batch = self._state.batch()
        self.delete_into(batch, episode_ids)
        self._state.write(batch)

    def all(self) -> Iterator[tuple[str, Progress]]:
        for key, value in self._state.scan(LIVE_CF, b""):
            yield key.decode(), Progress.decode(value)
