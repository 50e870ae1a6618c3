"""``strata.v1.AdminService``: operator RPCs used by ``weaverctl``. The servicer
(:class:`AdminService`) hands Backup and Rebuild to :class:`MaintenanceRpcs`, Export and Import
to :class:`daemon.services.export.TransferRpcs`; :func:`admin_service` builds it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from urllib.parse import urlsplit

import grpc

from daemon.codec import convert, validation
from daemon.codec.status import FailedPrecondition, rpc
from daemon.services import tenancy
from daemon.services.export import TransferRpcs
from daemon.settings import Settings
from daemon.settings.sections import LimitsSettings
from stratad_client.pb import admin_pb2 as pb
from stratad_client.pb import admin_pb2_grpc
from tiers.rights.backup import VectorsSource, take_backup
from tiers.rocks import RocksStore
from tiers.semantic.embedding import EmbeddingUnavailable
from tiers.semantic.store import SemanticStore
from weaver.rebuild import RebuildReport


@dataclass(frozen=True, slots=True)
class BackupSources:
    """What a backup reads, and the locks it holds (Tier 3 writers first, then appends)."""

    stores: dict[str, RocksStore]
    tier3_lock: AbstractContextManager[object]
    writes_lock: AbstractContextManager[object]
    # The vector store as it stands (waits for Tier 3 to open; None when it failed to).
    vectors: Callable[[], VectorsSource | None]
    # Returns once no file of the stores holds what a Forget deleted (Purger.settle).
    settle: Callable[[], None] = lambda: None


@dataclass(frozen=True, slots=True)
class MaintenanceRpcs:
    """Backup, Rebuild."""

    backup: BackupSources
    rebuild: Callable[[str], Awaitable[RebuildReport]]
    limits: LimitsSettings

    @rpc
    async def Backup(
        self, request: pb.BackupRequest, context: grpc.aio.ServicerContext
    ) -> pb.BackupResponse:
        destination = validation.backup_destination(request.destination)
        tenancy.require_all_tenants("a backup (it holds every tenant)")
        b = self.backup
        vectors = await asyncio.to_thread(b.vectors)
        try:
            info = await asyncio.to_thread(
                take_backup,
                destination,
                b.stores,
                b.tier3_lock,
                b.writes_lock,
                vectors,
                b.settle,
            )
        except OSError as exc:  # the file system refused: permissions, read-only, no space
            raise FailedPrecondition(
                f"cannot write the backup to {str(destination)!r}: {exc.strerror or exc}"
            ) from None
        return pb.BackupResponse(
            path=str(info.path),
            stores=info.stores,
            size_bytes=info.size_bytes,
            taken_at=convert.timestamp(int(info.taken_at * 1_000_000)),
        )

    @rpc
    async def Rebuild(
        self, request: pb.RebuildRequest, context: grpc.aio.ServicerContext
    ) -> pb.RebuildResponse:
        # a token of some tenants rebuilds only them: its one tenant, or the one it names
        user_id = tenancy.effective_user(validation.user_id(request.user_id, self.limits))
        report = await self.rebuild(user_id)
        return convert.from_fields(pb.RebuildResponse, report)


@dataclass(frozen=True, slots=True)
class AdminService(admin_pb2_grpc.AdminServiceServicer):
    """Each RPC is its group's: one line of delegation, no logic here."""

    maintenance: MaintenanceRpcs
    transfer: TransferRpcs

    async def Backup(
        self, request: pb.BackupRequest, context: grpc.aio.ServicerContext
    ) -> pb.BackupResponse:
        return await self.maintenance.Backup(request, context)

    async def Rebuild(
        self, request: pb.RebuildRequest, context: grpc.aio.ServicerContext
    ) -> pb.RebuildResponse:
        return await self.maintenance.Rebuild(request, context)

    async def Export(
        self, request: pb.ExportRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ExportChunk]:
        async for chunk in self.transfer.Export(request, context):
            yield chunk

    async def Import(
        self, requests: AsyncIterator[pb.ImportChunk], context: grpc.aio.ServicerContext
    ) -> pb.ImportResponse:
        return await self.transfer.Import(requests, context)


def backup_vectors(
    semantic: SemanticStore, external: str = "", wait_seconds: float = 60.0
) -> VectorsSource | None:
    """The vector store for a backup: waits up to ``wait_seconds`` for Tier 3 to open; None
    when it failed to (the backup goes on without it). ``external`` names an external Qdrant
    (no credentials): its vectors are not captured."""
    try:
        embedder, vectors = semantic.wait_ready(wait_seconds)
    except EmbeddingUnavailable:
        if semantic.error is None:
            raise  # still loading: the operator retries
        return None
    if external:
        return VectorsSource(embedder.model_name, embedder.dim, external=external)
    copy_to = getattr(vectors, "copy_to", None)
    return VectorsSource(embedder.model_name, embedder.dim, copy_to=copy_to)


def external_vectors(settings: Settings) -> str:
    """Where an external Qdrant keeps the vectors (without credentials); "" when embedded."""
    if not settings.qdrant_url:
        return ""
    url = urlsplit(settings.qdrant_url)
    host = url.hostname or settings.qdrant_url
    where = f"{url.scheme}://{host}{f':{url.port}' if url.port else ''}" if url.scheme else host
    return f"qdrant {where}, collection {settings.vectors.collection}"
