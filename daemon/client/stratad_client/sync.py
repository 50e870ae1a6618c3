"""The blocking clients: :class:`MemoryClient` (an agent's calls) and :class:`AdminClient`
(the operator's). Their methods are defined once for both transports, in
:mod:`stratad_client.memory` and :mod:`stratad_client.admin`."""

from __future__ import annotations

from functools import cached_property

from stratad_client.admin import AdminApi
from stratad_client.memory import MemoryApi
from stratad_client.transport import Blocking


class AdminClient(AdminApi[Blocking]):
    """Blocking client of the operator's calls. Use as a context manager, or call
    :meth:`close`."""

    _transport_class = Blocking

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemoryClient(MemoryApi[Blocking]):
    """Blocking client of an agent's calls. Use as a context manager, or call :meth:`close`."""

    _transport_class = Blocking

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @cached_property
    def admin(self) -> AdminClient:
        """An :class:`AdminClient` on this client's connection (closed with it)."""
        return self._sibling(AdminClient)
