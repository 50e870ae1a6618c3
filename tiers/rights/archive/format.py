"""The export format: a user's memory as JSON Lines, one self-describing record per line.

Every line is one JSON object with a ``type``; times are integer microseconds since the Unix
epoch (UTC, fields ending in ``_us``). In file order:

- ``header`` (line 1): ``format`` (:data:`FORMAT`), ``version`` (:data:`VERSION`),
  ``exported_at`` (ISO 8601) and ``exported_at_us``, ``scope`` (``user_id``, ``agent_id``:
  empty for every agent of the user), the embedding ``model`` and ``dim`` it was made with;
- ``session``: a working-memory session's record (``generation``, ``next_seq``, ``open``,
  ``messages``); an open one is followed by its ``messages`` message records;
- ``episode``: a journal episode (its header, and whether the weaver had ``indexed`` and
  ``consolidated`` it), followed by its ``message_count`` message records;
- ``message``: one stored message of the record before it (``episode_id`` or ``session_id``):
  ``seq``, ``role``, ``content``, ``name``, ``tool_call``, ``message_id``, ``metadata``,
  ``created_at_us``, ``received_at_us``, ``tokens``;
- the records of the kinds of scoped data (``tiers.schema.KINDS``; each kind writes its own, by
  ``Document.record``, ``Anchor.record``, ``Pin.record``, and reads them back by its
  ``read_record``):

  * ``document``: a keyed document (``tiers.keyed.documents``): scope, ``namespace`` (its
    labels), ``key``, ``text``, ``value``, ``created_at_us``, ``updated_at_us`` and its point
    ``id`` (derived from scope, namespace and key; an importer derives it again and indexes
    the text);
  * ``anchor``: a session's anchor (``tiers.keyed.anchors``): scope, ``session_id``, ``text``,
    ``updated_at_us``;
  * ``pin``: a pinned memory (``tiers.keyed.pins``): scope (an empty ``agent_id``: the user's
    own pin), ``memory_id``, ``pinned_at_us``;
- ``extraction``: an episode's stored consolidation record (summary, facts, triplets and the
  turns' provenance), so a rebuild or a resumed run derives the same points;
- ``point``: a Tier 3 memory without its vectors (the payload of ``tiers.semantic.vectors``: ``id``,
  ``kind`` (never ``document``: a document's point comes from its record), ``text``, scope,
  ``episode_id``, ``session_id``, ``sources``, ``created_at_us``, ``valid_from_us``,
  ``valid_to_us``, ``extractor``, ``attrs``);
- ``edge``: a fact-graph edge (``subject``, ``predicate``, ``object``, ``fact_text``,
  ``episode_id``, ``sources``, validity, ``confidence``, ``extractor``, ``attrs``);
- ``footer`` (last line): ``records``, the count of each record type, and ``kinds``, of
  each point kind (a truncated file is recognised by its missing footer).

:class:`tiers.rights.archive.parser.ExportParser` reads a file line by line and raises
``InvalidExport`` naming the line at the first problem; :mod:`tiers.rights.archive.exporter` writes
files and :mod:`tiers.rights.archive.importer` applies them. ``docs/api.md`` ("Export format")
documents the same schema.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tiers.core.records import Episode, Scope, StoredMessage
from tiers.keyed.document import KIND as DOCUMENT
from tiers.schema import KINDS as SCOPED_KINDS
from tiers.scoped import exported, scope_fields
from tiers.semantic.graph import Edge
from tiers.semantic.vectors import KINDS, MemoryPoint, Source

FORMAT = "strata-memory-export"
VERSION = 1
POINT_KINDS = tuple(k for k in KINDS if k != DOCUMENT)  # the kinds of ``point`` records
EPISODE_ID = re.compile(r"[0-9a-f]{32}")
# Timestamp's range (0001-01-01 .. 9999-12-31), in microseconds.
MIN_US, MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999
MAX_LINE_BYTES = 16 * 1024 * 1024


def record_types(kind_types: Iterable[str]) -> tuple[str, ...]:
    """Every record type of a file between its header and footer, in file order: the
    sessions', episodes' and messages', then ``kind_types`` (the exported kinds of scoped
    data, in :data:`tiers.schema.KINDS`' order), then extractions, points and edges."""
    return ("session", "episode", "message", *kind_types, "extraction", "point", "edge")


# The daemon's record types: those of :data:`tiers.schema.KINDS` that are exported.
TYPES = record_types(k.record_type for k in exported(SCOPED_KINDS))


@dataclass(frozen=True, slots=True)
class Header:
    scope: Scope
    model: str
    dim: int
    exported_at_us: int


@dataclass(frozen=True, slots=True)
class SessionRecord:
    session_id: str
    scope: Scope
    generation: int
    next_seq: int
    open: bool
    messages: int  # of the open log
    last_active_us: int


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    episode: Episode
    indexed: bool
    consolidated: bool


@dataclass(frozen=True, slots=True)
class MessageRecord:
    parent: str  # "episode" or "session"
    parent_id: str
    message: StoredMessage


@dataclass(frozen=True, slots=True)
class ExtractionRecord:
    episode_id: str
    scope: Scope
    doc: dict[str, Any]  # the JSON form (weaver.consolidate.record_to_json)


@dataclass(frozen=True, slots=True)
class Record:
    line: int
    type: str
    value: Any  # Header, SessionRecord, EpisodeRecord, MessageRecord, ..., or Counter


def with_messages(records: Iterable[Record]) -> Iterator[tuple[Record, list[StoredMessage]]]:
    """Each record of a file but its messages, with the messages that follow it (those of an
    episode or a session; none for the other records)."""
    parent: Record | None = None
    messages: list[StoredMessage] = []
    for r in records:
        if r.type == "message":
            value: MessageRecord = r.value
            messages.append(value.message)
            continue
        if parent is not None:
            yield parent, messages
        parent, messages = r, []
    if parent is not None:
        yield parent, messages


# -- writing -------------------------------------------------------------------------------------
def dump(record: dict[str, Any]) -> bytes:
    """One line of the file (sorted keys: the same data gives the same bytes)."""
    text = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.encode() + b"\n"


def header(scope: Scope, model: str, dim: int, exported_at_us: int) -> dict[str, Any]:
    when = dt.datetime.fromtimestamp(exported_at_us / 1_000_000, dt.UTC)
    return {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "exported_at": when.isoformat().replace("+00:00", "Z"),
        "exported_at_us": exported_at_us,
        "scope": scope_fields(scope),
        "model": model,
        "dim": dim,
    }


def session(s: SessionRecord) -> dict[str, Any]:
    return {
        "type": "session",
        "session_id": s.session_id,
        **scope_fields(s.scope),
        "generation": s.generation,
        "next_seq": s.next_seq,
        "open": s.open,
        "messages": s.messages,
        "last_active_us": s.last_active_us,
    }


def episode(e: Episode, indexed: bool, consolidated: bool) -> dict[str, Any]:
    return {
        "type": "episode",
        "episode_id": e.episode_id,
        "session_id": e.session_id,
        **scope_fields(e.scope),
        "started_at_us": e.started_at_us,
        "ended_at_us": e.ended_at_us,
        "flushed_at_us": e.flushed_at_us,
        "message_count": e.message_count,
        "first_seq": e.first_seq,
        "last_seq": e.last_seq,
        "end_reason": e.end_reason,
        "indexed": indexed,
        "consolidated": consolidated,
    }


def message(m: StoredMessage, *, episode_id: str = "", session_id: str = "") -> dict[str, Any]:
    parent = {"episode_id": episode_id} if episode_id else {"session_id": session_id}
    return {
        "type": "message",
        **parent,
        "seq": m.seq,
        "role": m.role,
        "content": m.content,
        "name": m.name,
        "tool_call": (
            {"name": m.tool_call.name, "arguments": m.tool_call.arguments} if m.tool_call else None
        ),
        "message_id": m.message_id,
        "metadata": m.metadata,
        "created_at_us": m.created_at_us,
        "received_at_us": m.received_at_us,
        "tokens": m.tokens,
    }


def extraction(episode_id: str, scope: Scope, doc: dict[str, Any]) -> dict[str, Any]:
    return {"type": "extraction", "episode_id": episode_id, **scope_fields(scope), **doc}


def point(p: MemoryPoint) -> dict[str, Any]:
    return {
        "type": "point",
        "id": p.id,
        "kind": p.kind,
        "text": p.text,
        **scope_fields(p.scope),
        "episode_id": p.episode_id,
        "session_id": p.session_id,
        "sources": [_source(s) for s in p.sources],
        "created_at_us": p.created_at_us,
        "valid_from_us": p.valid_from_us,
        "valid_to_us": p.valid_to_us,
        "replaced_by": p.replaced_by,
        "extractor": p.extractor,
        "attrs": p.attrs,
    }


def edge(e: Edge) -> dict[str, Any]:
    return {
        "type": "edge",
        "id": e.id,
        **scope_fields(e.scope),
        "subject": e.subject,
        "predicate": e.predicate,
        "object": e.object,
        "fact_text": e.fact_text,
        "episode_id": e.episode_id,
        "sources": [_source(s) for s in e.sources],
        "created_at_us": e.created_at_us,
        "valid_from_us": e.valid_from_us,
        "valid_to_us": e.valid_to_us,
        "confidence": e.confidence,
        "extractor": e.extractor,
        "attrs": e.attrs,
    }


def footer(
    counts: Counter[str], kinds: Counter[str], types: Iterable[str] = TYPES
) -> dict[str, Any]:
    return {
        "type": "footer",
        "records": {t: counts[t] for t in types},
        "kinds": {k: kinds[k] for k in POINT_KINDS if kinds[k]},
    }


def _source(s: Source) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "seq": s.seq,
        "message_id": s.message_id,
        "metadata": s.metadata,
        "speaker": s.speaker,
        "created_at_us": s.created_at_us,
        "text": s.text,
        "role": s.role,
    }
