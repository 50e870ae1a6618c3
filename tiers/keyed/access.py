"""Access counts: how often a Tier 3 memory was handed to an agent (by Pack or GetContext),
for the recall recipe's reinforcement (``recall.reinforcement``: a memory that keeps being
used decays more slowly).

Plain Recall does not count, so that an evaluation that asks questions through Recall does
not feed its own later answers. A count belongs to the scope of the memory it counts (the
memory's user and agent), so a Forget of the scope, of the memory's episode or of the memory
removes it (:meth:`AccessCounts.forget_into`).

Key layout of the state store (``<data_dir>/state``)::

    access  <user_id> 0x00 <agent_id> 0x00 <memory_id>  -> {"n": count, "t": last µs,
                                                            "e": episode_id}

Counts are written with the state store's usual durability (the WAL, ``fsync`` when ``sync``
is on) before the Pack or GetContext that made them answers. A memory already forgotten is
never counted: :meth:`AccessCounts.record` checks the tombstones under the same lock a
Forget holds while it writes its batch (:attr:`AccessCounts.lock`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from tiers.core.records import Scope, pack, unpack
from tiers.rocks import Batch, RocksStore
from tiers.scoped import Covered, Forgotten
from tiers.semantic.tombstones import Tombstones

ACCESS_CF = "access"
ACCESS_CFS = (ACCESS_CF,)


def scope_prefix(scope: Scope) -> bytes:
    return scope.user_id.encode() + b"\x00" + scope.agent_id.encode() + b"\x00"


def access_key(scope: Scope, memory_id: str) -> bytes:
    return scope_prefix(scope) + memory_id.encode()


@dataclass(frozen=True, slots=True)
class Accessed:
    """A memory handed to an agent: its id, its own scope and its episode."""

    memory_id: str
    scope: Scope
    episode_id: str = ""


@dataclass(frozen=True, slots=True)
class AccessCount:
    scope: Scope
    memory_id: str
    count: int
    last_us: int
    episode_id: str = ""

    @classmethod
    def decode(cls, key: bytes, raw: bytes) -> AccessCount:
        user, agent, memory_id = key.split(b"\x00", 2)
        d = unpack(raw)
        return cls(Scope(user.decode(), agent.decode()), memory_id.decode(), d["n"], d["t"], d["e"])


class AccessCounts:
    """The counts in the state store; a scoped kind (:class:`tiers.scoped.ScopedKind`), not
    exported (a count is this daemon's use of a memory, not the user's data: an import
    starts counting afresh). Every method raises ``StoreUnavailable`` when the store cannot
    be read or written."""

    name = "access_counts"
    change_types: ClassVar[dict[str, str]] = {}  # counting a use is no change of memory
    column_families = ACCESS_CFS

    def __init__(self, state: RocksStore, clock: Callable[[], float] = time.time) -> None:
        self._state = state
        self._clock = clock
        self._tombstones = Tombstones(state)
        # Held by record() and by a Forget while it writes its batch: a count is either
        # written before the Forget deletes it, or sees the Forget's tombstones.
        self.lock = threading.Lock()

    def record(self, accessed: Iterable[Accessed]) -> int:
        """Add one to the count of each memory (once per call, however often it is named);
        forgotten memories are left out. Durable on return; returns how many were counted."""
        unique = {access_key(a.scope, a.memory_id): a for a in accessed if a.memory_id}
        if not unique:
            return 0
        now = int(self._clock() * 1_000_000)
        with self.lock:
            keys = [
                k
                for k, a in unique.items()
                if not self._tombstones.memory(a.memory_id)
                and not (a.episode_id and self._tombstones.episode(a.episode_id))
            ]
            old = self._state.get_many(ACCESS_CF, keys)
            batch = self._state.batch()
            for key, raw in zip(keys, old, strict=True):
                n = unpack(raw)["n"] if raw is not None else 0
                a = unique[key]
                batch.put(ACCESS_CF, key, pack({"n": n + 1, "t": now, "e": a.episode_id}))
            self._state.write(batch)
        return len(keys)

    def counts(self, memories: Sequence[tuple[Scope, str]]) -> dict[str, int]:
        """The count of each (scope, memory id) that has one, by memory id."""
        keys = [access_key(scope, memory_id) for scope, memory_id in memories]
        found = self._state.get_many(ACCESS_CF, keys)
        return {
            memory_id: unpack(raw)["n"]
            for (_scope, memory_id), raw in zip(memories, found, strict=True)
            if raw is not None
        }

    def of_scope(self, scope: Scope) -> list[AccessCount]:
        """The counts of ``scope``: of the user and every agent of it when ``agent_id`` is
        empty (as for Forget and Export)."""
        prefix = scope_prefix(scope) if scope.agent_id else scope.user_id.encode() + b"\x00"
        return [AccessCount.decode(k, v) for k, v in self._state.scan_prefix(ACCESS_CF, prefix)]

    # -- a scoped kind: Forget, Export, Import, Stats (tiers.scoped) -----------------------------
    def count(self) -> int:
        return self._state.count_keys(ACCESS_CF)

    def owner(self, memory_id: str) -> Scope | None:
        return None  # a count names a memory, it is none

    def forget_into(self, batch: Batch, covered: Covered) -> Forgotten:
        """Add to ``batch`` the deletes of the counts of ``covered.scope`` (every agent's when
        its ``agent_id`` is empty), of the memories of its (owner, episode id) pairs and of
        its (owner, memory id) pairs."""
        scope, episodes, memories = covered.scope, covered.episodes, covered.memories
        keys: set[bytes] = set()
        if scope is not None:
            keys.update(access_key(c.scope, c.memory_id) for c in self.of_scope(scope))
        wanted: dict[Scope, set[str]] = {}
        for owner, episode_id in episodes:
            wanted.setdefault(owner, set()).add(episode_id)
        for owner, episode_ids in wanted.items():
            keys.update(
                access_key(c.scope, c.memory_id)
                for c in self.of_scope(owner)
                if c.episode_id in episode_ids
            )
        named = [access_key(owner, memory_id) for owner, memory_id in memories]
        present = self._state.get_many(ACCESS_CF, named)
        keys.update(k for k, raw in zip(named, present, strict=True) if raw is not None)
        for key in keys:
            batch.delete(ACCESS_CF, key)
        return Forgotten(len(keys))
