"""The asyncio client (grpc.aio)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from grpc_health.v1 import health_pb2

from daemon.client.channel import PathLike, aio_channel, connection
from daemon.client.context import AsyncContextMethods
from daemon.client.requests import (
    CHANNEL_OPTIONS,
    Timeish,
    default_address,
    document_request,
    end_session_request,
    forget_request,
    list_documents_request,
    list_request,
    message,
    pack_request,
    put_document_request,
    recall_request,
    remove_messages_request,
    working_memory_request,
)
from daemon.pb import admin_pb2
from daemon.pb import memory_pb2 as pb


class AsyncMemoryClient(AsyncContextMethods):
    """asyncio client (``grpc.aio``), with the same methods as :class:`MemoryClient`."""

    def __init__(
        self,
        address: str | None = None,
        *,
        timeout: float = 10.0,
        token: str | None = None,
        token_file: PathLike | None = None,
        ca_file: PathLike | None = None,
        cert_file: PathLike | None = None,
        key_file: PathLike | None = None,
    ) -> None:
        """``token``: the bearer token; ``ca_file``: TLS with this CA; ``cert_file`` and
        ``key_file``: a client certificate. None: from the environment (STRATA_TOKEN,
        STRATA_TOKEN_FILE, STRATA_TLS_CA, STRATA_TLS_CERT, STRATA_TLS_KEY)."""
        conn = connection(token, token_file, ca_file, cert_file, key_file)
        channel = aio_channel(address or default_address(), conn, CHANNEL_OPTIONS)
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
        user_id: str = "",
        timeout: float | None = None,
    ) -> pb.GetWorkingMemoryResponse:
        """The session's window. Sessions are per user: ``user_id`` names the session's user
        when several users (of the token's tenants) have a session of this id."""
        response: pb.GetWorkingMemoryResponse = await self._memory.GetWorkingMemory(
            working_memory_request(session_id, max_messages, max_tokens, user_id),
            timeout=self._t(timeout),
        )
        return response

    async def end_session(
        self, session_id: str, *, user_id: str = "", timeout: float | None = None
    ) -> pb.EndSessionResponse:
        response: pb.EndSessionResponse = await self._memory.EndSession(
            end_session_request(session_id, user_id), timeout=self._t(timeout)
        )
        return response

    async def remove_messages(
        self,
        session_id: str,
        *,
        last: int = 0,
        all: bool = False,
        user_id: str = "",
        timeout: float | None = None,
    ) -> pb.RemoveMessagesResponse:
        """Take the newest ``last`` messages (or ``all``) out of the open session, durably;
        returns them, oldest first. A session left empty ends, with no episode."""
        response: pb.RemoveMessagesResponse = await self._memory.RemoveMessages(
            remove_messages_request(session_id, last, all, user_id), timeout=self._t(timeout)
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
        req = list_request(user_id, agent_id, start, end, page_size, page_token, newest_first)
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

    async def rebuild(
        self, user_id: str = "", *, timeout: float | None = None
    ) -> admin_pb2.RebuildResponse:
        """Re-derive Tier 3 (vector points, graph) from the journal and the stored
        consolidation records, for one user or (``user_id`` empty) every user."""
        response: admin_pb2.RebuildResponse = await self._admin.Rebuild(
            admin_pb2.RebuildRequest(user_id=user_id), timeout=self._t(timeout)
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
        req = recall_request(
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
        req = pack_request(
            query, user_id, agent_id, max_tokens, per_kind_caps, kinds, start, end, recipe
        )
        response: pb.PackResponse = await self._memory.Pack(req, timeout=self._t(timeout))
        return response

    async def forget(
        self,
        *,
        user_id: str = "",
        agent_id: str = "",
        episode_ids: Iterable[str] = (),
        memory_ids: Iterable[str] = (),
        timeout: float | None = None,
    ) -> pb.ForgetResponse:
        """Delete memories everywhere: a scope (``user_id``, optionally ``agent_id``), or
        episodes, or Tier 3 memories (hit ids); exactly one of the three. Returns the counts
        per tier."""
        req = forget_request(user_id, agent_id, episode_ids, memory_ids)
        response: pb.ForgetResponse = await self._memory.Forget(req, timeout=self._t(timeout))
        return response

    async def put_document(
        self,
        namespace: str | Iterable[str],
        key: str,
        text: str,
        *,
        value: str = "",
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> pb.PutDocumentResponse:
        """Create or replace the document ``key`` of ``namespace`` (its labels; a string is
        one label) in the scope of ``user_id`` and ``agent_id``: ``text`` is what Recall
        finds, ``value`` an optional JSON document returned unchanged. Durable on return;
        recallable (kind "document") once the weaver has indexed it, within seconds."""
        req = put_document_request(namespace, key, text, value, user_id, agent_id)
        response: pb.PutDocumentResponse = await self._memory.PutDocument(
            req, timeout=self._t(timeout)
        )
        return response

    async def get_document(
        self,
        namespace: str | Iterable[str],
        key: str,
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> pb.GetDocumentResponse:
        """The document, or ``grpc.RpcError`` NOT_FOUND."""
        req = document_request(pb.GetDocumentRequest, namespace, key, user_id, agent_id)
        response: pb.GetDocumentResponse = await self._memory.GetDocument(
            req, timeout=self._t(timeout)
        )
        return response

    async def delete_document(
        self,
        namespace: str | Iterable[str],
        key: str,
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> pb.DeleteDocumentResponse:
        """Delete the document everywhere (as Forget does); ``deleted`` is false when there
        was none."""
        req = document_request(pb.DeleteDocumentRequest, namespace, key, user_id, agent_id)
        response: pb.DeleteDocumentResponse = await self._memory.DeleteDocument(
            req, timeout=self._t(timeout)
        )
        return response

    async def list_documents(
        self,
        *,
        user_id: str = "",
        agent_id: str = "",
        namespace_prefix: str | Iterable[str] = (),
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> pb.ListDocumentsResponse:
        """A page of the documents of exactly this scope (an empty ``agent_id``: those put
        without an agent) under ``namespace_prefix``, by namespace then key."""
        req = list_documents_request(user_id, agent_id, namespace_prefix, page_size, page_token)
        response: pb.ListDocumentsResponse = await self._memory.ListDocuments(
            req, timeout=self._t(timeout)
        )
        return response

    async def iter_documents(self, **kwargs: Any) -> AsyncIterator[pb.Document]:
        """Every document matching :meth:`list_documents`' filters, page after page."""
        token = ""
        while True:
            page = await self.list_documents(page_token=token, **kwargs)
            for document in page.documents:
                yield document
            token = page.next_page_token
            if not token:
                return

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
