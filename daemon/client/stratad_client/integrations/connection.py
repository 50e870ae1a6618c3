"""The adapters' way to the daemon: one blocking client, given or made, called from async code
in a worker thread (so an adapter object works from any event loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from stratad_client import MemoryClient

T = TypeVar("T")


class Connection:
    """``client`` when given (the caller closes it), else a :class:`MemoryClient` made from
    ``client_args`` (``address``, ``token``, ``token_file``, ``ca_file``, ``cert_file``,
    ``key_file``, ``timeout``; each None defaults to the environment: ``STRATA_ADDRESS``,
    ``STRATA_TOKEN``...), closed by :meth:`close`."""

    def __init__(self, client: MemoryClient | None, client_args: dict[str, Any]) -> None:
        self._owned = client is None
        self.client = client if client is not None else MemoryClient(**client_args)

    def close(self) -> None:
        if self._owned:
            self.client.close()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, a call of the blocking client, in a worker thread."""
        return await asyncio.to_thread(fn, *args, **kwargs)
