"""Request validation: protobuf requests in, checked domain values out.

Every rule raises before anything is written, with a message naming the field and the limit.
Sizes are UTF-8 bytes. Field names in messages are those of ``proto/strata/v1/memory.proto``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.timestamp_pb2 import Timestamp

from daemon.codec.status import InvalidArgument, ResourceExhausted
from daemon.settings import LimitsSettings
from recall.context.session import ContextAsk
from stratad_client.pb import memory_pb2 as pb
from tiers.core.records import Message, Scope, ToolCall
from tiers.semantic.vectors import KINDS

ROLE_NAMES = {
    pb.ROLE_USER: "user",
    pb.ROLE_ASSISTANT: "assistant",
    pb.ROLE_SYSTEM: "system",
    pb.ROLE_TOOL: "tool",
}
MAX_PACK_TOKENS = 200_000  # Pack's and GetContext's budget
# Timestamp's valid range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_799


def _check_id(field: str, value: str, limit: int, *, required: bool) -> str:
    if not value:
        if required:
            raise InvalidArgument(f"{field} is required")
        return value
    size = len(value.encode())
    if size > limit:
        raise InvalidArgument(f"{field} is {size} bytes; the limit is {limit}")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise InvalidArgument(f"{field} must not contain control characters")
    return value


def session_id(value: str, limits: LimitsSettings) -> str:
    return _check_id("session_id", value, limits.max_session_id_bytes, required=True)


def user_id(value: str, limits: LimitsSettings, *, required: bool = False) -> str:
    return _check_id("user_id", value, limits.max_id_bytes, required=required)


def agent_id(value: str, limits: LimitsSettings) -> str:
    return _check_id("agent_id", value, limits.max_id_bytes, required=False)


def episode_id(value: str) -> str:
    if not value:
        raise InvalidArgument("episode_id is required")
    if len(value) != 32 or any(c not in "0123456789abcdef" for c in value):
        raise InvalidArgument("episode_id must be 32 lowercase hex characters")
    return value


def scope(value: pb.Scope, limits: LimitsSettings, field: str = "scope") -> Scope:
    return Scope(
        _check_id(f"{field}.user_id", value.user_id, limits.max_id_bytes, required=False),
        _check_id(f"{field}.agent_id", value.agent_id, limits.max_id_bytes, required=False),
    )


def namespace(
    values: Sequence[str], limits: LimitsSettings, field: str = "namespace"
) -> tuple[str, ...]:
    """A keyed document's namespace (or a prefix of one): at most
    limits.max_namespace_labels labels, each non-empty, without control characters."""
    if len(values) > limits.max_namespace_labels:
        raise InvalidArgument(
            f"{field} has {len(values)} labels; the limit is {limits.max_namespace_labels}"
            " (limits.max_namespace_labels)"
        )
    for i, label in enumerate(values):
        if not label:
            raise InvalidArgument(f"{field}[{i}] is empty; a namespace label must not be")
        _check_id(f"{field}[{i}]", label, limits.max_id_bytes, required=True)
    return tuple(values)


def document_key(value: str, limits: LimitsSettings) -> str:
    return _check_id("key", value, limits.max_id_bytes, required=True)


def document_content(text: str, value: str, limits: LimitsSettings) -> None:
    """A keyed document's text (what Recall indexes; empty: the document is not recalled)
    and JSON value (required without text), together at most limits.max_message_bytes."""
    size = len(text.encode()) + len(value.encode())
    if size > limits.max_message_bytes:
        raise ResourceExhausted(
            f"text and value are {size} bytes; the limit is {limits.max_message_bytes}"
            " (limits.max_message_bytes)"
        )
    if text and not text.strip():
        raise InvalidArgument(
            "text is only white space: give the text Recall indexes, or none (the document is"
            " then not recalled)"
        )
    if not text and not value:
        raise InvalidArgument("a document needs text (what Recall indexes) or a value, or both")
    if value:
        try:
            json.loads(value)
        except ValueError as exc:
            raise InvalidArgument(f"value is not valid JSON: {exc}") from None


def timestamp_us(value: Timestamp, field: str) -> int:
    if not _MIN_SECONDS <= value.seconds <= _MAX_SECONDS or not 0 <= value.nanos < 1_000_000_000:
        raise InvalidArgument(f"{field} is not a valid timestamp")
    return value.seconds * 1_000_000 + value.nanos // 1000


def message(value: pb.Message, limits: LimitsSettings, field: str = "message") -> Message:
    role = ROLE_NAMES.get(value.role)
    if role is None:
        if value.role == pb.ROLE_UNSPECIFIED:
            raise InvalidArgument(f"{field}.role is required (user, assistant, system or tool)")
        raise InvalidArgument(f"{field}.role {value.role} is not a known role")
    tool_call = None
    if value.HasField("tool_call"):
        name = _check_id(
            f"{field}.tool_call.name", value.tool_call.name, limits.max_id_bytes, required=True
        )
        try:
            json.loads(value.tool_call.arguments or "null")
        except ValueError as exc:
            raise InvalidArgument(f"{field}.tool_call.arguments is not valid JSON: {exc}") from None
        tool_call = ToolCall(name, value.tool_call.arguments)
    if not value.content and tool_call is None:
        raise InvalidArgument(
            f"{field}.content is required (it may be empty only with a tool_call)"
        )
    size = len(value.content.encode())
    if size > limits.max_content_bytes:
        raise InvalidArgument(
            f"{field}.content is {size} bytes; the limit is {limits.max_content_bytes}"
            " (limits.max_content_bytes)"
        )
    if len(value.metadata) > limits.max_metadata_entries:
        raise InvalidArgument(
            f"{field}.metadata has {len(value.metadata)} entries; the limit is"
            f" {limits.max_metadata_entries}"
        )
    for key in value.metadata:
        _check_id(f"{field}.metadata key", key, limits.max_id_bytes, required=True)
    total = value.ByteSize()
    if total > limits.max_message_bytes:
        raise ResourceExhausted(
            f"{field} is {total} bytes serialized; the limit is {limits.max_message_bytes}"
            " (limits.max_message_bytes)"
        )
    return Message(
        role=role,
        content=value.content,
        name=_check_id(f"{field}.name", value.name, limits.max_id_bytes, required=False),
        tool_call=tool_call,
        created_at_us=(
            timestamp_us(value.created_at, f"{field}.created_at")
            if value.HasField("created_at")
            else None
        ),
        message_id=_check_id(
            f"{field}.message_id", value.message_id, limits.max_id_bytes, required=False
        ),
        metadata=dict(value.metadata),
    )


def batch(values: list[pb.Message], limits: LimitsSettings) -> list[Message]:
    if not values:
        raise InvalidArgument("messages is empty; send at least one message")
    if len(values) > limits.max_batch_messages:
        raise InvalidArgument(
            f"messages has {len(values)} items; the limit is {limits.max_batch_messages}"
            " (limits.max_batch_messages)"
        )
    return [message(m, limits, f"messages[{i}]") for i, m in enumerate(values)]


def budget(value: int, field: str) -> int | None:
    """An optional non-negative budget; 0 means the default."""
    if value < 0:
        raise InvalidArgument(f"{field} must not be negative, got {value}")
    return value or None


def page_size(value: int, limits: LimitsSettings, default: int) -> int:
    if value < 0:
        raise InvalidArgument(f"page_size must not be negative, got {value}")
    if value > limits.max_page_size:
        raise InvalidArgument(f"page_size is {value}; the limit is {limits.max_page_size}")
    return value or min(default, limits.max_page_size)


def time_range(value: pb.TimeRange) -> tuple[int | None, int | None]:
    start = timestamp_us(value.start, "time_range.start") if value.HasField("start") else None
    end = timestamp_us(value.end, "time_range.end") if value.HasField("end") else None
    if start is not None and end is not None and end < start:
        raise InvalidArgument("time_range.end is before time_range.start")
    return start, end


# Linux's PATH_MAX and NAME_MAX, in bytes.
MAX_PATH_BYTES, MAX_NAME_BYTES = 4096, 255


def backup_destination(value: str) -> Path:
    """An absolute directory path for a backup, normalised (``a/../b`` is ``b``): no control
    characters (a NUL cannot reach the file system), within the OS's path and name lengths."""
    if not value:
        raise InvalidArgument("destination is required")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise InvalidArgument("destination must not contain control characters")
    if not value.startswith("/"):
        raise InvalidArgument(f"destination must be an absolute path, got {value!r}")
    path = os.path.normpath(value)
    if len(path.encode()) > MAX_PATH_BYTES:
        raise InvalidArgument(f"destination is longer than {MAX_PATH_BYTES} bytes")
    if any(len(part.encode()) > MAX_NAME_BYTES for part in path.split("/")):
        raise InvalidArgument(f"destination has a name longer than {MAX_NAME_BYTES} bytes")
    return Path(path)


_SEQ_TOKEN = re.compile(r"[0-9]{1,20}")


def seq_token(value: str) -> int:
    """A page token that is a message seq (GetEpisode): ASCII digits only (``str.isdigit``
    also accepts "²", which ``int`` refuses), within uint64."""
    if not _SEQ_TOKEN.fullmatch(value) or int(value) >= 2**64:
        raise InvalidArgument("page_token is not a token this server issued")
    return int(value)


def pack_tokens(value: int) -> int:
    """Pack's and GetContext's ``max_tokens``."""
    if not 1 <= value <= MAX_PACK_TOKENS:
        raise InvalidArgument(f"max_tokens must be between 1 and {MAX_PACK_TOKENS}, got {value}")
    return value


def per_kind_caps(value: Mapping[str, int]) -> dict[str, int]:
    for kind, cap in value.items():
        if kind not in KINDS:
            raise InvalidArgument(f"per_kind_caps: {kind!r} is not one of {', '.join(KINDS)}")
        if cap < 0:
            raise InvalidArgument(f"per_kind_caps[{kind}] must not be negative")
    return dict(value)


def kinds(value: Sequence[str]) -> tuple[str, ...]:
    for kind in value:
        if kind not in KINDS:
            raise InvalidArgument(f"kinds: {kind!r} is not one of {', '.join(KINDS)}")
    return tuple(value)


def recipe(value: str, recipes: Container[str]) -> str:
    if value and value != "default" and value not in recipes:
        raise InvalidArgument(f"recipe: no recipe named {value!r} is configured")
    return value


@dataclass(frozen=True, slots=True)
class ContextRequest:
    """A GetContext request, every field checked: the session's id, the scope it names (its
    user is for tenancy to allow), and what it asks."""

    session_id: str
    scope: Scope
    ask: ContextAsk


def context_request(
    request: pb.GetContextRequest, limits: LimitsSettings, recipes: Container[str]
) -> ContextRequest:
    """GetContext's request, checked at once: session id, scope, budget, window share, caps,
    query, kinds and recipe."""
    sid = session_id(request.session_id, limits)
    max_tokens = pack_tokens(request.max_tokens)
    share: float | None = None
    if request.HasField("window_share"):
        share = request.window_share
        if not 0 <= share <= 1:  # NaN too
            raise InvalidArgument(f"window_share must be between 0 and 1, got {share}")
    caps = per_kind_caps(request.per_kind_caps)
    query = request.query if request.HasField("query") else ""
    size = len(query.encode())
    if query.strip() and size > limits.max_content_bytes:
        raise InvalidArgument(f"query is {size} bytes; the limit is {limits.max_content_bytes}")
    ask = ContextAsk(
        max_tokens=max_tokens,
        window_share=share,
        per_kind_caps=caps,
        query=query,
        kinds=kinds(request.kinds),
        recipe=recipe(request.recipe, recipes),
        explain=request.explain,
        story=request.story if request.HasField("story") else None,
    )
    return ContextRequest(sid, scope(request.scope, limits), ask)
