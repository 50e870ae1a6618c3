"""The Recall RPCs of ``strata.v1.MemoryService``: Recall, Pack and GetNode. Each checks its
request into a :class:`recall.Query` (or an id), calls the engine (:mod:`recall.engine`),
:func:`recall.pack.pack_recalled` or :func:`recall.nodes.get_node`, and converts the answer
(a Recall's and a Pack's on the recall's thread, not on the event loop)."""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import grpc

from daemon.codec import convert
from daemon.codec import validation as check
from daemon.codec.status import InvalidArgument, rpc
from daemon.services import tenancy
from daemon.services.episodes import episode_pb
from daemon.settings.sections import LimitsSettings
from recall import ACROSS_EPISODES, CHANNELS, Candidate, Query
from recall.engine import RecallEngine
from recall.nodes import NodeNotFound, get_node
from recall.pack import pack_recalled
from recall.recipe import RecallSettings
from recall.result import RecallResult
from stratad_client.pb import memory_pb2 as pb
from tiers.journal.store import Journal
from tiers.keyed.access import AccessCounts
from tiers.semantic.store import SemanticStore
from tiers.semantic.threads import MAX_TOPIC_CHARS, episodes_of
from tiers.working.memory import WorkingMemory

RERANKERS = ("", "none", "llm", "local")
MAX_EXCLUDED = 64  # exclude_session_ids
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _timings(result: RecallResult) -> list[pb.StageTiming]:
    return [pb.StageTiming(stage=k, ms=v) for k, v in result.timings.items()]


def _recall_response(query: Query, result: RecallResult) -> pb.RecallResponse:
    return pb.RecallResponse(
        hits=[convert.hit_pb(c, query.explain, result.weights) for c in result.hits],
        timings=_timings(result),
        rerank=result.rerank,
        rerank_note=result.rerank_note,
        degraded_channels=result.degraded,
        cached=result.cached,
    )


def _pack_response(
    access: AccessCounts | None, max_tokens: int, caps: dict[str, int], result: RecallResult
) -> pb.PackResponse:
    packed = pack_recalled(access, result, max_tokens, caps)
    return pb.PackResponse(
        text=packed.text,
        tokens=packed.tokens,
        items=[
            pb.PackItem(
                id=i.candidate.point.id,
                kind=i.candidate.point.kind,
                text=i.text,
                tokens=i.tokens,
                sources=convert.source_pbs(i.candidate.point),
                created_at=convert.timestamp(i.candidate.point.created_at_us),
                superseded=i.candidate.superseded,
            )
            for i in packed.items
        ],
        degraded_channels=packed.degraded,
        timings=_timings(result),
    )


@dataclass(frozen=True, slots=True)
class RecallRpcs:
    """Recall, Pack, GetNode."""

    engine: RecallEngine
    semantic: SemanticStore
    journal: Journal
    working: WorkingMemory
    access: AccessCounts | None
    settings: RecallSettings
    limits: LimitsSettings

    def _query(
        self,
        text: str,
        scope: pb.Scope,
        k: int,
        kinds: Sequence[str],
        time_range: pb.TimeRange,
        channels: Sequence[str] = (),
        rerank: str = "",
        explain: bool = False,
        recipe: str = "",
        thread: str = "",
        exclude_sessions: Sequence[str] = (),
    ) -> Query:
        if not text.strip():
            raise InvalidArgument("query is required")
        size = len(text.encode())
        if size > self.limits.max_content_bytes:
            raise InvalidArgument(
                f"query is {size} bytes; the limit is {self.limits.max_content_bytes}"
            )
        checked = tenancy.user_scope(check.scope(scope, self.limits), "recall never crosses users")
        settings = self.settings
        if not 1 <= k <= settings.max_k:
            raise InvalidArgument(
                f"k must be between 1 and {settings.max_k} (recall.max_k), got {k}"
            )
        check.kinds(kinds)
        for channel in channels:
            if channel not in CHANNELS:
                raise InvalidArgument(f"channels: {channel!r} is not one of {', '.join(CHANNELS)}")
        if rerank not in RERANKERS:
            raise InvalidArgument(f"rerank: {rerank!r} is not one of none, llm, local")
        check.recipe(recipe, settings.recipes)
        start, end = check.time_range(time_range)
        if len(exclude_sessions) > MAX_EXCLUDED:
            raise InvalidArgument(f"exclude_session_ids: {MAX_EXCLUDED} ids at most")
        excluded = tuple(check.session_id(s, self.limits) for s in exclude_sessions)
        if len(thread) > MAX_TOPIC_CHARS:
            raise InvalidArgument(f"thread: a topic has {MAX_TOPIC_CHARS} characters at most")
        if thread and kinds and set(kinds) <= set(ACROSS_EPISODES):
            raise InvalidArgument(
                "thread: keeps to the memories of the thread's episodes; profiles, digests "
                "and threads draw on many episodes (ask for other kinds, or GetNode the thread)"
            )
        return Query(
            text=text,
            scope=checked,
            k=k,
            recipe=settings.recipe(recipe),
            kinds=tuple(dict.fromkeys(kinds)),
            start_us=start,
            end_us=end,
            channels=tuple(dict.fromkeys(channels)),
            rerank=rerank,
            explain=explain,
            thread=thread,
            exclude_sessions=tuple(dict.fromkeys(excluded)),
        )

    async def _in_thread(self, query: Query) -> Query:
        """``query`` kept to its thread's episodes (tiers.semantic.threads)."""
        if not query.thread:
            return query
        vectors = self.semantic.wait_ready(0)[1]
        episodes = await asyncio.to_thread(episodes_of, vectors, query.scope, query.thread)
        return replace(query, episode_ids=episodes)

    @rpc
    async def Recall(
        self, request: pb.RecallRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecallResponse:
        query = self._query(
            request.query,
            request.scope,
            request.k,
            list(request.kinds),
            request.time_range,
            list(request.channels),
            request.rerank,
            request.explain,
            request.recipe,
            request.thread,
            list(request.exclude_session_ids),
        )
        query = await self._in_thread(query)
        # The reply is built on the recall's thread: the event loop serves the appends.
        return await asyncio.wrap_future(
            self.engine.submit_then(query, functools.partial(_recall_response, query))
        )

    @rpc
    async def Pack(
        self, request: pb.PackRequest, context: grpc.aio.ServicerContext
    ) -> pb.PackResponse:
        check.pack_tokens(request.max_tokens)
        check.per_kind_caps(request.per_kind_caps)
        query = self._query(
            request.query,
            request.scope,
            self.settings.max_k,
            list(request.kinds),
            request.time_range,
            recipe=request.recipe,
            thread=request.thread,
            exclude_sessions=list(request.exclude_session_ids),
        )
        query = await self._in_thread(query)
        answer = functools.partial(
            _pack_response, self.access, request.max_tokens, dict(request.per_kind_caps)
        )
        return await asyncio.wrap_future(self.engine.submit_then(query, answer))

    @rpc
    async def GetNode(
        self, request: pb.GetNodeRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetNodeResponse:
        if not _UUID.match(request.id):
            raise InvalidArgument("id must be a hit's id (a UUID)")
        scope = tenancy.effective_scope(check.scope(request.scope, self.limits))
        recipe = self.settings.recipe("")  # the chain compares as the default recipe
        view = await asyncio.to_thread(
            get_node,
            self.semantic,
            self.journal,
            request.id,
            scope,
            self.working,
            depth=recipe.updates_depth,
            similarity=recipe.updates_similarity,
        )
        if not tenancy.visible(view.point.scope.user_id):
            raise NodeNotFound(f"memory {request.id!r} not found")
        response = pb.GetNodeResponse(
            node=convert.hit_pb(Candidate(view.point), False, {}),
            messages=[convert.stored_message(m) for m in view.messages],
            journal_expired=view.journal_expired,
            children=[convert.hit_pb(Candidate(c), False, {}) for c in view.children],
            replaces=[convert.hit_pb(Candidate(p), False, {}) for p in view.replaces],
            replaced_by=[convert.hit_pb(Candidate(p), False, {}) for p in view.replaced_by],
        )
        if view.episode is not None:
            response.episode.CopyFrom(episode_pb(self.journal, view.episode))
        return response
