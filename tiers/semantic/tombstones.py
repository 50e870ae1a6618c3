"""Tombstones: what Forget removed, so that nothing derives it again.

Forget deletes an episode's data everywhere, but a weaver job that read the episode before
the delete (or a re-index, a resumed run, ``weaverctl rebuild``) could write its chunks,
summary or facts back. Every writer of Tier 3 therefore checks the tombstones first, under
``SemanticStore.write_lock``, which Forget holds while it writes the tombstones and deletes;
so a write either lands before the Forget (and is deleted by it) or sees the tombstone.

Key layout of the state store (column family ``forgotten``, no TTL)::

    forgotten  e <episode_id>   -> forgotten_at:u64 (µs)  everything derived from the episode
    forgotten  m <memory_id>    -> forgotten_at:u64 (µs)  one Tier 3 memory (point id)
    forgotten  p                -> u64 (ns)  a Forget's purge has not finished
    (tiers.rights.forget.cascade)
    forgotten  u <user_id>      -> b""  the user's points are hidden and being deleted
    (tiers.semantic.erasures)

Point ids are deterministic (a hash of scope, kind, text and sources), so a forgotten memory
that a resumed run or a rebuild derives again from a stored extraction has the same id and is
skipped. Tombstones hold ids only, no content, and are never deleted, but one: a keyed
document's id is derived from its key (``tiers.keyed.documents``), and a put of that key after a
delete is a new document, so the put clears the id's tombstone (:meth:`Tombstones.clear`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from tiers.core.records import u64
from tiers.rocks import Batch, RocksStore

TOMBSTONES_CF = "forgotten"
TOMBSTONE_CFS = (TOMBSTONES_CF,)  # state store; tiers.schema
_EPISODE, _MEMORY = b"e", b"m"
PURGE_KEY = b"p"


class _Derived(Protocol):
    """Anything derived from an episode: a MemoryPoint or a graph Edge."""

    @property
    def id(self) -> str: ...

    @property
    def episode_id(self) -> str: ...


D = TypeVar("D", bound=_Derived)


def is_forgotten(state: RocksStore, *, episode_id: str = "", memory_id: str = "") -> bool:
    """Whether the episode, or the memory, was forgotten (either one given matches)."""
    if episode_id and state.get(TOMBSTONES_CF, _EPISODE + episode_id.encode()) is not None:
        return True
    return bool(memory_id) and state.get(TOMBSTONES_CF, _MEMORY + memory_id.encode()) is not None


class Tombstones:
    """The tombstones of one state store. Tier 3 writers: under ``SemanticStore.write_lock``,
    drop what :meth:`keep` rejects, then write."""

    def __init__(self, state: RocksStore) -> None:
        self._state = state

    def episode(self, episode_id: str) -> bool:
        return is_forgotten(self._state, episode_id=episode_id)

    def memory(self, memory_id: str) -> bool:
        return is_forgotten(self._state, memory_id=memory_id)

    def keep(self, items: Sequence[D]) -> list[D]:
        """``items`` without those whose episode or own id was forgotten, nor the points
        made of forgotten ones (a digest's or thread's ``attrs`` ``episodes`` and
        ``children``, a profile's ``facts``: an import of an export made before a Forget
        would bring their texts back)."""
        episodes: dict[str, bool] = {}

        def forgotten(episode_id: str) -> bool:
            if episode_id not in episodes:
                episodes[episode_id] = self.episode(episode_id)
            return episodes[episode_id]

        out = []
        for item in items:
            if forgotten(item.episode_id) or self.memory(item.id):
                continue
            made_of = getattr(item, "attrs", None) or {}
            if any(forgotten(str(e)) for e in made_of.get("episodes") or ()):
                continue
            parts = [*(made_of.get("children") or ()), *(made_of.get("facts") or ())]
            if not any(self.memory(str(m)) for m in parts):
                out.append(item)
        return out

    @staticmethod
    def add(
        batch: Batch,
        episode_ids: Iterable[str] = (),
        memory_ids: Iterable[str] = (),
        at_us: int | None = None,
    ) -> None:
        """Add tombstones to a batch of the state store."""
        stamp = u64(at_us if at_us is not None else int(time.time() * 1_000_000))
        for eid in episode_ids:
            batch.put(TOMBSTONES_CF, _EPISODE + eid.encode(), stamp)
        for mid in memory_ids:
            batch.put(TOMBSTONES_CF, _MEMORY + mid.encode(), stamp)

    @staticmethod
    def clear(state: RocksStore, batch: Batch, memory_ids: Iterable[str]) -> None:
        """Add to a batch of ``state`` the deletes of these memories' tombstones (a keyed
        document put again after its delete: the writer holds the documents' lock)."""
        for mid in memory_ids:
            if is_forgotten(state, memory_id=mid):
                batch.delete(TOMBSTONES_CF, _MEMORY + mid.encode())
