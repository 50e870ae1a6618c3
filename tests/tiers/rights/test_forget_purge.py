"""Forget's purge in a real daemon: no byte of what was forgotten is left in the files of the
data dir, also after a SIGKILL, a crash before the purge or a stop during it."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from stratad_client import StrataClientError
from tests.support import QUIET, QUIET_ENV, consolidate, wait_until
from tests.support.disk import gone_within, in_logs, on_disk
from tests.support.forgetting import SECRET, talk, texts
from tests.support.llm_server import FakeOpenAI, Reply
from tests.support.weaving import digesting, tier3, turns_in
from tiers.semantic.tombstones import PURGE_KEY, TOMBSTONES_CF
from tiers.semantic.vectors import PointFilter

pytestmark = pytest.mark.slow


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
    with FakeOpenAI(responder=digesting(_reversing_llm)) as fake:
        settings = {
            **QUIET_ENV,
            "llm__model": "openai/test",
            "llm__api_base": fake.base_url,
            "recall__graph_files_min_memories": "1",  # the graph's features on disk too
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
            before = on_disk(data, everything + reversed_)
            assert {w for hits in before.values() for w in hits} == set(everything + reversed_)
            # The graph's features hold the names normalized: in lower case.
            named = [by_episode.lower(), by_scope.lower()]
            c.recall("code word stamps", user_id="alice", k=5)  # builds alice's graph
            assert set(_graphs(data, named)) == set(named)

            r = c.forget(episode_ids=[episode])
            assert r.episodes == 1 and r.vector_points >= 4
            assert _graphs(data, named) == []  # the user's feature files, at once
            # RocksDB's logs hold none of it when Forget returns; the rest follows at once.
            assert in_logs(data, [by_episode, by_episode[::-1]]) == []
            gone_within(data, [by_episode, by_episode[::-1]])

            (fact,) = [
                h
                for h in c.recall(by_memory[::-1], user_id="alice", k=50, kinds=["fact"]).hits
                if by_memory[::-1] in h.text
            ]
            r = c.forget(memory_ids=[fact.id])
            assert r.vector_points == 1 and r.graph_edges == 1 and r.consolidation_records == 1
            # The fact's own text is gone; the message it came from is not forgotten.
            gone_within(data, [by_memory[::-1]])
            assert any(p.startswith("journal/") for p in on_disk(data, [by_memory]))

            r = c.forget(user_id="alice")
            assert r.sessions == 1 and r.episodes == 2
        d.kill()  # SIGKILL right after Forget returned: the compactions and purge cut short
        gone = [w for w in everything + reversed_ if w not in (bobs, bobs[::-1])]
        assert in_logs(data, gone) == []
        d = spawn(data, **settings)
        with d.client(60) as c:

            def tier3_open() -> bool:
                try:
                    texts(c, "bob", bobs)
                except StrataClientError as exc:
                    assert exc.code == grpc.StatusCode.UNAVAILABLE
                    return False
                return True

            wait_until(tier3_open, 120, "until Tier 3 is open again", interval=0.2)
            gone_within(data, gone)  # the purge was finished at the start
            assert any(bobs in t for _i, _e, t in texts(c, "bob", f"{bobs} coins"))
            assert texts(c, "alice", f"{by_scope} stamps {by_memory} {by_episode}") == []
            assert c.get_working_memory("s4", user_id="alice").messages == []
            held = on_disk(data, [bobs, bobs[::-1]])
            assert any(p.startswith("journal/") for p in held)
            assert any(p.startswith("vectors/") for p in held)
            assert _graphs(data, [w.lower() for w in gone]) == []
        assert d.terminate() == 0
    assert not any(w in d.log_path.read_text() for w in gone)  # nor in our own log


def _graphs(data: Any, needles: list[str]) -> list[str]:
    """The needles found in the graph's feature files (``<data_dir>/graphs``)."""
    found = on_disk(data, needles)
    return sorted({n for path, hits in found.items() if path.startswith("graphs/") for n in hits})


def test_a_purge_that_a_crash_interrupted_runs_at_the_next_start(spawn, tmp_path):
    data = tmp_path / "data"
    d = spawn(data, **QUIET_ENV)
    with d.client(60) as c:
        gone = talk(c, "alice", "p1", f"My locker code is {SECRET}.", "Noted.")
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 120, "indexed")
    assert d.terminate() == 0
    # What a crash after the deletes and before the purge leaves: the mark, deleted points
    # whose bytes are still in the engine's files.
    with tier3(data) as (state, _journal, vectors):
        assert vectors.delete(PointFilter(episode_ids=(gone,))) >= 1
        batch = state.batch()
        batch.put(TOMBSTONES_CF, PURGE_KEY, b"\x00" * 8)
        state.write(batch)
    assert any(p.startswith("vectors/") for p in on_disk(data, [SECRET]))
    d = spawn(data, **QUIET_ENV)
    with d.client(60):
        wait_until(lambda: "event=forget.purged" in d.log(), 120, "the purge")
        assert "event=forget.purge_resumed" in d.log()
        assert not any(p.startswith("vectors/") for p in on_disk(data, [SECRET]))
    assert d.terminate() == 0
    with tier3(data) as (state, _journal, _vectors):
        assert state.get(TOMBSTONES_CF, PURGE_KEY) is None


def test_a_stop_during_a_purge_is_clean_and_the_next_start_finishes_it(start_daemon, tmp_path):
    for attempt in range(3):  # the stop lands at another point of the purge each time
        daemon = start_daemon(weaver=QUIET)
        with daemon.client() as c:
            gone = talk(c, "alice", f"stop{attempt}", f"Code {SECRET}{attempt}.", "Noted.")
            wait_until(lambda: c.admin.weaver_status().unindexed == 0, 120, "indexed")
            assert c.forget(episode_ids=[gone]).episodes == 1
        daemon.stop()  # most likely while the vector store's purge runs
    daemon = start_daemon(weaver=QUIET)
    daemon.daemon.parts.semantic.wait_ready(120)
    purger = daemon.daemon.parts.forgetter.purger  # type: ignore[union-attr]
    wait_until(lambda: not purger.pending, 120, "the resumed purge")
    assert on_disk(tmp_path / "data", [SECRET]) == {}
