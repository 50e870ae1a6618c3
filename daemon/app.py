"""The daemon's lifecycle: open the stores, serve, and shut down in order.

Start-up: data directory, state store, journal store, working-memory recovery, metrics endpoint
(when enabled), gRPC server (memory, admin, health, reflection: :mod:`daemon.server.grpc_server`),
scheduler (:mod:`daemon.server.scheduler`). The server accepts appends as soon as the stores are
open; nothing slow is on that path. What is opened and how the parts are wired to each other is
:mod:`daemon.wiring` (:class:`~daemon.wiring.DaemonParts`, which :class:`Daemon` extends).

Health: every named service is SERVING as soon as the server runs (appends are served); the
overall status ("") is NOT_SERVING until Tier 3 (embedding model and vector store) is open,
then SERVING, and stays NOT_SERVING if Tier 3 fails to open.

Shutdown (:meth:`Daemon.stop`, idempotent): health goes NOT_SERVING, the scheduler stops, the
server stops with ``shutdown_grace_seconds`` for in-flight RPCs, the stores are flushed (working
memory is already durable: every append was written before it was acknowledged) and closed in
reverse order of opening.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import grpc
from grpc_health.v1 import health_pb2

from daemon.server import gc_pauses
from daemon.server.grpc_server import SERVICES, HealthServicer, bind
from daemon.server.metrics import Metrics
from daemon.server.scheduler import build_scheduler
from daemon.settings import Settings, is_loopback
from daemon.wiring import DaemonParts, Factories
from tiers.semantic.embedding import EmbeddingRetrying
from tiers.semantic.store import Tier3Opened

log = logging.getLogger("strata.daemon")
# A purge ends once the vector store is closed; its thread may be waiting for Tier 3 first.
PURGER_JOIN_SECONDS = 65.0


def _fields(**fields: Any) -> dict[str, Any]:
    return {"fields": fields}


class Daemon(DaemonParts):
    def __init__(
        self, settings: Settings, *, freeze_gc: bool = False, factories: Factories | None = None
    ) -> None:
        """``freeze_gc``: once Tier 3 is open, freeze what the process holds out of later
        garbage collections (:func:`daemon.server.gc_pauses.freeze`); for the ``stratad`` process,
        not for a daemon embedded in another program (its objects would be frozen too).

        ``factories``: how the vector store and the embedding service are made, and the clock
        of the journal and working memory (:class:`~daemon.wiring.Factories`; by default, as
        the settings name them, and the system clock). The hook
        for tests and for a program that embeds the daemon with another vector store, e.g.
        ``Daemon(settings, factories=Factories(open_vectors=lambda s: MyStore(s.data_dir)))``."""
        super().__init__(settings, factories)
        self._freeze_gc = freeze_gc
        self.address: str | None = None
        self._server: grpc.aio.Server | None = None
        self._health: HealthServicer | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        # The stages of the shutdown that failed (logged as server.stop_failed): the others
        # still ran, and the daemon still stops (its exit code says so).
        self.stop_failures: list[str] = []
        self.metrics: Metrics | None = Metrics() if settings.metrics.enabled else None
        self.metrics_address: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- start -----------------------------------------------------------------------------
    async def start(self) -> str:
        """Open everything and serve; returns the bound address (host:port)."""
        started = time.monotonic()
        s = self.settings
        try:
            self.open_stores()
            assert self.working is not None
            recovered = self.working.recover()
        except BaseException:
            self._close_stores()
            raise
        assert self.journal and self.state and self.journal_store
        stats = self.working.stats()
        log.info(
            "working_memory.recovered",
            extra=_fields(open_sessions=stats.live_sessions, flushed=len(recovered)),
        )

        # The metrics interceptor is the outermost: it sees every RPC, rejected ones included.
        metrics_interceptor: grpc.aio.ServerInterceptor | None = None
        if self.metrics is not None:
            m = self.metrics
            assert self.semantic is not None
            models = {"embed": self.embedding_client} if self.embedding_client else {}
            m.observe(self.working, self.journal, self.semantic, self.weaver, self.engine, models)
            metrics_interceptor = m.interceptor()
            try:
                self.metrics_address = m.serve(s.metrics.listen)
            except OSError:
                self._close_stores()
                raise
        server, self._health = self._build_server(metrics_interceptor)
        self.address = bind(server, s)
        self._server = server
        await server.start()
        await self._health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        for name in SERVICES:
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._loop = asyncio.get_running_loop()

        self._scheduler = build_scheduler(s, self.working, self.journal, self.weaver)
        self._scheduler.start()
        # Tier 3 loads in the background: appends are served already.
        assert self.semantic is not None
        self.semantic.events.subscribe(Tier3Opened, lambda event: self._tier3_opened(event.ok))
        self.semantic.embeddings.events.subscribe(
            EmbeddingRetrying, lambda event: self._tier3_waiting(event.error)
        )
        self.semantic.start()
        if self.weaver is not None:
            self.weaver.start()
        if not s.auth.enabled:
            # Settings refuse a non-loopback listen without tokens: this is open local mode.
            assert is_loopback(s.listen)
            log.warning(
                "server.unauthenticated",
                extra=_fields(detail="authentication is off: open local mode, loopback only"),
            )
        log.info(
            "server.started",
            extra=_fields(
                address=self.address,
                auth="on" if s.auth.enabled else "off",
                tokens=len(s.auth.tokens),
                tls="on" if s.tls.enabled else "off",
                data_dir=str(s.data_dir),
                sync=s.sync,
                startup_ms=round((time.monotonic() - started) * 1000, 1),
                metrics=self.metrics_address or "off",
            ),
        )
        return self.address

    def _tier3_opened(self, ok: bool) -> None:
        """From the loader thread: the overall health follows Tier 3."""
        status = health_pb2.HealthCheckResponse
        if ok:
            log.info("server.ready")
            if self._freeze_gc:  # the model and the fact graph are loaded: out of the GC's way
                gc_pauses.freeze()
            if self.forgetter is not None:  # a Forget's purge that a stop interrupted
                self.forgetter.purger.resume()
        health_servicer, loop = self._health, self._loop
        if health_servicer is None or loop is None:
            return
        serving = status.SERVING if ok else status.NOT_SERVING
        health_servicer.reason = ""
        if not ok and self.semantic is not None:
            health_servicer.reason = self.semantic.error or "Tier 3 failed to open"

        def update() -> None:
            task = asyncio.ensure_future(health_servicer.set("", serving))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        with contextlib.suppress(RuntimeError):  # the loop is closed: the daemon has stopped
            loop.call_soon_threadsafe(update)

    def _tier3_waiting(self, reason: str) -> None:
        """From the loader thread: Tier 3 waits for an embedding endpoint that is down; the
        overall health stays NOT_SERVING and says why."""
        if self._health is not None:
            self._health.reason = reason

    # -- stop ------------------------------------------------------------------------------
    async def stop(self) -> None:
        """Shut down in order; safe to call more than once and from several tasks."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._stopping)

    async def _shutdown(self) -> None:
        """The stages in order. A stage that fails is logged (``server.stop_failed``) and the
        next ones run anyway: the stores are flushed and closed, and the daemon stops,
        whatever failed before (an exception here used to leave it running, stopped in
        part, until a second signal)."""
        grace = self.settings.shutdown_grace_seconds
        log.info("server.stopping", extra=_fields(grace_seconds=grace))
        try:
            if self._health is not None:
                async with self._stage("health"):
                    await self._health.enter_graceful_shutdown()
            if self._scheduler is not None and self._scheduler.running:
                async with self._stage("scheduler"):
                    self._scheduler.shutdown(wait=False)
            if self._server is not None:
                async with self._stage("server"):
                    await self._server.stop(grace)
            if self.weaver is not None:
                async with self._stage("weaver"):
                    await asyncio.to_thread(self.weaver.stop, grace)
            if self.metrics is not None:
                async with self._stage("metrics"):
                    await asyncio.to_thread(self.metrics.close)
            async with self._stage("stores"):
                self._close_stores()
        finally:
            log.info("server.stopped", extra=_fields(failed=",".join(self.stop_failures)))
            self._stopped.set()

    @contextlib.asynccontextmanager
    async def _stage(self, name: str) -> Any:
        try:
            yield
        except Exception as exc:
            self.stop_failures.append(name)
            log.error("server.stop_failed", extra=_fields(stage=name, error=repr(exc)))

    def _close_stores(self) -> None:
        """Flush and close in reverse order of opening, with writers held off. Each part is
        closed even when one before failed; the first failure is raised at the end."""
        failed: list[BaseException] = []

        def close(step: Any) -> None:
            try:
                step()
            except Exception as exc:
                failed.append(exc)

        if self.engine is not None:
            close(self.engine.close)
        lock = self.working.write_lock if self.working is not None else contextlib.nullcontext()
        with lock:
            if self.forgetter is not None:
                # first: the purge the next line ends is no error
                close(self.forgetter.purger.close)
            if self.semantic is not None:
                close(self.semantic.close)  # ends a purge in progress (its child is killed)
            if self.embedding_client is not None:  # its thread pool, once nothing embeds
                close(self.embedding_client.close)
            purger = self.forgetter.purger if self.forgetter is not None else None
            if purger is not None and not purger.join(PURGER_JOIN_SECONDS):
                log.error("forget.purger_stuck", extra=_fields(seconds=PURGER_JOIN_SECONDS))
            for store in (self.journal_store, self.state):
                if store is not None:
                    close(store.flush)
                    close(store.close)
        if failed:
            raise failed[0]

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
