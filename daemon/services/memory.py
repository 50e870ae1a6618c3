"""``strata.v1.MemoryService``: the agent-facing RPCs over Tier 1 and Tier 2 (Recall, Forget,
the keyed documents and the context are mixed in from ``recall_rpcs``, ``forget_rpcs``,
``document_rpcs`` and ``context_rpcs``)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable

import grpc

from daemon.codec import convert
from daemon.codec import validation as check
from daemon.codec.status import rpc
from daemon.pb import memory_pb2 as pb
from daemon.pb import memory_pb2_grpc
from daemon.server import auth
from daemon.services.context import ContextRPCs
from daemon.services.documents import DocumentRPCs
from daemon.services.forget import ForgetRPCs
from daemon.services.recall import RecallRPCs
from daemon.settings import Settings
from recall.engine import RecallEngine
from tiers.core.errors import EpisodeNotFound
from tiers.core.records import Episode, Scope
from tiers.journal.store import Journal
from tiers.keyed.access import AccessCounts
from tiers.keyed.anchors import AnchorStore
from tiers.keyed.documents import DocumentStore
from tiers.keyed.pins import PinStore
from tiers.rights.forget.cascade import Forgetter
from tiers.rocks import RocksStore
from tiers.semantic.store import SemanticStore
from tiers.working.memory import WorkingMemory

VERSION = "0.1.0"
# A GetEpisode page stops before its messages pass this many bytes.
EPISODE_PAGE_BYTES = 16 * 1024 * 1024


class MemoryService(
    RecallRPCs, ForgetRPCs, DocumentRPCs, ContextRPCs, memory_pb2_grpc.MemoryServiceServicer
):
    def __init__(
        self,
        settings: Settings,
        working: WorkingMemory,
        journal: Journal,
        state: RocksStore,
        semantic: SemanticStore | None = None,
        engine: RecallEngine | None = None,
        forgetter: Forgetter | None = None,
        documents: DocumentStore | None = None,
        anchors: AnchorStore | None = None,
        pins: PinStore | None = None,
        access: AccessCounts | None = None,
    ) -> None:
        self._limits = settings.limits
        self._recall_settings = settings.recall
        self._context_settings = settings.context
        self._working = working
        self._journal = journal
        self._state = state
        self._semantic = semantic
        self._engine = engine
        self._forgetter = forgetter
        self._documents = documents
        self._anchors = anchors
        self._pins = pins
        self._access = access
        self._started = time.monotonic()

    @rpc
    async def Append(
        self, request: pb.AppendRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendResponse:
        sid = check.session_id(request.session_id, self._limits)
        scope, user, allowed = self._append_scope(check.scope(request.scope, self._limits))
        if not request.HasField("message"):
            raise check.InvalidArgument("message is required")
        message = check.message(request.message, self._limits)
        (result,) = self._working.append(sid, scope, [message], user_id=user, allowed=allowed)
        return pb.AppendResponse(seq=result.seq, duplicate=result.duplicate)

    @rpc
    async def AppendBatch(
        self, request: pb.AppendBatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendBatchResponse:
        sid = check.session_id(request.session_id, self._limits)
        scope, user, allowed = self._append_scope(check.scope(request.scope, self._limits))
        messages = check.batch(list(request.messages), self._limits)
        results = self._working.append(sid, scope, messages, user_id=user, allowed=allowed)
        return pb.AppendBatchResponse(
            results=[pb.AppendResponse(seq=r.seq, duplicate=r.duplicate) for r in results]
        )

    @rpc
    async def GetWorkingMemory(
        self, request: pb.GetWorkingMemoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetWorkingMemoryResponse:
        sid = check.session_id(request.session_id, self._limits)
        user, allowed = auth.session_user(check.scope(request.scope, self._limits).user_id)
        view = self._working.window(
            sid,
            max_messages=check.budget(request.max_messages, "max_messages"),
            max_tokens=check.budget(request.max_tokens, "max_tokens"),
            user_id=user,
            allowed=allowed,
        )
        return pb.GetWorkingMemoryResponse(
            session_id=view.session_id,
            scope=convert.scope(view.scope),
            state=pb.SESSION_STATE_OPEN if view.open else pb.SESSION_STATE_ENDED,
            messages=[convert.stored_message(m) for m in view.messages],
            total_tokens=view.total_tokens,
            log_messages=view.log_messages,
        )

    @rpc
    async def EndSession(
        self, request: pb.EndSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.EndSessionResponse:
        sid = check.session_id(request.session_id, self._limits)
        user, allowed = auth.session_user(check.scope(request.scope, self._limits).user_id)
        result = await asyncio.to_thread(
            functools.partial(self._working.end_session, sid, user_id=user, allowed=allowed)
        )
        return pb.EndSessionResponse(
            episode_id=result.episode_id, message_count=result.message_count
        )

    @rpc
    async def RemoveMessages(
        self, request: pb.RemoveMessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.RemoveMessagesResponse:
        sid = check.session_id(request.session_id, self._limits)
        user, allowed = auth.session_user(check.scope(request.scope, self._limits).user_id)
        if request.all == (request.last > 0):
            raise check.InvalidArgument(
                "set exactly one of last (how many of the newest messages to remove) and all"
            )
        result = self._working.remove_last(
            sid, None if request.all else request.last, user_id=user, allowed=allowed
        )
        return pb.RemoveMessagesResponse(
            removed=[convert.stored_message(m) for m in result.removed],
            log_messages=result.log_messages,
            state=pb.SESSION_STATE_OPEN if result.open else pb.SESSION_STATE_ENDED,
        )

    @rpc
    async def ListEpisodes(
        self, request: pb.ListEpisodesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListEpisodesResponse:
        scope = check.scope(request.scope, self._limits)
        user_id = auth.effective_user(scope.user_id)
        start, end = check.time_range(request.time_range)
        size = check.page_size(request.page_size, self._limits, default=50)
        page = await asyncio.to_thread(
            self._journal.list,
            user_id=user_id,
            agent_id=scope.agent_id,
            start_us=start,
            end_us=end,
            newest_first=request.newest_first,
            page_size=size,
            page_token=request.page_token,
        )
        return pb.ListEpisodesResponse(
            episodes=[self._episode(e) for e in page.episodes],
            next_page_token=page.next_page_token,
        )

    @rpc
    async def GetEpisode(
        self, request: pb.GetEpisodeRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetEpisodeResponse:
        eid = check.episode_id(request.episode_id)
        size = check.page_size(request.page_size, self._limits, default=1000)
        after = 0
        if request.page_token:
            after = check.seq_token(request.page_token)
        return await asyncio.to_thread(self._get_episode, eid, size, after)

    def _get_episode(self, eid: str, size: int, after: int) -> pb.GetEpisodeResponse:
        episode = self._journal.get(eid)
        if not auth.visible(episode.scope.user_id):
            raise EpisodeNotFound(f"episode {eid!r} not found")  # as if it did not exist
        response = pb.GetEpisodeResponse(episode=self._episode(episode))
        messages = self._journal.messages(eid, after_seq=after, limit=size + 1)
        used = 0
        for i, message in enumerate(messages):
            item = convert.stored_message(message)
            used += item.ByteSize()
            if i == size or (i > 0 and used > EPISODE_PAGE_BYTES):
                response.next_page_token = str(messages[i - 1].seq)
                break
            response.messages.append(item)
        return response

    @staticmethod
    def _append_scope(
        requested: Scope,
    ) -> tuple[Scope, str, Callable[[str], bool] | None]:
        """The scope an append gives (empty: the session's), and how its session is named
        (:func:`auth.session_user`)."""
        user, allowed = auth.session_user(requested.user_id)
        if requested != Scope("") and user:
            requested = Scope(user, requested.agent_id)
        return requested, user, allowed

    def _episode(self, episode: Episode) -> pb.Episode:
        return convert.episode(
            episode,
            self._journal.expires_at_us(episode),
            self._journal.is_pending(episode.episode_id),
        )

    @rpc
    async def Stats(
        self, request: pb.StatsRequest, context: grpc.aio.ServicerContext
    ) -> pb.StatsResponse:
        return await asyncio.to_thread(self._stats)

    def _stats(self) -> pb.StatsResponse:
        wm = self._working.stats()
        return pb.StatsResponse(
            working_memory=pb.WorkingMemoryStats(
                live_sessions=wm.live_sessions,
                window_messages=wm.window_messages,
                log_messages=wm.log_messages,
            ),
            journal=pb.JournalStats(
                episodes=self._journal.count(),
                pending_consolidation=self._journal.pending_count(),
                pending_near_expiry=len(self._journal.near_expiry()),
                size_bytes=self._journal.size_bytes(),
            ),
            uptime_seconds=time.monotonic() - self._started,
            version=VERSION,
            state_size_bytes=self._state.size_on_disk(),
        )
