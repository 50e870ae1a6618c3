"""Recall, Pack and GetNode over gRPC on a real daemon (real model, embedded Qdrant, RocksDB)."""

from __future__ import annotations

import datetime as dt
import time

import grpc
import pytest

from daemon.wiring import Factories
from tests.support import MAY, QUIET, code, consolidate, talk, wait_indexed, wait_until
from tests.support.llm_server import FakeOpenAI, Reply
from tiers.core.tokens import count_tokens

pytestmark = pytest.mark.slow


def test_recall_right_after_end_session_with_exact_provenance(quiet_daemon):
    with quiet_daemon.client() as c:
        talk(c, "alice", "s1", MAY, "My dentist appointment is on Thursday at 9.", "Noted.")
        wait_indexed(c, timeout=10)
        r = c.recall("When is the dentist appointment?", user_id="alice", k=3)
        assert r.hits, "the session's turns are recallable right after EndSession"
        top = r.hits[0]  # one hit per message: the turn itself
        assert top.kind == "episode_turn" and "dentist" in top.text
        assert top.id and top.score > 0 and top.created_at.ToDatetime(dt.UTC) == MAY
        [source] = top.sources
        assert source.seq == 1
        assert (source.session_id, source.message_id) == ("s1", "s1-0")
        assert dict(source.metadata) == {"dia_id": "s1:0", "user": "alice"}
        assert {t.stage for t in r.timings} >= {"embed", "vector", "keyword", "fuse", "total"}


def test_recall_with_facts_explain_and_scope_isolation(quiet_daemon):
    with quiet_daemon.client() as c:
        for user in ("alice", "mallory"):
            talk(c, user, f"{user}-1", MAY, "I work at Acme as a designer.", "I love hiking.")
            talk(c, user, f"{user}-2", MAY, "My sister Emma lives in Oslo.", "Nice city!")
        consolidate(c)
        r = c.recall("Where does Alice work?", user_id="alice", k=10, explain=True)
        assert any("Acme" in h.text for h in r.hits)
        facts = c.recall("Where does Alice work?", user_id="alice", k=10, kinds=["fact"]).hits
        assert {h.kind for h in facts} == {"fact"} and any("Acme" in h.text for h in facts)
        for hit in r.hits:
            assert hit.explanation.channels, "explain gives each channel's rank"
            assert hit.explanation.fused > 0
            assert all(s.metadata["user"] == "alice" for s in hit.sources)
        # Same names, same texts, two users: never a cross-user hit, whatever the query.
        queries = ["Acme", "Emma", "Oslo", "hiking", "Alice", "sister", "designer", "Bob", "work"]
        for user in ("alice", "mallory"):
            for q in queries:
                for channels in ([], ["vector"], ["keyword"], ["graph"]):
                    hits = c.recall(q, user_id=user, k=20, channels=channels).hits
                    assert all(s.metadata["user"] == user for h in hits for s in h.sources), (
                        user,
                        q,
                        channels,
                    )


def test_superseded_facts_rank_below_current_ones(quiet_daemon):
    with quiet_daemon.client() as c:
        talk(c, "alice", "old", MAY, "I live in Paris.")
        talk(c, "alice", "new", dt.datetime(2024, 2, 1, tzinfo=dt.UTC), "I live in Berlin.")
        consolidate(c)
        hits = c.recall("Where does Alice live?", user_id="alice", k=10, kinds=["fact"]).hits
        lives = [h for h in hits if "Paris" in h.text or "Berlin" in h.text]
        assert [("Berlin" in h.text, h.superseded) for h in lives] == [(True, False), (False, True)]
        assert lives[1].valid_to.ToDatetime(dt.UTC) == dt.datetime(2024, 2, 1, tzinfo=dt.UTC)


def test_pack_never_exceeds_its_budget(quiet_daemon):
    with quiet_daemon.client() as c:
        for i in range(6):
            talk(
                c,
                "alice",
                f"s{i}",
                MAY,
                f"Trip {i}: I visited museum number {i} in Rome.",
                "Sounds great, tell me more about the paintings you saw there.",
            )
        consolidate(c)
        for budget in (5, 20, 60, 200, 1000):
            p = c.pack("What did Alice visit in Rome?", user_id="alice", max_tokens=budget)
            assert p.tokens <= budget and count_tokens(p.text) == p.tokens
            assert sum(i.tokens for i in p.items) == p.tokens
            assert all(i.sources for i in p.items)
        capped = c.pack("Rome", user_id="alice", max_tokens=1000, per_kind_caps={"fact": 1})
        assert sum(1 for i in capped.items if i.kind == "fact") <= 1
        assert capped.items and capped.text.startswith("[")


def test_get_node_drills_down_even_after_the_journal_expired(start_daemon):
    now = [1_900_000_000.0]  # the journal's clock: the episode expires when the test says
    daemon = start_daemon(
        weaver=QUIET, journal={"ttl_seconds": 3600}, factories=Factories(clock=lambda: now[0])
    )
    daemon.daemon.parts.semantic.wait_ready(120)
    with daemon.client() as c:
        talk(c, "alice", "s1", MAY, "I adopted a cat called Miso.", "What a lovely name!")
        consolidate(c)
        fact = next(h for h in c.recall("Miso", user_id="alice", k=10).hits if h.kind == "fact")
        node = c.get_node(fact.id, user_id="alice")
        assert not node.journal_expired and node.episode.session_id == "s1"
        assert [m.message.content for m in node.messages] == ["I adopted a cat called Miso."]
        assert code(lambda: c.get_node(fact.id, user_id="mallory"))[0] == grpc.StatusCode.NOT_FOUND

        now[0] += 7200  # past the TTL: the journal no longer returns the episode
        node = c.get_node(fact.id, user_id="alice")
        assert node.journal_expired and not node.HasField("episode")
        (m,) = node.messages
        assert (m.message.content, m.message.name, m.message.message_id) == (
            "I adopted a cat called Miso.",
            "Alice",
            "s1-0",
        )
        assert dict(m.message.metadata) == {"dia_id": "s1:0", "user": "alice"}


def test_rerank_falls_back_to_the_fused_order(start_daemon):
    with FakeOpenAI(default=Reply.error(500)) as fake:
        daemon = start_daemon(weaver=QUIET, llm={"model": "openai/test", "api_base": fake.base_url})
        daemon.daemon.parts.semantic.wait_ready(120)
        with daemon.client() as c:
            talk(c, "alice", "s1", MAY, "I play the cello on Sundays.", "Lovely.")
            wait_indexed(c)
            plain = c.recall("cello", user_id="alice", k=5)
            r = c.recall("cello", user_id="alice", k=5, rerank="llm")
            assert r.rerank == "none" and "failed" in r.rerank_note
            assert [h.id for h in r.hits] == [h.id for h in plain.hits]
            local = c.recall("cello", user_id="alice", k=5, rerank="local", explain=True)
            assert local.rerank == "local" and local.hits[0].explanation.rerank


def test_semantic_cache_and_its_invalidation(start_daemon):
    daemon = start_daemon(weaver=QUIET, recall={"cache_ttl_seconds": 60})
    daemon.daemon.parts.semantic.wait_ready(120)
    with daemon.client() as c:
        talk(c, "alice", "s1", MAY, "My favourite colour is teal.")
        wait_indexed(c)
        first = c.recall("favourite colour", user_id="alice", k=5)
        again = c.recall("favourite colour", user_id="alice", k=5)
        assert not first.cached and again.cached
        assert [h.id for h in again.hits] == [h.id for h in first.hits]
        assert not c.recall("favourite colour", user_id="bob", k=5).cached
        talk(c, "alice", "s2", MAY, "Actually my favourite colour is now orange.")
        wait_indexed(c)
        fresh = c.recall("favourite colour", user_id="alice", k=5)
        assert not fresh.cached and any("orange" in h.text for h in fresh.hits)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"query": ""}, "query is required"),
        ({"user_id": ""}, "scope.user_id is required"),
        ({"k": 0}, "k must be between 1 and 100"),
        ({"k": 101}, "k must be between 1 and 100"),
        ({"kinds": ["memes"]}, "kinds: 'memes'"),
        ({"channels": ["psychic"]}, "channels: 'psychic'"),
        ({"rerank": "magic"}, "rerank: 'magic'"),
        ({"recipe": "nope"}, "no recipe named 'nope'"),
    ],
)
def test_recall_validation(quiet_daemon, kwargs, fragment):
    args = {"query": "hello", "user_id": "alice", "k": 5} | kwargs
    with quiet_daemon.client() as c:
        status, details = code(lambda: c.recall(args.pop("query"), **args))
    assert status == grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in details


def test_pack_and_get_node_validation(quiet_daemon):
    with quiet_daemon.client() as c:
        for budget in (0, -3):
            refused = code(lambda: c.pack("x", user_id="alice", max_tokens=budget))  # noqa: B023
            assert refused[0] == grpc.StatusCode.INVALID_ARGUMENT
        caps = code(lambda: c.pack("x", user_id="alice", max_tokens=10, per_kind_caps={"memes": 1}))
        assert "per_kind_caps" in caps[1]
        assert code(lambda: c.get_node("not-a-uuid"))[0] == grpc.StatusCode.INVALID_ARGUMENT
        missing = code(lambda: c.get_node("00000000-0000-0000-0000-000000000000"))[0]
        assert missing == grpc.StatusCode.NOT_FOUND


def test_recall_works_while_the_weaver_runs(start_daemon):
    import threading

    from tests.support.weaving import EchoLLM

    echo = EchoLLM()
    with FakeOpenAI(responder=lambda req: Reply.hang(1.0, then=echo(req))) as fake:
        daemon = start_daemon(weaver=QUIET, llm={"model": "openai/test", "api_base": fake.base_url})
        daemon.daemon.parts.semantic.wait_ready(120)
        with daemon.client() as c:
            for i in range(3):
                talk(c, "alice", f"s{i}", MAY, f"Note {i}: the boiler code is 44{i}.")
            wait_indexed(c)
            runner = threading.Thread(target=lambda: list(c.admin.run_weaver()))
            runner.start()
            wait_until(lambda: c.admin.weaver_status().running, 10, "for the run", interval=0.02)
            latencies = []
            while c.admin.weaver_status().running:
                began = time.monotonic()
                hits = c.recall("boiler code", user_id="alice", k=5).hits
                latencies.append(time.monotonic() - began)
                assert hits and all("boiler" in h.text for h in hits[:1])
            runner.join(30)
            assert len(latencies) >= 5 and max(latencies) < 1.0
            assert echo.calls == 3
