"""``strata.v1.MemoryService``: the agent-facing RPCs. The servicer registered with the server
(:class:`MemoryService`) holds one handler object per group of RPCs and hands each RPC to its
group: sessions (:mod:`daemon.services.sessions`), episodes and stats
(:mod:`daemon.services.episodes`), Recall, Pack and GetNode (:mod:`daemon.services.recall`),
Forget (:mod:`daemon.services.forget`), the keyed documents (:mod:`daemon.services.documents`),
the context (:mod:`daemon.services.context`) and Watch (:mod:`daemon.services.watch`).
:func:`daemon.wiring.open_parts` builds it, with each handler object, over a daemon's stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from daemon.services.context import ContextRpcs
from daemon.services.documents import DocumentRpcs
from daemon.services.episodes import EpisodeRpcs, StatsRpcs
from daemon.services.forget import ForgetRpcs
from daemon.services.recall import RecallRpcs
from daemon.services.sessions import SessionRpcs
from daemon.services.watch import WatchRpcs
from stratad_client.pb import memory_pb2 as pb
from stratad_client.pb import memory_pb2_grpc


@dataclass(frozen=True, slots=True)
class MemoryService(memory_pb2_grpc.MemoryServiceServicer):
    """Each RPC is its group's: one line of delegation, no logic here."""

    sessions: SessionRpcs
    episodes: EpisodeRpcs
    stats: StatsRpcs
    recall: RecallRpcs
    forget: ForgetRpcs
    documents: DocumentRpcs
    context: ContextRpcs
    watch: WatchRpcs

    async def Append(
        self, request: pb.AppendRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendResponse:
        return await self.sessions.Append(request, context)

    async def AppendBatch(
        self, request: pb.AppendBatchRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendBatchResponse:
        return await self.sessions.AppendBatch(request, context)

    async def GetWorkingMemory(
        self, request: pb.GetWorkingMemoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetWorkingMemoryResponse:
        return await self.sessions.GetWorkingMemory(request, context)

    async def EndSession(
        self, request: pb.EndSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.EndSessionResponse:
        return await self.sessions.EndSession(request, context)

    async def RemoveMessages(
        self, request: pb.RemoveMessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.RemoveMessagesResponse:
        return await self.sessions.RemoveMessages(request, context)

    async def ListEpisodes(
        self, request: pb.ListEpisodesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListEpisodesResponse:
        return await self.episodes.ListEpisodes(request, context)

    async def GetEpisode(
        self, request: pb.GetEpisodeRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetEpisodeResponse:
        return await self.episodes.GetEpisode(request, context)

    async def Stats(
        self, request: pb.StatsRequest, context: grpc.aio.ServicerContext
    ) -> pb.StatsResponse:
        return await self.stats.Stats(request, context)

    async def Recall(
        self, request: pb.RecallRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecallResponse:
        return await self.recall.Recall(request, context)

    async def Pack(
        self, request: pb.PackRequest, context: grpc.aio.ServicerContext
    ) -> pb.PackResponse:
        return await self.recall.Pack(request, context)

    async def GetNode(
        self, request: pb.GetNodeRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetNodeResponse:
        return await self.recall.GetNode(request, context)

    async def Forget(
        self, request: pb.ForgetRequest, context: grpc.aio.ServicerContext
    ) -> pb.ForgetResponse:
        return await self.forget.Forget(request, context)

    async def PutDocument(
        self, request: pb.PutDocumentRequest, context: grpc.aio.ServicerContext
    ) -> pb.PutDocumentResponse:
        return await self.documents.PutDocument(request, context)

    async def GetDocument(
        self, request: pb.GetDocumentRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetDocumentResponse:
        return await self.documents.GetDocument(request, context)

    async def DeleteDocument(
        self, request: pb.DeleteDocumentRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteDocumentResponse:
        return await self.documents.DeleteDocument(request, context)

    async def ListDocuments(
        self, request: pb.ListDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListDocumentsResponse:
        return await self.documents.ListDocuments(request, context)

    async def GetContext(
        self, request: pb.GetContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetContextResponse:
        return await self.context.GetContext(request, context)

    async def SetAnchor(
        self, request: pb.SetAnchorRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetAnchorResponse:
        return await self.context.SetAnchor(request, context)

    async def GetAnchor(
        self, request: pb.GetAnchorRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetAnchorResponse:
        return await self.context.GetAnchor(request, context)

    async def PinMemory(
        self, request: pb.PinMemoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.PinMemoryResponse:
        return await self.context.PinMemory(request, context)

    async def Watch(
        self, request: pb.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ChangeEvent]:
        async for event in self.watch.Watch(request, context):
            yield event
