"""The daemon's lifecycle: open the stores, serve, and shut down in order.

Start-up: data directory, state store, journal store, working-memory recovery, gRPC server
(memory, admin, health, reflection), scheduler. The server accepts appends as soon as the
stores are open; nothing slow is on that path.

Shutdown (:meth:`Daemon.stop`, idempotent): health goes NOT_SERVING, the scheduler stops, the
server stops with ``shutdown_grace_seconds`` for in-flight RPCs, the stores are flushed (working
memory is already durable: every append was written before it was acknowledged) and closed in
reverse order of opening.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from typing import Any

import grpc
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from daemon.admin_service import AdminService
from daemon.memory_service import MemoryService
from daemon.pb import (
    admin_pb2,
    admin_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
    weaver_pb2,
    weaver_pb2_grpc,
)
from daemon.settings import Settings
from daemon.weaver_service import WeaverService
from recall import Channel, Reranker
from recall.cache import SemanticCache
from recall.channels import KeywordChannel, VectorChannel
from recall.engine import RecallEngine
from recall.graph_channel import GraphChannel
from recall.rerank import LLMReranker, LocalReranker
from tiers.embedding import EmbeddingService, SentenceTransformerEmbedder
from tiers.journal import JOURNAL_CFS, Journal
from tiers.rocks import RocksStore
from tiers.semantic import SemanticStore, edge_store_path
from tiers.vectors import VectorStore
from tiers.working import STATE_CFS, WindowLimits, WorkingMemory
from weaver.consolidate import Consolidator
from weaver.extractors import Extractor
from weaver.extractors.local import LocalExtractor
from weaver.index import Indexer
from weaver.runner import Weaver

log = logging.getLogger("strata.daemon")

SERVICES = (
    memory_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
    weaver_pb2.DESCRIPTOR.services_by_name["WeaverService"].full_name,
)
# Responses can be larger than requests (a window of large messages, an episode page).
MAX_SEND_BYTES = 64 * 1024 * 1024


def _fields(**fields: Any) -> dict[str, Any]:
    return {"fields": fields}


def is_loopback(listen: str) -> bool:
    host = listen.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Daemon:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.address: str | None = None
        self.state: RocksStore | None = None
        self.journal_store: RocksStore | None = None
        self.working: WorkingMemory | None = None
        self.journal: Journal | None = None
        self.semantic: SemanticStore | None = None
        self.engine: RecallEngine | None = None
        self.weaver: Weaver | None = None
        self._server: grpc.aio.Server | None = None
        self._health: health.aio.HealthServicer | None = None
        self._scheduler: AsyncIOScheduler | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()

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
        self.engine = self._recall_engine(self.semantic)
        if s.weaver.enabled:
            semantic = self.semantic
            local = LocalExtractor(
                embed=lambda texts: semantic.embeddings.wait().encode_documents(texts),
                summary_turns=s.weaver.summary_turns,
            )
            self.weaver = Weaver(
                self.journal,
                self.semantic,
                Indexer(self.journal, self.semantic, s.weaver),
                Consolidator(
                    self.journal,
                    self.state,
                    self.semantic,
                    self._llm_extractor() or local,
                    local,
                    set(s.weaver.functional_predicates),
                ),
                next_run=self._next_consolidation,
            )
            weaver = self.weaver
            self.working.on_flush.append(lambda result: weaver.notify_flushed(result.episode_id))

    def _recall_engine(self, semantic: SemanticStore) -> RecallEngine:
        s = self.settings
        rerankers: dict[str, Reranker] = {
            "local": LocalReranker(lambda texts: semantic.embeddings.wait().encode_documents(texts))
        }
        model = s.recall.rerank_model or s.llm.model
        if model:
            rerankers["llm"] = LLMReranker(
                model=model,
                api_base=s.llm.api_base or None,
                api_key_env=s.llm.api_key_env or None,
                timeout_seconds=s.recall.rerank_timeout_seconds,
            )
        cache = None
        if s.recall.cache_ttl_seconds > 0:
            cache = SemanticCache(
                s.recall.cache_ttl_seconds, s.recall.cache_size, s.recall.cache_similarity
            )
            semantic.on_write.append(cache.invalidate)
        channels: dict[str, Channel] = {
            "vector": VectorChannel(semantic),
            "keyword": KeywordChannel(semantic),
            "graph": GraphChannel(semantic),
        }
        return RecallEngine(semantic, channels, rerankers, cache)

    def _embedding_service(self) -> EmbeddingService:
        e = self.settings.embedding
        models = self.settings.data_dir / "models"
        return EmbeddingService(
            lambda: SentenceTransformerEmbedder(
                e.model,
                backend=e.backend,
                threads=e.threads,
                batch_size=e.batch_size,
                cache_dir=models,
            ),
            f"{e.model} ({e.backend})",
        )

    def _open_vectors(self) -> VectorStore:
        s = self.settings
        if s.qdrant_url:
            from tiers.vectors.qdrant import QdrantVectorStore

            key = s.qdrant_api_key.get_secret_value() if s.qdrant_api_key else None
            return QdrantVectorStore.from_url(s.qdrant_url, key, s.vectors.collection)
        from tiers.vectors.edge import EdgeVectorStore

        return EdgeVectorStore(edge_store_path(s.data_dir))

    def _llm_extractor(self) -> Extractor | None:
        llm = self.settings.llm
        if not llm.model:
            return None
        from weaver.extractors.llm import LLMExtractor

        return LLMExtractor(
            model=llm.model,
            api_base=llm.api_base or None,
            api_key_env=llm.api_key_env or None,
            timeout_seconds=llm.timeout_seconds,
            max_retries=llm.max_retries,
        )

    def _next_consolidation(self) -> float | None:
        job = self._scheduler.get_job("consolidate") if self._scheduler else None
        if job is None or job.next_run_time is None:
            return None
        return float(job.next_run_time.timestamp())

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

        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", s.limits.max_request_bytes),
                ("grpc.max_send_message_length", MAX_SEND_BYTES),
            ]
        )
        memory_pb2_grpc.add_MemoryServiceServicer_to_server(
            MemoryService(s, self.working, self.journal, self.state, self.semantic, self.engine),
            server,
        )
        weaver_pb2_grpc.add_WeaverServiceServicer_to_server(
            WeaverService(
                self.weaver, self.journal, s.limits, f"{s.embedding.model} ({s.embedding.backend})"
            ),
            server,
        )
        admin_pb2_grpc.add_AdminServiceServicer_to_server(
            AdminService(
                {"state": self.state, "journal": self.journal_store}, self.working.write_lock
            ),
            server,
        )
        self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable_server_reflection(
            (*SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
        try:
            port = server.add_insecure_port(s.listen)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {s.listen}: {exc}") from None
        host = s.listen.rpartition(":")[0]
        self.address = f"{host}:{port}"
        self._server = server
        await server.start()
        for name in ("", *SERVICES):
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)

        self._scheduler = AsyncIOScheduler(
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60}
        )
        self._scheduler.add_job(
            self._end_idle_sessions,
            "interval",
            seconds=s.working_memory.sweep_interval_seconds,
            id="end_idle_sessions",
        )
        self._scheduler.add_job(
            self._compact_journal,
            "interval",
            seconds=s.journal.compaction_interval_seconds,
            id="compact_journal",
        )
        if self.weaver is not None:
            if s.weaver.cron:
                trigger = CronTrigger.from_crontab(s.weaver.cron)
            else:
                trigger = IntervalTrigger(seconds=s.weaver.interval_seconds)
            self._scheduler.add_job(self.weaver.scheduled_run, trigger, id="consolidate")
            self._scheduler.add_job(
                self.weaver.request_optimize,
                "interval",
                seconds=s.vectors.optimize_interval_seconds,
                id="optimize_vectors",
            )
        self._scheduler.start()
        # Tier 3 loads in the background: appends are served already.
        assert self.semantic is not None
        self.semantic.start()
        if self.weaver is not None:
            self.weaver.start()
        if not is_loopback(s.listen):
            log.warning(
                "server.unauthenticated",
                extra=_fields(detail="listening beyond loopback with no authentication"),
            )
        log.info(
            "server.started",
            extra=_fields(
                address=self.address,
                data_dir=str(s.data_dir),
                sync=s.sync,
                startup_ms=round((time.monotonic() - started) * 1000, 1),
            ),
        )
        return self.address

    # -- jobs ------------------------------------------------------------------------------
    async def _end_idle_sessions(self) -> None:
        assert self.working is not None
        for result in await asyncio.to_thread(self.working.end_idle):
            log.info(
                "session.ended",
                extra=_fields(
                    session_id=result.session_id,
                    episode_id=result.episode_id,
                    messages=result.message_count,
                    reason=result.reason,
                ),
            )

    async def _compact_journal(self) -> None:
        assert self.journal is not None
        began = time.monotonic()
        await asyncio.to_thread(self.journal.compact)
        log.info("journal.compacted", extra=_fields(ms=round((time.monotonic() - began) * 1000, 1)))

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
        self._close_stores()
        log.info("server.stopped")
        self._stopped.set()

    def _close_stores(self) -> None:
        """Flush and close in reverse order of opening, with writers held off."""
        if self.engine is not None:
            self.engine.close()
        lock = self.working.write_lock if self.working is not None else contextlib.nullcontext()
        with lock:
            if self.semantic is not None:
                self.semantic.close()
            for store in (self.journal_store, self.state):
                if store is not None:
                    try:
                        store.flush()
                    finally:
                        store.close()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
