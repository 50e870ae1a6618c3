"""The asyncio clients (``grpc.aio``): :class:`AsyncMemoryClient` and :class:`AsyncAdminClient`,
with the methods of :class:`MemoryClient` and :class:`AdminClient` (the same definitions, in
:mod:`stratad_client.memory` and :mod:`stratad_client.admin`), to be awaited; streams are async
iterators."""

from __future__ import annotations

from functools import cached_property

from stratad_client.admin import AdminApi
from stratad_client.memory import MemoryApi
from stratad_client.transport import Asyncio


class AsyncAdminClient(AdminApi[Asyncio]):
    """asyncio client of the operator's calls. Use with ``async with``, or await
    :meth:`close`."""

    _transport_class = Asyncio

    async def __aenter__(self) -> AsyncAdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncMemoryClient(MemoryApi[Asyncio]):
    """asyncio client of an agent's calls. Use with ``async with``, or await :meth:`close`."""

    _transport_class = Asyncio

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @cached_property
    def admin(self) -> AsyncAdminClient:
        """An :class:`AsyncAdminClient` on this client's connection (closed with it)."""
        return self._sibling(AsyncAdminClient)
