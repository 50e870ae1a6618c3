"""The daemon's lifecycle: open the stores, serve, and shut down in order.

A :class:`Daemon` is made from the settings (and :class:`~daemon.wiring.Factories`), started
once (:meth:`Daemon.start`: the bound address) and stopped once (:meth:`Daemon.stop`); both
are safe to call again, and from several tasks. Once started it holds a :class:`Running`: the
:class:`~daemon.wiring.Parts` over the stores, its address and its health.

Start-up, each part registering the stage that stops it (:mod:`daemon.stages`): the stores
(data directory, state store, journal store, Tier 3 and the engines and services over them,
each with its own stage: :func:`daemon.wiring.open_parts`, the composition root),
working-memory recovery, the metrics endpoint (when enabled), the gRPC server (memory, admin,
health, reflection: :mod:`daemon.server.grpc_server`), Tier 3 opening in the background, the
weaver's worker, the scheduler (:mod:`daemon.server.scheduler`), the services' health. The
server accepts appends as soon as it starts; nothing slow is on that path. A part that fails
to start stops what had started.

Health: every named service is SERVING once the parts have started (appends are served); the
overall status ("") is NOT_SERVING until Tier 3 (embedding model and vector store) is open,
then SERVING, and stays NOT_SERVING if Tier 3 fails to open.

Shutdown, the reverse of the start: health goes NOT_SERVING, the scheduler stops, Tier 3's
work that can wait for the next start stops (``SemanticStore.interrupt``: a shard's term count
after a crash, which could hold the weaver's job for minutes), the weaver finishes its job at
hand (or gives it up, to be redone at the next start), the server stops with
``shutdown_grace_seconds`` for in-flight RPCs, the metrics endpoint closes, the stores are
flushed (working memory is already durable: every append was written before it was
acknowledged) and closed in reverse order of opening.
A stage that fails is logged and the others still run (:attr:`Daemon.stop_failures`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc
from grpc_health.v1 import health_pb2

from daemon.server.grpc_server import SERVICES, HealthServicer, bind, build_server
from daemon.server.metrics import Metrics
from daemon.settings import Settings, is_loopback
from daemon.stages import Stages, in_thread
from daemon.wiring import Factories, Parts, open_parts
from tiers.core import collector
from tiers.semantic.embedding import EmbeddingRetrying
from tiers.semantic.events import Tier3Opened

log = logging.getLogger("strata.daemon")
T = TypeVar("T")
Status = health_pb2.HealthCheckResponse
# A stop still running after this long writes every thread's stack to stderr, to say where it
# hangs (Stages.close); a second signal still stops the daemon at once.
STOP_DUMP_SECONDS = 60.0


def _fields(**fields: Any) -> dict[str, Any]:
    return {"fields": fields}


class NotStarted(RuntimeError):
    """The daemon has not started: :meth:`Daemon.start` has not returned, or it failed."""


@dataclass(frozen=True)
class Running:
    """A started daemon: its parts, the address it serves on, its health servicer, and its
    metrics (``metrics`` and ``metrics_address`` are None with ``[metrics]`` disabled)."""

    parts: Parts
    address: str
    health: HealthServicer
    metrics: Metrics | None
    metrics_address: str | None


class _Once(Generic[T]):
    """A coroutine run at most once, on the first call; every call awaits its one result."""

    def __init__(self, run: Callable[[], Coroutine[Any, Any, T]]) -> None:
        self._run = run
        self._task: asyncio.Task[T] | None = None

    @property
    def began(self) -> bool:
        return self._task is not None

    async def __call__(self) -> T:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        return await asyncio.shield(self._task)

    def result(self) -> T:
        """The result once done; raises :class:`NotStarted` before, or the error it raised."""
        task = self._task
        if task is None or not task.done():
            raise NotStarted("the daemon has not started: await Daemon.start() first")
        return task.result()


class Daemon:
    """The daemon in this process: ``Daemon(settings, factories=...)``, then ``await start()``
    (the address it serves on) and ``await stop()``, or ``async with``; :attr:`address` and
    :attr:`parts` once started. The API of ``stratad serve`` and of a daemon embedded in a
    program or a test."""

    def __init__(
        self, settings: Settings, *, freeze_gc: bool = False, factories: Factories | None = None
    ) -> None:
        """``freeze_gc``: once Tier 3 is open, freeze what the process holds out of later
        garbage collections (:func:`tiers.core.collector.freeze`); for the ``stratad`` process,
        not for a daemon embedded in another program (its objects would be frozen too).

        ``factories``: how the vector store and the embedding service are made, and the clock
        of the journal and working memory (:class:`~daemon.wiring.Factories`; by default, as
        the settings name them, and the system clock). The hook
        for tests and for a program that embeds the daemon with another vector store, e.g.
        ``Daemon(settings, factories=Factories(open_vectors=lambda s: MyStore(s.data_dir)))``.

        Nothing is opened here: :meth:`start` opens and serves, :meth:`stop` closes."""
        self.settings = settings
        self.factories = factories if factories is not None else Factories()
        self._freeze_gc = freeze_gc
        self._stages = Stages()
        self._start = _Once(self._start_parts)
        self._stop = _Once(self._shutdown)
        self._stopped = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- what a started daemon holds -------------------------------------------------------
    @property
    def running(self) -> Running:
        """The started daemon (after :meth:`stop` too: its parts, closed); raises
        :class:`NotStarted` before :meth:`start` has returned."""
        return self._start.result()

    @property
    def parts(self) -> Parts:
        return self.running.parts

    @property
    def address(self) -> str:
        """The bound address (host:port: the real port when ``listen`` asked for port 0)."""
        return self.running.address

    @property
    def metrics(self) -> Metrics | None:
        return self.running.metrics

    @property
    def metrics_address(self) -> str | None:
        return self.running.metrics_address

    @property
    def stop_failures(self) -> list[str]:
        """The stages of the shutdown that failed (logged as ``server.stop_failed``): the
        others still ran, and the daemon still stopped (its exit code says so)."""
        return self._stages.failed

    # -- start -----------------------------------------------------------------------------
    async def start(self) -> str:
        """Open everything and serve; returns the bound address (host:port). A second call
        returns the same address; after :meth:`stop` it raises (a daemon starts once)."""
        if self._stop.began:
            raise RuntimeError("this daemon has stopped: a new Daemon starts again")
        return (await self._start()).address

    async def _start_parts(self) -> Running:
        """Each part in turn, registering the stage that stops it; if one fails, what had
        started is stopped (in reverse order) and its error raised, naming the part."""
        try:
            return await self._start_each(time.monotonic())
        except BaseException:
            await self._stages.close()
            raise

    async def _start_each(self, began: float) -> Running:
        s, stages = self.settings, self._stages
        grace = s.shutdown_grace_seconds
        async with stages.starting("stores"):
            parts = open_parts(s, self.factories, stages)  # each store's stage pushed
        async with stages.starting("working memory"):
            recovered = parts.working.recover()
        stats = parts.working.stats()
        log.info(
            "working_memory.recovered",
            extra=_fields(open_sessions=stats.live_sessions, flushed=len(recovered)),
        )
        # The metrics interceptor is the outermost: it sees every RPC, rejected ones included.
        metrics, metrics_address = None, None
        interceptor: grpc.aio.ServerInterceptor | None = None
        if s.metrics.enabled:
            async with stages.starting("metrics"):
                metrics = Metrics()
                models = {"embed": parts.embedding_client} if parts.embedding_client else {}
                metrics.observe(
                    parts.working, parts.journal, parts.semantic, parts.weaver, parts.engine, models
                )
                interceptor = metrics.interceptor()
                metrics_address = metrics.serve(s.metrics.listen)
                stages.push("metrics", lambda: in_thread(metrics.close))
        async with stages.starting("server"):
            services = parts.services
            server, health = build_server(
                s, services.memory, services.weaver, services.admin, interceptor
            )
            address = bind(server, s)
            stages.push("server", lambda: server.stop(grace))
            stages.push("watch", parts.feed.close)  # first: Watch streams end, not wait
            await server.start()
            await health.set("", Status.NOT_SERVING)
        async with stages.starting("tier 3"):  # in the background: appends are served already
            self._follow_tier3(parts, health)
            parts.semantic.start()  # closed with the stores
        weaver = parts.weaver
        if weaver is not None:
            async with stages.starting("weaver"):
                stages.push("weaver", lambda: in_thread(weaver.stop, grace))
                weaver.start()
        stages.push("tier 3 background", parts.semantic.interrupt)  # before the weaver's stop
        async with stages.starting("scheduler"):
            parts.scheduler.start()
            stages.push("scheduler", lambda: parts.scheduler.shutdown(wait=False))
        async with stages.starting("health"):
            for name in SERVICES:
                await health.set(name, Status.SERVING)
            stages.push("health", health.enter_graceful_shutdown)
        self._log_started(address, metrics_address, began)
        return Running(parts, address, health, metrics, metrics_address)

    def _log_started(self, address: str, metrics_address: str | None, began: float) -> None:
        s = self.settings
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
                address=address,
                auth="on" if s.auth.enabled else "off",
                tokens=len(s.auth.tokens),
                tls="on" if s.tls.enabled else "off",
                data_dir=str(s.data_dir),
                sync=s.sync,
                startup_ms=round((time.monotonic() - began) * 1000, 1),
                metrics=metrics_address or "off",
            ),
        )

    def _follow_tier3(self, parts: Parts, health: HealthServicer) -> None:
        """The overall health follows Tier 3, which reports from its loader thread."""
        loop = asyncio.get_running_loop()
        semantic = parts.semantic

        def opened(ok: bool) -> None:
            if ok:
                log.info("server.ready")
                if self._freeze_gc:  # the model is loaded: out of the GC's way
                    collector.freeze()
                parts.forgetter.purger.resume()  # a Forget's purge that a stop interrupted
            health.reason = "" if ok else semantic.error or "Tier 3 failed to open"
            serving = Status.SERVING if ok else Status.NOT_SERVING

            def update() -> None:
                task = asyncio.ensure_future(health.set("", serving))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

            with contextlib.suppress(RuntimeError):  # the loop is closed: the daemon has stopped
                loop.call_soon_threadsafe(update)

        def waiting(reason: str) -> None:
            """Tier 3 waits for an embedding endpoint that is down; the overall health stays
            NOT_SERVING and says why."""
            health.reason = reason

        semantic.events.subscribe(Tier3Opened, lambda event: opened(event.ok))
        semantic.embeddings.events.subscribe(EmbeddingRetrying, lambda event: waiting(event.error))

    # -- stop ------------------------------------------------------------------------------
    async def stop(self) -> None:
        """Shut down in order; safe to call more than once, from several tasks, before
        :meth:`start` and while it runs (the start ends first)."""
        await self._stop()

    async def _shutdown(self) -> None:
        """The stages in reverse order of the start. A stage that fails is logged
        (``server.stop_failed``) and the next ones run anyway: the stores are flushed and
        closed, and the daemon stops, whatever failed before."""
        if self._start.began:
            with contextlib.suppress(Exception):  # a failed start has stopped what it started
                await self._start()
        log.info(
            "server.stopping", extra=_fields(grace_seconds=self.settings.shutdown_grace_seconds)
        )
        try:
            await self._stages.close(dump_after=STOP_DUMP_SECONDS)
        finally:
            log.info("server.stopped", extra=_fields(failed=",".join(self.stop_failures)))
            self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def __aenter__(self) -> Daemon:
        """``async with Daemon(settings) as daemon:`` starts it, and stops it at the end."""
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()
