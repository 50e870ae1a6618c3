"""Forget in a real daemon: every tier, every read path, no resurrection, backups."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from daemon import weaverctl as ctl
from daemon.client import MemoryClient, message
from tests.llm_server import FakeOpenAI, Reply
from tests.support import wait_until
from tests.weaving import EchoLLM, tier3, turns_in
from tiers.backup import restore_backup
from tiers.records import Scope
from tiers.tombstones import PURGE_KEY, TOMBSTONES_CF, is_forgotten
from tiers.vectors import PointFilter
from weaver.consolidate import EXTRACTIONS_CF

pytestmark = pytest.mark.slow
QUIET = {"interval_seconds": 3600}
MAY = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC)
ALICE, BOB = Scope("alice"), Scope("bob")
SECRET = "Zebra-7781-Quartz"


def talk(
    c: MemoryClient, user: str, sid: str, *turns: str, agent: str = "", end: bool = True
) -> str:
    c.append_batch(
        sid,
        [
            message(text, name=("Alice", "Bob")[i % 2], created_at=MAY, message_id=f"{sid}-{i}")
            for i, text in enumerate(turns)
        ],
        user_id=user,
        agent_id=agent,
    )
    return c.end_session(sid, user_id=user).episode_id if end else ""


def consolidate(c: MemoryClient) -> None:
    report = list(c.run_weaver())[-1].report
    assert report.ok, report.error


def texts(c: MemoryClient, user: str, query: str, **kwargs: Any) -> list[tuple[str, str, str]]:
    hits = c.recall(query, user_id=user, k=50, **kwargs).hits
    return [(h.id, h.episode_id, h.text) for h in hits]


def code(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code()  # type: ignore[no-any-return]


def test_forget_cascades_through_every_tier(start_daemon, capsys):
    daemon = start_daemon(weaver=QUIET, recall={"cache_ttl_seconds": 60})
    semantic = daemon.daemon.semantic
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
        weaver = daemon.daemon.weaver
        assert weaver is not None
        assert weaver._consolidator.consolidate(acme).forgotten
        assert weaver._indexer.index([acme]).points == 0
        assert vectors.get(acme_ids) == [] and is_forgotten(daemon.daemon.state, episode_id=acme)

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
            assert list(daemon.daemon.state.scan(cf, b"alice")) == [] or cf == EXTRACTIONS_CF
        assert daemon.daemon.state.get(EXTRACTIONS_CF, berlin.encode()) is None
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
            with pytest.raises(grpc.RpcError) as info:
                c.forget(**kwargs)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, kwargs
            assert fragment in info.value.details(), kwargs


def _raw_bytes(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


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
        _embedder, vectors = daemon.daemon.semantic.wait_ready(120)
        with daemon.client() as c:
            gone = talk(c, "alice", "s1", f"My locker code is {SECRET}.", "Noted.")
            kept = talk(c, "bob", "s2", "I like jazz.")
            deadline = time.monotonic() + 60
            while c.weaver_status().unindexed:  # the chunks are in the vector store
                assert time.monotonic() < deadline
                time.sleep(0.05)
            c.backup(str(tmp_path / "before"))
            assert _raw_bytes(tmp_path / "before" / "journal", SECRET.encode())
            assert _raw_bytes(tmp_path / "before" / "vectors", SECRET.encode())  # its chunk
            events = c.run_weaver()
            next(events)  # queued: the run goes on in the daemon
            assert started.wait(30)  # the run is inside the LLM call for one episode
            r = c.forget(episode_ids=[gone])
            assert r.episodes == 1 and r.vector_points >= 1  # its chunks were indexed
            release.set()
            report = list(events)[-1].report
            assert report.ok, report.error
            assert vectors.count(PointFilter(episode_ids=(gone,))) == 0
            assert vectors.count(PointFilter(episode_ids=(kept,))) >= 2
            state = daemon.daemon.state
            assert state.get(EXTRACTIONS_CF, gone.encode()) is None
            assert not daemon.daemon.semantic.graph.edges_where(lambda e: e.episode_id == gone)
            c.backup(str(tmp_path / "after"))
    # The deleted bytes are gone from the files of a backup (the RocksDB files it links, the
    # compacted copy of the vector store), and a restore has none of the episode's data.
    for store in ("journal", "state", "vectors"):
        assert _raw_bytes(tmp_path / "after" / store, SECRET.encode()) == [], store
    restored = tmp_path / "restored"
    restore_backup(tmp_path / "after", restored)
    with tier3(restored) as (state, journal, vectors):
        assert journal.find(gone) is None and journal.find(kept) is not None
        assert vectors.count(PointFilter(episode_ids=(gone,))) == 0
        assert vectors.count(PointFilter(episode_ids=(kept,))) >= 2
        assert is_forgotten(state, episode_id=gone)


def _on_disk(root: Path, needles: list[str]) -> dict[str, list[str]]:
    """Every file under ``root`` that holds one of ``needles``, with the ones it holds."""
    found: dict[str, list[str]] = {}
    for folder, _dirs, files in os.walk(root):  # files a purge removes meanwhile are skipped
        for name in files:
            path = Path(folder) / name
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            hits = [n for n in needles if n.encode() in data]
            if hits:
                found[str(path.relative_to(root))] = hits
    return found


PURGE_BOUND = 60.0  # docs/operations.md, Forget: the bytes leave the disk within this


def _gone_within(root: Path, needles: list[str], seconds: float = PURGE_BOUND) -> None:
    """Every byte of ``needles`` leaves the files under ``root`` within ``seconds``."""
    deadline = time.monotonic() + seconds
    while left := _on_disk(root, needles):
        assert time.monotonic() < deadline, f"still on disk after {seconds:g} s: {left}"
        time.sleep(0.2)


def _reversing_llm(request: Any) -> Reply:
    """Facts whose text is only in Tier 3 and the stored extraction: the turn reversed."""
    turns = turns_in(request)
    return Reply.json(
        {
            "summary": f"{turns[0]['speaker']} talked about {len(turns)} things.",
            "summary_source_seqs": [turns[0]["seq"]],
            "facts": [
                {
                    "text": f"{t['speaker']} noted {t['text'][::-1]}",
                    "source_seqs": [t["seq"]],
                    "triplet": {
                        "subject": t["speaker"],
                        "predicate": "noted",
                        "object": t["text"][::-1],
                    },
                }
                for t in turns
            ],
        }
    )


def test_forget_leaves_no_bytes_on_disk(spawn, tmp_path):
    """By episode ids, by memory ids and by scope: no byte of the forgotten text is left in
    any file of the data dir, also after a SIGKILL right after Forget returns and a restart;
    the other tenant's data is intact."""
    by_episode, by_memory, by_scope, still_open, bobs = (
        "Quokkaword1101",
        "Narwhalword2202",
        "Axolotlword3303",
        "Pangolinword4404",
        "Okapiword5505",
    )
    data = tmp_path / "data"
    with FakeOpenAI(responder=_reversing_llm) as fake:
        settings = {
            "weaver__interval_seconds": "3600",
            "llm__model": "openai/test",
            "llm__api_base": fake.base_url,
        }
        d = spawn(data, **settings)
        with d.client(60) as c:
            episode = talk(c, "alice", "s1", f"My code word is {by_episode}.", "Noted.")
            talk(c, "alice", "s2", f"My pet is called {by_memory}.", "Cute.")
            talk(c, "alice", "s3", f"I collect {by_scope} stamps.", "Nice.")
            talk(c, "bob", "s1", f"I collect {bobs} coins.", "Cool.")  # same session id
            consolidate(c)
            talk(c, "alice", "s4", f"Remind me about {still_open}.", end=False)
            everything = [by_episode, by_memory, by_scope, still_open, bobs]
            reversed_ = [w[::-1] for w in everything if w != still_open]  # consolidated
            before = _on_disk(data, everything + reversed_)
            assert {w for hits in before.values() for w in hits} == set(everything + reversed_)

            r = c.forget(episode_ids=[episode])
            assert r.episodes == 1 and r.vector_points >= 4
            # RocksDB's part is done when Forget returns; the vector store's follows at once.
            assert not any(
                not p.startswith("vectors/") for p in _on_disk(data, [by_episode, by_episode[::-1]])
            )
            _gone_within(data, [by_episode, by_episode[::-1]])

            (fact,) = [
                h
                for h in c.recall(by_memory[::-1], user_id="alice", k=50, kinds=["fact"]).hits
                if by_memory[::-1] in h.text
            ]
            r = c.forget(memory_ids=[fact.id])
            assert r.vector_points == 1 and r.graph_edges == 1 and r.consolidation_records == 1
            # The fact's own text is gone; the message it came from is not forgotten.
            _gone_within(data, [by_memory[::-1]])
            assert any(p.startswith("journal/") for p in _on_disk(data, [by_memory]))

            r = c.forget(user_id="alice")
            assert r.sessions == 1 and r.episodes == 2
        d.kill()  # SIGKILL right after Forget returned: the vector store's purge is cut short
        gone = [w for w in everything + reversed_ if w not in (bobs, bobs[::-1])]
        assert not any(not p.startswith("vectors/") for p in _on_disk(data, gone))
        d = spawn(data, **settings)
        with d.client(60) as c:
            deadline = time.monotonic() + 120
            while True:  # until Tier 3 is open again
                try:
                    texts(c, "bob", bobs)
                    break
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            _gone_within(data, gone)  # the purge was finished at the start
            assert any(bobs in t for _i, _e, t in texts(c, "bob", f"{bobs} coins"))
            assert texts(c, "alice", f"{by_scope} stamps {by_memory} {by_episode}") == []
            assert c.get_working_memory("s4", user_id="alice").messages == []
            on_disk = _on_disk(data, [bobs, bobs[::-1]])
            assert any(p.startswith("journal/") for p in on_disk)
            assert any(p.startswith("vectors/") for p in on_disk)
        assert d.terminate() == 0
    assert not any(w in d.log_path.read_text() for w in gone)  # nor in our own log


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
    with FakeOpenAI(responder=_lives_in_llm) as fake:
        daemon = start_daemon(weaver=QUIET, llm={"model": "openai/test", "api_base": fake.base_url})
        _embedder, vectors = daemon.daemon.semantic.wait_ready(120)
        graph = daemon.daemon.semantic.graph
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
    d = daemon.daemon
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


def test_a_purge_that_a_crash_interrupted_runs_at_the_next_start(spawn, tmp_path):
    data = tmp_path / "data"
    d = spawn(data, weaver__interval_seconds="3600")
    with d.client(60) as c:
        gone = talk(c, "alice", "p1", f"My locker code is {SECRET}.", "Noted.")
        wait_until(lambda: c.weaver_status().unindexed == 0, 120, "indexed")
    assert d.terminate() == 0
    # What a crash after the deletes and before the purge leaves: the mark, deleted points
    # whose bytes are still in the engine's files.
    with tier3(data) as (state, _journal, vectors):
        assert vectors.delete(PointFilter(episode_ids=(gone,))) >= 1
        batch = state.batch()
        batch.put(TOMBSTONES_CF, PURGE_KEY, b"\x00" * 8)
        state.write(batch)
    assert any(p.startswith("vectors/") for p in _on_disk(data, [SECRET]))
    d = spawn(data, weaver__interval_seconds="3600")
    with d.client(60):
        wait_until(lambda: "event=forget.purged" in d.log(), 120, "the purge")
        assert "event=forget.purge_resumed" in d.log()
        assert not any(p.startswith("vectors/") for p in _on_disk(data, [SECRET]))
    assert d.terminate() == 0
    with tier3(data) as (state, _journal, _vectors):
        assert state.get(TOMBSTONES_CF, PURGE_KEY) is None


def test_a_stop_during_a_purge_is_clean_and_the_next_start_finishes_it(start_daemon, tmp_path):
    for attempt in range(3):  # the stop lands at another point of the purge each time
        daemon = start_daemon(weaver=QUIET)
        with daemon.client() as c:
            gone = talk(c, "alice", f"stop{attempt}", f"Code {SECRET}{attempt}.", "Noted.")
            wait_until(lambda: c.weaver_status().unindexed == 0, 120, "indexed")
            assert c.forget(episode_ids=[gone]).episodes == 1
        daemon.stop()  # most likely while the vector store's purge runs
    daemon = start_daemon(weaver=QUIET)
    daemon.daemon.semantic.wait_ready(120)
    purger = daemon.daemon.forgetter.purger  # type: ignore[union-attr]
    wait_until(lambda: not purger.pending, 120, "the resumed purge")
    assert _on_disk(tmp_path / "data", [SECRET]) == {}
