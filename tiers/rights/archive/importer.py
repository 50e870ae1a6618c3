"""Applying an export (:mod:`tiers.rights.archive.format`) to this daemon's stores.

The caller parses the whole file first (:class:`tiers.rights.archive.parser.ExportParser`: nothing
is written from a file that is invalid anywhere), then calls :meth:`Importer.check` and
:meth:`Importer.apply` with the parsed records (parsed again: the file is spooled, not held).

- :meth:`Importer.check` refuses (``ImportConflict``, nothing written) a file naming a
  session, episode, point or edge that this daemon holds for another scope, or a session
  open here that the file would continue: an import never overwrites another tenant's data.
- :meth:`Importer.apply` writes, in file order:

  * episodes into the journal with the same ids, messages and times, and the ``unindexed``
    and ``pending`` marks as the exporting daemon had them (``Journal.set_marks``): an
    episode it had indexed and consolidated is never indexed or consolidated again here (its
    points come from the file), and one it had not is, by the weaver, from the same stored
    extraction when the file has one, so with the same point ids;
  * sessions: the session's record is raised to the exported generation and next seq, so a
    later episode of the session here never reuses an imported episode's id; an open
    session's messages go through ``WorkingMemory.append`` (Tier 1's one door) with their
    seqs, event times, names, tool calls, message ids and metadata (``received_at`` becomes
    the import's time); a session open here at the same generation gets only the messages it
    lacks;
  * the records of each kind of scoped data (``tiers.schema.KINDS``), in batches, through
    :meth:`tiers.scoped.ScopedKind.import_values`: keyed documents with their times, replacing
    this daemon's document of the same scope, namespace and key, and their points written at
    once (embedded here); session anchors and pins with their times, replacing this daemon's
    anchor of the same session (a pin of a memory forgotten here is skipped); a file with
    records of a kind this daemon does not store is refused (``ImportConflict``);
  * stored consolidation records, as the file has them;
  * points through ``SemanticStore.write`` (tombstones, embedding with this daemon's model:
    the file has no vectors, keyword vectors, upsert, caches), in batches under
    ``SemanticStore.write_lock``;
  * graph edges through ``SemanticStore.write_edges``.

Ids are the file's, so importing a file twice overwrites what the first import wrote and
duplicates nothing. What this daemon's tombstones name is skipped and counted. Raises
ImportConflict, StoreUnavailable, EmbeddingUnavailable, VectorStoreUnavailable.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tiers.core.errors import ImportConflict
from tiers.core.records import Message, Scope, StoredMessage, from_fields
from tiers.journal.consolidation import put_extraction
from tiers.journal.store import Journal
from tiers.rights.archive.format import (
    EpisodeRecord,
    ExtractionRecord,
    Record,
    SessionRecord,
    with_messages,
)
from tiers.rocks import RocksStore
from tiers.scoped import ExportedKind, ScopedKind, exported
from tiers.semantic.graph import Edge
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint
from tiers.working.memory import WorkingMemory
from tiers.working.session import SESSION_OWNERS_CF, SESSIONS_CF, Session, SessionKey, owner_key

# (episode_id, scope, JSON form) -> the stored record (weaver.extraction_json.record_from_json)
ExtractionFromJSON = Callable[[str, Scope, dict[str, Any]], bytes]
POINT_BATCH = 64  # points per embedding call and per hold of the Tier 3 write lock
EDGE_BATCH = 1000
CHECK_BATCH = 1000  # point ids per lookup when checking a file against the store


@dataclass(slots=True)
class ImportReport:
    written: Counter[str] = field(default_factory=Counter)  # per type, and "point:<kind>"
    skipped_forgotten: int = 0
    skipped_expired: int = 0  # episodes already past this daemon's journal TTL
    sessions_skipped: int = 0  # open sessions that ended here already
    unindexed: list[str] = field(default_factory=list)  # episodes the weaver must index
    seconds: float = 0.0


@dataclass(eq=False, slots=True)
class Importer:
    state: RocksStore
    journal: Journal
    working: WorkingMemory
    semantic: SemanticStore
    extraction_bytes: ExtractionFromJSON
    kinds: Sequence[ScopedKind] = ()
    _by_type: dict[str, ExportedKind] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # tiers.schema.KINDS, opened, by the type of their records in a file
        self._by_type = {k.record_type: k for k in exported(self.kinds)}

    # -- check -------------------------------------------------------------------------------
    def check(self, records: Iterable[Record]) -> None:
        """Raise ImportConflict at the first record this daemon holds for another scope (or
        a session open here that the file would continue); nothing is written."""
        _embedder, vectors = self.semantic.wait_ready(timeout=None)
        batch: list[tuple[int, MemoryPoint]] = []
        for r in records:
            if r.type == "session":
                self._check_session(r.line, r.value)
            elif r.type == "episode":
                found = self.journal.find(r.value.episode.episode_id)
                if found is not None and found.scope != r.value.episode.scope:
                    raise _conflict(r.line, f"episode {found.episode_id}")
            elif r.type == "edge":
                edge = self.semantic.graph.get(r.value.id)
                if edge is not None and edge.scope != r.value.scope:
                    raise _conflict(r.line, f"graph edge {edge.id}")
            elif r.type == "point":
                batch.append((r.line, r.value))
                if len(batch) >= CHECK_BATCH:
                    self._check_points(batch, vectors.get)
                    batch = []
        self._check_points(batch, vectors.get)

    def _check_session(self, line: int, rec: SessionRecord) -> None:
        here = self._meta(rec.session_id, rec.scope.user_id)
        if here is None:
            return
        session, is_open = here
        if session.scope != rec.scope:
            raise _conflict(line, f"session {rec.session_id!r}")
        if (
            is_open
            and not (rec.open and session.generation == rec.generation)
            and (session.generation <= rec.generation)
        ):
            raise ImportConflict(
                f"line {line}: session {rec.session_id!r} is open in this daemon (generation "
                f"{session.generation}) and the file continues it (generation "
                f"{rec.generation}): end or forget it here first; nothing was imported"
            )

    @staticmethod
    def _check_points(
        batch: Sequence[tuple[int, MemoryPoint]], get: Callable[[list[str]], list[MemoryPoint]]
    ) -> None:
        if not batch:
            return
        lines = {p.id: (line, p.scope) for line, p in batch}
        for found in get(list(lines)):
            line, scope = lines[found.id]
            if found.scope != scope:
                raise _conflict(line, f"point {found.id}")

    # -- apply -------------------------------------------------------------------------------
    def apply(self, records: Iterable[Record]) -> ImportReport:
        """Write the records (see the module's docstring); returns what was written."""
        began = time.monotonic()
        report = ImportReport()
        points: list[MemoryPoint] = []
        keyed: dict[str, list[Any]] = {t: [] for t in self._by_type}  # a kind's records, batched
        edges: list[Edge] = []
        for parent, messages in with_messages(records):
            kind = parent.type
            if kind in ("header", "footer"):
                continue
            if kind == "episode":
                self._episode(parent.value, messages, report)
            elif kind == "session":
                self._session(parent.value, messages, report)
            elif kind == "extraction":
                self._extraction(parent.value, report)
            elif kind in keyed:
                keyed[kind].append(parent.value)
                if len(keyed[kind]) >= POINT_BATCH:
                    self._keyed(kind, keyed[kind], report)
                    keyed[kind] = []
            elif kind == "point":
                points.append(parent.value)
                if len(points) >= POINT_BATCH:
                    self._points(points, report)
                    points = []
            elif kind == "edge":
                edges.append(parent.value)
                if len(edges) >= EDGE_BATCH:
                    self._edges(edges, report)
                    edges = []
            else:
                raise ImportConflict(f"this daemon does not store {kind}s; nothing was imported")
        self._points(points, report)
        for record_type, values in keyed.items():
            self._keyed(record_type, values, report)
        self._edges(edges, report)
        report.seconds = time.monotonic() - began
        return report

    def _episode(
        self, rec: EpisodeRecord, messages: list[StoredMessage], report: ImportReport
    ) -> None:
        episode = rec.episode
        if self.journal.expires_at_us(episode) <= int(time.time() * 1_000_000):
            report.skipped_expired += 1
            return
        with self.semantic.write_lock:  # the tombstone check and the write, not split
            if self.semantic.tombstones.episode(episode.episode_id):
                report.skipped_forgotten += 1
                return
            self.journal.write_episode(episode, messages)
            self.journal.set_marks(episode, indexed=rec.indexed, consolidated=rec.consolidated)
        report.written["episode"] += 1
        report.written["message"] += len(messages)
        if not rec.indexed:
            report.unindexed.append(episode.episode_id)

    def _session(
        self, rec: SessionRecord, messages: list[StoredMessage], report: ImportReport
    ) -> None:
        sid = rec.session_id
        todo: list[StoredMessage] = []
        with self.working.write_lock:
            here = self._meta(sid, rec.scope.user_id)
            session, is_open = here if here is not None else (None, False)
            if session is not None and session.scope != rec.scope:
                raise ImportConflict(f"session {sid!r} belongs to another scope in this daemon")
            live = rec.open and bool(messages)
            if session is not None and is_open:
                if session.generation > rec.generation:
                    report.sessions_skipped += int(live)  # this daemon is ahead
                    return
                if not live or session.generation != rec.generation:
                    raise ImportConflict(
                        f"session {sid!r} is open in this daemon and the file continues it"
                    )
                todo = [m for m in messages if m.seq >= session.next_seq]  # what it lacks
            elif session is not None and session.generation >= rec.generation:
                if live:  # ended here already: its messages are in an episode here
                    report.sessions_skipped += 1
                    return
            elif live:
                self._reserve(rec, rec.generation - 1, messages[0].seq)
                todo = messages
            else:
                self._reserve(rec, rec.generation, rec.next_seq)
            if todo:
                appended = self.working.append(sid, rec.scope, [_message(m) for m in todo])
                if [a.seq for a in appended] != [m.seq for m in todo]:
                    raise ImportConflict(
                        f"session {sid!r}: the messages were appended at other seqs than exported"
                    )
        report.written["session"] += 1
        report.written["message"] += len(todo)

    def _reserve(self, rec: SessionRecord, generation: int, next_seq: int) -> None:
        """Record the session as ended at ``generation`` with ``next_seq`` next: the next
        append opens ``generation + 1`` there (Tier 1's own rule, tiers.working.memory)."""
        meta = Session(rec.session_id, rec.scope, generation, next_seq, 0, rec.last_active_us)
        batch = self.state.batch()
        batch.put(SESSIONS_CF, meta.ref.key(), meta.meta(False))
        batch.put(SESSION_OWNERS_CF, owner_key(meta.ref), b"")
        self.state.write(batch)

    def _meta(self, session_id: str, user_id: str) -> tuple[Session, bool] | None:
        """The session of ``user_id`` named ``session_id`` here (sessions are per user)."""
        raw = self.state.get(SESSIONS_CF, SessionKey(user_id, session_id).key())
        return None if raw is None else Session.from_meta(session_id, raw)

    def _extraction(self, rec: ExtractionRecord, report: ImportReport) -> None:
        value = self.extraction_bytes(rec.episode_id, rec.scope, rec.doc)
        with self.semantic.write_lock:
            if self.semantic.tombstones.episode(rec.episode_id):
                report.skipped_forgotten += 1
                return
            batch = self.state.batch()
            put_extraction(batch, rec.episode_id, value)
            self.state.write(batch)
        report.written["extraction"] += 1

    def _keyed(self, record_type: str, values: list[Any], report: ImportReport) -> None:
        """Write a kind's records as the file has them (what this daemon has forgotten is
        skipped), through :meth:`tiers.scoped.ScopedKind.import_values`."""
        if not values:
            return
        with self.semantic.write_lock:  # the tombstone check and the write, not split
            written = self._by_type[record_type].import_values(
                values, self.semantic.tombstones, self.semantic.write
            )
        report.written[record_type] += written
        report.skipped_forgotten += len(values) - written

    def _points(self, points: list[MemoryPoint], report: ImportReport) -> None:
        if not points:
            return
        with self.semantic.write_lock:
            written = self.semantic.write(points)  # embedded here: the file has no vectors
        report.written["point"] += len(written)
        report.written.update(f"point:{p.kind}" for p in written)
        report.skipped_forgotten += len(points) - len(written)

    def _edges(self, edges: list[Edge], report: ImportReport) -> None:
        if not edges:
            return
        with self.semantic.write_lock:
            written = self.semantic.write_edges(edges)
        report.written["edge"] += len(written)
        report.skipped_forgotten += len(edges) - len(written)


def _message(m: StoredMessage) -> Message:
    return from_fields(Message, m)


def _conflict(line: int, what: str) -> ImportConflict:
    return ImportConflict(
        f"line {line}: {what} belongs to another scope in this daemon; nothing was imported"
    )
