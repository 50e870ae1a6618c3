"""The state schema: every column family of the two RocksDB stores (state and journal), each
with its owner, and every kind of scoped data (:data:`KINDS`).

A store declares its own column families, as a constant in its own module; this module only
composes them, in the order the daemon opens them, and records each family's owner
(:class:`ColumnFamily`). ``tests/tiers/test_schema.py`` fails when a store opens a family that
no owner declares, or when a declared one is not opened.

:data:`KINDS` lists the stores of scoped data that Forget, Export and Import reach through
:class:`tiers.scoped.ScopedKind` (in this order: Forget deletes and Export writes the kinds in
it). Sessions, episodes, consolidation records, vector points and graph edges are not in it:
Forget, Export and Import handle each in its own step (``docs/architecture.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Literal, TypeVar

from tiers.changes.log import CORE_TYPES, ChangeLog
from tiers.journal import consolidation
from tiers.journal import store as journal
from tiers.journal.stale import StaleScopes
from tiers.keyed.access import AccessCounts
from tiers.keyed.anchors import AnchorStore
from tiers.keyed.documents import DocumentStore
from tiers.keyed.pins import PinStore
from tiers.rocks import RocksStore
from tiers.scoped import KindFactory, RecordsChanges, ScopedKind
from tiers.semantic import tombstones
from tiers.semantic.graph import nxgraph
from tiers.working import progress, session

Store = Literal["state", "journal"]


@dataclass(frozen=True, slots=True)
class ColumnFamily:
    name: str
    store: Store  # "state" (``<data_dir>/state``, no TTL) or "journal" (with the TTL)
    owner: str  # the module that declares it and reads and writes it


def _owned(store: Store, owner: ModuleType, names: Sequence[str]) -> tuple[ColumnFamily, ...]:
    return tuple(ColumnFamily(name, store, owner.__name__) for name in names)


# Every kind of scoped data, opened on the state store (its column families are composed
# below). A document first: what a Forget removes of it are memories, whose pins and access
# counts go too. The change log last: it forgets the changes that name the documents forgotten.
KINDS: tuple[KindFactory, ...] = (
    DocumentStore,
    AnchorStore,
    PinStore,
    AccessCounts,
    StaleScopes,
    ChangeLog,
)


def families(kinds: Sequence[KindFactory] = KINDS) -> tuple[ColumnFamily, ...]:
    """Every column family of both stores, with ``kinds``' own among the state store's."""
    return (
        *_owned("state", session, session.WORKING_CFS),
        *_owned("state", progress, progress.PROGRESS_CFS),
        *_owned("state", consolidation, consolidation.CONSOLIDATION_CFS),
        *_owned("state", consolidation, consolidation.OWNER_CFS),
        *_owned("state", nxgraph, nxgraph.GRAPH_CFS),
        *_owned("state", tombstones, tombstones.TOMBSTONE_CFS),
        *(
            ColumnFamily(cf, "state", kind.__module__)
            for kind in kinds
            for cf in kind.column_families
        ),
        *_owned("journal", journal, journal.JOURNAL_CFS),
    )


def state_families(kinds: Sequence[KindFactory] = KINDS) -> list[str]:
    """The state store's column families, in the order it opens them."""
    return [cf.name for cf in families(kinds) if cf.store == "state"]


FAMILIES = families()
STATE_CFS = state_families()
JOURNAL_CFS = [cf.name for cf in FAMILIES if cf.store == "journal"]

K = TypeVar("K")


def change_types(kinds: Iterable[KindFactory | ScopedKind] = KINDS) -> dict[str, str]:
    """Every type a change may have (what ``MemoryService.Watch`` may say), with what each
    names: the tiers' own and each kind's, in the registry's order."""
    types = dict(CORE_TYPES)
    for kind in kinds:
        types.update(kind.change_types)
    return types


def open_kinds(state: RocksStore, kinds: Sequence[KindFactory] = KINDS) -> tuple[ScopedKind, ...]:
    """One store of each kind on ``state``, in the registry's order; the kinds that record
    their changes record them in the change log among them, which takes every kind's types."""
    opened = tuple(make(state) for make in kinds)
    changes = next((k for k in opened if isinstance(k, ChangeLog)), None)
    if changes is not None:
        changes.types = change_types(kinds)
    for kind in opened:
        if isinstance(kind, RecordsChanges):
            kind.changes = changes
    return opened


def kind_of(kinds: Sequence[ScopedKind], cls: type[K]) -> K:
    """The store of class ``cls`` among ``kinds`` (for the parts that use one by name)."""
    found = next((k for k in kinds if isinstance(k, cls)), None)
    if found is None:
        raise LookupError(f"no scoped kind {cls.__name__} in {[k.name for k in kinds]}")
    return found


__all__ = [
    "FAMILIES",
    "JOURNAL_CFS",
    "KINDS",
    "STATE_CFS",
    "ColumnFamily",
    "change_types",
    "families",
    "kind_of",
    "open_kinds",
    "state_families",
]
