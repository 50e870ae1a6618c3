"""The Prometheus endpoint, scraped over real HTTP from real daemons; health follows Tier 3."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import urllib.request
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.components import configured_embedder, embedding_description
from daemon.settings import Settings
from daemon.wiring import Factories
from stratad_client import MemoryClient, StrataClientError, message
from tests.support import MAY, QUIET, ThreadDaemon, wait_until
from tests.support.llm_server import FakeOpenAI, Reply
from tests.support.weaving import EchoLLM, conversation, run
from tiers.core.models import ModelClient
from tiers.semantic.embedding import EmbeddingService, EmbeddingUnavailable
from tiers.settings import VectorsSettings

METRICS = {"enabled": True, "listen": "127.0.0.1:0"}
MEMORY = "strata.v1.MemoryService"


class Scrape:
    """One scrape of ``/metrics``: sample values by name and labels."""

    def __init__(self, daemon: ThreadDaemon) -> None:
        url = f"http://{daemon.daemon.metrics_address}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200
            self.text = response.read().decode()
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(self.text):
            for s in family.samples:
                self.samples[(s.name, frozenset(s.labels.items()))] = s.value

    def __call__(self, name: str, **labels: str) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)


def wait_ready(client: MemoryClient, timeout: float = 120) -> None:
    wait_until(lambda: client.health() == "SERVING", timeout, "for the daemon to be ready")


def test_the_point_cache_of_a_store_in_its_own_process_is_scraped(start_daemon: Any) -> None:
    daemon = start_daemon(metrics=METRICS, weaver=QUIET, vectors={"process": True})
    with daemon.client() as c:
        wait_ready(c)
        before = Scrape(daemon)
        assert before("strata_point_cache_capacity") == VectorsSettings().point_cache
        conversation(c, "s1", MAY, "I moved to Berlin.", "Nice, how is it?")
        assert run(c).ok
        hits = c.recall("Where did Alice move?", user_id="alice", k=3).hits
        assert hits
        after = Scrape(daemon)
    read = after("strata_point_cache_hits_total") + after("strata_point_cache_misses_total")
    assert read >= len(hits) and after("strata_point_cache_points") >= len(hits)


def test_rpcs_state_weaver_and_recall_move_their_series(start_daemon: Any) -> None:
    daemon = start_daemon(metrics=METRICS, weaver=QUIET)
    with daemon.client() as c:
        wait_ready(c)
        before = Scrape(daemon)
        assert before("strata_ready") == 1.0
        assert before("strata_workers_alive") == 1  # the default: one worker process
        assert before("strata_worker_restarts_total") == 0
        assert before("strata_working_sessions") == 0
        assert before("strata_weaver_runs_total", outcome="ok") == 0
        assert before("strata_point_cache_capacity") == VectorsSettings().point_cache

        for i in range(3):
            c.append("s1", f"message {i}", user_id="alice")
        c.append("s2", "another session", user_id="alice")
        with pytest.raises(StrataClientError) as err:
            c.append("", "no session id", user_id="alice")
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        mid = Scrape(daemon)
        assert mid("strata_rpc_requests_total", service=MEMORY, method="Append", code="OK") == 4
        assert (
            mid(
                "strata_rpc_requests_total",
                service=MEMORY,
                method="Append",
                code="INVALID_ARGUMENT",
            )
            == 1
        )
        assert (
            mid("strata_rpc_duration_seconds_count", service=MEMORY, method="Append", code="OK")
            == 4
        )
        assert (
            mid("strata_rpc_duration_seconds_sum", service=MEMORY, method="Append", code="OK") > 0
        )
        assert mid("strata_working_sessions") == 2
        assert mid("strata_working_log_messages") == 4
        assert mid("strata_journal_episodes") == 0

        conversation(c, "s3", MAY, "I moved to Berlin.", "Nice, how is it?")
        c.end_session("s1")
        assert c.health() == "SERVING"
        report = run(c)  # a server-streaming RPC; indexes and consolidates both episodes
        assert report.ok and report.episodes == 2
        hits = c.recall("Where did Alice move?", user_id="alice", k=3).hits
        assert hits

        after = Scrape(daemon)
    assert after("strata_working_sessions") == 1  # s2 is still open
    assert after("strata_journal_episodes") == 2
    assert after("strata_journal_pending_episodes") == 0
    assert after("strata_journal_unindexed_episodes") == 0
    svc = "strata.v1.WeaverService"
    assert after("strata_rpc_requests_total", service=svc, method="RunNow", code="OK") == 1
    assert after("strata_rpc_requests_total", service=MEMORY, method="Recall", code="OK") == 1
    assert after("strata_weaver_runs_total", outcome="ok") == 1
    assert after("strata_weaver_run_duration_seconds_count") == 1
    assert after("strata_weaver_episodes_total", outcome="consolidated") == 2
    assert after("strata_weaver_episodes_total", outcome="indexed") == 2
    assert after("strata_weaver_items_total", kind="chunk") >= 2
    assert after("strata_weaver_items_total", kind="summary") == 2
    assert after("strata_weaver_items_total", kind="fact") >= 1
    assert after("strata_recall_requests_total", cached="false") == 1
    # The Recall read its hits' points: from the engine, or from the cache the weaver's reads
    # filled (what is read is kept).
    read = after("strata_point_cache_hits_total") + after("strata_point_cache_misses_total")
    assert read >= len(hits) and after("strata_point_cache_points") >= len(hits)
    for stage in ("embed", "vector", "keyword", "fuse", "total"):
        assert after("strata_recall_stage_duration_seconds_count", stage=stage) == 1, stage
    assert after("strata_recall_stage_duration_seconds_sum", stage="total") > 0
    # The health checks above went through the interceptor too.
    health = {"service": "grpc.health.v1.Health", "method": "Check", "code": "OK"}
    assert after("strata_rpc_requests_total", **health) >= 2


def test_llm_calls_tokens_and_failures(start_daemon: Any) -> None:
    echo = EchoLLM()
    usage = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    with FakeOpenAI(responder=lambda req: dataclasses.replace(echo(req), usage=usage)) as fake:
        daemon = start_daemon(
            metrics=METRICS,
            weaver=QUIET,
            llm={
                "model": "openai/test",
                "api_base": fake.base_url,
                "max_retries": 0,
                "on_failure": "local",
            },
        )
        with daemon.client() as c:
            wait_ready(c)
            conversation(c, "s1", MAY, "I like jazz.", "I prefer rock.")
            assert run(c).llm_calls == 1
            first = Scrape(daemon)
            assert first("strata_llm_calls_total", purpose="extract", outcome="ok") == 1
            assert first("strata_llm_tokens_total", purpose="extract", type="prompt") == 120
            assert first("strata_llm_tokens_total", purpose="extract", type="completion") == 30
            assert first("strata_llm_extraction_failures_total") == 0
            # The LLM reranker counts its own calls and tokens.
            fake.responder = lambda req: Reply.json({"order": [2, 1]}, usage=usage)
            got = c.recall("jazz", user_id="alice", rerank="llm")
            assert got.rerank == "llm", got.rerank_note
            reranked = Scrape(daemon)
            assert reranked("strata_llm_calls_total", purpose="rerank", outcome="ok") == 1
            assert reranked("strata_llm_tokens_total", purpose="rerank", type="prompt") == 120
            assert reranked("strata_llm_calls_total", purpose="extract", outcome="ok") == 1

            fake.responder = None
            fake.default = Reply.error(400)  # not retryable: one failed call
            conversation(c, "s2", MAY, "I work at Initech.")
            report = run(c)
            # the episode either fell back to the local extractor or waits for the LLM
            assert report.fallbacks + report.failures == 1
            second = Scrape(daemon)
    assert second("strata_llm_calls_total", purpose="extract", outcome="error") == 1
    assert second("strata_llm_extraction_failures_total") == 1
    episodes = {
        o: second("strata_weaver_episodes_total", outcome=o) for o in ("fallback", "failed")
    }
    assert episodes == {"fallback": report.fallbacks, "failed": report.failures}
    assert second("strata_weaver_runs_total", outcome="ok" if report.ok else "failed") >= 1
    assert second("strata_llm_tokens_total", purpose="extract", type="prompt") == 120


def test_each_daemon_counts_its_own_and_metrics_are_off_by_default(start_daemon: Any, tmp_path):
    one = start_daemon(metrics=METRICS, data_dir=tmp_path / "one")
    two = start_daemon(metrics=METRICS, data_dir=tmp_path / "two")
    off = start_daemon(data_dir=tmp_path / "off")
    assert off.daemon.metrics is None and off.daemon.metrics_address is None
    assert one.daemon.metrics_address != two.daemon.metrics_address
    with one.client() as c:
        c.append_batch("s", [message("a"), message("b")], user_id="u")
    with two.client() as c:
        c.append("s", "c", user_id="u")
    method = {"service": MEMORY, "code": "OK"}
    assert Scrape(one)("strata_rpc_requests_total", method="AppendBatch", **method) == 1
    assert Scrape(two)("strata_rpc_requests_total", method="AppendBatch", **method) == 0
    assert Scrape(two)("strata_rpc_requests_total", method="Append", **method) == 1
    assert Scrape(one)("strata_working_log_messages") == 2
    address = one.daemon.metrics_address
    one.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{address}/metrics", timeout=2)


def gated(gate: threading.Event) -> Factories:
    """Factories whose embedding model's load waits until ``gate`` is set."""

    def embedding_service(settings: Settings, client: ModelClient | None) -> EmbeddingService:
        def load() -> Any:
            return gate.wait(60) and configured_embedder(settings, client)

        return EmbeddingService(load, embedding_description(settings.embedding))

    return Factories(embedding_service=embedding_service)


def test_health_is_serving_only_once_tier3_is_open(start_daemon: Any) -> None:
    gate = threading.Event()
    daemon = start_daemon(metrics=METRICS, factories=gated(gate))
    with daemon.client() as c:
        assert c.health() == "NOT_SERVING"
        assert c.health(MEMORY) == "SERVING"  # appends are served before readiness
        assert c.health("strata.v1.AdminService") == "SERVING"
        c.append("s1", "served while the model loads", user_id="alice")
        assert Scrape(daemon)("strata_ready") == 0
        time.sleep(0.2)
        assert c.health() == "NOT_SERVING"
        gate.set()
        wait_ready(c)
        assert Scrape(daemon)("strata_ready") == 1
    daemon.stop()


def test_health_stays_not_serving_when_the_model_fails_to_load(start_daemon: Any) -> None:
    daemon = start_daemon(embedding={"model": "/nonexistent/strata-test-model"})
    semantic = daemon.daemon.parts.semantic
    with pytest.raises(EmbeddingUnavailable):
        semantic.wait_ready(60)
    with daemon.client() as c:
        time.sleep(0.2)  # let a (wrong) transition land, if one were sent
        assert c.health() == "NOT_SERVING"
        assert c.health(MEMORY) == "SERVING"
        c.append("s1", "appends still work", user_id="alice")


def test_an_aborted_rpc_is_counted_before_its_status_is_sent() -> None:
    """gRPC sends the status inside ``context.abort``: the count must already be there, or a
    client that scrapes right after its error reply can see the old count (it did, under load)."""
    from daemon.server.rpc_metrics import _wrap

    events: list[str] = []

    class Context:  # the part of grpc.aio.ServicerContext the wrapper touches
        def code(self) -> None:
            return None

        async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
            events.append(f"sent {code.name}")
            raise grpc.aio.AbortError(details)

    async def handler(request: Any, context: Any) -> None:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad")

    wrapped = _wrap(handler, lambda code, seconds: events.append(f"counted {code.name}"))
    assert wrapped is not None
    with pytest.raises(grpc.aio.AbortError):
        asyncio.run(wrapped(None, Context()))
    assert events == ["counted INVALID_ARGUMENT", "sent INVALID_ARGUMENT"]


def _eight_d(texts: list[str]) -> list[list[float]]:
    return [[float(len(t) % (i + 2)) + 1.0 for i in range(8)] for t in texts]


def test_remote_embedding_calls_are_counted(start_daemon: Any) -> None:
    with FakeOpenAI(embed=_eight_d) as fake:
        daemon = start_daemon(
            metrics=METRICS,
            weaver=QUIET,
            embedding={
                "provider": "litellm",
                "model": "openai/test-embed",
                "api_base": fake.base_url,
                "max_retries": 0,
                "dim": 8,
            },
        )
        with daemon.client() as c:
            wait_ready(c)
            conversation(c, "s1", MAY, "I like jazz.", "I prefer rock.")
            wait_until(lambda: c.admin.weaver_status().unindexed == 0, 30, "for the index")
            c.recall("jazz", user_id="alice")
            ok = Scrape(daemon)
            calls = ok("strata_llm_calls_total", purpose="embed", outcome="ok")
            assert calls == len(fake.requests) >= 2  # the index batch and the query
            assert ok("strata_llm_calls_total", purpose="embed", outcome="error") == 0
            assert ok("strata_llm_tokens_total", purpose="embed", type="prompt") > 0
            fake.outage = Reply.error(503)
            with pytest.raises(StrataClientError) as err:
                c.recall("rock", user_id="alice")
            assert err.value.code == grpc.StatusCode.UNAVAILABLE
            down = Scrape(daemon)
            assert down("strata_llm_calls_total", purpose="embed", outcome="error") == 1
            assert down("strata_llm_calls_total", purpose="embed", outcome="ok") == calls
