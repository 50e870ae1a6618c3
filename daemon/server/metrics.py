"""Prometheus metrics (``[metrics] enabled = true``): one registry per daemon, served over HTTP.

Three sources feed it:

- :class:`~daemon.server.rpc_metrics.RpcMetricsInterceptor`, a gRPC server interceptor
  (:mod:`daemon.server.rpc_metrics`): every RPC by service, method and status code, with its
  latency;
- the weaver's events (``Weaver.events``: ``EpisodesIndexed``, ``RunFinished``) and the
  recall engine's (``RecallEngine.events``: ``Recalled``): runs, their durations and what
  they produced, recall stage timings;
- :class:`_StateCollector`, read at scrape time: live sessions, messages in windows and logs,
  journal episodes, pending and unindexed episodes, Tier 3 readiness, the point cache's hits
  and misses, and the LLM extractor's call and token totals.

``docs/operations.md`` (Metrics) lists every series. The registry is the daemon's own (never
the process-wide default), so several daemons in one process each count their own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from daemon.server.rpc_metrics import RpcMetricsInterceptor
from recall.engine import Recalled
from tiers.core.errors import StrataError
from tiers.core.models import LLMTotals
from tiers.semantic.vectors.child import ChildPoints
from tiers.semantic.vectors.point_cache import PointCache
from tiers.workers.embedder import describe
from weaver.jobs.events import EpisodesIndexed, RunFinished

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from recall.engine import RecallEngine
    from recall.result import RecallResult
    from tiers.journal.store import Journal
    from tiers.semantic.store import SemanticStore
    from tiers.working.memory import WorkingMemory
    from weaver.jobs.runner import Weaver

log = logging.getLogger("strata.metrics")

# RPCs range from sub-millisecond appends to multi-second weaver runs (RunNow streams).
RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
RECALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
RUN_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class Metrics:
    """The daemon's metrics: its registry, its instruments and the HTTP endpoint."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.rpc_requests = Counter(
            "strata_rpc_requests",
            "RPCs handled, by service, method and status code.",
            ["service", "method", "code"],
            registry=r,
        )
        self.rpc_seconds = Histogram(
            "strata_rpc_duration_seconds",
            "Time to handle an RPC (a stream: until its last message), by status code.",
            ["service", "method", "code"],
            buckets=RPC_BUCKETS,
            registry=r,
        )
        self.weaver_runs = Counter(
            "strata_weaver_runs",
            "Consolidation runs, by outcome (ok, failed).",
            ["outcome"],
            registry=r,
        )
        self.weaver_run_seconds = Histogram(
            "strata_weaver_run_duration_seconds",
            "Duration of a consolidation run.",
            buckets=RUN_BUCKETS,
            registry=r,
        )
        self.weaver_index_seconds = Histogram(
            "strata_weaver_index_duration_seconds",
            "Duration of one indexing batch (stage 1).",
            buckets=RUN_BUCKETS,
            registry=r,
        )
        self.weaver_episodes = Counter(
            "strata_weaver_episodes",
            "Episodes through the weaver, by outcome (indexed, consolidated, failed, fallback).",
            ["outcome"],
            registry=r,
        )
        self.weaver_items = Counter(
            "strata_weaver_items",
            "Items the weaver produced, by kind "
            "(chunk, summary, fact, triplet, superseded, profile).",
            ["kind"],
            registry=r,
        )
        self.recall_requests = Counter(
            "strata_recall_requests",
            "Recall engine queries (Recall and Pack), by whether the cache answered.",
            ["cached"],
            registry=r,
        )
        self.recall_stage_seconds = Histogram(
            "strata_recall_stage_duration_seconds",
            "Recall time per stage (embed, vector, keyword, graph, fuse, rerank, total).",
            ["stage"],
            buckets=RECALL_BUCKETS,
            registry=r,
        )
        self.recall_degraded = Counter(
            "strata_recall_degraded_channels",
            "Recall channels that failed while the others answered, by channel.",
            ["channel"],
            registry=r,
        )
        self.recall_rerank_fallbacks = Counter(
            "strata_recall_rerank_fallbacks",
            "Reranks that failed or were not configured (the fused order stood).",
            registry=r,
        )
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    # -- wiring ----------------------------------------------------------------------------
    def interceptor(self) -> RpcMetricsInterceptor:
        return RpcMetricsInterceptor(self.rpc_requests, self.rpc_seconds)

    def observe(
        self,
        working: WorkingMemory,
        journal: Journal,
        semantic: SemanticStore,
        weaver: Weaver | None,
        engine: RecallEngine | None,
        models: Mapping[str, object] | None = None,
    ) -> None:
        """Hook the observers and register the scrape-time collector. ``models``: more
        back-ends with totals by purpose (``"embed"``: a remote embedding endpoint's client)."""
        if weaver is not None:
            weaver.events.subscribe(EpisodesIndexed, self._indexed)
            weaver.events.subscribe(RunFinished, self._run)
        if engine is not None:
            engine.events.subscribe(Recalled, lambda event: self._recalled(event.result))
        llm: dict[str, object] = {}
        if weaver is not None:
            llm["extract"] = weaver.extractor
        if engine is not None and engine.reranker("llm") is not None:
            llm["rerank"] = engine.reranker("llm")
        llm.update(models or {})
        self.registry.register(_StateCollector(working, journal, semantic, llm))

    def _indexed(self, event: EpisodesIndexed) -> None:
        self.weaver_index_seconds.observe(event.seconds)
        self.weaver_episodes.labels("indexed").inc(event.episodes)
        self.weaver_items.labels("chunk").inc(event.points)

    def _run(self, event: RunFinished) -> None:
        report = event.report
        self.weaver_runs.labels("ok" if report.ok else "failed").inc()
        self.weaver_run_seconds.observe(report.seconds)
        self.weaver_episodes.labels("consolidated").inc(report.episodes)
        self.weaver_episodes.labels("failed").inc(report.failures)
        self.weaver_episodes.labels("fallback").inc(report.fallbacks)
        for kind, n in (
            ("summary", report.summaries),
            ("fact", report.facts),
            ("triplet", report.triplets),
            ("superseded", report.superseded),
            ("profile", report.profiles),
            ("digest", report.digests),
        ):
            self.weaver_items.labels(kind).inc(n)

    def _recalled(self, result: RecallResult) -> None:
        self.recall_requests.labels(str(result.cached).lower()).inc()
        for stage, ms in result.timings.items():
            self.recall_stage_seconds.labels(stage).observe(ms / 1000)
        for channel in result.degraded:
            self.recall_degraded.labels(channel).inc()
        if result.rerank_note:
            self.recall_rerank_fallbacks.inc()

    # -- the endpoint ----------------------------------------------------------------------
    def serve(self, listen: str) -> str:
        """Serve ``GET /metrics`` on ``listen`` (host:port, port 0 = any); the bound address."""
        host, _, port = listen.rpartition(":")
        try:
            self._server, self._thread = start_http_server(
                int(port), host.strip("[]"), registry=self.registry
            )
        except OSError as exc:
            raise OSError(f"cannot serve metrics on {listen}: {exc}") from None
        return f"{host}:{self._server.server_port}"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None


class _StateCollector(Collector):
    """Gauges and totals read from the tiers at scrape time (on the HTTP server's thread)."""

    def __init__(
        self,
        working: WorkingMemory,
        journal: Journal,
        semantic: SemanticStore,
        llm: Mapping[str, object],
    ) -> None:
        self._working = working
        self._journal = journal
        self._semantic = semantic
        self._llm = llm  # purpose ("extract", "rerank", "embed") -> a back-end with totals

    def describe(self) -> Iterable[Metric]:
        return []  # collected lazily: nothing is read at registration

    def collect(self) -> Iterable[Metric]:
        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, value=value)

        yield gauge(
            "strata_ready",
            "1 when Tier 3 (model and vector store) is open.",
            float(self._semantic.ready),
        )
        if self._semantic.ready:
            workers, _note = describe(self._semantic.embeddings.wait(0))
            yield gauge(
                "strata_workers_alive",
                "Worker processes running (background model work).",
                sum(w.alive for w in workers),
            )
            yield CounterMetricFamily(
                "strata_worker_restarts",
                "Worker processes started again after one exited or was killed.",
                value=sum(w.restarts for w in workers),
            )
            try:
                vectors: object = self._semantic.wait_ready(0)[1]
            except StrataError:  # closed since
                vectors = None
            yield from _point_cache(vectors)
        try:
            wm = self._working.stats()
            sessions = (wm.live_sessions, wm.window_messages, wm.log_messages)
            episodes = self._journal.count()
            pending = self._journal.pending_count()
            unindexed = self._journal.unindexed_count()
        except Exception as exc:  # closed during shutdown: the scrape gets what it can
            log.warning("metrics.collect_failed", extra={"fields": {"error": str(exc)}})
            return
        yield gauge(
            "strata_working_sessions", "Live (open) sessions in working memory.", sessions[0]
        )
        yield gauge(
            "strata_working_window_messages", "Messages in the live sessions' windows.", sessions[1]
        )
        yield gauge(
            "strata_working_log_messages",
            "Messages in the live sessions' durable logs.",
            sessions[2],
        )
        yield gauge("strata_journal_episodes", "Episodes in the journal (not expired).", episodes)
        yield gauge("strata_journal_pending_episodes", "Episodes awaiting consolidation.", pending)
        yield gauge(
            "strata_journal_unindexed_episodes", "Episodes awaiting indexing (stage 1).", unindexed
        )
        yield gauge(
            "strata_live_unembedded_messages",
            "Live sessions' messages staged for the keyword channel, not embedded yet.",
            len(self._semantic.pending),
        )
        totals = {
            purpose: t
            for purpose, backend in self._llm.items()
            if isinstance(t := getattr(backend, "totals", None), LLMTotals)
        }
        if not totals:
            return
        calls = CounterMetricFamily(
            "strata_llm_calls",
            "LLM requests sent, by purpose and outcome.",
            labels=["purpose", "outcome"],
        )
        tokens = CounterMetricFamily(
            "strata_llm_tokens",
            "LLM tokens from the replies' usage, by purpose and type.",
            labels=["purpose", "type"],
        )
        for purpose, t in totals.items():
            calls.add_metric([purpose, "ok"], t.llm_calls - t.failed_calls)
            calls.add_metric([purpose, "error"], t.failed_calls)
            tokens.add_metric([purpose, "prompt"], t.prompt_tokens)
            tokens.add_metric([purpose, "completion"], t.completion_tokens)
        yield calls
        yield tokens
        if "extract" in totals:
            yield CounterMetricFamily(
                "strata_llm_extraction_failures",
                "Episodes the LLM could not extract after its retries.",
                value=totals["extract"].failed_extractions,
            )


def _point_cache(vectors: object) -> Iterator[Metric]:
    """The embedded store's point cache (``vectors.point_cache``), in this process or in the
    store's own (``vectors.process``); a Qdrant server has none."""
    cache = getattr(vectors, "points", None)  # the store's own extra, through its erasures
    if not isinstance(cache, PointCache | ChildPoints):
        return
    try:
        hits, misses, points, capacity = cache.counts()
    except StrataError as exc:  # the store's process starting again: the next scrape
        log.warning("metrics.collect_failed", extra={"fields": {"error": str(exc)}})
        return
    yield CounterMetricFamily(
        "strata_point_cache_hits",
        "Points a request read from the point cache (decoded, no engine read).",
        value=hits,
    )
    yield CounterMetricFamily(
        "strata_point_cache_misses",
        "Points a request read from the engine, not found in the point cache.",
        value=misses,
    )
    yield GaugeMetricFamily("strata_point_cache_points", "Points in the point cache.", points)
    yield GaugeMetricFamily(
        "strata_point_cache_capacity",
        "Points the point cache may hold (vectors.point_cache).",
        capacity,
    )
