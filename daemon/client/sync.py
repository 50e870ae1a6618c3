"""The blocking client."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2

from daemon.client.base import CHANNEL_OPTIONS
from daemon.client.channel import Connection, sync_channel
from daemon.client.context import ContextMethods
from daemon.client.requests import (
    Timeish,
    append_batch_request,
    append_request,
    append_results,
    document_request,
    end_session_request,
    episode_request,
    forget_request,
    import_chunks,
    list_documents_request,
    list_request,
    node_request,
    pack_request,
    put_document_request,
    recall_request,
    remove_messages_request,
    serving_status,
    working_memory_request,
)
from daemon.pb import admin_pb2, weaver_pb2
from daemon.pb import memory_pb2 as pb

T = TypeVar("T")


def _pages(page: Callable[[str], Any], items: Callable[[Any], Iterable[T]]) -> Iterator[T]:
    """The ``items`` of ``page(token)``, page after page, until a page has no next token."""
    token = ""
    while True:
        reply = page(token)
        yield from items(reply)
        token = reply.next_page_token
        if not token:
            return


class MemoryClient(ContextMethods):
    """Blocking client. Use as a context manager, or call :meth:`close`."""

    def _open_channel(self, address: str, conn: Connection) -> grpc.Channel:
        return sync_channel(address, conn, CHANNEL_OPTIONS)

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
        req = append_request(session_id, content, role, user_id, agent_id, fields)
        return self._memory.Append(req, timeout=self._t(timeout))

    def append_batch(
        self,
        session_id: str,
        messages: Iterable[pb.Message],
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> list[pb.AppendResponse]:
        req = append_batch_request(session_id, messages, user_id, agent_id)
        return append_results(self._memory.AppendBatch(req, timeout=self._t(timeout)))

    def get_working_memory(
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
        return self._memory.GetWorkingMemory(
            working_memory_request(session_id, max_messages, max_tokens, user_id),
            timeout=self._t(timeout),
        )

    def end_session(
        self, session_id: str, *, user_id: str = "", timeout: float | None = None
    ) -> pb.EndSessionResponse:
        return self._memory.EndSession(
            end_session_request(session_id, user_id), timeout=self._t(timeout)
        )

    def remove_messages(
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
        return self._memory.RemoveMessages(
            remove_messages_request(session_id, last, all, user_id), timeout=self._t(timeout)
        )

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
        req = list_request(user_id, agent_id, start, end, page_size, page_token, newest_first)
        return self._memory.ListEpisodes(req, timeout=self._t(timeout))

    def iter_episodes(self, **kwargs: Any) -> Iterator[pb.Episode]:
        """Every episode matching :meth:`list_episodes`' filters, page after page."""
        yield from _pages(
            lambda token: self.list_episodes(page_token=token, **kwargs), lambda p: p.episodes
        )

    def get_episode(
        self,
        episode_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> pb.GetEpisodeResponse:
        req = episode_request(episode_id, page_size, page_token)
        return self._memory.GetEpisode(req, timeout=self._t(timeout))

    def stats(self, *, timeout: float | None = None) -> pb.StatsResponse:
        return self._memory.Stats(pb.StatsRequest(), timeout=self._t(timeout))

    def backup(self, destination: str, *, timeout: float | None = None) -> admin_pb2.BackupResponse:
        return self._admin.Backup(
            admin_pb2.BackupRequest(destination=destination), timeout=self._t(timeout)
        )

    def rebuild(
        self, user_id: str = "", *, timeout: float | None = None
    ) -> admin_pb2.RebuildResponse:
        """Re-derive Tier 3 (vector points, graph) from the journal and the stored
        consolidation records, for one user or (``user_id`` empty) every user."""
        return self._admin.Rebuild(
            admin_pb2.RebuildRequest(user_id=user_id), timeout=self._t(timeout)
        )

    def export(
        self, user_id: str = "", *, agent_id: str = "", timeout: float | None = None
    ) -> Iterator[admin_pb2.ExportChunk]:
        """Everything of ``user_id`` (or of its agent ``agent_id``) as a stream: progress
        counts while the daemon makes the export, then the JSON Lines file in chunks
        (``data``, to be written in order), then the final counts (``done``). ``timeout``
        bounds the whole stream (None: no deadline)."""
        req = admin_pb2.ExportRequest(user_id=user_id, agent_id=agent_id)
        yield from self._admin.Export(req, timeout=timeout)

    def import_(
        self, data: Iterable[bytes], *, user_id: str = "", timeout: float | None = None
    ) -> admin_pb2.ImportResponse:
        """Import an export file, given as byte chunks of any size in file order. The user is
        the file's; ``user_id``, when given, must be the same. ``timeout`` bounds the whole
        call, embedding included (None: no deadline)."""
        return self._admin.Import(import_chunks(data, user_id), timeout=timeout)

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
        req = recall_request(
            query, user_id, agent_id, k, kinds, start, end, channels, rerank, explain, recipe
        )
        return self._memory.Recall(req, timeout=self._t(timeout))

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
        req = pack_request(
            query, user_id, agent_id, max_tokens, per_kind_caps, kinds, start, end, recipe
        )
        return self._memory.Pack(req, timeout=self._t(timeout))

    def forget(
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
        return self._memory.Forget(req, timeout=self._t(timeout))

    def put_document(
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
        return self._memory.PutDocument(req, timeout=self._t(timeout))

    def get_document(
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
        return self._memory.GetDocument(req, timeout=self._t(timeout))

    def delete_document(
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
        return self._memory.DeleteDocument(req, timeout=self._t(timeout))

    def list_documents(
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
        return self._memory.ListDocuments(req, timeout=self._t(timeout))

    def iter_documents(self, **kwargs: Any) -> Iterator[pb.Document]:
        """Every document matching :meth:`list_documents`' filters, page after page."""
        yield from _pages(
            lambda token: self.list_documents(page_token=token, **kwargs), lambda p: p.documents
        )

    def get_node(
        self, node_id: str, *, user_id: str = "", agent_id: str = "", timeout: float | None = None
    ) -> pb.GetNodeResponse:
        """A hit's episode and exact source messages."""
        req = node_request(node_id, user_id, agent_id)
        return self._memory.GetNode(req, timeout=self._t(timeout))

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
        return self._weaver.Status(weaver_pb2.WeaverStatusRequest(), timeout=self._t(timeout))

    def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """The status ("SERVING", "NOT_SERVING", ...) of ``service`` ("" = the daemon)."""
        req = health_pb2.HealthCheckRequest(service=service)
        return serving_status(self._health.Check(req, timeout=self._t(timeout)))
