"""Writing an export (:mod:`tiers.rights.archive.format`): everything of one scope, walked from the
stores.

:meth:`Exporter.write` holds ``SemanticStore.write_lock`` for the whole walk (no weaver step,
rebuild, import or Forget runs meanwhile, as for a backup) and, briefly, the working-memory
lock while it reads the scope's sessions, their open logs and the list of its episodes, so
every session is in the file either open (with its log) or as the episode it ended as, never
both and never neither. Then, in this order: the header, the episodes (oldest first, each with
its messages and whether it was indexed and consolidated), the sessions (open ones with their
logs), the records of each kind of scoped data (``tiers.schema.KINDS``, in its order, through
:meth:`tiers.scoped.ScopedKind.export`: the keyed documents by scope, namespace and key, the
session anchors, the pins; of forgotten memories none), the stored consolidation records,
the Tier 3 points of every kind (without vectors: the importing daemon embeds them with its
own model; a document's point is not one of them, its record is) and the graph edges, the
footer.

Forgotten episodes and memories (:mod:`tiers.semantic.tombstones`) are never written; another user's
data never is either (every read is filtered by the scope, and every record is checked
against it once more). Raises EmbeddingUnavailable (Tier 3 not open), StoreUnavailable,
VectorStoreUnavailable.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import IO, Any

from tiers import scoped
from tiers.core import collector
from tiers.core.records import Episode, Scope, StoredMessage
from tiers.journal.consolidation import EXTRACTIONS_CF, PENDING_CF, UNINDEXED_CF, extractions_of
from tiers.journal.store import Journal
from tiers.rights.archive import format as export
from tiers.rights.archive.format import SessionRecord
from tiers.rocks import RocksStore
from tiers.scoped import ExportedKind, ScopedKind
from tiers.semantic.graph import Edge
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import PointFilter
from tiers.working.session import LOG_CF, SESSIONS_CF, Session, sessions_of

# A stored consolidation record -> its scope (None when it has no provenance) and JSON form
# (weaver.extraction_json.record_to_json: the weaver owns the record's layout).
ExtractionToJSON = Callable[[bytes], tuple[Scope | None, dict[str, Any]]]
Progress = Callable[[Counter[str]], None]
PROGRESS_EVERY = 5000  # records between two progress calls
_ALL = 10_000_000
_PAGE = 1000
_READ_BATCH = 1000  # stored records read in one multi-get


@dataclass(frozen=True, slots=True)
class ExportSummary:
    records: Counter[str]  # per record type, and "point:<kind>"
    bytes: int
    seconds: float


@dataclass(eq=False, slots=True)
class Exporter:
    state: RocksStore
    journal: Journal
    semantic: SemanticStore
    working_lock: AbstractContextManager[object]
    extraction_json: ExtractionToJSON
    kinds: Sequence[ScopedKind] = ()
    _exported: list[ExportedKind] = field(init=False, repr=False)
    _types: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._exported = scoped.exported(self.kinds)  # tiers.schema.KINDS, opened: those exported
        self._types = export.record_types(k.record_type for k in self._exported)

    def write(
        self, out: IO[bytes], scope: Scope, progress: Progress | None = None
    ) -> ExportSummary:
        """Write the export of ``scope`` (a user, or one agent of the user) to ``out``."""
        if not scope.user_id:
            raise ValueError("an export needs a user_id")
        began = time.monotonic()
        embedder, vectors = self.semantic.wait_ready(timeout=None)
        writer = _Writer(out, progress, self._types)
        with self.semantic.write_lock:
            with self.working_lock:
                sessions = self._sessions(scope)
                episodes = self._episodes(scope)
            writer.put(export.header(scope, embedder.model_name, embedder.dim, _now_us()))
            exported: set[str] = set()
            for episode in episodes:
                if self._write_episode(writer, episode):
                    exported.add(episode.episode_id)
            for record, log in sessions:
                writer.put(export.session(record), "session")
                for message in log:
                    writer.put(export.message(message, session_id=record.session_id), "message")
            for keyed in self._exported:  # the scoped kinds' records, but forgotten ones
                for line in keyed.export(scope, self.semantic.tombstones):
                    writer.put(line, keyed.record_type)
            for eid, owner, doc in self._extractions(scope, exported):
                writer.put(export.extraction(eid, owner, doc), "extraction")
            tombstones = self.semantic.tombstones
            for kind in export.POINT_KINDS:
                flt = PointFilter(user_id=scope.user_id, agent_id=scope.agent_id, kinds=(kind,))
                with collector.quiet():  # a kind's points of a scope, decoded (tiers.core)
                    points = tombstones.keep(vectors.scroll(flt, _ALL))
                    for p in sorted(points, key=lambda p: (p.created_at_us, p.id)):
                        if _within(p.scope, scope):
                            writer.put(export.point(p), "point", f"point:{kind}")
            for edge in sorted(tombstones.keep(self._edges(scope)), key=_edge_order):
                writer.put(export.edge(edge), "edge")
        kinds = Counter({k: writer.counts[f"point:{k}"] for k in export.POINT_KINDS})
        writer.put(export.footer(writer.counts, kinds, self._types))
        return ExportSummary(writer.counts, writer.bytes, time.monotonic() - began)

    def _sessions(self, scope: Scope) -> list[tuple[SessionRecord, list[StoredMessage]]]:
        """The scope's sessions (open and ended) and the open ones' logs. Under the
        working-memory lock."""
        out = []
        for ref in sessions_of(self.state, scope.user_id):  # the user's, not every user's
            raw = self.state.get(SESSIONS_CF, ref.key())
            if raw is None:
                continue
            session, is_open = Session.from_meta(ref.session_id, raw)
            if not _within(session.scope, scope):
                continue
            log = []
            if is_open:
                log = [
                    StoredMessage.decode(v)
                    for _k, v in self.state.scan_prefix(LOG_CF, session.ref.prefix())
                ]
            record = SessionRecord(
                session.session_id,
                session.scope,
                session.generation,
                session.next_seq,
                is_open and bool(log),
                len(log) if is_open else 0,
                session.last_active_us,
            )
            out.append((record, log))
        return out

    def _episodes(self, scope: Scope) -> list[Episode]:
        """The scope's episodes in the journal (not expired), oldest first."""
        out: list[Episode] = []
        token = ""
        while True:
            page = self.journal.list(
                user_id=scope.user_id, agent_id=scope.agent_id, page_size=_PAGE, page_token=token
            )
            out += page.episodes
            token = page.next_page_token
            if not token:
                return out

    def _write_episode(self, writer: _Writer, episode: Episode) -> bool:
        eid = episode.episode_id
        if self.semantic.tombstones.episode(eid) or not _within(episode.scope, writer.scope):
            return False
        messages: list[StoredMessage] = []
        while True:
            after = messages[-1].seq if messages else 0
            page = self.journal.messages(eid, after_seq=after, limit=_PAGE)
            messages += page
            if len(page) < _PAGE:
                break
        if not messages:  # expired between the listing and now
            return False
        if len(messages) != episode.message_count:  # the header stays true to the file
            episode = replace(
                episode,
                message_count=len(messages),
                first_seq=messages[0].seq,
                last_seq=messages[-1].seq,
            )
        key = eid.encode()
        indexed = self.state.get(UNINDEXED_CF, key) is None
        consolidated = self.state.get(PENDING_CF, key) is None
        writer.put(export.episode(episode, indexed, consolidated), "episode")
        for message in messages:
            writer.put(export.message(message, episode_id=eid), "message")
        return True

    def _extractions(
        self, scope: Scope, exported: set[str]
    ) -> Iterable[tuple[str, Scope, dict[str, Any]]]:
        """The stored records of the exported episodes, and of the scope's episodes that have
        left the journal (a record keeps its episode's scope in its provenance, and its
        owner's entry finds it: no other user's record is read), in episode id order."""
        tombstones = self.semantic.tombstones
        owned = {
            e for e, owner in extractions_of(self.state, scope.user_id) if _within(owner, scope)
        }
        wanted = sorted(exported | owned)
        for i in range(0, len(wanted), _READ_BATCH):
            ids = wanted[i : i + _READ_BATCH]
            raws = self.state.get_many(EXTRACTIONS_CF, [eid.encode() for eid in ids])
            for eid, raw in zip(ids, raws, strict=True):
                if raw is None:
                    continue
                owner, doc = self.extraction_json(raw)
                foreign = owner is None or not _within(owner, scope) or tombstones.episode(eid)
                if eid not in exported and foreign:
                    continue
                yield eid, owner or self._journal_scope(eid), doc

    def _journal_scope(self, episode_id: str) -> Scope:
        episode = self.journal.find(episode_id)
        assert episode is not None, "an exported episode is in the journal"
        return episode.scope

    def _edges(self, scope: Scope) -> list[Edge]:
        return self.semantic.graph.edges_where(lambda e: _within(e.scope, scope), scope.user_id)


class _Writer:
    """Lines out, counts kept, progress told every PROGRESS_EVERY records."""

    def __init__(self, out: IO[bytes], progress: Progress | None, types: Sequence[str]) -> None:
        self._out = out
        self._progress = progress
        self._types = types  # the file's record types (a point is also counted by its kind)
        self.counts: Counter[str] = Counter()
        self.bytes = 0
        self.scope = Scope("")

    def put(self, record: dict[str, Any], *kinds: str) -> None:
        if record["type"] == "header":
            self.scope = Scope(**record["scope"])
        line = export.dump(record)
        self._out.write(line)
        self.bytes += len(line)
        for kind in kinds:
            self.counts[kind] += 1
        if (
            kinds
            and self._progress is not None
            and sum(self.counts[t] for t in self._types) % PROGRESS_EVERY == 0
        ):
            self._progress(Counter(self.counts))


def _within(owner: Scope, scope: Scope) -> bool:
    """Whether data of ``owner`` belongs to the export of ``scope``."""
    return owner.user_id == scope.user_id and (
        not scope.agent_id or owner.agent_id == scope.agent_id
    )


def _edge_order(edge: Edge) -> tuple[int, str]:
    return edge.created_at_us, edge.id


def _now_us() -> int:
    return int(time.time() * 1_000_000)
