"""A kind of scoped data: records a store keeps per scope (a user, or one agent of the user),
which Forget must remove, Export write, Import read back and Stats count.

Each kind implements :class:`ScopedKind` in its own module, and ``tiers/schema.py`` lists it
in :data:`tiers.schema.KINDS`; Forget (:mod:`tiers.rights.forget.cascade`), Export and
Import (:mod:`tiers.rights.archive`), Stats and Watch reach every kind through that list, in
its order, and name none of them. A kind owns what is its own: its column families, the types
of the changes it records (``change_types``) and, when it is exported (:class:`ExportedKind`),
its export records (written by ``export``, read by ``read_record``). The export format's
record types, the parser's dispatch and the change log's types are derived from the list.
So adding a kind of data touches its own module and one line of the schema
(``docs/architecture.md``, "Adding a kind of data").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tiers.core.records import Scope
from tiers.rocks import Batch, RocksStore
from tiers.semantic.tombstones import Tombstones
from tiers.semantic.vectors import MemoryPoint

Owned = tuple[Scope, str]  # (owner, episode or memory id)


@dataclass(frozen=True, slots=True)
class Limits:
    """The importing daemon's limits on ids and messages (``limits.*`` settings), which the
    readers of export records apply."""

    max_id_bytes: int = 256
    max_session_id_bytes: int = 256
    max_content_bytes: int = 65_536
    max_metadata_entries: int = 64
    max_namespace_labels: int = 8
    max_document_bytes: int = 131_072  # text and value (limits.max_message_bytes)
    max_anchor_bytes: int = 4096


class RecordReader(Protocol):
    """What a kind's ``read_record`` gets from the export parser
    (:class:`tiers.rights.archive.parser.ExportParser`): the import's limits and the readers
    of the fields every record has. Each method raises ``ValueError`` saying what is wrong
    with the field (the parser adds the line)."""

    @property
    def limits(self) -> Limits: ...

    def scope(self, d: dict[str, Any]) -> Scope:
        """The record's ``user_id`` and ``agent_id``, checked against the file's header."""

    def id(self, d: dict[str, Any], key: str, *, empty: bool = False, limit: int = 0) -> str:
        """An id: a string within ``limit`` bytes (``limits.max_id_bytes`` when 0), no
        control characters."""

    def string(self, d: dict[str, Any], key: str, *, empty: bool = False) -> str: ...

    def micros(self, d: dict[str, Any], key: str) -> int:
        """A time in microseconds since the epoch, within a timestamp's range."""

    def uuid(self, d: dict[str, Any], key: str) -> str:
        """A memory id (a UUID), in its canonical form."""

    def once(self, key: Hashable, what: str) -> None:
        """Raises when ``key`` was seen before in the file: ``what`` appears twice."""


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
    def column_families(self) -> tuple[str, ...]:
        """Its column families of the state store: compacted by a Forget's purge."""

    @property
    def change_types(self) -> Mapping[str, str]:
        """The types of the changes it records in the change log (``MemoryService.Watch``),
        each with what its attrs name; empty for a kind that records none."""

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


@runtime_checkable
class ExportedKind(Protocol):
    """What a kind that Export writes and Import reads back adds to :class:`ScopedKind`: its
    record type and its records' writer, reader and importer. Its class in
    :data:`tiers.schema.KINDS` and its opened store both answer ``isinstance`` (see
    :func:`exported`); a kind without them (the change log, the access counts) is not
    exported. The methods raise as :class:`ScopedKind`'s do."""

    @property
    def record_type(self) -> str:
        """The ``type`` of its records in an export file (:mod:`tiers.rights.archive.format`)."""

    def read_record(self, d: dict[str, Any], reader: RecordReader) -> Any:
        """One export record of :attr:`record_type` read into the value :meth:`import_values`
        takes (``reader`` checks the common fields). Raises ``ValueError`` saying what is
        wrong."""

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


def scope_fields(scope: Scope) -> dict[str, str]:
    """The ``user_id`` and ``agent_id`` of an export record (what :meth:`RecordReader.scope`
    reads back)."""
    return {"user_id": scope.user_id, "agent_id": scope.agent_id}


def exported(kinds: Iterable[object]) -> list[ExportedKind]:
    """The kinds among ``kinds`` (classes or opened stores) that are exported, in order."""
    return [k for k in kinds if isinstance(k, ExportedKind)]


@runtime_checkable
class RecordsChanges(Protocol):
    """A kind whose writes record changes: ``tiers.schema.open_kinds`` hands it the change
    log opened among the kinds (a ``tiers.changes.log.ChangeLog``, which imports this
    module)."""

    changes: Any


class KindFactory(Protocol):
    """What ``tiers.schema.KINDS`` lists: a kind's store class, which names its column
    families (the schema composes them, with the class's module as their owner) and change
    types (the change log composes them), and opens the store on the state store. An
    exported kind's class is also an :class:`ExportedKind`: the format and the parser
    compose its record type and reader."""

    @property
    def column_families(self) -> tuple[str, ...]: ...

    @property
    def change_types(self) -> Mapping[str, str]: ...

    @property
    def __module__(self) -> str: ...  # type: ignore[override]

    def __call__(self, state: RocksStore) -> ScopedKind: ...
