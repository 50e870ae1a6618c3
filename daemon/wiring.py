"""The composition root: the one place the daemon is built from its settings.

:func:`open_parts` opens the stores on the data directory and builds every part over them,
by keyword: the state and journal stores, the kinds of scoped data, working memory, Tier 3
with its embedder and vector store (chosen from the settings by the table of
:mod:`daemon.components`), the recall engine, Forget, the extractors, the weaver and its
scheduler, and the gRPC services over them (:class:`Services`). It connects the parts to
each other (the weaver hears of ended sessions, new documents and purges), and as each part
that holds something opens, it registers the named stage that stops it on the daemon's one
stack (:class:`daemon.stages.Stages`): the stop runs them in reverse order, each logged when
it fails, and the server's, the weaver's and the scheduler's stages, pushed by
:class:`daemon.app.Daemon` as they start, run before the stores'.

The two parts that reach past the data directory's stores, the vector store and the embedding
model, are made by :class:`Factories`, which also holds the clock of the journal and working
memory: the daemon's public hook to make them otherwise (in tests, or when a program embeds
the daemon with another vector store).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from daemon.components import (
    configured_embeddings,
    configured_vectors,
    digest_writer,
    embedding_client,
    embedding_description,
    live_indexer,
    llm_extractor,
    local_extractor,
    recall_engine,
    workers_of,
)
from daemon.server.scheduler import new_scheduler, next_consolidation, schedule_jobs
from daemon.services.admin import (
    AdminService,
    BackupSources,
    MaintenanceRpcs,
    backup_vectors,
    external_vectors,
)
from daemon.services.context import ContextRpcs
from daemon.services.documents import DocumentRpcs
from daemon.services.episodes import EpisodeRpcs, StatsRpcs
from daemon.services.export import TransferRpcs, transfer_sources
from daemon.services.forget import ForgetRpcs
from daemon.services.memory import MemoryService
from daemon.services.recall import RecallRpcs
from daemon.services.sessions import SessionRpcs
from daemon.services.watch import ChangeFeed, WatchRpcs
from daemon.services.weaver import WeaverService
from daemon.settings import Settings
from daemon.stages import Stages
from recall.context.pins import PinnedMemories
from recall.context.session import ContextDefaults, SessionContexts
from recall.engine import RecallEngine
from tiers.changes.log import ChangeLog
from tiers.core.models import ModelClient
from tiers.core.records import from_fields
from tiers.journal.stale import StaleScopes
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
from tiers.semantic.embedding import EmbeddingService
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import VectorStore
from tiers.working.memory import WorkingMemory
from tiers.working.progress import LiveProgress
from tiers.working.session import WindowLimits
from weaver.consolidate import Consolidator, redact_record
from weaver.index import DocumentIndexer, Indexer
from weaver.jobs.runner import Weaver
from weaver.rebuild import Rebuilder, RebuildReport

log = logging.getLogger("strata.daemon")


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


@dataclass(frozen=True, kw_only=True)
class Services:
    """The gRPC services over the parts (:func:`daemon.server.grpc_server.build_server`)."""

    memory: MemoryService
    weaver: WeaverService
    admin: AdminService


@dataclass(frozen=True, kw_only=True)
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
    services: Services


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


class _Writers:
    """Working memory's writers held off while the stores close: held by the first of the
    stores' stages to run, released by the last (both on the event loop's thread)."""

    def __init__(self) -> None:
        self.lock: threading.RLock | None = None
        self._held = False

    def hold(self) -> None:
        if self.lock is not None:
            self.lock.acquire()
            self._held = True

    def release(self) -> None:
        if self._held and self.lock is not None:
            self._held = False
            self.lock.release()


def _rebuild(
    rebuilder: Rebuilder, weaver: Weaver | None
) -> Callable[[str], Awaitable[RebuildReport]]:
    async def rebuild(user_id: str) -> RebuildReport:
        """On the weaver's worker when there is one, so no consolidation run interleaves."""
        if weaver is not None:
            return await asyncio.wrap_future(weaver.submit(lambda: rebuilder.rebuild(user_id)))
        return await asyncio.to_thread(rebuilder.rebuild, user_id)

    return rebuild


def open_parts(settings: Settings, factories: Factories, stages: Stages) -> Parts:
    """Open the stores and build every part over them. Each part that holds something pushes
    the named stage that stops it on ``stages`` as it opens; if one fails to open, the caller
    closes ``stages`` (what had opened is closed) and the error is raised. Nothing here is
    slow: Tier 3 opens when it is started."""
    s, make = settings, factories
    s.data_dir.mkdir(parents=True, exist_ok=True)
    rocks = functools.partial(RocksStore, sync=s.sync, space=s.storage.space(s.data_dir))
    writers = _Writers()
    stages.push("writers released", writers.release)  # runs last: after the stores closed
    state = rocks(s.data_dir / "state", STATE_CFS)
    stages.push("state store", lambda: _close_store(state))
    ttl = s.journal.ttl_seconds
    journal_store = rocks(s.data_dir / "journal", JOURNAL_CFS, ttl_seconds=ttl)
    stages.push("journal store", lambda: _close_store(journal_store))
    kinds = open_kinds(state)  # the keyed stores record their changes in the change log
    changes = kind_of(kinds, ChangeLog).configured(s.changes.retention_seconds, make.clock)
    journal = Journal(journal_store, state, ttl, make.clock, changes)
    working = WorkingMemory(
        state, journal, from_fields(WindowLimits, s.working_memory), make.clock, changes
    )
    writers.lock = working.write_lock
    e = s.embedding
    client = embedding_client(e) if e.provider == "litellm" else None
    if client is not None:  # its thread pool, once nothing embeds
        stages.push("embedding client", client.close)
    vectors = make.embedding_service(s, client), lambda: make.open_vectors(s)
    semantic = SemanticStore(state, *vectors, s.weaver.digest_policy(), s.graph.cache_edges)
    stages.push("tier 3", semantic.close)
    documents, anchors = kind_of(kinds, DocumentStore), kind_of(kinds, AnchorStore)
    pins, access = kind_of(kinds, PinStore), kind_of(kinds, AccessCounts)
    engine = recall_engine(s, semantic, access)
    forgetter = Forgetter(
        working, journal, journal_store, state, semantic, engine.scope_caches(), redact_record,
        kinds,
    )  # fmt: skip
    stages.push("purges and tier 3", lambda: _end_purges(forgetter, semantic))
    # Before Tier 3 closes (above): the graph builds queued behind Recalls end with the engine,
    # not one by one against a closed store, each logged as a failure.
    stages.push("recall engine", engine.close)
    stages.push("writers held off", writers.hold)  # runs first of the stores' stages
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
        stale=kind_of(kinds, StaleScopes),
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
    feed = ChangeFeed(changes)
    pinned = PinnedMemories(pins, semantic, documents)
    lim, c = s.limits, s.context
    defaults = ContextDefaults(
        max_query_bytes=lim.max_content_bytes,
        window_share=c.window_share,
        pinned_share=c.pinned_share,
        per_kind_caps={str(k): v for k, v in c.per_kind_caps.items()},
        recall_k=c.recall_k,
        query_turns=c.query_turns,
        story_below_tokens=c.story_below_tokens,
    )
    contexts = SessionContexts(
        working, engine, semantic, anchors, pinned, access, s.recall, defaults
    )
    memory = MemoryService(
        sessions=SessionRpcs(working, lim),
        episodes=EpisodeRpcs(journal, lim),
        stats=StatsRpcs(working, journal, state, kinds, semantic.pending),
        recall=RecallRpcs(engine, semantic, journal, working, access, s.recall, lim),
        forget=ForgetRpcs(forgetter, lim),
        documents=DocumentRpcs(documents, forgetter, lim),
        context=ContextRpcs(contexts, pinned, s.recall, lim),
        watch=WatchRpcs(feed, lim),
    )
    external = external_vectors(s)
    backup = BackupSources(
        {"state": state, "journal": journal_store},
        semantic.quiet,  # Tier 3 writers and erasures first, then appends
        working.write_lock,
        lambda: backup_vectors(semantic, external),
        forgetter.purger.settle,  # the compactions of earlier Forgets
    )
    transfer = transfer_sources(state, journal, working, semantic, weaver, s.data_dir, kinds)
    services = Services(
        memory=memory,
        weaver=WeaverService(
            weaver,
            journal,
            lim,
            embedding_description(e),
            workers=lambda: workers_of(semantic.embeddings),
        ),
        admin=AdminService(
            MaintenanceRpcs(backup, _rebuild(rebuilder, weaver), lim), TransferRpcs(transfer, lim)
        ),
    )
    return Parts(
        settings=s,
        state=state,
        journal_store=journal_store,
        journal=journal,
        working=working,
        semantic=semantic,
        documents=documents,
        anchors=anchors,
        pins=pins,
        access=access,
        kinds=kinds,
        changes=changes,
        feed=feed,
        engine=engine,
        forgetter=forgetter,
        rebuilder=rebuilder,
        weaver=weaver,
        embedding_client=client,
        scheduler=scheduler,
        services=services,
    )
