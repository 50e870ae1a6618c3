"""The daemon's parts wired together: the stores opened on the data directory, Tier 3 with
its embedder and vector store, the recall engine, Forget, the extractors, the weaver, and the
gRPC services over them.

The parts that depend on settings alone are built by :mod:`daemon.components`; this module
connects them to the stores and to each other (the weaver hears of ended sessions, new
documents and purges): :func:`open_parts` makes the :class:`Parts`, each registering its own
teardown as it opens. :class:`daemon.app.Daemon` holds them once started, with the
lifecycle: start, health, and shutdown in order.

The two parts that reach past the data directory's stores, the vector store and the embedding
model, are made by :class:`Factories`, which also holds the clock of the journal and working
memory: the daemon's public hook to make them otherwise (in tests, or when a program embeds
the daemon with another vector store).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field

import grpc
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from daemon.components import (
    configured_vectors,
    digest_writer,
    embedding_client,
    embedding_description,
    litellm_embedder,
    live_indexer,
    llm_extractor,
    local_embedder,
    local_extractor,
    recall_engine,
)
from daemon.server.grpc_server import HealthServicer, build_server
from daemon.server.scheduler import new_scheduler, next_consolidation, schedule_jobs
from daemon.services.admin import BackupSources, admin_service, backup_vectors, external_vectors
from daemon.services.export import transfer_sources
from daemon.services.memory import memory_service
from daemon.services.watch import ChangeFeed
from daemon.services.weaver import WeaverService
from daemon.settings import Settings
from recall.engine import RecallEngine
from tiers.changes.log import ChangeLog
from tiers.core.models import ModelClient
from tiers.journal.store import JOURNAL_CFS, Journal
from tiers.keyed.access import AccessCounts
from tiers.keyed.anchors import AnchorStore
from tiers.keyed.documents import DocumentPut, DocumentStore
from tiers.keyed.pins import PinStore
from tiers.rights.forget.cascade import Forgetter
from tiers.rights.forget.purge import Purged
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS, kind_of, open_kinds
from tiers.scoped import ScopedKind
from tiers.semantic.embedding import Embedder, EmbeddingService, EmbeddingUnavailable
from tiers.semantic.embedding.priority import PriorityEmbedder
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import VectorStore
from tiers.workers.embedder import describe, start_background
from tiers.workers.pool import WorkerStatus, WorkerUnavailable
from tiers.working.memory import WorkingMemory
from tiers.working.progress import LiveProgress
from tiers.working.session import WindowLimits
from weaver.consolidate import Consolidator, redact_record
from weaver.index import DocumentIndexer, Indexer
from weaver.jobs.runner import Weaver
from weaver.rebuild import Rebuilder, RebuildReport

log = logging.getLogger("strata.daemon")


def configured_embedder(settings: Settings, client: ModelClient | None) -> Embedder:
    """Load the embedding model the settings name (slow: on the loader thread). A local model
    embeds queries in this process and documents in ``workers.count`` worker processes at a
    lower CPU priority (:mod:`tiers.workers`); with no workers, or when they cannot start,
    in this process, the weaver's documents waiting while a query is being embedded.
    ``client``: the model client of ``embedding.provider = "litellm"``, None for a local
    model."""
    e = settings.embedding
    if client is not None:  # a slice of documents fills the requests in flight
        slice_ = e.batch_size * e.max_in_flight
        return PriorityEmbedder(litellm_embedder(e, client), document_slice=slice_)
    local = local_embedder(e, settings.data_dir)
    w = settings.workers
    if not w.count:
        return PriorityEmbedder(local, note="in the daemon's process (workers.count = 0)")
    try:
        return start_background(local, local.worker_spec(w.threads), count=w.count, nice=w.nice)
    except WorkerUnavailable as exc:
        log.error(
            "workers.disabled",
            extra={"fields": {"error": str(exc), "detail": "documents are embedded here"}},
        )
        return PriorityEmbedder(
            local, note=f"in the daemon's process: the workers were refused ({exc})"
        )


def configured_embeddings(settings: Settings, client: ModelClient | None) -> EmbeddingService:
    """The embedding model the settings name, loaded in the background by
    :func:`configured_embedder`."""
    return EmbeddingService(
        lambda: configured_embedder(settings, client), embedding_description(settings.embedding)
    )


def workers_of(embeddings: EmbeddingService) -> tuple[list[WorkerStatus], str]:
    """The worker processes behind the loaded embedder, and the note on where documents are
    embedded (``weaverctl status``); none while the model loads."""
    try:
        embedder = embeddings.wait(0)
    except EmbeddingUnavailable:
        return [], "the embedding model is loading"
    return describe(embedder)


@dataclass(frozen=True)
class Factories:
    """How a daemon makes its vector store and its embedding service, and the clock its
    journal and working memory read; the defaults make what the settings name, and the system
    clock (what ``stratad`` runs). Pass others as ``Daemon(settings, factories=...)`` to put
    another :class:`~tiers.semantic.vectors.VectorStore` implementation under Tier 3, or in tests (a
    store that fails on cue, a model load held back, a clock days later).

    - ``open_vectors(settings)``: called once, on the Tier 3 loader thread after the model has
      loaded; what it raises makes Tier 3 fail to open (health stays NOT_SERVING).
    - ``embedding_service(settings, client)``: called once, when the stores open; ``client``
      is the model client of ``embedding.provider = "litellm"`` (which the metrics observe),
      None otherwise. The service loads the model in the background (:class:`EmbeddingService`).
    - ``clock()``: the wall clock (seconds since the epoch) of the journal, working memory
      and change log: receive times, idle sessions, the journal's expiry, the changes'
      retention. Tests move it (days later).
    """

    open_vectors: Callable[[Settings], VectorStore] = configured_vectors
    embedding_service: Callable[[Settings, ModelClient | None], EmbeddingService] = (
        configured_embeddings
    )
    clock: Callable[[], float] = time.time


# A purge ends once the vector store is closed; its thread may be waiting for Tier 3 first.
PURGER_JOIN_SECONDS = 65.0


@dataclass(frozen=True)
class Parts:
    """The daemon's stores, engines and services, open on the data directory (made only by
    :func:`open_parts`: none is missing, none is half open). Tier 3, ``semantic``, is there
    from the start and opens in the background once started (``semantic.ready``,
    ``semantic.wait_ready``). ``weaver`` is None with ``weaver.enabled = false``;
    ``embedding_client`` is the model client of ``embedding.provider = "litellm"``, None for
    a local model. ``scheduler`` has every job, not started."""

    settings: Settings
    state: RocksStore
    journal_store: RocksStore
    journal: Journal
    working: WorkingMemory
    semantic: SemanticStore
    documents: DocumentStore
    anchors: AnchorStore
    pins: PinStore
    access: AccessCounts
    kinds: tuple[ScopedKind, ...]  # every kind of scoped data (tiers.schema.KINDS)
    changes: ChangeLog  # the change log (one of the kinds)
    feed: ChangeFeed  # wakes the Watch streams; closed before the server stops
    engine: RecallEngine
    forgetter: Forgetter
    rebuilder: Rebuilder
    weaver: Weaver | None
    embedding_client: ModelClient | None
    scheduler: AsyncIOScheduler
    closing: ExitStack = field(repr=False)

    def close(self) -> None:
        """Flush and close in reverse order of opening, with writers held off. Each part is
        closed even when one before failed; a failure is raised at the end."""
        with self.working.write_lock:
            self.closing.close()

    async def rebuild(self, user_id: str) -> RebuildReport:
        """On the weaver's worker when there is one, so no consolidation run interleaves."""
        rebuilder = self.rebuilder
        if self.weaver is not None:
            return await asyncio.wrap_future(self.weaver.submit(lambda: rebuilder.rebuild(user_id)))
        return await asyncio.to_thread(rebuilder.rebuild, user_id)

    def server(
        self, metrics_interceptor: grpc.aio.ServerInterceptor | None
    ) -> tuple[grpc.aio.Server, HealthServicer]:
        """The gRPC server with the memory, weaver and admin services over the open stores
        (not bound yet)."""
        s = self.settings
        semantic = self.semantic
        external = external_vectors(s)
        return build_server(
            s,
            memory_service(
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
                self.kinds,
                self.feed,
            ),
            WeaverService(
                self.weaver,
                self.journal,
                s.limits,
                embedding_description(s.embedding),
                workers=lambda: workers_of(semantic.embeddings),
            ),
            admin_service(
                BackupSources(
                    {"state": self.state, "journal": self.journal_store},
                    semantic.write_lock,  # Tier 3 writers first, then appends
                    self.working.write_lock,
                    lambda: backup_vectors(semantic, external),
                ),
                self.rebuild,
                s.limits,
                transfer_sources(
                    self.state,
                    self.journal,
                    self.working,
                    semantic,
                    self.weaver,
                    s.data_dir,
                    self.kinds,
                ),
            ),
            metrics_interceptor,
        )


def _close_store(store: RocksStore) -> None:
    try:
        store.flush()
    finally:
        store.close()


def _end_purges(forgetter: Forgetter, semantic: SemanticStore) -> None:
    """Stop the purger after its current purge, which closing Tier 3 ends (its child is
    killed; Tier 3's own close, later, finds it closed), then wait for the purger."""
    purger = forgetter.purger
    purger.close()  # first: the purge the next line ends is no error
    try:
        semantic.close()
    finally:
        if not purger.join(PURGER_JOIN_SECONDS):
            log.error("forget.purger_stuck", extra={"fields": {"seconds": PURGER_JOIN_SECONDS}})


def open_parts(settings: Settings, factories: Factories) -> Parts:
    """Open the stores and wire the parts over them. Each part that holds something
    registers its own teardown as it opens (:attr:`Parts.closing`), so :meth:`Parts.close`
    closes them in reverse order; if one fails to open, those opened before are closed and
    the error raised. Nothing here is slow: Tier 3 opens when it is started."""
    s, make = settings, factories
    s.data_dir.mkdir(parents=True, exist_ok=True)
    rocks = functools.partial(RocksStore, sync=s.sync, space=s.storage.space(s.data_dir))
    with ExitStack() as closing:
        state = rocks(s.data_dir / "state", STATE_CFS)
        closing.callback(_close_store, state)
        ttl = s.journal.ttl_seconds
        journal_store = rocks(s.data_dir / "journal", JOURNAL_CFS, ttl_seconds=ttl)
        closing.callback(_close_store, journal_store)
        kinds = open_kinds(state)  # the keyed stores record their changes in the change log
        changes = kind_of(kinds, ChangeLog).configured(s.changes.retention_seconds, make.clock)
        journal = Journal(journal_store, state, s.journal.ttl_seconds, make.clock, changes)
        wm = s.working_memory
        working = WorkingMemory(
            state,
            journal,
            WindowLimits(
                max_messages=wm.max_messages,
                max_tokens=wm.max_tokens,
                idle_timeout_seconds=wm.idle_timeout_seconds,
                max_sessions=wm.max_sessions,
                max_log_messages=wm.max_log_messages,
            ),
            make.clock,
            changes,
        )
        e = s.embedding
        client = embedding_client(e) if e.provider == "litellm" else None
        if client is not None:  # its thread pool, once nothing embeds
            closing.callback(client.close)
        vectors = make.embedding_service(s, client), lambda: make.open_vectors(s)
        semantic = SemanticStore(state, *vectors, s.weaver.digest_policy(), s.graph.cache_edges)
        closing.callback(semantic.close)
        documents, anchors = kind_of(kinds, DocumentStore), kind_of(kinds, AnchorStore)
        pins, access = kind_of(kinds, PinStore), kind_of(kinds, AccessCounts)
        engine = recall_engine(s, semantic, access)
        closing.callback(engine.close)
        forgetter = Forgetter(
            working,
            journal,
            journal_store,
            state,
            semantic,
            engine.scope_caches(),
            redact_record,
            kinds,
        )
        closing.callback(_end_purges, forgetter, semantic)
        local = local_extractor(s.weaver, semantic)
        progress = LiveProgress(state, changes)
        indexer = Indexer(journal, semantic, s.weaver, progress)
        consolidator = Consolidator(
            journal,
            state,
            semantic,
            (llm_extractor(s.llm) if s.weaver.enabled else None) or local,
            local,
            set(s.weaver.functional_predicates),
            wait_for_llm=s.llm.on_failure == "wait",
            tool_text=indexer.tool_text,
            digest_writer=digest_writer(s.llm) if s.weaver.enabled else None,
        )
        # Rebuild never extracts, so it works with the weaver disabled too.
        document_indexer = DocumentIndexer(documents, semantic)
        rebuilder = Rebuilder(journal, state, semantic, indexer, consolidator, document_indexer)
        scheduler = new_scheduler()
        weaver = None
        if s.weaver.enabled:
            weaver = Weaver(
                journal,
                semantic,
                indexer,
                consolidator,
                next_run=lambda: next_consolidation(scheduler),
                llm_backoff=(s.llm.retry_backoff_seconds, s.llm.retry_backoff_max_seconds),
                documents=document_indexer,
                live=live_indexer(s.weaver, working, progress, semantic, indexer),
            )
            w = weaver
            w.follow(working.events)  # ended sessions, and live ones (the live stage)
            documents.events.subscribe(DocumentPut, lambda _event: w.notify_documents())
            forgetter.purger.events.subscribe(Purged, lambda _event: w.index_lost())
        schedule_jobs(scheduler, s, working, journal, changes, weaver)
        parts = Parts(
            s,
            state,
            journal_store,
            journal,
            working,
            semantic,
            documents,
            anchors,
            pins,
            access,
            kinds,
            changes,
            ChangeFeed(changes),
            engine,
            forgetter,
            rebuilder,
            weaver,
            client,
            scheduler,
            closing.pop_all(),
        )
    return parts
