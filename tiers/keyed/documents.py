"""Keyed documents: durable records put, got and deleted by (scope, namespace, key).

A document is a client's note or store item (a LangGraph ``BaseStore`` item, an MCP
note): ``text``, what Recall indexes (empty: the document is not recalled, only got and
listed), and a JSON ``value`` returned unchanged. It lives in the state store (no TTL),
written with one batch (with ``fsync`` when ``sync`` is on) before the put returns; the
weaver indexes it into Tier 3 within seconds as one point of kind ``"document"``
(:mod:`weaver.index`), whose id is derived from scope, namespace and key
(:func:`document_id`), so a replace overwrites the same point.

Key layout of the state store (``<data_dir>/state``)::

    documents      K                  -> {"t": text, "v": value, "c": created µs, "u": updated µs}
    doc_unindexed  K                  -> b""   (put since the weaver last indexed it)
    doc_ids        <id: 36 ascii>     -> K     (a hit id back to its document)

    K = <user_id> 0x00 <agent_id> 0x00 (<label> 0x00)* 0x01 <key>   (tiers.keyed.document)

Ids and labels contain no control characters (the daemon validates them), so ``<user_id>
0x00`` is every document of a user, ``<user_id> 0x00 <agent_id> 0x00`` of one scope, and
adding ``<label> 0x00`` per label of a namespace prefix narrows it to that namespace and the
ones below it. Keys sort by scope, then namespace label by label (a namespace before the ones
it contains), then key.

The ``doc_unindexed`` mark is written in the same batch as the record, so a document put before a
crash is indexed after it. Deleting goes through Forget (:mod:`tiers.rights.forget.cascade`):
tombstone, records, point and purge. A document's id is its key's, so a put after a delete clears
the tombstone of that id in its batch: it is a new document, and the indexer writes only what the
record holds at the moment it writes (:meth:`DocumentStore.current`), so a deleted document's text
in flight never comes back.

:attr:`DocumentStore.lock` orders puts against deletes (a Forget holds it while it writes its
tombstones and deletes) and against the indexer clearing a mark.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tiers.changes import log as changelog
from tiers.changes.log import Change
from tiers.core.events import Events
from tiers.core.records import Scope
from tiers.keyed import KeyedStore
from tiers.keyed.document import (
    KIND,
    Document,
    namespace_prefix,
    read_record,
    scope_prefix,
    storage_key,
)
from tiers.rocks import Batch, InvalidPageToken, RocksStore, page_key, page_token_of, prefix_end
from tiers.scoped import Covered, Forgotten
from tiers.semantic.tombstones import Tombstones
from tiers.semantic.vectors import MemoryPoint

DOCUMENTS_CF = "documents"
MARKS_CF = "doc_unindexed"
IDS_CF = "doc_ids"
DOCUMENT_CFS = (DOCUMENTS_CF, MARKS_CF, IDS_CF)


@dataclass(frozen=True, slots=True)
class DocumentPage:
    documents: list[Document]
    next_page_token: str


@dataclass(frozen=True, slots=True)
class DocumentPut:
    """Event of :attr:`DocumentStore.events`: a document of ``scope`` was put (the weaver
    indexes it)."""

    scope: Scope


class DocumentStore(KeyedStore):
    """The documents in the state store; a scoped kind (:class:`tiers.scoped.ScopedKind`)."""

    name = "documents"
    record_type = KIND
    column_families = DOCUMENT_CFS
    change_types = {
        "document.put": "memory_id, namespace, key, version",
        "document.deleted": "memory_id (its namespace and key are forgotten with it)",
    }
    read_record = staticmethod(read_record)

    def __init__(self, state: RocksStore, clock: Callable[[], float] = time.time) -> None:
        super().__init__(state, clock)
        self.lock = threading.RLock()
        # Called (outside the lock) after every put: the weaver indexes the new marks.
        self.events = Events("documents")  # DocumentPut

    # -- one document ------------------------------------------------------------------------
    def get(self, scope: Scope, namespace: Iterable[str], key: str) -> Document | None:
        k = storage_key(scope, namespace, key)
        raw = self._state.get(DOCUMENTS_CF, k)
        return None if raw is None else Document.decode(k, raw)

    def find(self, doc_id: str) -> Document | None:
        """The document whose point id is ``doc_id``, if one is stored."""
        k = self._state.get(IDS_CF, doc_id.encode())
        raw = None if k is None else self._state.get(DOCUMENTS_CF, k)
        return None if k is None or raw is None else Document.decode(k, raw)

    def put(
        self, scope: Scope, namespace: tuple[str, ...], key: str, text: str, value: str
    ) -> tuple[Document, bool]:
        """Create or replace; durable on return. Returns the document and whether it is new.
        Raises StoreUnavailable (nothing stored)."""
        with self.lock:
            old = self.get(scope, namespace, key)
            now = int(self._clock() * 1_000_000)
            created = now if old is None else old.created_at_us
            doc = Document(scope, namespace, key, text, value, created, max(now, created))
            attrs: dict[str, object] = {"memory_id": doc.id, "namespace": list(namespace)}
            attrs.update(key=key, created=old is None)
            self._write(doc, [Change(scope, "document.put", attrs)])
        self.events.publish(DocumentPut(scope))
        return doc, old is None

    def restore(self, doc: Document) -> None:
        """Write ``doc`` as it is, times included (an import), marked for indexing."""
        with self.lock:
            self._write(doc)

    def _write(self, doc: Document, changes: Sequence[Change] = ()) -> None:
        batch = self._state.batch()
        k = doc.storage_key
        batch.put(DOCUMENTS_CF, k, doc.encode())
        batch.put(MARKS_CF, k, b"")
        batch.put(IDS_CF, doc.id.encode(), k)
        Tombstones.clear(self._state, batch, [doc.id])  # a put after a delete: a new document
        changelog.write(self._state, batch, self.changes, changes)

    # -- listing -----------------------------------------------------------------------------
    def page(
        self, scope: Scope, prefix: Iterable[str] = (), page_size: int = 50, page_token: str = ""
    ) -> DocumentPage:
        """The documents of exactly ``scope`` whose namespace starts with ``prefix``, by
        namespace then key."""
        low = namespace_prefix(scope, prefix)
        high = prefix_end(low)
        if page_token:
            last = page_key(page_token)
            if not low <= last < high:
                raise InvalidPageToken("page_token does not belong to this listing")
            low = last + b"\x00"
        out: list[Document] = []
        for key, raw in self._state.scan(DOCUMENTS_CF, low, high):
            if len(out) == page_size:
                return DocumentPage(out, page_token_of(out[-1].storage_key))
            out.append(Document.decode(key, raw))
        return DocumentPage(out, "")

    def of_scope(self, scope: Scope) -> Iterator[Document]:
        """Every document of ``scope``; an empty ``agent_id`` means every agent of the user
        (as for Forget and Export)."""
        prefix = scope_prefix(scope, any_agent=not scope.agent_id)
        for key, raw in self._state.scan_prefix(DOCUMENTS_CF, prefix):
            yield Document.decode(key, raw)

    def all(self) -> Iterator[Document]:
        for key, raw in self._state.scan(DOCUMENTS_CF, b""):
            yield Document.decode(key, raw)

    # -- indexing ----------------------------------------------------------------------------
    def unindexed(self, limit: int) -> list[Document]:
        """Up to ``limit`` documents put since they were last indexed."""
        out: list[Document] = []
        for key, _mark in self._state.scan(MARKS_CF, b""):
            raw = self._state.get(DOCUMENTS_CF, key)
            if raw is not None:
                out.append(Document.decode(key, raw))
            if len(out) >= limit:
                break
        return out

    def unindexed_count(self) -> int:
        return sum(1 for _ in self._state.scan(MARKS_CF, b""))

    def current(self, docs: Iterable[Document]) -> list[Document]:
        """Those of ``docs`` still stored exactly as they are (not replaced nor deleted)."""
        return [d for d in docs if self._state.get(DOCUMENTS_CF, d.storage_key) == d.encode()]

    def mark_indexed(self, docs: Iterable[Document]) -> None:
        """Clear the marks of ``docs`` that were not put again meanwhile."""
        with self.lock:
            batch = self._state.batch()
            for d in self.current(docs):
                batch.delete(MARKS_CF, d.storage_key)
            self._state.write(batch)

    # -- a scoped kind: Forget, Export, Import, Stats (tiers.scoped) -----------------------------
    def count(self) -> int:
        return self._state.count_keys(DOCUMENTS_CF)

    def owner(self, memory_id: str) -> Scope | None:
        """The scope of the document whose point id is ``memory_id`` (indexed or not)."""
        doc = self.find(memory_id)
        return doc.scope if doc is not None else None

    def forget_into(self, batch: Batch, covered: Covered) -> Forgotten:
        """Add to ``batch`` the deletes of the documents of ``covered.scope`` (every agent's
        when its ``agent_id`` is empty) and of the documents with its memory ids; they are
        memories themselves. The caller holds :attr:`lock` until the batch is written (a
        Forget, with its tombstones). Their points go with the scope's or the ids' points."""
        docs = self._covered(covered.scope, covered.memory_ids)
        for doc in docs:
            k = doc.storage_key
            batch.delete(DOCUMENTS_CF, k)
            batch.delete(MARKS_CF, k)
            batch.delete(IDS_CF, doc.id.encode())
        return Forgotten(len(docs), tuple((d.scope, d.id) for d in docs))

    def export(self, scope: Scope, tombstones: Tombstones) -> Iterator[dict[str, Any]]:
        for document in self.of_scope(scope):
            if not tombstones.memory(document.id):
                yield document.record()

    def import_values(
        self,
        values: Sequence[Document],
        tombstones: Tombstones,
        write_points: Callable[[list[MemoryPoint]], object],
    ) -> int:
        """Store the documents (forgotten ones skipped), then write their points at once
        (embedded here: an export has no vectors)."""
        kept = [d for d in values if not tombstones.memory(d.id)]
        for doc in kept:
            self.restore(doc)  # marked: indexed again after a crash
        write_points([d.point() for d in kept if d.recalled])
        self.mark_indexed(kept)
        return len(kept)

    def _covered(self, scope: Scope | None, ids: Iterable[str]) -> list[Document]:
        found = {d.id: d for d in self.of_scope(scope)} if scope is not None else {}
        for doc_id in ids:
            doc = self.find(doc_id)
            if doc is not None:
                found[doc.id] = doc
        return sorted(found.values(), key=lambda d: d.storage_key)
