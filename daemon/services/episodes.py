"""The Tier 2 RPCs of ``strata.v1.MemoryService``: ListEpisodes and GetEpisode, over
:mod:`tiers.journal.store`; and Stats, the counts of the tiers and of each kind of scoped
data."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence, Sized
from dataclasses import dataclass

import grpc

from daemon.codec import convert
from daemon.codec import validation as check
from daemon.codec.status import rpc
from daemon.services import tenancy
from daemon.settings.sections import LimitsSettings
from stratad_client.pb import memory_pb2 as pb
from tiers.core.errors import EpisodeNotFound
from tiers.core.records import Episode
from tiers.journal.store import Journal
from tiers.rocks import RocksStore
from tiers.scoped import ScopedKind
from tiers.working.memory import WorkingMemory

VERSION = "0.1.0"
# A GetEpisode page stops before its messages pass this many bytes.
EPISODE_PAGE_BYTES = 16 * 1024 * 1024


def episode_pb(journal: Journal, episode: Episode) -> pb.Episode:
    return convert.episode(
        episode, journal.expires_at_us(episode), journal.is_pending(episode.episode_id)
    )


@dataclass(frozen=True, slots=True)
class EpisodeRpcs:
    """ListEpisodes, GetEpisode."""

    journal: Journal
    limits: LimitsSettings

    @rpc
    async def ListEpisodes(
        self, request: pb.ListEpisodesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListEpisodesResponse:
        scope = tenancy.effective_scope(check.scope(request.scope, self.limits))
        start, end = check.time_range(request.time_range)
        size = check.page_size(request.page_size, self.limits, default=50)
        page = await asyncio.to_thread(
            self.journal.list,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            start_us=start,
            end_us=end,
            newest_first=request.newest_first,
            page_size=size,
            page_token=request.page_token,
        )
        return pb.ListEpisodesResponse(
            episodes=[episode_pb(self.journal, e) for e in page.episodes],
            next_page_token=page.next_page_token,
        )

    @rpc
    async def GetEpisode(
        self, request: pb.GetEpisodeRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetEpisodeResponse:
        eid = check.episode_id(request.episode_id)
        size = check.page_size(request.page_size, self.limits, default=1000)
        after = 0
        if request.page_token:
            after = check.seq_token(request.page_token)
        return await asyncio.to_thread(self._get_episode, eid, size, after)

    def _get_episode(self, eid: str, size: int, after: int) -> pb.GetEpisodeResponse:
        episode = self.journal.get(eid)
        if not tenancy.visible(episode.scope.user_id):
            raise EpisodeNotFound(f"episode {eid!r} not found")  # as if it did not exist
        response = pb.GetEpisodeResponse(episode=episode_pb(self.journal, episode))
        messages = self.journal.messages(eid, after_seq=after, limit=size + 1)
        used = 0
        for i, message in enumerate(messages):
            item = convert.stored_message(message)
            used += item.ByteSize()
            if i == size or (i > 0 and used > EPISODE_PAGE_BYTES):
                response.next_page_token = str(messages[i - 1].seq)
                break
            response.messages.append(item)
        return response


class StatsRpcs:
    """Stats: the live sessions, the journal, the state store and its kinds of scoped data,
    and the daemon's uptime."""

    def __init__(
        self,
        working: WorkingMemory,
        journal: Journal,
        state: RocksStore,
        kinds: Sequence[ScopedKind],
        staged: Sized = (),
    ) -> None:
        """``staged``: the live sessions' messages not embedded yet (Tier 3's pending
        points)."""
        self._working = working
        self._journal = journal
        self._state = state
        self._kinds = tuple(kinds)
        self._staged = staged
        self._started = time.monotonic()

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
                unembedded_messages=len(self._staged),
            ),
            journal=pb.JournalStats(
                episodes=self._journal.count(),
                pending_consolidation=self._journal.pending_count(),
                pending_near_expiry=len(self._journal.near_expiry()),
                size_bytes=self._journal.size_bytes(),
                unindexed=self._journal.unindexed_count(),
            ),
            uptime_seconds=time.monotonic() - self._started,
            version=VERSION,
            state_size_bytes=self._state.size_on_disk(),
            records={kind.name: kind.count() for kind in self._kinds},
        )
