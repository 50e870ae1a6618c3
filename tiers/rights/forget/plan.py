"""What a Forget covers and what it removed: the request (:class:`ForgetTarget`), its
resolution into ids and owners (:class:`ForgetPlan`, made by ``Forgetter.plan``) and the
counts per tier (:class:`ForgetCounts`); and :class:`ScopeCache`, the seam of the caches a
Forget empties. The cascade itself is :mod:`tiers.rights.forget.cascade`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from tiers.core.records import Episode, Scope


@runtime_checkable
class ScopeCache(Protocol):
    """A cache holding a user's recall data (semantic cache, graph channel indexes).
    Contract suite: ``tests/contracts/test_scope_cache.py``.

    Errors: none. A cache lives in memory; dropping entries cannot fail."""

    def forget_scope(self, user_id: str) -> int:
        """Drop what the cache holds for ``user_id`` (every agent's), and nothing of another
        user; returns how many entries were dropped (0 for a user it holds nothing of)."""


@dataclass(frozen=True, slots=True)
class ForgetTarget:
    """Exactly one of: a scope (``user_id``, optionally ``agent_id``), episode ids, memory
    ids. Validated by the caller."""

    scope: Scope | None = None
    episode_ids: tuple[str, ...] = ()
    memory_ids: tuple[str, ...] = ()


@dataclass(slots=True)
class ForgetPlan:
    target: ForgetTarget
    episode_ids: set[str] = field(default_factory=set)
    memory_ids: set[str] = field(default_factory=set)  # only for a memory-id forget
    # Every scope whose data the plan deletes (for a tenant check before run()).
    owners: set[Scope] = field(default_factory=set)
    owner_of: dict[str, Scope] = field(default_factory=dict)  # named episode or memory id
    headers: dict[str, Episode] = field(default_factory=dict)

    def keep_only(self, allowed: Callable[[Scope], bool]) -> None:
        """Leave out the named ids whose owner is not ``allowed`` (as if unknown)."""
        for item, owner in list(self.owner_of.items()):
            if not allowed(owner):
                del self.owner_of[item]
                self.episode_ids.discard(item)
                self.memory_ids.discard(item)
        if self.target.scope is None:
            self.owners = set(self.owner_of.values())


class Laps:
    """The milliseconds of a Forget's stages (for its log line), each stage's time the time
    since the last lap, added up over its laps."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        key = f"{stage}_ms"
        self.ms[key] = round(self.ms.get(key, 0.0) + (now - self._last) * 1000, 1)
        self._last = now


@dataclass(slots=True)
class ForgetCounts:
    sessions: int = 0
    session_messages: int = 0
    episodes: int = 0
    episode_messages: int = 0
    consolidation_records: int = 0
    vector_points: int = 0
    graph_edges: int = 0
    graph_nodes: int = 0
    cache_entries: int = 0
    profiles_rewritten: int = 0  # entity profiles rebuilt from the facts that remain
    digests_rewritten: int = 0  # digests and story threads rebuilt from the summaries left
    facts_restored: int = 0  # superseded by a forgotten fact: current again, or closed later
    # RocksDB's memtables flushed, so no log holds what was deleted (tiers.rights.forget.purge;
    # the compactions and the vector store's purge come after)
    flush_ms: float = 0.0
    # Per kind of scoped data (tiers.schema.KINDS), by its name: the records it deleted.
    kinds: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float]:
        """Every count, the kinds' by their names (``flush_ms`` too)."""
        fields = {n: getattr(self, n) for n in self.__dataclass_fields__ if n != "kinds"}
        return {**fields, **self.kinds}

    @property
    def documents(self) -> int:
        """Keyed documents (their points are in ``vector_points``)."""
        return self.kinds.get("documents", 0)

    @property
    def anchors(self) -> int:
        """Session anchors."""
        return self.kinds.get("anchors", 0)

    @property
    def pins(self) -> int:
        """Pins, of the scope or of the forgotten memory ids."""
        return self.kinds.get("pins", 0)

    @property
    def access_counts(self) -> int:
        """Access counts of the forgotten scope, episodes and memories."""
        return self.kinds.get("access_counts", 0)
