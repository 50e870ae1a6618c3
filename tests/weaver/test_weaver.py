"""The Memory Weaver in a real daemon: real embedding model, embedded Qdrant engine, RocksDB."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from tests.support import MAY, QUIET, wait_until
from tests.support.builds import gated_child, index_small_stores
from tests.support.llm_server import FakeOpenAI, Reply
from tests.support.weaving import EchoLLM, conversation, run
from tiers.core.records import Scope
from tiers.semantic.vectors import PointFilter
from tiers.semantic.vectors.shards.store import ShardedVectorStore

pytestmark = pytest.mark.slow
ALICE = Scope("alice")


def test_an_ended_session_is_indexed_within_seconds_with_provenance(start_daemon):
    daemon = start_daemon(weaver=QUIET)
    _embedder, vectors = daemon.daemon.parts.semantic.wait_ready(120)  # the model loads once
    chunks = PointFilter(user_id="alice", kinds=("episode_chunk",))
    with daemon.client() as c:
        began = time.monotonic()
        eid = conversation(
            c,
            "s1",
            MAY,
            "I adopted a cat called Miso.",
            "Lovely! What colour is she?",
            "She is ginger and very loud.",
            "Ha, like my old cat.",
        )
        wait_until(lambda: vectors.count(chunks) > 0, 10)
        assert time.monotonic() - began < 5
        points = vectors.scroll(chunks)
        assert {p.episode_id for p in points} == {eid}
        seqs = sorted({s.seq for p in points for s in p.sources})
        assert seqs == [1, 2, 3, 4]
        source = next(s for p in points for s in p.sources if s.seq == 1)
        assert (source.session_id, source.message_id, source.metadata) == (
            "s1",
            "s1-0",
            {"dia_id": "s1:0"},
        )
        assert any(p.text.startswith("Alice: I adopted a cat called Miso.") for p in points)
        # Each source keeps its message, so drilling down works after the journal expires.
        assert (source.speaker, source.text) == ("Alice", "I adopted a cat called Miso.")
        assert source.created_at_us == int(MAY.timestamp() * 1_000_000)
        # The mark goes right after the points are written (a reader can see them first).
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 10, "for the mark to be cleared")
        # The other user's scope sees nothing.
        assert vectors.count(PointFilter(user_id="bob")) == 0


def test_run_now_consolidates_into_facts_summary_and_graph(start_daemon):
    daemon = start_daemon(weaver=QUIET)
    semantic = daemon.daemon.parts.semantic
    _embedder, vectors = semantic.wait_ready(120)
    with daemon.client() as c:
        eid = conversation(
            c,
            "s1",
            MAY,
            "I work at Acme as a designer.",
            "Cool. I went to Rome yesterday.",
        )
        report = run(c)
        assert report.ok and report.episodes == 1 and report.summaries == 1
        assert report.facts >= 2 and report.triplets >= 1 and report.failures == 0
        facts = vectors.scroll(PointFilter(user_id="alice", kinds=("fact",)))
        texts = " | ".join(p.text for p in facts)
        assert "Alice" in texts and "Acme" in texts
        assert "7 May 2023" in texts and "Bob" in texts  # "yesterday", anchored; "I" resolved
        for point in facts:
            assert point.episode_id == eid and point.extractor == "local"
            assert all(s.metadata["dia_id"].startswith("s1:") for s in point.sources)
        edges = semantic.graph.edges_of(ALICE, "Alice")
        assert any(e.predicate == "works_at" and "Acme" in e.object for e in edges)
        assert all(e.sources and e.sources[0].session_id == "s1" for e in edges)
        (summary,) = vectors.scroll(PointFilter(user_id="alice", kinds=("summary",)))
        assert "Alice" in summary.text and "2023" in summary.text

        # Nothing is left to do, and doing it again adds nothing.
        status = c.admin.weaver_status()
        assert status.pending == 0 and status.last_run.run_id == report.run_id
        again = run(c)
        assert again.ok and again.episodes == 0
        assert daemon.daemon.parts.weaver is not None
        before = vectors.count(PointFilter(user_id="alice"))
        daemon.daemon.parts.weaver._consolidator.consolidate(eid)  # re-consolidate one episode
        assert vectors.count(PointFilter(user_id="alice")) == before


def test_a_new_value_supersedes_the_old_fact(start_daemon):
    daemon = start_daemon(weaver=QUIET)
    semantic = daemon.daemon.parts.semantic
    _embedder, vectors = semantic.wait_ready(120)
    with daemon.client() as c:
        # Imported out of order: the later episode arrives first.
        conversation(c, "later", dt.datetime(2024, 2, 1, tzinfo=dt.UTC), "I moved to Berlin.")
        conversation(c, "earlier", MAY, "I live in Paris.")
        report = run(c)
        assert report.superseded == 1
    edges = {e.object: e for e in semantic.graph.edges_about(ALICE, "Alice", "lives_in")}
    assert set(edges) == {"Paris", "Berlin"}
    assert edges["Berlin"].valid_to_us is None
    assert edges["Paris"].valid_to_us == edges["Berlin"].valid_from_us
    facts = {
        p.attrs.get("object"): p
        for p in vectors.scroll(PointFilter(user_id="alice", kinds=("fact",)))
        if p.attrs.get("predicate") == "lives_in"
    }
    assert facts["Paris"].valid_to_us == edges["Berlin"].valid_from_us
    assert facts["Berlin"].valid_to_us is None
    current = vectors.scroll(
        PointFilter(user_id="alice", kinds=("fact",), include_superseded=False)
    )
    assert not any("Paris" in p.text for p in current)
    assert any("Berlin" in p.text for p in current)


def test_the_llm_back_end_and_its_fallback(start_daemon):
    echo = EchoLLM()
    with FakeOpenAI(responder=echo) as fake:
        daemon = start_daemon(
            weaver=QUIET,
            llm={
                "model": "openai/test",
                "api_base": fake.base_url,
                "max_retries": 1,
                "on_failure": "local",  # the default, "wait", is in test_faults_llm.py
            },
        )
        _embedder, vectors = daemon.daemon.parts.semantic.wait_ready(120)
        with daemon.client() as c:
            conversation(c, "s1", MAY, "I like jazz.", "I prefer rock.")
            report = run(c)
            assert report.ok and report.fallbacks == 0 and report.llm_calls == 1
            assert report.facts == 2
            facts = vectors.scroll(PointFilter(user_id="alice", kinds=("fact",)))
            assert {p.extractor for p in facts} == {"llm:openai/test"}
            assert c.admin.weaver_status().extractor == "llm:openai/test"

            # The LLM goes down: the episode is done by the local extractor instead.
            fake.responder = None
            fake.default = Reply.error(500)
            conversation(c, "s2", MAY, "I work at Initech.")
            report = run(c)
            assert report.ok and report.fallbacks == 1 and report.llm_calls == 2
            latest = vectors.scroll(PointFilter(user_id="alice", kinds=("fact",)))
            assert any(p.extractor == "local" and "Initech" in p.text for p in latest)


def test_a_run_that_breaks_is_reported_as_failed(start_daemon, monkeypatch):
    d = start_daemon(weaver=QUIET)
    with d.client(timeout=60) as c:
        conversation(c, "s1", MAY, "I moved to Lisbon.", "Nice!")

        def broken() -> list[object]:
            raise OSError("the state store cannot be read")

        monkeypatch.setattr(d.daemon.parts.journal, "pending", broken)
        report = run(c)
        assert not report.ok and report.failures == 1
        assert "the state store cannot be read" in report.error
        monkeypatch.undo()
        assert "the state store cannot be read" in c.admin.weaver_status().last_error
        assert run(c).ok  # the worker survived and the episode is still pending


def test_an_index_build_runs_beside_indexing_and_keeps_what_was_written_meanwhile(
    start_daemon, tmp_path, monkeypatch
):
    """The build neither waits behind index jobs nor holds them up (under a backlog it never
    ran before), and what is indexed during it is in the built copy."""
    gate = tmp_path / "go"
    gated_child(monkeypatch, gate)  # the build's child waits until the test lets it go
    index_small_stores(monkeypatch)  # so that the build has something to index and swap in
    daemon = start_daemon(weaver=QUIET)
    vectors = daemon.daemon.parts.semantic.wait_ready(120)[1].inner  # the store itself
    assert isinstance(vectors, ShardedVectorStore)
    weaver = daemon.daemon.parts.weaver
    assert weaver is not None
    turns = PointFilter(user_id="alice", kinds=("episode_turn",))
    with daemon.client() as c:
        first = conversation(c, "s1", MAY, "I adopted a cat called Miso.", "What colour?")
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 60)
        (shard,) = vectors.open_shards().values()  # alice's, the one shard written
        weaver.request_optimize()
        wait_until(lambda: shard.live._child is not None, 60)  # the build has started
        building = weaver._builds._optimizer
        weaver.request_optimize()  # one build at a time: this one starts nothing
        assert weaver._builds._optimizer is building
        second = conversation(c, "s2", MAY, "Miso learned to open doors.", "Clever cat!")
        wait_until(
            lambda: c.admin.weaver_status().unindexed == 0, 60
        )  # indexed while the build runs
        assert shard.builds == 0 and shard.live._child is not None
        gate.touch()
        wait_until(lambda: shard.builds == 1, 60)
        assert {p.episode_id for p in vectors.scroll(turns)} == {first, second}
        hits = c.recall("What can Miso do?", user_id="alice", k=3).hits
        assert hits and "open doors" in hits[0].text
