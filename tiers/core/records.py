"""The records the tiers store, and their encoding.

Values are msgpack maps with short string keys (never pickle), so any RocksDB tool and any
language can read them. Times are integer microseconds since the Unix epoch (UTC).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

import msgpack

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_R = TypeVar("_R", bound="DataclassInstance")

ROLES = ("user", "assistant", "system", "tool")
END_REASONS = ("client", "idle", "capacity", "rollover")


@dataclass(frozen=True, slots=True)
class Scope:
    user_id: str
    agent_id: str = ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: str  # a JSON document


@dataclass(frozen=True, slots=True)
class Message:
    """A message as the client gave it (``created_at_us`` None means "now")."""

    role: str
    content: str
    name: str = ""
    tool_call: ToolCall | None = None
    created_at_us: int | None = None
    message_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored: numbered, timed and counted."""

    seq: int
    role: str
    content: str
    created_at_us: int
    received_at_us: int
    tokens: int
    name: str = ""
    tool_call: ToolCall | None = None
    message_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        doc: dict[str, Any] = {
            "s": self.seq,
            "r": self.role,
            "c": self.content,
            "t": self.created_at_us,
            "rt": self.received_at_us,
            "k": self.tokens,
        }
        if self.name:
            doc["n"] = self.name
        if self.tool_call is not None:
            doc["tc"] = [self.tool_call.name, self.tool_call.arguments]
        if self.message_id:
            doc["id"] = self.message_id
        if self.metadata:
            doc["m"] = self.metadata
        return pack(doc)

    @classmethod
    def decode(cls, raw: bytes) -> StoredMessage:
        doc = unpack(raw)
        tc = doc.get("tc")
        return cls(
            seq=doc["s"],
            role=doc["r"],
            content=doc["c"],
            created_at_us=doc["t"],
            received_at_us=doc["rt"],
            tokens=doc["k"],
            name=doc.get("n", ""),
            tool_call=ToolCall(tc[0], tc[1]) if tc else None,
            message_id=doc.get("id", ""),
            metadata=doc.get("m", {}),
        )


@dataclass(frozen=True, slots=True)
class Episode:
    """A finished session in the journal (its messages are stored beside it)."""

    episode_id: str
    session_id: str
    scope: Scope
    started_at_us: int
    ended_at_us: int
    flushed_at_us: int
    message_count: int
    first_seq: int
    last_seq: int
    end_reason: str

    def encode(self) -> bytes:
        return pack(
            {
                "e": self.episode_id,
                "s": self.session_id,
                "u": self.scope.user_id,
                "a": self.scope.agent_id,
                "t0": self.started_at_us,
                "t1": self.ended_at_us,
                "f": self.flushed_at_us,
                "n": self.message_count,
                "q0": self.first_seq,
                "q1": self.last_seq,
                "why": self.end_reason,
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> Episode:
        d = unpack(raw)
        return cls(
            episode_id=d["e"],
            session_id=d["s"],
            scope=Scope(d["u"], d["a"]),
            started_at_us=d["t0"],
            ended_at_us=d["t1"],
            flushed_at_us=d["f"],
            message_count=d["n"],
            first_seq=d["q0"],
            last_seq=d["q1"],
            end_reason=d["why"],
        )


def episode_id_for(session_id: str, generation: int, user_id: str | None = None) -> str:
    """Deterministic: re-flushing the same session generation after a crash overwrites, never
    duplicates. Sessions are per user, so the user is part of it; ``None`` derives it as
    stores written before that did (``tiers.working.session``: ``legacy_ids``)."""
    name = session_id if user_id is None else f"{user_id}\x00{session_id}"
    digest = hashlib.sha256(f"{name}\x00{generation}".encode()).hexdigest()
    return digest[:32]


def from_fields(record: type[_R], source: object, /, **given: Any) -> _R:
    """A ``record`` (a dataclass) made from another record or a settings section it mirrors: the
    ``given`` fields, and every other field read from ``source``'s attribute of the same name. A
    field ``source`` lacks raises AttributeError, so a field added to ``record`` is never left at
    its default by mistake. (The daemon's :func:`daemon.codec.convert.from_fields` does the same
    for a protobuf message.)"""
    values = {
        f.name: getattr(source, f.name) for f in fields(record) if f.init and f.name not in given
    }
    return record(**values, **given)


def pack(doc: Any) -> bytes:
    return msgpack.packb(doc, use_bin_type=True)


def unpack(raw: bytes) -> Any:
    return msgpack.unpackb(raw, raw=False)


def u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def time_key(us: int) -> bytes:
    """A signed microsecond time as 8 bytes that sort in time order (before 1970 too)."""
    return (us + (1 << 63)).to_bytes(8, "big")
