"""Forget in a real daemon: every tier, every read path, no resurrection, backups."""

from __future__ import annotations

import datetime as dt
import json
import threading
from typing import Any

import grpc
import pytest

from daemon.cli import weaverctl as ctl
from stratad_client import StrataClientError
from tests.support import MAY, QUIET, consolidate, wait_until
from tests.support.disk import files_with
from tests.support.forgetting import SECRET, talk, texts
from tests.support.llm_server import FakeOpenAI, Reply
from tests.support.weaving import EchoLLM, digesting, tier3, turns_in
from tiers.core.records import Scope
from tiers.journal.consolidation import EXTRACTIONS_CF
from tiers.rights.backup import restore_backup
from tiers.semantic.tombstones import is_forgotten
from tiers.semantic.vectors import PointFilter

pytestmark = pytest.mark.slow
ALICE, BOB = Scope("alice"), Scope("bob")


def code(call: Any) -> grpc.StatusCode:
    with pytest.raises(StrataClientError) as info:
        call()
    return info.value.code  # type: ignore[no-any-return]


def test_forget_cascades_through_every_tier(start_daemon, capsys):
    daemon = start_daemon(weaver=QUIET, recall={"cache_ttl_seconds": 60})
    semantic = daemon.daemon.parts.semantic
    _embedder, vectors = semantic.wait_ready(120)
    graph = semantic.graph
    with daemon.client() as c:
        acme = talk(c, "alice", "a1", "I work at Acme as a designer.", "I went to Rome.")
        berlin = talk(c, "alice", "a2", "I moved to Berlin.", "Nice, Berlin is great.")
        bob = talk(c, "bob", "b1", "I work at Acme as a designer.")
        talk(c, "alice", "a3", f"My locker code is {SECRET}.", agent="coach", end=False)
        consolidate(c)
        assert graph.edges_where(lambda e: e.scope == BOB and e.object == "Acme")
        assert {e.object for e in graph.edges_of(ALICE, "Alice")} >= {"Acme", "Berlin"}
        before = texts(c, "alice", "Where does Alice work?")  # fills the semantic cache
        assert any(eid == acme for _id, eid, _t in before)
        acme_ids = [p.id for p in vectors.scroll(PointFilter(episode_ids=(acme,)))]
        kinds = {p.kind for p in vectors.get(acme_ids)}
        assert kinds == {"episode_chunk", "episode_turn", "summary", "fact"}

        # -- by episode id: the journal, its state, every point and edge of it -------------
        r = c.forget(episode_ids=[acme, "f" * 32])  # an unknown id is not an error
        assert (r.episodes, r.episode_messages, r.consolidation_records) == (1, 2, 1)
        assert r.vector_points == len(acme_ids) and r.graph_edges >= 1 and r.graph_nodes >= 1
        assert r.cache_entries >= 1 and r.sessions == 0
        assert code(lambda: c.get_episode(acme)) == grpc.StatusCode.NOT_FOUND
        assert acme not in [e.episode_id for e in c.iter_episodes(user_id="alice")]
        assert code(lambda: c.get_node(acme_ids[0])) == grpc.StatusCode.NOT_FOUND
        for channels in (["vector"], ["keyword"], ["graph"], []):
            hits = texts(c, "alice", "Where does Alice work? Acme", channels=channels)
            assert not any(eid == acme or "Acme" in t for _id, eid, t in hits), channels
        assert "Acme" not in c.pack("Alice work Acme", user_id="alice", max_tokens=500).text
        # The shared entity "Alice" stays with its other edge; "Acme" left alice's graph only.
        assert {e.object for e in graph.edges_of(ALICE, "Alice")} == {"Berlin"}
        assert "acme" not in dict(graph.entities(ALICE))
        assert graph.edges_where(lambda e: e.scope == BOB and e.object == "Acme")
        assert any(eid == bob for _id, eid, _t in texts(c, "bob", "Where does Bob work? Acme"))
        assert c.get_episode(berlin).episode.message_count == 2

        # -- no resurrection: a run, a re-consolidation, a re-index ------------------------
        consolidate(c)
        weaver = daemon.daemon.parts.weaver
        assert weaver is not None
        assert weaver._consolidator.consolidate(acme).forgotten
        assert weaver._index.indexer.index([acme]).points == 0
        assert vectors.get(acme_ids) == [] and is_forgotten(
            daemon.daemon.parts.state, episode_id=acme
        )

        # -- by memory id: one fact and its edge; the rest of the episode stays ------------
        (fact,) = [
            p
            for p in vectors.scroll(PointFilter(user_id="alice", kinds=("fact",)))
            if p.attrs.get("object") == "Berlin"
        ]
        r = c.forget(memory_ids=[fact.id])
        assert (r.vector_points, r.graph_edges, r.episodes) == (1, 1, 0)
        assert r.graph_nodes == 2  # "Alice" and "Berlin" had no other edge
        assert code(lambda: c.get_node(fact.id)) == grpc.StatusCode.NOT_FOUND
        assert fact.id not in [i for i, _e, _t in texts(c, "alice", "Where did Alice move?")]
        assert any(eid == berlin for _i, eid, _t in texts(c, "alice", "Where did Alice move?"))
        # Consolidating again from the stored extraction derives the same id: skipped.
        weaver._consolidator.consolidate(berlin)
        assert vectors.get([fact.id]) == [] and graph.get(fact.id) is None

        # -- by scope (one agent): the open session -----------------------------------------
        assert c.get_working_memory("a3").messages
        r = c.forget(user_id="alice", agent_id="coach")
        assert (r.sessions, r.session_messages, r.episodes) == (1, 1, 0)
        view = c.get_working_memory("a3")
        assert not view.messages and view.log_messages == 0
        assert c.get_episode(berlin).episode.episode_id == berlin  # other agents' data stays

        # -- by scope (the whole user) -------------------------------------------------------
        assert ctl.main(["--address", daemon.address, "forget", "--user", "alice", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["episodes"] == "1" and int(out["vectorPoints"]) >= 2
        assert list(c.iter_episodes(user_id="alice")) == []
        assert texts(c, "alice", "Berlin Acme Rome locker") == []
        assert vectors.count(PointFilter(user_id="alice")) == 0 and graph.entities(ALICE) == []
        for cf in ("pending", "unindexed", EXTRACTIONS_CF, "log"):
            assert list(daemon.daemon.parts.state.scan(cf, b"alice")) == [] or cf == EXTRACTIONS_CF
        assert daemon.daemon.parts.state.get(EXTRACTIONS_CF, berlin.encode()) is None
        assert any(eid == bob for _id, eid, _t in texts(c, "bob", "Acme"))
        assert c.get_episode(bob).episode.message_count == 1

        # New data of a forgotten user is kept (tombstones name ids, not the user).
        talk(c, "alice", "a4", "I adopted a cat named Miso.")
        consolidate(c)
        assert any("Miso" in t for _i, _e, t in texts(c, "alice", "cat name"))


INVALID = [
    ({}, "exactly one of scope, episode_ids or memory_ids"),
    ({"user_id": "u", "episode_ids": ["0" * 32]}, "got scope, episode_ids"),
    ({"agent_id": "x"}, "scope.user_id is required"),
    ({"episode_ids": [""]}, "episode_ids[0] must be 32 lowercase hex"),
    ({"episode_ids": ["XYZ"]}, "episode_ids[0] must be 32 lowercase hex"),
    ({"memory_ids": ["not-a-uuid"]}, "memory_ids[0] must be a hit's id"),
    ({"memory_ids": ["0" * 32] * 1001}, "the limit is 1000"),
]


def test_forget_validation(daemon):
    with daemon.client() as c:
        for kwargs, fragment in INVALID:
            with pytest.raises(StrataClientError) as info:
                c.forget(**kwargs)
            assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT, kwargs
            assert fragment in info.value.message, kwargs


def test_forget_during_a_run_then_backup_and_restore(start_daemon, tmp_path):
    started, release = threading.Event(), threading.Event()
    echo = EchoLLM()

    def slow(request: Any) -> Reply:
        started.set()
        release.wait(30)
        return echo(request)

    with FakeOpenAI(responder=slow) as fake:
        daemon = start_daemon(
            weaver=QUIET,
            llm={"model": "openai/test", "api_base": fake.base_url, "timeout_seconds": 60},
        )
        _embedder, vectors = daemon.daemon.parts.semantic.wait_ready(120)
        with daemon.client() as c:
            gone = talk(c, "alice", "s1", f"My locker code is {SECRET}.", "Noted.")
            kept = talk(c, "bob", "s2", "I like jazz.")
            # the chunks are in the vector store
            wait_until(lambda: not c.admin.weaver_status().unindexed, 60, "for the index stage")
            c.admin.backup(str(tmp_path / "before"))
            assert files_with(tmp_path / "before" / "journal", SECRET.encode())
            assert files_with(tmp_path / "before" / "vectors", SECRET.encode())  # its chunk
            events = c.admin.run_weaver()
            next(events)  # queued: the run goes on in the daemon
            assert started.wait(30)  # the run is inside the LLM call for one episode
            r = c.forget(episode_ids=[gone])
            assert r.episodes == 1 and r.vector_points >= 1  # its chunks were indexed
            release.set()
            report = list(events)[-1].report
            assert report.ok, report.error
            assert vectors.count(PointFilter(episode_ids=(gone,))) == 0
            assert vectors.count(PointFilter(episode_ids=(kept,))) >= 2
            state = daemon.daemon.parts.state
            assert state.get(EXTRACTIONS_CF, gone.encode()) is None
            assert not daemon.daemon.parts.semantic.graph.edges_where(
                lambda e: e.episode_id == gone
            )
            c.admin.backup(str(tmp_path / "after"))
    # The deleted bytes are gone from the files of a backup (the RocksDB files it links, the
    # compacted copy of the vector store), and a restore has none of the episode's data.
    for store in ("journal", "state", "vectors"):
        assert files_with(tmp_path / "after" / store, SECRET.encode()) == [], store
    restored = tmp_path / "restored"
    restore_backup(tmp_path / "after", restored)
    with tier3(restored) as (state, journal, vectors):
        assert journal.find(gone) is None and journal.find(kept) is not None
        assert vectors.count(PointFilter(episode_ids=(gone,))) == 0
        assert vectors.count(PointFilter(episode_ids=(kept,))) >= 2
        assert is_forgotten(state, episode_id=gone)


def _lives_in_llm(request: Any) -> Reply:
    """One fact per turn: "<speaker> lives in <last word>" (a functional predicate)."""
    turns = turns_in(request)
    facts = []
    for t in turns:
        city = t["text"].rstrip(".").split()[-1]
        facts.append(
            {
                "text": f"{t['speaker']} lives in {city}",
                "source_seqs": [t["seq"]],
                "triplet": {"subject": t["speaker"], "predicate": "lives_in", "object": city},
            }
        )
    summary = f"{turns[0]['speaker']} said where she lives."
    return Reply.json({"summary": summary, "summary_source_seqs": [], "facts": facts})


def test_forgetting_a_superseding_fact_makes_the_older_current_again(start_daemon):
    with FakeOpenAI(responder=digesting(_lives_in_llm)) as fake:
        daemon = start_daemon(weaver=QUIET, llm={"model": "openai/test", "api_base": fake.base_url})
        _embedder, vectors = daemon.daemon.parts.semantic.wait_ready(120)
        graph = daemon.daemon.parts.semantic.graph
        with daemon.client() as c:
            for sid, city, day in (("m1", "Paris", 1), ("m2", "Rome", 2), ("m3", "Oslo", 3)):
                c.append(
                    sid,
                    f"I live in {city}.",
                    name="Alice",
                    user_id="alice",
                    created_at=MAY + dt.timedelta(days=day),
                )
                c.end_session(sid)
            consolidate(c)
            facts = {
                p.attrs["object"]: p
                for p in vectors.scroll(PointFilter(user_id="alice", kinds=("fact",)))
            }
            paris, rome, oslo = facts["Paris"], facts["Rome"], facts["Oslo"]
            assert paris.valid_to_us is not None and rome.valid_to_us is not None
            assert oslo.valid_to_us is None

            # The newest goes: Rome is current again, Paris stays closed (by Rome).
            r = c.forget(memory_ids=[oslo.id])
            assert r.facts_restored == 1
            (rome_now,) = vectors.get([rome.id])
            assert rome_now.valid_to_us is None
            assert graph.get(rome.id).valid_to_us is None  # type: ignore[union-attr]
            assert vectors.get([paris.id])[0].valid_to_us == rome.valid_from_us
            hits = c.recall("Where does Alice live?", user_id="alice", kinds=["fact"]).hits
            assert rome.id in [h.id for h in hits]

            # The middle one goes: Paris is closed at the next value that remains (none: open).
            r = c.forget(memory_ids=[rome.id])
            assert r.facts_restored == 1
            assert vectors.get([paris.id])[0].valid_to_us is None


def test_scope_forget_finds_extractions_whose_episode_expired(start_daemon):
    daemon = start_daemon(weaver=QUIET)
    d = daemon.daemon.parts
    with daemon.client() as c:
        gone = talk(c, "alice", "x1", f"My locker code is {SECRET}.", "Noted.")
        consolidate(c)
        assert d.state.get(EXTRACTIONS_CF, gone.encode()) is not None
        # What an expired episode whose points were deleted leaves: its stored extraction.
        header = d.journal.find(gone)
        assert header is not None
        d.journal.delete_episode(header)
        _embedder, vectors = d.semantic.wait_ready(0)
        vectors.delete(PointFilter(episode_ids=(gone,)))
        d.semantic.graph.remove_edges(
            [e.id for e in d.semantic.graph.edges_where(lambda e: e.episode_id == gone)]
        )
        d.state.write(_without_marks(d.state, gone))
        r = c.forget(user_id="alice")
        assert r.consolidation_records == 1
        assert d.state.get(EXTRACTIONS_CF, gone.encode()) is None
        assert is_forgotten(d.state, episode_id=gone)


def _without_marks(state: Any, episode_id: str) -> Any:
    batch = state.batch()
    for cf in ("pending", "unindexed"):
        batch.delete(cf, episode_id.encode())
    return batch


def test_scope_forget_finds_the_marks_of_an_episode_gone_from_the_journal(start_daemon):
    daemon = start_daemon(weaver=QUIET)
    d = daemon.daemon.parts
    with daemon.client() as c:
        gone = talk(c, "alice", "x1", f"My locker code is {SECRET}.", "Noted.")
        talk(c, "bob", "y1", "I like tea.", "Noted.")
        # An episode the journal no longer holds (expired and compacted) with its pending
        # mark left: the scope's Forget finds it by the mark's owner alone.
        header = d.journal.find(gone)
        assert header is not None and d.journal.is_pending(gone)
        d.journal.delete_episode(header)
        assert [e for e, _owner in d.journal.marked("alice")] == [gone]
        r = c.forget(user_id="alice")
        assert r.consolidation_records >= 1
        assert not d.journal.is_pending(gone) and d.journal.marked("alice") == []
        assert [owner for _e, owner in d.journal.marked("bob")] == [BOB]  # bob's stays
