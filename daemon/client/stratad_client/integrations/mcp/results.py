"""What the tools of ``stratad-mcp`` take and return: argument types, the result models
(published as each tool's output schema) and their conversion from the daemon's replies."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from google.protobuf.message import Message as ProtoMessage
from google.protobuf.timestamp_pb2 import Timestamp
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from stratad_client.kinds import MemoryKind
from stratad_client.pb import memory_pb2 as pb

Kinds = Annotated[
    list[MemoryKind] | None,
    Field(
        description="Only these kinds of memory (default: all). episode_chunk and episode_turn "
        "are passages of past conversations, summary a conversation's summary, fact an atomic "
        "fact, profile what is known about one entity, document a note kept with note."
    ),
]
Thread = Annotated[
    str,
    Field(
        description="A story thread's topic: only the memories of its conversations "
        '(a thread hit\'s attrs.topic; "" = all).',
        max_length=80,
    ),
]
Start = Annotated[
    dt.datetime | None,
    Field(description="Only what happened at or after this time (ISO 8601; no zone means UTC)."),
]
End = Annotated[
    dt.datetime | None,
    Field(description="Only what happened before this time (ISO 8601; no zone means UTC)."),
]
Query = Annotated[str, Field(min_length=1, description="What to look for, in plain words.")]
SessionId = Annotated[
    str, Field(min_length=1, description="The conversation's id, chosen by you; stable per chat.")
]
MaxTokens = Annotated[int, Field(ge=1, le=200_000, description="The block's budget in tokens.")]
IdList = Annotated[list[str] | None, Field(max_length=100)]
M = TypeVar("M", bound=BaseModel)


class Source(BaseModel):
    session_id: str
    seq: int = Field(description="The message's number in its session.")
    speaker: str
    created_at: str | None
    episode_id: str
    message_id: str
    metadata: dict[str, str]


class Memory(BaseModel):
    id: str = Field(description="The memory's id: for get_sources and forget(memory_ids).")
    kind: str
    text: str
    created_at: str | None
    superseded: bool = Field(description="A fact that a newer fact replaced.")
    sources: list[Source] = Field(description="The messages this memory comes from.")


class Hit(Memory):
    score: float
    episode_id: str
    session_id: str
    attrs: dict[str, str] = Field(
        default_factory=dict,
        description="A digest's level, period and title; a thread's topic, origin and title.",
    )


class PackItem(Memory):
    tokens: int


class Episode(BaseModel):
    episode_id: str
    session_id: str
    agent_id: str
    started_at: str | None
    ended_at: str | None
    expires_at: str | None
    message_count: int
    end_reason: str
    consolidation: str


class StoredMessage(BaseModel):
    seq: int
    role: str
    content: str
    speaker: str
    created_at: str | None
    message_id: str
    metadata: dict[str, str]
    tool_call: dict[str, str] | None


class Remembered(BaseModel):
    session_id: str
    seq: int
    duplicate: bool = Field(description="The message_id was stored before; nothing was added.")


class Noted(BaseModel):
    key: str
    id: str = Field(description="The note's memory id, as recall's hits and forget name it.")
    created: bool = Field(description="False: a note of this key was replaced.")


class Ended(BaseModel):
    session_id: str
    episode_id: str
    message_count: int


class Recalled(BaseModel):
    hits: list[Hit]
    degraded_channels: list[str]


class Packed(BaseModel):
    text: str = Field(description="The memories formatted for a prompt.")
    tokens: int
    items: list[PackItem]
    degraded_channels: list[str]


class ContextMemory(PackItem):
    pinned: bool = Field(description="Pinned by the user (the block's Pinned section).")


class Context(BaseModel):
    text: str = Field(description="The block to read before answering.")
    tokens: int
    query: str = Field(description="What was recalled for (formulated from the conversation).")
    state: str = Field(description="open, ended, or unspecified (a session never seen).")
    anchor: str | None = Field(description="The session's anchor, when it is in the block.")
    messages: list[StoredMessage] = Field(description="The latest messages, oldest first.")
    memories: list[ContextMemory] = Field(description="The pinned and recalled memories.")
    degraded_channels: list[str]


class Anchored(BaseModel):
    session_id: str
    cleared: bool = Field(description="True: the text was empty and the anchor is gone.")
    replaced: bool = Field(description="True: the session had an anchor before.")


class PinResult(BaseModel):
    id: str
    pinned: bool
    changed: bool = Field(description="False: it was so already.")


class Episodes(BaseModel):
    episodes: list[Episode]
    next_page_token: str


class EpisodeMessages(BaseModel):
    episode: Episode
    messages: list[StoredMessage]
    next_page_token: str


class Sources(BaseModel):
    node: Hit
    episode: Episode | None
    messages: list[StoredMessage]
    journal_expired: bool


class Forgotten(BaseModel):
    counts: dict[str, int] = Field(description="What was deleted, per tier.")
    skipped_ids: list[str] = Field(description="Unknown ids, or ids of another user.")


class WeaverStatus(BaseModel):
    running: bool
    pending: int
    unindexed: int
    pending_near_expiry: int
    next_run: str | None
    last_error: str
    extractor: str
    embedding_model: str
    embedding_ready: bool
    tier3_error: str
    last_run: dict[str, Any] | None


def iso_time(msg: ProtoMessage, field: str) -> str | None:
    if not msg.HasField(field):
        return None
    ts: Timestamp = getattr(msg, field)
    return ts.ToDatetime(dt.UTC).isoformat()


def from_proto(msg: ProtoMessage, model: type[M], **given: Any) -> M:
    """``model`` from the protobuf fields of the same names (and ``given``): times as ISO 8601
    strings (None when unset), maps as dicts."""
    values = dict(given)
    for name in model.model_fields.keys() - given.keys():
        value = getattr(msg, name)
        if isinstance(value, Timestamp):
            value = iso_time(msg, name)
        elif isinstance(value, Mapping):
            value = dict(value)
        values[name] = value
    return model(**values)


def enum_name(name: str, prefix: str) -> str:
    return name.removeprefix(prefix).lower()


def sources_of(memory: pb.Hit | pb.PackItem | pb.ContextItem) -> list[Source]:
    return [from_proto(s, Source) for s in memory.sources]


def episode_of(e: pb.Episode) -> Episode:
    return from_proto(
        e,
        Episode,
        agent_id=e.scope.agent_id,
        end_reason=enum_name(pb.EndReason.Name(e.end_reason), "END_REASON_"),
        consolidation=enum_name(
            pb.ConsolidationState.Name(e.consolidation), "CONSOLIDATION_STATE_"
        ),
    )


def message_of(m: pb.StoredMessage) -> StoredMessage:
    msg, call = m.message, m.message.tool_call
    return from_proto(
        msg,
        StoredMessage,
        seq=m.seq,
        role=enum_name(pb.Role.Name(msg.role), "ROLE_"),
        speaker=msg.name,
        tool_call={"name": call.name, "arguments": call.arguments} if call.name else None,
    )


def tool_result(model: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=model.model_dump(mode="json"),
    )


def source_label(s: Source) -> str:
    who = f", {s.speaker}" if s.speaker else ""
    return f"session {s.session_id} #{s.seq}{who}"


def message_lines(messages: list[StoredMessage]) -> list[str]:
    return [
        f"#{m.seq} {m.role}{f' ({m.speaker})' if m.speaker else ''}: {m.content}" for m in messages
    ]
