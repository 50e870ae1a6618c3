"""Reading an export file (:mod:`tiers.rights.archive.format`) line by line, checking it as it goes.

:class:`ExportParser` turns each line into a :class:`tiers.rights.archive.format.Record` holding the
domain value (an ``Episode``, a ``StoredMessage``, a ``MemoryPoint``, an ``Edge``, ...) and raises
:class:`tiers.core.errors.InvalidExport` naming the line at the first problem: not JSON, not an
object, no header first, a format or version this code does not read, a record of another user (or,
in an export of one agent, of another agent), a missing or mistyped field, a message not right after
its episode or session, too few or too many messages, a count the footer disagrees with, anything
after the footer. :meth:`ExportParser.finish` says whether the file ended with its footer (a
truncated file does not). Nothing here touches a store.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from tiers.core.errors import InvalidExport
from tiers.core.records import ROLES, Episode, Scope, StoredMessage, ToolCall
from tiers.rights.archive import fields
from tiers.rights.archive.fields import Bad
from tiers.rights.archive.format import (
    FORMAT,
    MAX_LINE_BYTES,
    POINT_KINDS,
    VERSION,
    EpisodeRecord,
    ExtractionRecord,
    Header,
    MessageRecord,
    Record,
    SessionRecord,
    record_types,
)
from tiers.schema import KINDS
from tiers.scoped import ExportedKind, Limits, exported
from tiers.semantic.graph import Edge
from tiers.semantic.vectors import MemoryPoint


class ExportParser:
    """Reads an export line by line (:meth:`feed`, then :meth:`finish`) and checks it as it
    goes: JSON objects, a known header and version, every record of ``user_id`` (the header's
    user when empty) and of the header's agent when it names one, messages right after their
    episode or session and as many as it says, the footer's counts. Raises InvalidExport.

    The records of the kinds of scoped data are read by their kind (``kinds``: the daemon's,
    :data:`tiers.schema.KINDS`, unless given), with this parser as their
    :class:`tiers.scoped.RecordReader`."""

    def __init__(
        self,
        user_id: str = "",
        limits: Limits | None = None,
        check_extraction: Callable[[str, Scope, dict[str, Any]], object] | None = None,
        kinds: Sequence[object] = KINDS,
    ) -> None:
        self.user_id = user_id
        self.limits = limits or Limits()
        self._check_extraction = check_extraction
        exported_kinds = exported(kinds)
        self.types = record_types(k.record_type for k in exported_kinds)
        self._readers: dict[str, Callable[[dict[str, Any]], Any]] = {
            "session": self._read_session,
            "episode": self._read_episode,
            "message": self._read_message,
            **{k.record_type: self._kind_reader(k) for k in exported_kinds},
            "extraction": self._read_extraction,
            "point": self._read_point,
            "edge": self._read_edge,
        }
        self.header: Header | None = None
        self.counts: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.lines = 0
        self._footer_line = 0
        self._parent: tuple[str, str, int, int] | None = None  # type, id, left, next seq
        self._episodes: set[str] = set()
        self._sessions: set[str] = set()
        self._keys: set[Hashable] = set()  # the kinds' records (RecordReader.once)

    def feed(self, raw: bytes) -> Record:
        self.lines += 1
        try:
            return self._record(raw)
        except Bad as exc:
            raise InvalidExport(f"line {self.lines}: {exc}") from None

    def finish(self) -> None:
        """The end of the file: it must have ended with its footer."""
        if self.header is None:
            raise InvalidExport("the file is empty: an export starts with its header line")
        if not self._footer_line:
            raise InvalidExport(
                f"the file ends at line {self.lines} without its footer: it is truncated"
            )

    def _record(self, raw: bytes) -> Record:
        if self._footer_line:
            raise Bad(f"nothing may follow the footer (line {self._footer_line})")
        if len(raw) > MAX_LINE_BYTES:
            raise Bad(f"the line is {len(raw)} bytes; the limit is {MAX_LINE_BYTES}")
        try:
            doc = json.loads(raw, parse_constant=fields.no_constant)
        except ValueError as exc:
            raise Bad(f"not a JSON object ({exc}); an export is JSON Lines") from None
        if not isinstance(doc, dict):
            raise Bad("not a JSON object; every line of an export is one")
        kind = doc.get("type")
        if self.header is None:
            if kind != "header":
                raise Bad("the first line must be the header ({'type': 'header', ...})")
            return Record(self.lines, "header", self._read_header(doc))
        if self._parent is not None and kind != "message":
            ptype, pid, left, _seq = self._parent
            raise Bad(f"{ptype} {pid!r} announced {left} more message records")
        if kind == "header":
            raise Bad("a second header")
        if kind == "footer":
            return Record(self.lines, "footer", self._read_footer(doc))
        read = self._readers.get(kind) if isinstance(kind, str) else None
        if read is None or not isinstance(kind, str):
            raise Bad(f"unknown record type {kind!r}; known: {', '.join(self.types)}")
        value = read(doc)
        self.counts[kind] += 1
        return Record(self.lines, kind, value)

    def _kind_reader(self, kind: ExportedKind) -> Callable[[dict[str, Any]], Any]:
        def read(d: dict[str, Any]) -> Any:
            try:
                return kind.read_record(d, self)
            except Bad:
                raise
            except ValueError as exc:  # the kind's own check
                raise Bad(str(exc)) from None

        return read

    # -- records ---------------------------------------------------------------------------------
    def _read_header(self, d: dict[str, Any]) -> Header:
        if d.get("format") != FORMAT:
            raise Bad(f"format is {d.get('format')!r}, not a Strata export ({FORMAT!r})")
        version = d.get("version")
        if version != VERSION:
            raise Bad(f"format version {version!r} is not supported (this daemon reads {VERSION})")
        scope_doc = d.get("scope")
        if not isinstance(scope_doc, dict):
            raise Bad("header.scope must be an object with user_id and agent_id")
        scope = Scope(self._id(scope_doc, "user_id"), self._id(scope_doc, "agent_id", empty=True))
        if self.user_id and scope.user_id != self.user_id:
            raise Bad(
                f"the file holds user_id {scope.user_id!r}, not {self.user_id!r} as requested; "
                "an import never moves memory to another user"
            )
        self.user_id = scope.user_id
        self.header = Header(
            scope,
            fields.string(d, "model"),
            fields.integer(d, "dim", 0),
            fields.micros(d, "exported_at_us"),
        )
        return self.header

    def _read_footer(self, d: dict[str, Any]) -> Counter[str]:
        records = d.get("records")
        if not isinstance(records, dict):
            raise Bad("footer.records must be an object of counts per record type")
        for kind in self.types:
            if records.get(kind, 0) != self.counts[kind]:
                raise Bad(
                    f"the footer counts {records.get(kind, 0)} {kind} records, the file has "
                    f"{self.counts[kind]}"
                )
        self._footer_line = self.lines
        return Counter(records)

    def _scope(self, d: dict[str, Any]) -> Scope:
        assert self.header is not None
        scope = Scope(self._id(d, "user_id"), self._id(d, "agent_id", empty=True))
        if scope.user_id != self.user_id:
            raise Bad(f"a record of user_id {scope.user_id!r} in an export of {self.user_id!r}")
        want = self.header.scope.agent_id
        if want and scope.agent_id != want:
            raise Bad(f"a record of agent_id {scope.agent_id!r} in an export of agent {want!r}")
        return scope

    def _read_session(self, d: dict[str, Any]) -> SessionRecord:
        sid = self._id(d, "session_id", limit=self.limits.max_session_id_bytes)
        if sid in self._sessions:
            raise Bad(f"session {sid!r} appears twice")
        self._sessions.add(sid)
        record = SessionRecord(
            sid,
            self._scope(d),
            fields.integer(d, "generation", 0),
            fields.integer(d, "next_seq", 1),
            fields.boolean(d, "open"),
            fields.integer(d, "messages", 0),
            fields.micros(d, "last_active_us"),
        )
        if record.open and record.messages:
            if record.messages >= record.next_seq or record.generation < 1:
                raise Bad("an open session's messages, generation and next_seq disagree")
            first = record.next_seq - record.messages
            self._parent = ("session", sid, record.messages, first)
        elif record.messages:
            raise Bad("only an open session carries messages")
        return record

    def _read_episode(self, d: dict[str, Any]) -> EpisodeRecord:
        eid = fields.episode_id(d, "episode_id")
        if eid in self._episodes:
            raise Bad(f"episode {eid!r} appears twice")
        self._episodes.add(eid)
        e = Episode(
            episode_id=eid,
            session_id=self._id(d, "session_id", limit=self.limits.max_session_id_bytes),
            scope=self._scope(d),
            started_at_us=fields.micros(d, "started_at_us"),
            ended_at_us=fields.micros(d, "ended_at_us"),
            flushed_at_us=fields.micros(d, "flushed_at_us"),
            message_count=fields.integer(d, "message_count", 1),
            first_seq=fields.integer(d, "first_seq", 1),
            last_seq=fields.integer(d, "last_seq", 1),
            end_reason=fields.string(d, "end_reason"),
        )
        if e.last_seq - e.first_seq + 1 < e.message_count:
            raise Bad("message_count does not fit between first_seq and last_seq")
        self._parent = ("episode", eid, e.message_count, e.first_seq)
        return EpisodeRecord(e, fields.boolean(d, "indexed"), fields.boolean(d, "consolidated"))

    def _read_message(self, d: dict[str, Any]) -> MessageRecord:
        if self._parent is None:
            raise Bad("a message record must follow its episode or session record")
        ptype, pid, left, next_seq = self._parent
        key = f"{ptype}_id"
        if d.get(key) != pid:
            raise Bad(f"a message of {d.get(key)!r} where one of {ptype} {pid!r} was due")
        m = self._stored_message(d)
        contiguous = ptype == "session"  # an open log has no gaps; an episode may skip seqs
        if m.seq < next_seq or (contiguous and m.seq != next_seq):
            raise Bad(f"message seq {m.seq} is out of order (expected {next_seq})")
        self._parent = (ptype, pid, left - 1, m.seq + 1) if left > 1 else None
        return MessageRecord(ptype, pid, m)

    def _stored_message(self, d: dict[str, Any]) -> StoredMessage:
        lim = self.limits
        role = fields.string(d, "role")
        if role not in ROLES:
            raise Bad(f"role {role!r} is not one of {', '.join(ROLES)}")
        content = fields.string(d, "content", empty=True)
        if len(content.encode()) > lim.max_content_bytes:
            raise Bad(f"content is over limits.max_content_bytes ({lim.max_content_bytes})")
        tool_call = None
        tc = d.get("tool_call")
        if tc is not None:
            if not isinstance(tc, dict):
                raise Bad("tool_call must be null or an object with name and arguments")
            arguments = fields.string(tc, "arguments", empty=True)
            try:
                json.loads(arguments or "null")
            except ValueError:
                raise Bad("tool_call.arguments is not valid JSON") from None
            tool_call = ToolCall(self._id(tc, "name"), arguments)
        if not content and tool_call is None:
            raise Bad("content may be empty only with a tool_call")
        metadata = fields.str_map(d, "metadata")
        if len(metadata) > lim.max_metadata_entries:
            raise Bad(f"metadata is over limits.max_metadata_entries ({lim.max_metadata_entries})")
        return StoredMessage(
            seq=fields.integer(d, "seq", 1),
            role=role,
            content=content,
            created_at_us=fields.micros(d, "created_at_us"),
            received_at_us=fields.micros(d, "received_at_us"),
            tokens=fields.integer(d, "tokens", 0),
            name=self._id(d, "name", empty=True),
            tool_call=tool_call,
            message_id=self._id(d, "message_id", empty=True),
            metadata=metadata,
        )

    # -- RecordReader: what a kind's read_record gets ---------------------------------------
    def scope(self, d: dict[str, Any]) -> Scope:
        return self._scope(d)

    def id(self, d: dict[str, Any], key: str, *, empty: bool = False, limit: int = 0) -> str:
        return self._id(d, key, empty=empty, limit=limit)

    def string(self, d: dict[str, Any], key: str, *, empty: bool = False) -> str:
        return fields.string(d, key, empty=empty)

    def micros(self, d: dict[str, Any], key: str) -> int:
        return fields.micros(d, key)

    def uuid(self, d: dict[str, Any], key: str) -> str:
        return fields.uuid_str(d, key)

    def once(self, key: Hashable, what: str) -> None:
        if key in self._keys:
            raise Bad(f"{what} appears twice")
        self._keys.add(key)

    def _read_extraction(self, d: dict[str, Any]) -> ExtractionRecord:
        eid = fields.episode_id(d, "episode_id")
        scope = self._scope(d)
        doc = {k: v for k, v in d.items() if k not in ("type", "episode_id", "user_id", "agent_id")}
        if self._check_extraction is not None:
            try:
                self._check_extraction(eid, scope, doc)
            except (KeyError, TypeError, ValueError) as exc:
                raise Bad(f"extraction of episode {eid}: {type(exc).__name__}: {exc}") from None
        return ExtractionRecord(eid, scope, doc)

    def _read_point(self, d: dict[str, Any]) -> MemoryPoint:
        kind = fields.string(d, "kind")
        if kind not in POINT_KINDS:
            raise Bad(f"point kind {kind!r} is not one of {', '.join(POINT_KINDS)}")
        self.kinds[kind] += 1
        return MemoryPoint(
            id=fields.uuid_str(d, "id"),
            kind=kind,
            text=fields.string(d, "text", empty=True),
            scope=self._scope(d),
            episode_id=fields.string(d, "episode_id", empty=True),
            session_id=fields.string(d, "session_id", empty=True),
            sources=fields.sources(d),
            created_at_us=fields.micros(d, "created_at_us"),
            extractor=fields.string(d, "extractor", empty=True),
            valid_from_us=fields.micros(d, "valid_from_us", optional=True),
            valid_to_us=fields.micros(d, "valid_to_us", optional=True),
            attrs=fields.mapping(d, "attrs"),
            replaced_by=self._replaced_by(d),
        )

    def _replaced_by(self, d: dict[str, Any]) -> str | None:
        """The id of the fact that superseded this one (absent in archives before it)."""
        if d.get("replaced_by") is None:
            return None
        return fields.uuid_str(d, "replaced_by")

    def _read_edge(self, d: dict[str, Any]) -> Edge:
        confidence = d.get("confidence")
        if isinstance(confidence, bool) or not isinstance(confidence, int | float):
            raise Bad("confidence must be a number")
        return Edge(
            id=fields.uuid_str(d, "id"),
            scope=self._scope(d),
            subject=fields.string(d, "subject"),
            predicate=fields.string(d, "predicate"),
            object=fields.string(d, "object"),
            fact_text=fields.string(d, "fact_text", empty=True),
            episode_id=fields.string(d, "episode_id", empty=True),
            sources=fields.sources(d),
            created_at_us=fields.micros(d, "created_at_us"),
            valid_from_us=fields.micros(d, "valid_from_us"),
            valid_to_us=fields.micros(d, "valid_to_us", optional=True),
            confidence=float(confidence),
            extractor=fields.string(d, "extractor", empty=True),
            attrs=fields.str_map(d, "attrs"),
        )

    def _id(self, d: dict[str, Any], key: str, *, empty: bool = False, limit: int = 0) -> str:
        value = fields.string(d, key, empty=empty)
        limit = limit or self.limits.max_id_bytes
        if len(value.encode()) > limit:
            raise Bad(f"{key} is longer than {limit} bytes")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise Bad(f"{key} must not contain control characters")
        return value
