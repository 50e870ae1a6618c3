"""A testing kit for an agent's own tests: a real daemon in this process, on a loopback port and
a temporary data directory, for as long as a ``with`` block (as Temporal's
``WorkflowEnvironment.start_local``).

::

    from daemon.testing import local_daemon

    def test_my_agent_remembers():
        with local_daemon() as strata, strata.client() as memory:
            memory.append("s1", "I moved to Berlin.", user_id="alice")
            ...

:func:`local_daemon` serves from a background thread (for blocking code and the blocking
clients); :func:`async_local_daemon` serves on the caller's event loop (for asyncio tests and
the asyncio clients). Both take the daemon's settings as keyword arguments (``weaver={...}``,
``embedding={...}``, as in ``strata.toml``) over these defaults: ``listen`` on 127.0.0.1 at a
free port, ``data_dir`` a temporary directory removed afterwards, a short shutdown grace; the
``STRATA_*`` variables apply as for ``stratad``. The embedding model is the local one unless
the settings name another; it loads in the background after the start (``wait_ready``).

This module is the daemon's (it needs ``stratad``); the client alone does not import it.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from daemon.app import Daemon
from daemon.settings import Settings
from daemon.wiring import Factories
from stratad_client import (
    AdminClient,
    AsyncAdminClient,
    AsyncMemoryClient,
    MemoryClient,
    StrataClientError,
)

T = TypeVar("T")
READY_POLL_SECONDS = 0.1
# A stop waits (at most this long) for Tier 3 to finish opening: the model loads in a thread of
# its own, which must not be cut off when the test's process exits.
SETTLE_SECONDS = 60.0


def local_settings(data_dir: Path, **overrides: Any) -> Settings:
    """The settings of a test daemon in ``data_dir``: loopback on a free port, a short shutdown
    grace, then ``overrides`` (the daemon's settings by name; nested ones as dicts)."""
    defaults: dict[str, Any] = {
        "data_dir": data_dir,
        "listen": "127.0.0.1:0",
        "shutdown_grace_seconds": 2.0,
    }
    return Settings(**{**defaults, **overrides})


class LocalDaemon:
    """A daemon started by :func:`local_daemon`, served from a thread of its own. ``address``:
    where it listens (host:port); ``settings``: its settings; ``daemon``: the
    :class:`~daemon.app.Daemon` itself, whose coroutines :meth:`call` runs on its loop."""

    def __init__(
        self,
        settings: Settings,
        *,
        factories: Factories | None = None,
        settle_on_stop: bool = True,
    ) -> None:
        """Start a daemon with ``settings`` (their ``listen`` should be a loopback address).
        ``factories``: its vector store, embedding service and clock
        (:class:`~daemon.wiring.Factories`); ``settle_on_stop``: :meth:`stop` first waits for
        Tier 3 to finish opening (off for a test that stops it while it opens)."""
        self.settings = settings
        self._settle = settle_on_stop
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="strata-local-daemon", daemon=True
        )
        self._thread.start()
        self.daemon = Daemon(settings, factories=factories)
        try:
            self.address: str = self.call(self.daemon.start())
        except BaseException:
            self._end_loop()
            raise

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        """Run ``coro`` on the daemon's event loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def client(self, *, timeout: float = 10.0) -> MemoryClient:
        """A :class:`MemoryClient` of this daemon (``timeout``: its calls' deadline); the
        caller closes it."""
        return MemoryClient(self.address, timeout=timeout)

    def admin(self, *, timeout: float = 10.0) -> AdminClient:
        """An :class:`AdminClient` of this daemon (``timeout``: its calls' deadline); the
        caller closes it."""
        return AdminClient(self.address, timeout=timeout)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until the embedding model is loaded and every finished session and document is
        indexed, so that Recall finds them; ``TimeoutError`` after ``timeout`` seconds."""
        with self.admin() as admin:
            _wait(lambda: indexed(admin.weaver_status()), timeout)

    def stop(self) -> None:
        """Shut the daemon down (in order, as on SIGTERM), once Tier 3 has finished opening;
        safe to call twice."""
        if self._thread.is_alive():
            try:
                if self._settle:
                    with self.admin() as admin, contextlib.suppress(TimeoutError):
                        _wait(lambda: _settled(admin), SETTLE_SECONDS)
                self.call(self.daemon.stop())
            finally:
                self._end_loop()

    def _end_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()


def indexed(status: Any) -> bool:
    """Whether a ``weaver_status`` says Recall finds everything: the embedding model is
    loaded and every finished session and document is indexed."""
    return bool(status.embedding_ready) and not status.unindexed


def _wait(ready: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the daemon was not ready within {timeout} s")
        time.sleep(READY_POLL_SECONDS)


def _settled(admin: AdminClient) -> bool:
    """Whether Tier 3 has opened (the daemon serves) or failed to (``tier3_error``)."""
    try:
        return admin.health() == "SERVING" or bool(admin.weaver_status().tier3_error)
    except StrataClientError:  # no weaver: only the health says it
        return False


async def _async_settled(admin: AsyncAdminClient) -> bool:
    """:func:`_settled` on an asyncio client."""
    try:
        serving = await admin.health() == "SERVING"
        return serving or bool((await admin.weaver_status()).tier3_error)
    except StrataClientError:
        return False


@contextmanager
def local_daemon(
    *, data_dir: Path | None = None, wait_ready: bool = False, **settings: Any
) -> Iterator[LocalDaemon]:
    """A daemon for the ``with`` block, stopped (and its temporary data directory removed) at
    its end. ``data_dir``: keep the data there instead; ``wait_ready``: return once Recall
    works (:meth:`LocalDaemon.wait_ready`); ``settings``: the daemon's settings by name
    (``weaver={"interval_seconds": 3600}``, ``embedding={"cache_dir": ...}``, ...)."""
    with tempfile.TemporaryDirectory(prefix="strata-test-") as tmp:
        daemon = LocalDaemon(local_settings(data_dir or Path(tmp) / "data", **settings))
        try:
            if wait_ready:
                daemon.wait_ready()
            yield daemon
        finally:
            daemon.stop()


class AsyncLocalDaemon:
    """A daemon started by :func:`async_local_daemon`, served on the caller's event loop.
    ``address``: where it listens; ``settings``: its settings."""

    def __init__(self, daemon: Daemon, address: str) -> None:
        """Wrap a started ``daemon`` listening on ``address``."""
        self.settings = daemon.settings
        self.address = address

    def client(self, *, timeout: float = 10.0) -> AsyncMemoryClient:
        """An :class:`AsyncMemoryClient` of this daemon (``timeout``: its calls' deadline)."""
        return AsyncMemoryClient(self.address, timeout=timeout)

    def admin(self, *, timeout: float = 10.0) -> AsyncAdminClient:
        """An :class:`AsyncAdminClient` of this daemon (``timeout``: its calls' deadline)."""
        return AsyncAdminClient(self.address, timeout=timeout)

    async def wait_ready(self, timeout: float = 120.0) -> None:
        """As :meth:`LocalDaemon.wait_ready` (``timeout`` in seconds), awaited."""
        deadline = time.monotonic() + timeout
        async with self.admin() as admin:
            while not indexed(await admin.weaver_status()):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the daemon was not ready within {timeout} s")
                await asyncio.sleep(READY_POLL_SECONDS)


@asynccontextmanager
async def async_local_daemon(
    *, data_dir: Path | None = None, wait_ready: bool = False, **settings: Any
) -> AsyncIterator[AsyncLocalDaemon]:
    """:func:`local_daemon` for asyncio: the daemon runs on the running event loop (the same
    ``data_dir``, ``wait_ready`` and ``settings``)."""
    with tempfile.TemporaryDirectory(prefix="strata-test-") as tmp:
        daemon = Daemon(local_settings(data_dir or Path(tmp) / "data", **settings))
        address = None
        try:
            address = await daemon.start()
            local = AsyncLocalDaemon(daemon, address)
            if wait_ready:
                await local.wait_ready()
            yield local
        finally:
            if address is not None:
                await _settle(address)
            await daemon.stop()


async def _settle(address: str) -> None:
    """Wait (at most SETTLE_SECONDS) for Tier 3 to finish opening, as :meth:`LocalDaemon.stop`."""
    deadline = time.monotonic() + SETTLE_SECONDS
    async with AsyncAdminClient(address) as admin:
        while not await _async_settled(admin) and time.monotonic() < deadline:
            await asyncio.sleep(READY_POLL_SECONDS)
