"""The daemon's lifecycle: open the stores, serve, and shut down in order.

Start-up: data directory, state store, journal store, working-memory recovery, metrics
endpoint (when enabled), gRPC server (memory, admin, health, reflection: :mod:`daemon.server`),
scheduler (:mod:`daemon.scheduler`). The server accepts appends as soon as the stores are open;
nothing slow is on that path.

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
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from grpc_health.v1 import health_pb2

from daemon import gc_pauses
from daemon.admin_service import AdminService, BackupSources, backup_vectors, external_vectors
from daemon.components import (
    embedding_client,
    embedding_description,
    litellm_embedder,
    llm_extractor,
    local_embedder,
    recall_engine,
)
from daemon.export_rpcs import transfer_sources
from daemon.memory_service import MemoryService
from daemon.metrics import Metrics
from daemon.scheduler import build_scheduler, next_consolidation
from daemon.security_settings import read_secret_file
from daemon.server import SERVICES, HealthServicer, bind, build_server
from daemon.settings import Settings, is_loopback
from daemon.weaver_service import WeaverService
from recall.engine import RecallEngine
from tiers.access import AccessCounts
from tiers.anchors import AnchorStore
from tiers.documents import DocumentStore
from tiers.embedding import Embedder, EmbeddingService
from tiers.embedding_priority import PriorityEmbedder
from tiers.forget import Forgetter
from tiers.journal import JOURNAL_CFS, Journal
from tiers.models import ModelClient
from tiers.pins import PinStore
from tiers.rocks import RocksStore
from tiers.semantic import SemanticStore, edge_store_path
from tiers.session import WindowLimits
from tiers.vectors import VectorStore
from tiers.working import STATE_CFS, WorkingMemory
from weaver.consolidate import Consolidator, redact_record
from weaver.extractors.local import LocalExtractor
from weaver.index import DocumentIndexer, Indexer
from weaver.rebuild import Rebuilder, RebuildReport
from weaver.runner import Weaver

log = logging.getLogger("strata.daemon")
# A purge ends once the vector store is closed; its thread may be waiting for Tier 3 first.
PURGER_JOIN_SECONDS = 65.0


def _fields(**fields: Any) -> dict[str, Any]:
    return {"fields": fields}


class Daemon:
    def __init__(self, settings: Settings, *, freeze_gc: bool = False) -> None:
        """``freeze_gc``: once Tier 3 is open, freeze what the process holds out of later
        garbage collections (:func:`daemon.gc_pauses.freeze`); for the ``stratad`` process,
        not for a daemon embedded in another program (its objects would be frozen too)."""
        self.settings = settings
        self._freeze_gc = freeze_gc
        self.address: str | None = None
        self.state: RocksStore | None = None
        self.journal_store: RocksStore | None = None
        self.working: WorkingMemory | None = None
        self.journal: Journal | None = None
        self.semantic: SemanticStore | None = None
        self.engine: RecallEngine | None = None
        self.weaver: Weaver | None = None
        self.rebuilder: Rebuilder | None = None
        self.forgetter: Forgetter | None = None
        self.documents: DocumentStore | None = None
        self.anchors: AnchorStore | None = None
        self.pins: PinStore | None = None
        self.access: AccessCounts | None = None
        self.embedding_client: ModelClient | None = None  # embedding.provider = "litellm"
        self._server: grpc.aio.Server | None = None
        self._health: HealthServicer | None = None
        self._scheduler: AsyncIOScheduler | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self.metrics: Metrics | None = Metrics() if settings.metrics.enabled else None
        self.metrics_address: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- start -----------------------------------------------------------------------------
    def open_stores(self) -> None:
        s = self.settings
        s.data_dir.mkdir(parents=True, exist_ok=True)
        self.state = RocksStore(s.data_dir / "state", STATE_CFS, sync=s.sync)
        self.journal_store = RocksStore(
            s.data_dir / "journal", JOURNAL_CFS, sync=s.sync, ttl_seconds=s.journal.ttl_seconds
        )
        self.journal = Journal(self.journal_store, self.state, s.journal.ttl_seconds)
        wm = s.working_memory
        self.working = WorkingMemory(
            self.state,
            self.journal,
            WindowLimits(
                max_messages=wm.max_messages,
                max_tokens=wm.max_tokens,
                idle_timeout_seconds=wm.idle_timeout_seconds,
                max_sessions=wm.max_sessions,
                max_log_messages=wm.max_log_messages,
            ),
        )
        self.semantic = SemanticStore(self.state, self._embedding_service(), self._open_vectors)
        self.documents = DocumentStore(self.state)
        self.anchors = AnchorStore(self.state)
        self.pins = PinStore(self.state)
        self.access = AccessCounts(self.state)
        self.engine = recall_engine(s, self.semantic, self.access)
        self.forgetter = Forgetter(
            self.working,
            self.journal,
            self.journal_store,
            self.state,
            self.semantic,
            self.engine.scope_caches(),
            redact_record,
            self.documents,
            self.anchors,
            self.pins,
            self.access,
        )
        semantic = self.semantic
        local = LocalExtractor(
            embed=lambda texts: semantic.embeddings.wait().encode_documents(texts),
            summary_turns=s.weaver.summary_turns,
        )
        indexer = Indexer(self.journal, self.semantic, s.weaver)
        consolidator = Consolidator(
            self.journal,
            self.state,
            self.semantic,
            (llm_extractor(s.llm) if s.weaver.enabled else None) or local,
            local,
            set(s.weaver.functional_predicates),
            wait_for_llm=s.llm.on_failure == "wait",
            tool_text=indexer.tool_text,
        )
        # Rebuild never extracts, so it works with the weaver disabled too.
        documents = DocumentIndexer(self.documents, self.semantic)
        self.rebuilder = Rebuilder(
            self.journal, self.state, self.semantic, indexer, consolidator, documents
        )
        if s.weaver.enabled:
            self.weaver = Weaver(
                self.journal,
                self.semantic,
                indexer,
                consolidator,
                next_run=self._next_consolidation,
                llm_backoff=(s.llm.retry_backoff_seconds, s.llm.retry_backoff_max_seconds),
                documents=documents,
            )
            weaver = self.weaver
            self.working.on_flush.append(lambda result: weaver.notify_flushed(result.episode_id))
            self.documents.on_put.append(weaver.notify_documents)
            self.forgetter.purger.on_purged.append(weaver.index_lost)

    def _embedding_service(self) -> EmbeddingService:
        e, data_dir = self.settings.embedding, self.settings.data_dir
        client = embedding_client(e) if e.provider == "litellm" else None
        self.embedding_client = client

        def load() -> Embedder:
            # Queries first: the weaver's documents wait while a query is being embedded.
            if client is not None:
                return PriorityEmbedder(litellm_embedder(e, client))
            return PriorityEmbedder(local_embedder(e, data_dir))

        return EmbeddingService(load, embedding_description(e))

    def _open_vectors(self) -> VectorStore:
        s = self.settings
        if s.qdrant_url:
            from tiers.vectors.qdrant import QdrantVectorStore

            key = s.qdrant_api_key.get_secret_value() if s.qdrant_api_key else None
            if s.qdrant_api_key_file is not None:
                key = read_secret_file(s.qdrant_api_key_file)
            return QdrantVectorStore.from_url(s.qdrant_url, key, s.vectors.collection)
        from tiers.vectors.edge import EdgeVectorStore

        return EdgeVectorStore(edge_store_path(s.data_dir))

    async def _rebuild(self, user_id: str) -> RebuildReport:
        """On the weaver's worker when there is one, so no consolidation run interleaves."""
        rebuilder = self.rebuilder
        assert rebuilder is not None
        if self.weaver is not None:
            return await asyncio.wrap_future(self.weaver.submit(lambda: rebuilder.rebuild(user_id)))
        return await asyncio.to_thread(rebuilder.rebuild, user_id)

    def _next_consolidation(self) -> float | None:
        return next_consolidation(self._scheduler)

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
        semantic = self.semantic
        assert semantic is not None
        external = external_vectors(s)
        server, self._health = build_server(
            s,
            MemoryService(
                s,
                self.working,
                self.journal,
                self.state,
                self.semantic,
                self.engine,
                self.forgetter,
                self.documents,
                self.anchors,
                self.pins,
                self.access,
            ),
            WeaverService(self.weaver, self.journal, s.limits, embedding_description(s.embedding)),
            AdminService(
                BackupSources(
                    {"state": self.state, "journal": self.journal_store},
                    semantic.write_lock,  # Tier 3 writers first, then appends
                    self.working.write_lock,
                    lambda: backup_vectors(semantic, external),
                ),
                self._rebuild,
                s.limits,
                transfer_sources(
                    self.state,
                    self.journal,
                    self.working,
                    semantic,
                    self.weaver,
                    s.data_dir,
                    self.documents,
                    self.anchors,
                    self.pins,
                ),
            ),
            metrics_interceptor,
        )
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
        self.semantic.on_ready.append(self._tier3_opened)
        self.semantic.embeddings.on_retry.append(self._tier3_waiting)
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
        log.info(
            "server.stopping", extra=_fields(grace_seconds=self.settings.shutdown_grace_seconds)
        )
        if self._health is not None:
            await self._health.enter_graceful_shutdown()
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        if self._server is not None:
            await self._server.stop(self.settings.shutdown_grace_seconds)
        if self.weaver is not None:
            await asyncio.to_thread(self.weaver.stop, self.settings.shutdown_grace_seconds)
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.close)
        self._close_stores()
        log.info("server.stopped")
        self._stopped.set()

    def _close_stores(self) -> None:
        """Flush and close in reverse order of opening, with writers held off."""
        if self.engine is not None:
            self.engine.close()
        lock = self.working.write_lock if self.working is not None else contextlib.nullcontext()
        with lock:
            if self.forgetter is not None:
                self.forgetter.purger.close()  # first: the purge the next line ends is no error
            if self.semantic is not None:
                self.semantic.close()  # ends a purge in progress (its child is killed)
            purger = self.forgetter.purger if self.forgetter is not None else None
            if purger is not None and not purger.join(PURGER_JOIN_SECONDS):
                log.error("forget.purger_stuck", extra=_fields(seconds=PURGER_JOIN_SECONDS))
            for store in (self.journal_store, self.state):
                if store is not None:
                    try:
                        store.flush()
                    finally:
                        store.close()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
