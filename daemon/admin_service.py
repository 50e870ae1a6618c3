"""``strata.v1.AdminService``: operator RPCs used by ``weaverctl``."""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from pathlib import Path

import grpc

from daemon import convert
from daemon.errors import InvalidArgument, rpc
from daemon.pb import admin_pb2 as pb
from daemon.pb import admin_pb2_grpc
from tiers.backup import take_backup
from tiers.rocks import RocksStore


class AdminService(admin_pb2_grpc.AdminServiceServicer):
    def __init__(
        self, stores: dict[str, RocksStore], quiesce: AbstractContextManager[object]
    ) -> None:
        self._stores = stores
        self._quiesce = quiesce

    @rpc
    async def Backup(
        self, request: pb.BackupRequest, context: grpc.aio.ServicerContext
    ) -> pb.BackupResponse:
        if not request.destination:
            raise InvalidArgument("destination is required")
        info = await asyncio.to_thread(
            take_backup, Path(request.destination), self._stores, self._quiesce
        )
        return pb.BackupResponse(
            path=str(info.path),
            stores=info.stores,
            size_bytes=info.size_bytes,
            taken_at=convert.timestamp(int(info.taken_at * 1_000_000)),
        )
