"""The LLM is down, slow or talks garbage: with ``llm.on_failure = "wait"`` (the default) the
weaver keeps the episodes pending and backs off, and consolidates them, each once, when the
LLM is back. Only an episode close to journal expiry goes to the local extractor."""

from __future__ import annotations

import time
from typing import Any

import pytest

from daemon.wiring import Factories
from stratad_client import MemoryClient
from tests.support import MAY, QUIET, wait_until
from tests.support.llm_server import FakeOpenAI, Reply, free_port_refuses
from tests.support.weaving import EchoLLM, conversation, run
from tiers.semantic.vectors import PointFilter

MODEL = "openai/test"


def llm(base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "api_base": base_url,
        "max_retries": 1,
        "timeout_seconds": 0.5,
        "retry_backoff_seconds": 0.4,
        "retry_backoff_max_seconds": 1.6,
        **extra,
    }


def three_episodes(c: MemoryClient) -> list[str]:
    return [
        conversation(c, f"s{i}", MAY, f"I adopted a cat called Cat{i}.", "Lovely.")
        for i in range(3)
    ]


def assert_consolidated_once(daemon: Any, echo: EchoLLM, ids: list[str]) -> None:
    """Every episode consolidated by the LLM, asked once each; nothing from the fallback."""
    _embedder, vectors = daemon.daemon.parts.semantic.wait_ready(0)
    facts = vectors.scroll(PointFilter(user_id="alice", kinds=("fact",)), limit=1000)
    summaries = vectors.scroll(PointFilter(user_id="alice", kinds=("summary",)), limit=1000)
    assert sorted(p.episode_id for p in summaries) == sorted(ids)
    assert {p.extractor for p in facts + summaries} == {f"llm:{MODEL}"}
    assert echo.calls == len(ids)
    assert sorted(p.episode_id for p in facts) == sorted(ids * 2)  # one fact per turn


def test_llm_down_keeps_episodes_pending_backs_off_and_recovers(start_daemon):
    port = free_port_refuses()
    daemon = start_daemon(weaver=QUIET, llm=llm(f"http://127.0.0.1:{port}/v1"))
    weaver = daemon.daemon.parts.weaver
    daemon.daemon.parts.semantic.wait_ready(120)
    with daemon.client() as c:
        ids = three_episodes(c)
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 60)
        report = run(c)
        # Connection refused: the first episode's attempts fail, the others are not tried.
        assert not report.ok and report.episodes == 0 and report.fallbacks == 0
        assert "the LLM failed" in report.error and "3 episodes stay pending" in report.error
        assert "next try in 0.4 s" in report.error
        status = c.admin.weaver_status()
        assert status.pending == 3 and "next try in" in status.last_error
        # The weaver retries by itself, pausing twice as long each time, up to the cap.
        delays = []
        for n in range(1, 5):
            wait_until(lambda n=n: f"(backoff {n})" in c.admin.weaver_status().last_error, 10)
            status = c.admin.weaver_status()
            delays.append(status.last_error.split("next try in ")[1].split(" s")[0])
            assert status.pending == 3 and status.last_run.episodes == 0
        assert delays == ["0.4", "0.8", "1.6", "1.6"]
        # A scheduled run waits for the pause to end.
        last = weaver.last_run
        weaver.scheduled_run()
        time.sleep(0.3)
        assert weaver.last_run is last and weaver.running is None

        # The LLM comes back on the same address: the next retry consolidates everything.
        echo = EchoLLM()
        with FakeOpenAI(responder=echo, port=port):
            # Pending reaches 0 before the run ends (profiles): wait for its report too.
            wait_until(lambda: (s := c.admin.weaver_status()).pending == 0 and not s.running, 20)
            status = c.admin.weaver_status()
            assert status.last_run.ok and status.last_run.episodes == 3
            assert weaver.llm_backoff.failures == 0
            assert_consolidated_once(daemon, echo, ids)


@pytest.mark.parametrize("fault", ["slow", "garbage", "5xx"])
def test_a_slow_or_broken_llm_leaves_episodes_pending(start_daemon, fault):
    replies = {
        "slow": Reply.hang(5.0, then=Reply.text("too late")),  # beyond timeout_seconds
        "garbage": Reply.text("Sure! Here are the facts: {not json"),
        "5xx": Reply.error(503),
    }
    with FakeOpenAI(default=replies[fault]) as fake:
        daemon = start_daemon(
            weaver=QUIET,
            llm=llm(fake.base_url, retry_backoff_seconds=3600.0, retry_backoff_max_seconds=3600.0),
        )
        daemon.daemon.parts.semantic.wait_ready(120)
        with daemon.client() as c:
            ids = three_episodes(c)
            report = run(c)
            assert not report.ok and report.episodes == 0 and report.fallbacks == 0
            assert len(fake.requests) == 2  # one episode, max_retries + 1 attempts
            assert report.llm_calls == 0  # nothing was extracted
            assert c.admin.weaver_status().pending == 3
            cause = {"slow": "Timeout", "garbage": "not valid JSON", "5xx": "503"}[fault]
            assert cause in report.error, report.error
            # Back to normal: an explicit run (the pause is an hour) does everything once.
            echo = EchoLLM()
            fake.responder = echo
            fake.default = Reply.error(500)
            report = run(c)
            assert report.ok and report.episodes == 3 and report.fallbacks == 0
            assert c.admin.weaver_status().pending == 0
            assert_consolidated_once(daemon, echo, ids)


def test_an_episode_close_to_expiry_goes_to_the_local_extractor(start_daemon):
    port = free_port_refuses()
    later = [0.0]  # seconds added to the daemon's clock (its journal's and working memory's)
    daemon = start_daemon(
        weaver=QUIET,
        llm=llm(f"http://127.0.0.1:{port}/v1", max_retries=0),
        factories=Factories(clock=lambda: time.time() + later[0]),
    )
    journal = daemon.daemon.parts.journal
    daemon.daemon.parts.semantic.wait_ready(120)
    with daemon.client() as c:
        old = conversation(c, "old", MAY, "I moved to Lisbon.", "Nice.")
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 60)
        # 28 of the journal's 30 days later (the clock is the seam for time)...
        later[0] = 28 * 86_400
        assert c.admin.weaver_status().pending_near_expiry == 1
        fresh = conversation(c, "fresh", MAY, "I moved to Porto.", "Nice.")
        report = run(c)
        # ...the old episode is done locally rather than lost; the fresh one waits.
        assert report.episodes == 1 and report.fallbacks == 1 and not report.ok
        assert "1 episodes stay pending" in report.error
        _embedder, vectors = daemon.daemon.parts.semantic.wait_ready(0)
        done = vectors.scroll(PointFilter(user_id="alice", kinds=("summary",)))
        assert [(p.episode_id, p.extractor) for p in done] == [(old, "local")]
        assert [p.episode_id for p in journal.pending()] == [fresh]


def test_on_failure_local_keeps_the_immediate_fallback(start_daemon):
    port = free_port_refuses()
    daemon = start_daemon(
        weaver=QUIET, llm=llm(f"http://127.0.0.1:{port}/v1", max_retries=0, on_failure="local")
    )
    daemon.daemon.parts.semantic.wait_ready(120)
    with daemon.client() as c:
        three_episodes(c)
        report = run(c)
        assert report.ok and report.episodes == 3 and report.fallbacks == 3
        assert c.admin.weaver_status().pending == 0
        assert daemon.daemon.parts.weaver.llm_backoff.failures == 0
