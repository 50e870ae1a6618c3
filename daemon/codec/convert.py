"""Domain records to protobuf messages."""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from daemon.codec.validation import ROLE_NAMES
from recall import Candidate
from stratad_client.pb import memory_pb2 as pb
from tiers.core.records import Episode, Scope, StoredMessage
from tiers.keyed.anchors import Anchor
from tiers.keyed.document import Document
from tiers.semantic.vectors import MemoryPoint

_ROLES = {name: value for value, name in ROLE_NAMES.items()}
END_REASONS = {
    "client": pb.END_REASON_CLIENT,
    "idle": pb.END_REASON_IDLE,
    "capacity": pb.END_REASON_CAPACITY,
    "rollover": pb.END_REASON_ROLLOVER,
}


_M = TypeVar("_M", bound=Message)


def from_fields(message: type[_M], source: object, /, **given: Any) -> _M:
    """A ``message`` for a record it mirrors: the ``given`` fields, and every other field read
    from ``source``'s attribute of the same name, a Timestamp ``x`` from the record's
    microseconds ``x_us``. A field the record lacks raises AttributeError, so a field added to
    the message is never sent empty by mistake."""
    values = dict(given)
    for f in message.DESCRIPTOR.fields:
        if f.name in values:
            continue
        if f.message_type is Timestamp.DESCRIPTOR and hasattr(source, f"{f.name}_us"):
            values[f.name] = timestamp(getattr(source, f"{f.name}_us"))
        else:
            values[f.name] = getattr(source, f.name)
    return message(**values)


def timestamp(us: int) -> Timestamp:
    seconds, micros = divmod(us, 1_000_000)
    return Timestamp(seconds=seconds, nanos=micros * 1000)


def scope(value: Scope) -> pb.Scope:
    return pb.Scope(user_id=value.user_id, agent_id=value.agent_id)


def stored_message(value: StoredMessage) -> pb.StoredMessage:
    call = value.tool_call
    tool_call = pb.ToolCall(name=call.name, arguments=call.arguments) if call else None
    message = from_fields(pb.Message, value, role=_ROLES[value.role], tool_call=tool_call)
    return from_fields(pb.StoredMessage, value, message=message)


def episode(value: Episode, expires_at_us: int, pending: bool) -> pb.Episode:
    return from_fields(
        pb.Episode,
        value,
        scope=scope(value.scope),
        expires_at=timestamp(expires_at_us),
        end_reason=END_REASONS.get(value.end_reason, pb.END_REASON_UNSPECIFIED),
        consolidation=(
            pb.CONSOLIDATION_STATE_PENDING if pending else pb.CONSOLIDATION_STATE_CONSOLIDATED
        ),
    )


def document(value: Document) -> pb.Document:
    namespace = list(value.namespace)
    return from_fields(pb.Document, value, scope=scope(value.scope), namespace=namespace)


def source_pbs(point: MemoryPoint) -> list[pb.Source]:
    return [
        from_fields(
            pb.Source,
            s,
            episode_id=point.episode_id,
            created_at=timestamp(s.created_at_us) if s.created_at_us else None,
        )
        for s in point.sources
    ]


# The attrs a hit shows, per kind (pb.Hit.attrs): what a kind says of itself.
HIT_ATTRS = {
    "digest": ("level", "period", "title"),
    "thread": ("topic", "origin", "title"),
    "profile": ("entity", "topic"),
}
# ... and of every kind: which hit of the same answer it replaces (recall.cues.updates).
UPDATE_ATTRS = ("replaces",)


def hit_pb(c: Candidate, explain: bool, weights: dict[str, float]) -> pb.Hit:
    p = c.point
    hit = pb.Hit(
        id=p.id,
        kind=p.kind,
        text=p.text,
        score=c.score,
        created_at=timestamp(p.created_at_us),
        sources=source_pbs(p),
        superseded=c.superseded,
        episode_id=p.episode_id,
        session_id=p.session_id,
        attrs={
            k: str(p.attrs[k]) for k in (*HIT_ATTRS.get(p.kind, ()), *UPDATE_ATTRS) if k in p.attrs
        },
    )
    if p.replaced_by:  # a fact the weaver closed, or a hit a newer one of the answer replaces
        hit.attrs["replaced_by"] = p.replaced_by
    if p.valid_from_us is not None:
        hit.valid_from.CopyFrom(timestamp(p.valid_from_us))
    if p.valid_to_us is not None:
        hit.valid_to.CopyFrom(timestamp(p.valid_to_us))
    if explain:
        hit.explanation.CopyFrom(
            from_fields(
                pb.Explanation,
                c,
                channels=[
                    pb.ChannelRank(
                        channel=name,
                        rank=rank,
                        score=c.channel_scores.get(name, 0.0),
                        weight=weights.get(name, 0.0),
                    )
                    for name, rank in sorted(c.ranks.items())
                ],
                rerank=c.rerank_note,
            )
        )
    return hit


def anchor_pb(anchor: Anchor) -> pb.SessionAnchor:
    return from_fields(pb.SessionAnchor, anchor, scope=scope(anchor.scope))
