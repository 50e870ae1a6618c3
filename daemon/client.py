"""The Python client agents import: :class:`MemoryClient` (sync) and :class:`AsyncMemoryClient`.

::

    from daemon.client import MemoryClient

    with MemoryClient() as memory:  # $STRATA_ADDRESS or 127.0.0.1:50051
        memory.append("chat-1", "I moved to Berlin last week.", user_id="alice")
        memory.end_session("chat-1")
        for episode in memory.iter_episodes(user_id="alice"):
            print(episode.episode_id, episode.message_count)

Both clients take the same arguments and return the protobuf messages of
``proto/strata/v1/memory.proto`` (typed by the generated ``.pyi`` stubs). Errors are
``grpc.RpcError`` with the daemon's status code and message. Every call has a deadline
(``timeout`` seconds, per client or per call).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, cast

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc

from daemon.pb import admin_pb2, admin_pb2_grpc, memory_pb2_grpc, weaver_pb2, weaver_pb2_grpc
from daemon.pb import memory_pb2 as pb

DEFAULT_ADDRESS = "127.0.0.1:50051"
ADDRESS_ENV = "STRATA_ADDRESS"
_ROLES = {
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
    "system": pb.ROLE_SYSTEM,
    "tool": pb.ROLE_TOOL,
}
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]

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


def _list_request(
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


def _recall_request(
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


def _pack_request(
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


def _wm_request(
    session_id: str, max_messages: int | None, max_tokens: int | None
) -> pb.GetWorkingMemoryRequest:
    req = pb.GetWorkingMemoryRequest(session_id=session_id)
    if max_messages is not None:
        req.max_messages = max_messages
    if max_tokens is not None:
        req.max_tokens = max_tokens
    return req


def default_address() -> str:
    """``$STRATA_ADDRESS``, or the daemon's default listen address."""
    return os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS


class _Base:
    def __init__(self, channel: Any, timeout: float) -> None:
        self.timeout = timeout
        self._channel = channel
        self._memory = memory_pb2_grpc.MemoryServiceStub(channel)
        self._admin = admin_pb2_grpc.AdminServiceStub(channel)
        self._weaver = weaver_pb2_grpc.WeaverServiceStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)

    def _t(self, timeout: float | None) -> float:
        return self.timeout if timeout is None else timeout


class MemoryClient(_Base):
    """Blocking client. Use as a context manager, or call :meth:`close`."""

    def __init__(self, address: str | None = None, *, timeout: float = 10.0) -> None:
        channel = grpc.insecure_channel(address or default_address(), options=_CHANNEL_OPTIONS)
        super().__init__(channel, timeout)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def append(
        self,
        session_id: str,
        content: str = "",
        *,
        role: str | int = "user",
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
        **fields: Any,
    ) -> pb.AppendResponse:
        """Append one message; ``fields`` are :func:`message`'s keyword arguments."""
        req = pb.AppendRequest(
            session_id=session_id,
            scope=pb.Scope(user_id=user_id, agent_id=agent_id),
            message=message(content, role, **fields),
        )
        response: pb.AppendResponse = self._memory.Append(req, timeout=self._t(timeout))
        return response

    def append_batch(
        self,
        session_id: str,
        messages: Iterable[pb.Message],
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> list[pb.AppendResponse]:
        req = pb.AppendBatchRequest(
            session_id=session_id,
            scope=pb.Scope(user_id=user_id, agent_id=agent_id),
            messages=list(messages),
        )
        return list(self._memory.AppendBatch(req, timeout=self._t(timeout)).results)

    def get_working_memory(
        self,
        session_id: str,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
    ) -> pb.GetWorkingMemoryResponse:
        response: pb.GetWorkingMemoryResponse = self._memory.GetWorkingMemory(
            _wm_request(session_id, max_messages, max_tokens), timeout=self._t(timeout)
        )
        return response

    def end_session(
        self, session_id: str, *, timeout: float | None = None
    ) -> pb.EndSessionResponse:
        response: pb.EndSessionResponse = self._memory.EndSession(
            pb.EndSessionRequest(session_id=session_id), timeout=self._t(timeout)
        )
        return response

    def list_episodes(
        self,
        *,
        user_id: str = "",
        agent_id: str = "",
        start: Timeish = None,
        end: Timeish = None,
        page_size: int = 0,
        page_token: str = "",
        newest_first: bool = False,
        timeout: float | None = None,
    ) -> pb.ListEpisodesResponse:
        req = _list_request(user_id, agent_id, start, end, page_size, page_token, newest_first)
        response: pb.ListEpisodesResponse = self._memory.ListEpisodes(req, timeout=self._t(timeout))
        return response

    def iter_episodes(self, **kwargs: Any) -> Iterator[pb.Episode]:
        """Every episode matching :meth:`list_episodes`' filters, page after page."""
        token = ""
        while True:
            page = self.list_episodes(page_token=token, **kwargs)
            yield from page.episodes
            token = page.next_page_token
            if not token:
                return

    def get_episode(
        self,
        episode_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> pb.GetEpisodeResponse:
        req = pb.GetEpisodeRequest(
            episode_id=episode_id, page_size=page_size, page_token=page_token
        )
        response: pb.GetEpisodeResponse = self._memory.GetEpisode(req, timeout=self._t(timeout))
        return response

    def stats(self, *, timeout: float | None = None) -> pb.StatsResponse:
        response: pb.StatsResponse = self._memory.Stats(pb.StatsRequest(), timeout=self._t(timeout))
        return response

    def backup(self, destination: str, *, timeout: float | None = None) -> admin_pb2.BackupResponse:
        response: admin_pb2.BackupResponse = self._admin.Backup(
            admin_pb2.BackupRequest(destination=destination), timeout=self._t(timeout)
        )
        return response

    def recall(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str = "",
        k: int = 10,
        kinds: Iterable[str] = (),
        start: Timeish = None,
        end: Timeish = None,
        channels: Iterable[str] = (),
        rerank: str = "",
        explain: bool = False,
        recipe: str = "",
        timeout: float | None = None,
    ) -> pb.RecallResponse:
        """Ranked memories of ``user_id`` for ``query``, each with its sources."""
        req = _recall_request(
            query, user_id, agent_id, k, kinds, start, end, channels, rerank, explain, recipe
        )
        response: pb.RecallResponse = self._memory.Recall(req, timeout=self._t(timeout))
        return response

    def pack(
        self,
        query: str,
        *,
        user_id: str,
        max_tokens: int,
        agent_id: str = "",
        per_kind_caps: Mapping[str, int] | None = None,
        kinds: Iterable[str] = (),
        start: Timeish = None,
        end: Timeish = None,
        recipe: str = "",
        timeout: float | None = None,
    ) -> pb.PackResponse:
        """A prompt-ready block of the best memories, within ``max_tokens``."""
        req = _pack_request(
            query, user_id, agent_id, max_tokens, per_kind_caps, kinds, start, end, recipe
        )
        response: pb.PackResponse = self._memory.Pack(req, timeout=self._t(timeout))
        return response

    def get_node(
        self, node_id: str, *, user_id: str = "", agent_id: str = "", timeout: float | None = None
    ) -> pb.GetNodeResponse:
        """A hit's episode and exact source messages."""
        req = pb.GetNodeRequest(id=node_id, scope=pb.Scope(user_id=user_id, agent_id=agent_id))
        response: pb.GetNodeResponse = self._memory.GetNode(req, timeout=self._t(timeout))
        return response

    def run_weaver(
        self,
        *,
        episode_ids: Iterable[str] = (),
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> Iterator[weaver_pb2.RunEvent]:
        """Start a consolidation run; yields progress events, then the report. Closing the
        iterator early leaves the run going on in the daemon."""
        req = weaver_pb2.RunNowRequest(
            episode_ids=list(episode_ids), scope=pb.Scope(user_id=user_id, agent_id=agent_id)
        )
        yield from self._weaver.RunNow(req, timeout=timeout)

    def weaver_status(self, *, timeout: float | None = None) -> weaver_pb2.WeaverStatusResponse:
        response: weaver_pb2.WeaverStatusResponse = self._weaver.Status(
            weaver_pb2.WeaverStatusRequest(), timeout=self._t(timeout)
        )
        return response

    def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """The status ("SERVING", "NOT_SERVING", ...) of ``service`` ("" = the daemon)."""
        response = self._health.Check(
            health_pb2.HealthCheckRequest(service=service), timeout=self._t(timeout)
        )
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


class AsyncMemoryClient(_Base):
    """asyncio client (``grpc.aio``), with the same methods as :class:`MemoryClient`."""

    def __init__(self, address: str | None = None, *, timeout: float = 10.0) -> None:
        channel = grpc.aio.insecure_channel(address or default_address(), options=_CHANNEL_OPTIONS)
        super().__init__(channel, timeout)

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def append(
        self,
        session_id: str,
        content: str = "",
        *,
        role: str | int = "user",
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
        **fields: Any,
    ) -> pb.AppendResponse:
        req = pb.AppendRequest(
            session_id=session_id,
            scope=pb.Scope(user_id=user_id, agent_id=agent_id),
            message=message(content, role, **fields),
        )
        response: pb.AppendResponse = await self._memory.Append(req, timeout=self._t(timeout))
        return response

    async def append_batch(
        self,
        session_id: str,
        messages: Iterable[pb.Message],
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> list[pb.AppendResponse]:
        req = pb.AppendBatchRequest(
            session_id=session_id,
            scope=pb.Scope(user_id=user_id, agent_id=agent_id),
            messages=list(messages),
        )
        response = await self._memory.AppendBatch(req, timeout=self._t(timeout))
        return list(response.results)

    async def get_working_memory(
        self,
        session_id: str,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
    ) -> pb.GetWorkingMemoryResponse:
        response: pb.GetWorkingMemoryResponse = await self._memory.GetWorkingMemory(
            _wm_request(session_id, max_messages, max_tokens), timeout=self._t(timeout)
        )
        return response

    async def end_session(
        self, session_id: str, *, timeout: float | None = None
    ) -> pb.EndSessionResponse:
        response: pb.EndSessionResponse = await self._memory.EndSession(
            pb.EndSessionRequest(session_id=session_id), timeout=self._t(timeout)
        )
        return response

    async def list_episodes(
        self,
        *,
        user_id: str = "",
        agent_id: str = "",
        start: Timeish = None,
        end: Timeish = None,
        page_size: int = 0,
        page_token: str = "",
        newest_first: bool = False,
        timeout: float | None = None,
    ) -> pb.ListEpisodesResponse:
        req = _list_request(user_id, agent_id, start, end, page_size, page_token, newest_first)
        response: pb.ListEpisodesResponse = await self._memory.ListEpisodes(
            req, timeout=self._t(timeout)
        )
        return response

    async def iter_episodes(self, **kwargs: Any) -> AsyncIterator[pb.Episode]:
        token = ""
        while True:
            page = await self.list_episodes(page_token=token, **kwargs)
            for episode in page.episodes:
                yield episode
            token = page.next_page_token
            if not token:
                return

    async def get_episode(
        self,
        episode_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> pb.GetEpisodeResponse:
        req = pb.GetEpisodeRequest(
            episode_id=episode_id, page_size=page_size, page_token=page_token
        )
        response: pb.GetEpisodeResponse = await self._memory.GetEpisode(
            req, timeout=self._t(timeout)
        )
        return response

    async def stats(self, *, timeout: float | None = None) -> pb.StatsResponse:
        response: pb.StatsResponse = await self._memory.Stats(
            pb.StatsRequest(), timeout=self._t(timeout)
        )
        return response

    async def backup(
        self, destination: str, *, timeout: float | None = None
    ) -> admin_pb2.BackupResponse:
        response: admin_pb2.BackupResponse = await self._admin.Backup(
            admin_pb2.BackupRequest(destination=destination), timeout=self._t(timeout)
        )
        return response

    async def recall(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str = "",
        k: int = 10,
        kinds: Iterable[str] = (),
        start: Timeish = None,
        end: Timeish = None,
        channels: Iterable[str] = (),
        rerank: str = "",
        explain: bool = False,
        recipe: str = "",
        timeout: float | None = None,
    ) -> pb.RecallResponse:
        req = _recall_request(
            query, user_id, agent_id, k, kinds, start, end, channels, rerank, explain, recipe
        )
        response: pb.RecallResponse = await self._memory.Recall(req, timeout=self._t(timeout))
        return response

    async def pack(
        self,
        query: str,
        *,
        user_id: str,
        max_tokens: int,
        agent_id: str = "",
        per_kind_caps: Mapping[str, int] | None = None,
        kinds: Iterable[str] = (),
        start: Timeish = None,
        end: Timeish = None,
        recipe: str = "",
        timeout: float | None = None,
    ) -> pb.PackResponse:
        req = _pack_request(
            query, user_id, agent_id, max_tokens, per_kind_caps, kinds, start, end, recipe
        )
        response: pb.PackResponse = await self._memory.Pack(req, timeout=self._t(timeout))
        return response

    async def get_node(
        self, node_id: str, *, user_id: str = "", agent_id: str = "", timeout: float | None = None
    ) -> pb.GetNodeResponse:
        req = pb.GetNodeRequest(id=node_id, scope=pb.Scope(user_id=user_id, agent_id=agent_id))
        response: pb.GetNodeResponse = await self._memory.GetNode(req, timeout=self._t(timeout))
        return response

    async def health(self, service: str = "", *, timeout: float | None = None) -> str:
        response = await self._health.Check(
            health_pb2.HealthCheckRequest(service=service), timeout=self._t(timeout)
        )
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))
