"""A kind of scoped data: records a store keeps per scope (a user, or one agent of the user),
which Forget must remove, Export write, Import read back and Stats count.

Each kind implements :class:`ScopedKind` in its own module, and ``tiers/schema.py`` lists it
in :data:`tiers.schema.KINDS`; Forget (:mod:`tiers.rights.forget.cascade`), Export and
Import (:mod:`tiers.rights.archive`) and Stats reach every kind through that list, in its
order, and name none of them. So adding a kind of data touches its own module and one line
of the schema (``docs/architecture.md``, "Adding a kind of data").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from tiers.core.records import Scope
from tiers.rocks import Batch, RocksStore
from tiers.semantic.tombstones import Tombstones
from tiers.semantic.vectors import MemoryPoint

Owned = tuple[Scope, str]  # (owner, episode or memory id)


@dataclass(frozen=True, slots=True)
class Covered:
    """What a Forget covers, as a kind sees it: a scope (every agent's when its ``agent_id``
    is empty), or episodes, or memories, each with its owner; what one kind forgets that is
    a memory itself (a keyed document) is added to ``memories`` for the kinds after it."""

    scope: Scope | None = None
    episodes: tuple[Owned, ...] = ()
    memories: tuple[Owned, ...] = ()

    @property
    def memory_ids(self) -> list[str]:
        return sorted({memory_id for _owner, memory_id in self.memories})


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What :meth:`ScopedKind.forget_into` deletes: how many records, and those of them that
    are memories themselves (with their owners): tombstoned with the Forget's, and covered
    for the kinds after this one (a pin or an access count of a forgotten document)."""

    count: int
    memories: tuple[Owned, ...] = ()


class ScopedKind(Protocol):
    """One kind of scoped data in the state store. Every method raises ``StoreUnavailable``
    when the store cannot be read or written (and writes nothing then); no other error."""

    @property
    def name(self) -> str:
        """The kind's name: its count in a Forget's counts (``ForgetCounts.kinds``)."""

    @property
    def record_type(self) -> str:
        """The ``type`` of its records in an export file (:mod:`tiers.rights.archive.format`);
        empty for a kind that is not exported."""

    @property
    def column_families(self) -> tuple[str, ...]:
        """Its column families of the state store: compacted by a Forget's purge."""

    @property
    def lock(self) -> AbstractContextManager[object]:
        """Held by a Forget from before :meth:`forget_into` until its batch (with the
        tombstones) is written: a writer of the kind that holds it too never writes what the
        Forget deletes after the delete."""

    def count(self) -> int:
        """Its records in every scope: what ``Stats`` reports under :attr:`name`
        (``StatsResponse.records``)."""

    def owner(self, memory_id: str) -> Scope | None:
        """The owner of ``memory_id`` when it is one of this kind's records (a document not
        indexed yet); None otherwise (most kinds hold no memories)."""

    def forget_into(self, batch: Batch, covered: Covered) -> Forgotten:
        """Add to ``batch`` the deletes of the records ``covered`` names: the scope's, and
        those of its episodes and memories where the kind keeps such a link."""

    def export(self, scope: Scope, tombstones: Tombstones) -> Iterable[dict[str, Any]]:
        """The records of ``scope`` (every agent's when its ``agent_id`` is empty) as export
        records (JSON objects with ``type`` = :attr:`record_type`), in file order, without
        what ``tombstones`` name. Called with ``SemanticStore.write_lock`` held."""

    def import_values(
        self,
        values: Sequence[Any],
        tombstones: Tombstones,
        write_points: Callable[[list[MemoryPoint]], object],
    ) -> int:
        """Write parsed export records of :attr:`record_type` as they are (times included),
        but those ``tombstones`` name; ``write_points`` embeds and writes Tier 3 points, for
        a kind whose records are memories. Returns how many were written. Called with
        ``SemanticStore.write_lock`` held."""


class KindFactory(Protocol):
    """What ``tiers.schema.KINDS`` lists: a kind's store class, which names its column
    families (the schema composes them, with the class's module as their owner) and opens
    the store on the state store."""

    @property
    def column_families(self) -> tuple[str, ...]: ...

    @property
    def __module__(self) -> str: ...  # type: ignore[override]

    def __call__(self, state: RocksStore) -> ScopedKind: ...
