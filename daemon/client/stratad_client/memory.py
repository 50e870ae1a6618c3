"""The agent's calls (MemoryService), defined once for :class:`stratad_client.MemoryClient` and
:class:`stratad_client.AsyncMemoryClient`.

Parameters every method shares: ``user_id`` and ``agent_id`` name the scope (the user, and one
agent of the user; empty: none, or the token's tenant where it has one); ``timeout`` is this
call's deadline in seconds (None: the client's ``timeout``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from stratad_client.base import T
from stratad_client.calls import Pages, Stream, Unary
from stratad_client.context import ContextApi
from stratad_client.pb import memory_pb2 as pb
from stratad_client.requests import (
    Timeish,
    append_batch_request,
    append_request,
    append_results,
    document_request,
    end_session_request,
    episode_request,
    forget_request,
    list_documents_request,
    list_request,
    node_request,
    pack_request,
    put_document_request,
    recall_request,
    remove_messages_request,
    working_memory_request,
)
from stratad_client.rpc import stream, unary


class MemoryApi(ContextApi[T]):
    """The MemoryService calls an agent makes. Parameters every method shares: ``user_id`` and
    ``agent_id`` name the scope (the user, and one agent of the user); ``timeout`` is the
    call's deadline in seconds (None: the client's)."""

    @unary
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
    ) -> Unary[pb.AppendResponse]:
        """Append one message (``content``, of ``role``: "user", "assistant", "system",
        "tool" or an enum value) to session ``session_id``; durable on return. ``fields``
        are :func:`message`'s other keyword arguments (``name``, ``created_at``,
        ``message_id``, ``metadata``, ``tool_call``)."""
        req = append_request(session_id, content, role, user_id, agent_id, fields)
        return Unary(self._memory.Append, req, self._t(timeout))

    @unary
    def append_batch(
        self,
        session_id: str,
        messages: Iterable[pb.Message],
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> Unary[list[pb.AppendResponse]]:
        """Append ``messages`` (made with :func:`message`) to session ``session_id`` at once,
        in order, all or none; one result per message."""
        req = append_batch_request(session_id, messages, user_id, agent_id)
        return Unary(self._memory.AppendBatch, req, self._t(timeout), append_results)

    @unary
    def get_working_memory(
        self,
        session_id: str,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        user_id: str = "",
        timeout: float | None = None,
    ) -> Unary[pb.GetWorkingMemoryResponse]:
        """The window of session ``session_id``: its newest messages, at most
        ``max_messages`` and ``max_tokens`` (None: the daemon's window). Sessions are per
        user: ``user_id`` names the session's user when several users (of the token's
        tenants) have a session of this id."""
        req = working_memory_request(session_id, max_messages, max_tokens, user_id)
        return Unary(self._memory.GetWorkingMemory, req, self._t(timeout))

    @unary
    def end_session(
        self, session_id: str, *, user_id: str = "", timeout: float | None = None
    ) -> Unary[pb.EndSessionResponse]:
        """End session ``session_id``: its messages become an episode of the journal."""
        req = end_session_request(session_id, user_id)
        return Unary(self._memory.EndSession, req, self._t(timeout))

    @unary
    def remove_messages(
        self,
        session_id: str,
        *,
        last: int = 0,
        all: bool = False,
        user_id: str = "",
        timeout: float | None = None,
    ) -> Unary[pb.RemoveMessagesResponse]:
        """Take the newest ``last`` messages (or ``all``) out of the open session
        ``session_id``, durably; returns them, oldest first. A session left empty ends, with
        no episode."""
        req = remove_messages_request(session_id, last, all, user_id)
        return Unary(self._memory.RemoveMessages, req, self._t(timeout))

    @unary
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
    ) -> Unary[pb.ListEpisodesResponse]:
        """A page of the episodes of the scope that overlap ``start``..``end`` (datetimes or
        Timestamps; None: open), at most ``page_size`` (0: the daemon's), from
        ``page_token`` (a reply's ``next_page_token``), oldest first or ``newest_first``."""
        req = list_request(user_id, agent_id, start, end, page_size, page_token, newest_first)
        return Unary(self._memory.ListEpisodes, req, self._t(timeout))

    @stream
    def iter_episodes(self, **kwargs: Any) -> Pages[pb.Episode]:
        """Every episode matching :meth:`list_episodes`' filters (``kwargs``: its keyword
        arguments), page after page."""
        return type(self).list_episodes.pages(self, kwargs, _episodes)

    @unary
    def get_episode(
        self,
        episode_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Unary[pb.GetEpisodeResponse]:
        """Episode ``episode_id`` with a page of its messages: at most ``page_size`` (0: the
        daemon's), from ``page_token`` (a reply's ``next_page_token``)."""
        req = episode_request(episode_id, page_size, page_token)
        return Unary(self._memory.GetEpisode, req, self._t(timeout))

    @unary
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
        thread: str = "",
        exclude_session_ids: Iterable[str] = (),
        timeout: float | None = None,
    ) -> Unary[pb.RecallResponse]:
        """The ``k`` best memories of ``user_id`` for ``query``, each with its sources:
        ``kinds`` (e.g. "fact", "summary"; empty: all), within ``start``..``end``, from
        ``channels`` ("vector", "keyword", "graph"; empty: the daemon's), reranked by
        ``rerank`` (empty: the daemon's), with scores explained when ``explain``; ``recipe``
        names a recall recipe of the daemon; ``thread`` keeps to one story thread's memories
        (its topic); ``exclude_session_ids``: no memory of these sessions."""
        req = recall_request(
            query, user_id, agent_id, k, kinds, start, end, channels, rerank, explain, recipe
        )
        req.thread = thread
        req.exclude_session_ids.extend(exclude_session_ids)
        return Unary(self._memory.Recall, req, self._t(timeout))

    @unary
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
        thread: str = "",
        exclude_session_ids: Iterable[str] = (),
        timeout: float | None = None,
    ) -> Unary[pb.PackResponse]:
        """A prompt-ready block of the best memories of ``user_id`` for ``query``, within
        ``max_tokens`` (at most ``per_kind_caps`` tokens per kind), of ``kinds``, within
        ``start``..``end``; ``recipe`` names a recall recipe of the daemon; ``thread`` keeps
        to one story thread's memories; ``exclude_session_ids``: none of these sessions'."""
        req = pack_request(
            query, user_id, agent_id, max_tokens, per_kind_caps, kinds, start, end, recipe
        )
        req.thread = thread
        req.exclude_session_ids.extend(exclude_session_ids)
        return Unary(self._memory.Pack, req, self._t(timeout))

    @unary
    def forget(
        self,
        *,
        user_id: str = "",
        agent_id: str = "",
        episode_ids: Iterable[str] = (),
        memory_ids: Iterable[str] = (),
        timeout: float | None = None,
    ) -> Unary[pb.ForgetResponse]:
        """Delete memories everywhere: a scope (``user_id``, optionally ``agent_id``), or
        episodes (``episode_ids``), or Tier 3 memories (``memory_ids``: hit ids); exactly one
        of the three. Returns the counts per tier."""
        req = forget_request(user_id, agent_id, episode_ids, memory_ids)
        return Unary(self._memory.Forget, req, self._t(timeout))

    @unary
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
    ) -> Unary[pb.PutDocumentResponse]:
        """Create or replace the document ``key`` of ``namespace`` (its labels; a string is
        one label) in the scope of ``user_id`` and ``agent_id``: ``text`` is what Recall
        finds, ``value`` an optional JSON document returned unchanged. Durable on return;
        recallable (kind "document") once the weaver has indexed it, within seconds."""
        req = put_document_request(namespace, key, text, value, user_id, agent_id)
        return Unary(self._memory.PutDocument, req, self._t(timeout))

    @unary
    def get_document(
        self,
        namespace: str | Iterable[str],
        key: str,
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> Unary[pb.GetDocumentResponse]:
        """The document ``key`` of ``namespace``, or :class:`NotFoundError`."""
        req = document_request(pb.GetDocumentRequest, namespace, key, user_id, agent_id)
        return Unary(self._memory.GetDocument, req, self._t(timeout))

    @unary
    def delete_document(
        self,
        namespace: str | Iterable[str],
        key: str,
        *,
        user_id: str = "",
        agent_id: str = "",
        timeout: float | None = None,
    ) -> Unary[pb.DeleteDocumentResponse]:
        """Delete the document ``key`` of ``namespace`` everywhere (as Forget does);
        ``deleted`` is false when there was none."""
        req = document_request(pb.DeleteDocumentRequest, namespace, key, user_id, agent_id)
        return Unary(self._memory.DeleteDocument, req, self._t(timeout))

    @unary
    def list_documents(
        self,
        *,
        user_id: str = "",
        agent_id: str = "",
        namespace_prefix: str | Iterable[str] = (),
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> Unary[pb.ListDocumentsResponse]:
        """A page of the documents of exactly this scope (an empty ``agent_id``: those put
        without an agent) under ``namespace_prefix``, by namespace then key: at most
        ``page_size`` (0: the daemon's), from ``page_token`` (a reply's
        ``next_page_token``)."""
        req = list_documents_request(user_id, agent_id, namespace_prefix, page_size, page_token)
        return Unary(self._memory.ListDocuments, req, self._t(timeout))

    @stream
    def iter_documents(self, **kwargs: Any) -> Pages[pb.Document]:
        """Every document matching :meth:`list_documents`' filters (``kwargs``: its keyword
        arguments), page after page."""
        return type(self).list_documents.pages(self, kwargs, _documents)

    @unary
    def get_node(
        self, node_id: str, *, user_id: str = "", agent_id: str = "", timeout: float | None = None
    ) -> Unary[pb.GetNodeResponse]:
        """The episode and exact source messages of ``node_id`` (a hit's id)."""
        req = node_request(node_id, user_id, agent_id)
        return Unary(self._memory.GetNode, req, self._t(timeout))

    @stream
    def watch(
        self,
        *,
        user_id: str = "",
        agent_id: str = "",
        cursor: str = "",
        from_oldest: bool = False,
        types: Iterable[str] = (),
        catch_up: bool = False,
        timeout: float | None = None,
    ) -> Stream[pb.ChangeEvent]:
        """The changes of the user's memory as they are written (``ChangeEvent``), after
        ``cursor`` (the last event's ``cursor``; empty: from now, or everything kept with
        ``from_oldest``), of ``types`` only when given. The stream stays open (with
        ``catch_up``: until what was written up to then is sent); ``timeout`` bounds it
        (None: no deadline). Raises OutOfRangeError when retention removed changes
        after ``cursor``, UnavailableError when the daemon stops (watch again from the last
        cursor)."""
        scope = pb.Scope(user_id=user_id, agent_id=agent_id)
        req = pb.WatchRequest(
            scope=scope, cursor=cursor, from_oldest=from_oldest, catch_up=catch_up
        )
        req.types.extend(types)
        return Stream(self._memory.Watch, req, timeout)


def _episodes(reply: pb.ListEpisodesResponse) -> Iterable[pb.Episode]:
    return reply.episodes


def _documents(reply: pb.ListDocumentsResponse) -> Iterable[pb.Document]:
    return reply.documents
