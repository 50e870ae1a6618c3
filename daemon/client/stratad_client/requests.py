"""What both clients share: addresses, and one builder per request (and reader per reply, where
the clients return less than the reply).

Every request the clients send is built here (one of a single field or none where it is sent),
and every reply they post-process is read here: a client method only describes its call
(:mod:`stratad_client.calls`), which the client's transport runs, blocking or awaited.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2

from stratad_client.pb import admin_pb2
from stratad_client.pb import memory_pb2 as pb

DEFAULT_ADDRESS = "127.0.0.1:50051"
ADDRESS_ENV = "STRATA_ADDRESS"
_ROLES = {
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
    "system": pb.ROLE_SYSTEM,
    "tool": pb.ROLE_TOOL,
}

Timeish = dt.datetime | Timestamp | None


def timestamp(value: Timeish) -> Timestamp | None:
    """A Timestamp from an aware datetime (naive means UTC) or a Timestamp."""
    if value is None or isinstance(value, Timestamp):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(dt.UTC))
    return ts


def message(
    content: str = "",
    role: str | int = "user",
    *,
    name: str = "",
    created_at: Timeish = None,
    message_id: str = "",
    metadata: Mapping[str, str] | None = None,
    tool_call: tuple[str, str] | None = None,
) -> pb.Message:
    """Build a :class:`Message`. ``role`` is "user", "assistant", "system", "tool" or an enum
    value; ``tool_call`` is ``(name, arguments_json)``."""
    msg = pb.Message(
        role=_ROLES[role] if isinstance(role, str) else cast(pb.Role, role),
        content=content,
        name=name,
        message_id=message_id,
        metadata=dict(metadata or {}),
    )
    ts = timestamp(created_at)
    if ts is not None:
        msg.created_at.CopyFrom(ts)
    if tool_call is not None:
        msg.tool_call.name, msg.tool_call.arguments = tool_call
    return msg


def append_request(
    session_id: str,
    content: str,
    role: str | int,
    user_id: str,
    agent_id: str,
    fields: Mapping[str, Any],
) -> pb.AppendRequest:
    """An AppendRequest of one message; ``fields`` are :func:`message`'s keyword arguments."""
    return pb.AppendRequest(
        session_id=session_id,
        scope=pb.Scope(user_id=user_id, agent_id=agent_id),
        message=message(content, role, **fields),
    )


def append_batch_request(
    session_id: str, messages: Iterable[pb.Message], user_id: str, agent_id: str
) -> pb.AppendBatchRequest:
    return pb.AppendBatchRequest(
        session_id=session_id,
        scope=pb.Scope(user_id=user_id, agent_id=agent_id),
        messages=list(messages),
    )


def append_results(response: pb.AppendBatchResponse) -> list[pb.AppendResponse]:
    """What the clients return of an AppendBatch reply: one result per message, in order."""
    return list(response.results)


def forget_request(
    user_id: str, agent_id: str, episode_ids: Iterable[str], memory_ids: Iterable[str]
) -> pb.ForgetRequest:
    """A ForgetRequest; ``user_id`` (with ``agent_id``) becomes the scope when given."""
    req = pb.ForgetRequest(episode_ids=list(episode_ids), memory_ids=list(memory_ids))
    if user_id or agent_id:
        req.scope.CopyFrom(pb.Scope(user_id=user_id, agent_id=agent_id))
    return req


def labels(namespace: str | Iterable[str]) -> list[str]:
    """A namespace as its labels; a string alone is one label (not its characters)."""
    return [namespace] if isinstance(namespace, str) else list(namespace)


DocumentRef = pb.GetDocumentRequest | pb.DeleteDocumentRequest


def document_request(
    kind: type[DocumentRef], namespace: str | Iterable[str], key: str, user_id: str, agent_id: str
) -> Any:
    """A GetDocumentRequest or DeleteDocumentRequest."""
    return kind(
        scope=pb.Scope(user_id=user_id, agent_id=agent_id), namespace=labels(namespace), key=key
    )


def put_document_request(
    namespace: str | Iterable[str], key: str, text: str, value: str, user_id: str, agent_id: str
) -> pb.PutDocumentRequest:
    return pb.PutDocumentRequest(
        scope=pb.Scope(user_id=user_id, agent_id=agent_id),
        namespace=labels(namespace),
        key=key,
        text=text,
        value=value,
    )


def list_documents_request(
    user_id: str,
    agent_id: str,
    namespace_prefix: str | Iterable[str],
    page_size: int,
    page_token: str,
) -> pb.ListDocumentsRequest:
    return pb.ListDocumentsRequest(
        scope=pb.Scope(user_id=user_id, agent_id=agent_id),
        namespace_prefix=labels(namespace_prefix),
        page_size=page_size,
        page_token=page_token,
    )


# Bytes per ImportChunk: well under the daemon's limits.max_request_bytes (8 MiB by default).
IMPORT_CHUNK_BYTES = 1024 * 1024


def import_chunks(data: Iterable[bytes], user_id: str = "") -> Iterator[admin_pb2.ImportChunk]:
    """The Import request stream: ``data`` re-cut into chunks of IMPORT_CHUNK_BYTES at most,
    the first naming ``user_id`` (empty: the file's user)."""
    first = True
    for block in data:
        for i in range(0, len(block), IMPORT_CHUNK_BYTES):
            yield admin_pb2.ImportChunk(
                user_id=user_id if first else "", data=block[i : i + IMPORT_CHUNK_BYTES]
            )
            first = False
    if first:  # an empty file: one empty chunk, so the daemon can say what is wrong
        yield admin_pb2.ImportChunk(user_id=user_id)


def list_request(
    user_id: str,
    agent_id: str,
    start: Timeish,
    end: Timeish,
    page_size: int,
    page_token: str,
    newest_first: bool,
) -> pb.ListEpisodesRequest:
    req = pb.ListEpisodesRequest(
        scope=pb.Scope(user_id=user_id, agent_id=agent_id),
        page_size=page_size,
        page_token=page_token,
        newest_first=newest_first,
    )
    _set_range(req.time_range, start, end)
    return req


def recall_request(
    query: str,
    user_id: str,
    agent_id: str,
    k: int,
    kinds: Iterable[str],
    start: Timeish,
    end: Timeish,
    channels: Iterable[str],
    rerank: str,
    explain: bool,
    recipe: str,
) -> pb.RecallRequest:
    req = pb.RecallRequest(
        query=query,
        scope=pb.Scope(user_id=user_id, agent_id=agent_id),
        k=k,
        kinds=list(kinds),
        channels=list(channels),
        rerank=rerank,
        explain=explain,
        recipe=recipe,
    )
    _set_range(req.time_range, start, end)
    return req


def pack_request(
    query: str,
    user_id: str,
    agent_id: str,
    max_tokens: int,
    per_kind_caps: Mapping[str, int] | None,
    kinds: Iterable[str],
    start: Timeish,
    end: Timeish,
    recipe: str,
) -> pb.PackRequest:
    req = pb.PackRequest(
        query=query,
        scope=pb.Scope(user_id=user_id, agent_id=agent_id),
        max_tokens=max_tokens,
        per_kind_caps=dict(per_kind_caps or {}),
        kinds=list(kinds),
        recipe=recipe,
    )
    _set_range(req.time_range, start, end)
    return req


def _set_range(target: pb.TimeRange, start: Timeish, end: Timeish) -> None:
    if (s := timestamp(start)) is not None:
        target.start.CopyFrom(s)
    if (e := timestamp(end)) is not None:
        target.end.CopyFrom(e)


def episode_request(episode_id: str, page_size: int, page_token: str) -> pb.GetEpisodeRequest:
    return pb.GetEpisodeRequest(episode_id=episode_id, page_size=page_size, page_token=page_token)


def node_request(node_id: str, user_id: str, agent_id: str) -> pb.GetNodeRequest:
    return pb.GetNodeRequest(id=node_id, scope=pb.Scope(user_id=user_id, agent_id=agent_id))


def working_memory_request(
    session_id: str, max_messages: int | None, max_tokens: int | None, user_id: str = ""
) -> pb.GetWorkingMemoryRequest:
    req = pb.GetWorkingMemoryRequest(session_id=session_id, scope=pb.Scope(user_id=user_id))
    if max_messages is not None:
        req.max_messages = max_messages
    if max_tokens is not None:
        req.max_tokens = max_tokens
    return req


def end_session_request(session_id: str, user_id: str = "") -> pb.EndSessionRequest:
    return pb.EndSessionRequest(session_id=session_id, scope=pb.Scope(user_id=user_id))


def remove_messages_request(
    session_id: str, last: int, all: bool, user_id: str = ""
) -> pb.RemoveMessagesRequest:
    return pb.RemoveMessagesRequest(
        session_id=session_id, scope=pb.Scope(user_id=user_id), last=last, all=all
    )


def get_context_request(
    session_id: str,
    max_tokens: int,
    query: str | None,
    user_id: str,
    agent_id: str,
    per_kind_caps: Mapping[str, int] | None,
    window_share: float | None,
    kinds: Iterable[str],
    recipe: str,
    explain: bool,
) -> pb.GetContextRequest:
    req = pb.GetContextRequest(
        session_id=session_id,
        max_tokens=max_tokens,
        scope=pb.Scope(user_id=user_id, agent_id=agent_id),
        per_kind_caps=dict(per_kind_caps or {}),
        kinds=list(kinds),
        recipe=recipe,
        explain=explain,
    )
    if query is not None:
        req.query = query
    if window_share is not None:
        req.window_share = window_share
    return req


def set_anchor_request(
    session_id: str, text: str, user_id: str, agent_id: str
) -> pb.SetAnchorRequest:
    return pb.SetAnchorRequest(
        session_id=session_id, scope=pb.Scope(user_id=user_id, agent_id=agent_id), text=text
    )


def get_anchor_request(session_id: str, user_id: str) -> pb.GetAnchorRequest:
    return pb.GetAnchorRequest(session_id=session_id, scope=pb.Scope(user_id=user_id))


def pin_request(memory_id: str, pinned: bool, user_id: str, agent_id: str) -> pb.PinMemoryRequest:
    return pb.PinMemoryRequest(
        scope=pb.Scope(user_id=user_id, agent_id=agent_id), memory_id=memory_id, pinned=pinned
    )


def serving_status(response: health_pb2.HealthCheckResponse) -> str:
    """What the clients return of a health check: the status's name ("SERVING", ...)."""
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def default_address() -> str:
    """``$STRATA_ADDRESS``, or the daemon's default listen address."""
    return os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS
