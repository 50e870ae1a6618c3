"""Domain records to protobuf messages."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from daemon.codec.validation import ROLE_NAMES
from daemon.pb import memory_pb2 as pb
from tiers.core.records import Episode, Scope, StoredMessage
from tiers.keyed.documents import Document

_ROLES = {name: value for value, name in ROLE_NAMES.items()}
END_REASONS = {
    "client": pb.END_REASON_CLIENT,
    "idle": pb.END_REASON_IDLE,
    "capacity": pb.END_REASON_CAPACITY,
    "rollover": pb.END_REASON_ROLLOVER,
}


def timestamp(us: int) -> Timestamp:
    seconds, micros = divmod(us, 1_000_000)
    return Timestamp(seconds=seconds, nanos=micros * 1000)


def scope(value: Scope) -> pb.Scope:
    return pb.Scope(user_id=value.user_id, agent_id=value.agent_id)


def stored_message(value: StoredMessage) -> pb.StoredMessage:
    message = pb.Message(
        role=_ROLES[value.role],
        content=value.content,
        name=value.name,
        created_at=timestamp(value.created_at_us),
        message_id=value.message_id,
        metadata=value.metadata,
    )
    if value.tool_call is not None:
        message.tool_call.name = value.tool_call.name
        message.tool_call.arguments = value.tool_call.arguments
    return pb.StoredMessage(
        seq=value.seq,
        message=message,
        received_at=timestamp(value.received_at_us),
        tokens=value.tokens,
    )


def episode(value: Episode, expires_at_us: int, pending: bool) -> pb.Episode:
    return pb.Episode(
        episode_id=value.episode_id,
        session_id=value.session_id,
        scope=scope(value.scope),
        started_at=timestamp(value.started_at_us),
        ended_at=timestamp(value.ended_at_us),
        flushed_at=timestamp(value.flushed_at_us),
        expires_at=timestamp(expires_at_us),
        message_count=value.message_count,
        first_seq=value.first_seq,
        last_seq=value.last_seq,
        end_reason=END_REASONS.get(value.end_reason, pb.END_REASON_UNSPECIFIED),
        consolidation=(
            pb.CONSOLIDATION_STATE_PENDING if pending else pb.CONSOLIDATION_STATE_CONSOLIDATED
        ),
    )


def document(value: Document) -> pb.Document:
    return pb.Document(
        scope=scope(value.scope),
        namespace=list(value.namespace),
        key=value.key,
        text=value.text,
        value=value.value,
        created_at=timestamp(value.created_at_us),
        updated_at=timestamp(value.updated_at_us),
        id=value.id,
    )
