"""weaverctl against a live stratad subprocess, and a SIGKILL in the middle of a weaver run."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from stratad_client import MemoryClient, message
from tests.support import QUIET_ENV, wait_until, weaverctl
from tests.support.llm_server import FakeOpenAI, Reply
from tests.support.weaving import EchoLLM, all_points, stored_extraction_facts, tier3

pytestmark = pytest.mark.slow


def episodes(c: MemoryClient, n: int, turns: int = 3) -> list[str]:
    ids = []
    for i in range(n):
        c.append_batch(
            f"s{i}",
            [
                message(
                    f"Episode {i} turn {t}: I bought {i * 10 + t} apples at the market.",
                    name="Alice" if t % 2 == 0 else "Bob",
                    created_at=dt.datetime(2023, 1, 1 + i, tzinfo=dt.UTC),
                    metadata={"dia_id": f"D{i}:{t}"},
                )
                for t in range(turns)
            ],
            user_id="alice",
        )
        ids.append(c.end_session(f"s{i}").episode_id)
    return ids


def test_weaverctl_run_now_and_status_end_to_end(spawn, tmp_path):
    proc = spawn(tmp_path / "data", **QUIET_ENV)
    with proc.client() as c:
        # The model is still loading (importing it alone takes seconds): appends are served.
        assert c.admin.weaver_status().embedding_ready is False
        assert c.append("early", "served before the model is ready", user_id="u").seq == 1
        episodes(c, 3)
    out = weaverctl(proc.address, "run-now")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert "consolidate 3/3" in lines
    assert " ok: 3 episodes" in lines[-1]
    status = json.loads(weaverctl(proc.address, "--json", "status").stdout)
    assert status["pending"] == "0" and status["lastRun"]["episodes"] == 3
    assert status["embeddingReady"] is True
    # Nothing pending: a run with nothing to do still succeeds.
    started = weaverctl(proc.address, "run-now", "--no-wait")
    assert started.returncode == 0 and started.stdout.startswith("run ")
    missing = weaverctl(proc.address, "run-now", "--episode", "nope")
    assert missing.returncode == 1 and "INVALID_ARGUMENT" in missing.stderr
    assert proc.terminate() == 0


def test_an_episode_expired_before_consolidation_fails_the_run_once(spawn, tmp_path):
    proc = spawn(tmp_path / "data", **QUIET_ENV, journal__ttl_seconds="1")
    with proc.client() as c:
        episodes(c, 1)
    time.sleep(1.2)  # the journal entry expires; the consolidation state does not
    out = weaverctl(proc.address, "run-now")
    assert out.returncode == 1, out.stdout
    assert "FAILED" in out.stdout and "1 failures" in out.stdout
    assert "expired before consolidation" in out.stdout
    status = json.loads(weaverctl(proc.address, "--json", "status").stdout)
    assert status["pending"] == "0" and "expired" in status["lastError"]
    assert weaverctl(proc.address, "run-now").returncode == 0  # not failing forever
    proc.terminate()


def test_sigkill_during_a_run_resumes_with_no_duplicates_and_no_losses(spawn, tmp_path):
    echo = EchoLLM()
    n = 12
    with FakeOpenAI(responder=lambda req: Reply.hang(0.3, then=echo(req))) as fake:
        llm = {"llm__model": "openai/test", "llm__api_base": fake.base_url}
        proc = spawn(tmp_path / "data", **QUIET_ENV, **llm)
        with proc.client() as c:
            ids = episodes(c, n)
        assert weaverctl(proc.address, "run-now", "--no-wait").returncode == 0
        wait_until(lambda: echo.calls >= 4, 120, "for the run's fourth call", interval=0.02)
        proc.kill()  # in the middle of the run
        asked_before = echo.calls

        fake.responder = echo  # fast now
        proc = spawn(tmp_path / "data", **QUIET_ENV, **llm)
        out = weaverctl(proc.address, "run-now")
        assert out.returncode == 0, out.stdout + out.stderr
        assert proc.terminate() == 0

    # Each episode was extracted once (by the LLM, or resumed from the stored extraction)...
    assert echo.calls <= n + 1 and echo.calls >= n
    assert asked_before >= 4
    with tier3(tmp_path / "data") as (state, journal, vectors):
        assert journal.pending() == [] and journal.unindexed() == []
        facts = all_points(vectors, "alice", "fact")
        summaries = all_points(vectors, "alice", "summary")
        chunks = all_points(vectors, "alice", "episode_chunk")
        assert sorted(p.episode_id for p in summaries) == sorted(ids)
        expected = {eid: sorted(stored_extraction_facts(state, eid)) for eid in ids}
        got: dict[str, list[str]] = {eid: [] for eid in ids}
        for p in facts:
            got[p.episode_id].append(p.text)
        # ...and Tier 3 holds exactly the stored extraction of every episode: none lost, none
        # doubled, none from a second, different LLM answer.
        assert {eid: sorted(texts) for eid, texts in got.items()} == expected
        assert all(len(v) == 3 for v in expected.values())
        assert len({p.id for p in chunks}) == len(chunks) and {p.episode_id for p in chunks} == set(
            ids
        )
