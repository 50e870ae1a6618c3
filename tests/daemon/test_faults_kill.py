"""SIGKILL at random points of a real stratad: during appends, EndSession, the index stage and
consolidation. After each restart nothing acknowledged is lost or doubled in any tier.

The trials of a test share one data directory: every restart is checked against everything
acknowledged so far, then goes on under load until the next kill. The seed and the kill
points are printed (``pytest -s``, or in the report of a failure); ``FAULT_SEED=N`` replays a
run.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from stratad_client import MemoryClient, StrataClientError, message
from tests.support import QUIET_ENV, ProcessDaemon, wait_until
from tests.support.llm_server import FakeOpenAI, Reply
from tests.support.weaving import EchoLLM, all_points, stored_extraction_facts, tier3
from tiers.semantic.graph.nxgraph import GRAPH_CF
from tiers.semantic.vectors import point_id
from weaver.episodes import chunk, chunk_text, load_episode, sources
from weaver.settings import WeaverSettings

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("FAULT_SEED", "20261122"))
APPEND_TRIALS = 14
WEAVER_TRIALS = 6  # index and consolidation, alternating
WRITERS = 3
# The whole open log of a session fits in its window, so GetWorkingMemory shows all of it.
NO_WEAVER = {
    "weaver__enabled": "false",
    "working_memory__max_messages": "100000",
    "working_memory__max_tokens": "10000000",
}


@dataclass
class Sent:
    text: str
    acked: bool  # False: in flight at the kill, present or not; resolved at the next check


@dataclass
class Session:
    sid: str
    user: str
    sent: list[Sent] = field(default_factory=list)
    ends_acked: int = 0


def _writer(
    address: str, sessions: list[Session], rng: random.Random, stop: threading.Event
) -> None:
    """Append batches and end sessions at random until the daemon dies."""
    with MemoryClient(address, timeout=5) as c:
        while not stop.is_set():
            s = rng.choice(sessions)
            if s.sent and rng.random() < 0.15:
                try:
                    c.end_session(s.sid)
                except StrataClientError as err:
                    if err.code == grpc.StatusCode.FAILED_PRECONDITION:
                        continue  # ended already, nothing appended since
                    return
                s.ends_acked += 1
                continue
            n = rng.randint(1, 4)
            batch = [Sent(f"{s.sid} #{len(s.sent) + i}", False) for i in range(n)]
            s.sent.extend(batch)  # in flight
            try:
                c.append_batch(
                    s.sid, [message(b.text, message_id=b.text) for b in batch], user_id=s.user
                )
            except StrataClientError:
                return
            for b in batch:
                b.acked = True


def _stored(c: MemoryClient, s: Session) -> tuple[list[str], int]:
    """Every message of the session in seq order (its episodes, then its open log), and how
    many episodes it has."""
    by_seq: list[tuple[int, str]] = []
    episodes = [e for e in c.iter_episodes(user_id=s.user) if e.session_id == s.sid]
    for e in episodes:
        by_seq += [(m.seq, m.message.content) for m in c.get_episode(e.episode_id).messages]
    try:
        window = c.get_working_memory(s.sid, max_messages=10_000, max_tokens=10_000_000)
    except StrataClientError as err:
        assert err.code == grpc.StatusCode.NOT_FOUND
    else:
        assert len(window.messages) == window.log_messages  # the whole open log
        by_seq += [(m.seq, m.message.content) for m in window.messages]
    seqs = [q for q, _ in by_seq]
    assert len(seqs) == len(set(seqs)), f"{s.sid}: a seq stored twice"
    return [text for _, text in sorted(by_seq)], len(episodes)


def _check(c: MemoryClient, sessions: list[Session]) -> None:
    for s in sessions:
        stored, episodes = _stored(c, s)
        assert len(stored) == len(set(stored)), f"{s.sid}: a message stored twice"
        present = set(stored)
        assert present <= {m.text for m in s.sent}, f"{s.sid}: a message nobody sent"
        for m in s.sent:
            assert m.text in present or not m.acked, f"{s.sid}: acknowledged {m.text} lost"
        # What was in flight at the kill is decided now: keep it only if it was stored.
        s.sent = [m for m in s.sent if m.text in present]
        for m in s.sent:
            m.acked = True
        assert stored == [m.text for m in s.sent], f"{s.sid}: order changed"
        assert episodes >= s.ends_acked, f"{s.sid}: an acknowledged EndSession lost"
        s.ends_acked = episodes


def test_sigkill_during_appends_and_end_session(spawn, tmp_path):
    rng = random.Random(SEED)
    print(f"FAULT_SEED={SEED}")
    sessions = [Session(f"w{w}-s{i}", f"user{w}") for w in range(WRITERS) for i in range(3)]
    data = tmp_path / "data"
    began = time.monotonic()
    for trial in range(APPEND_TRIALS):
        proc = spawn(data, **NO_WEAVER)
        with proc.client() as c:
            _check(c, sessions)
        stop = threading.Event()
        threads = [
            threading.Thread(
                target=_writer,
                args=(proc.address, sessions[w * 3 : w * 3 + 3], random.Random(rng.random()), stop),
            )
            for w in range(WRITERS)
        ]
        for t in threads:
            t.start()
        kill_after = rng.uniform(0.05, 0.6)
        print(f"trial {trial}: SIGKILL after {kill_after:.3f} s of appends and ends")
        time.sleep(kill_after)
        proc.kill()
        stop.set()
        for t in threads:
            t.join(10)
    proc = spawn(data, **NO_WEAVER)
    with proc.client() as c:
        _check(c, sessions)
    assert proc.terminate() == 0
    total = sum(len(s.sent) for s in sessions)
    print(f"{APPEND_TRIALS} trials, {total} messages kept, {time.monotonic() - began:.1f} s")
    assert total > APPEND_TRIALS * 10 and sum(s.ends_acked for s in sessions) >= APPEND_TRIALS


# -- the weaver's stages -------------------------------------------------------------------


def _episodes(c: MemoryClient, prefix: str, n: int, turns: int, day: int) -> list[str]:
    ids = []
    for i in range(n):
        sid = f"{prefix}-{i}"
        c.append_batch(
            sid,
            [
                message(
                    f"{sid} turn {t}: I bought {i * 10 + t} apples at the market in town.",
                    name="Alice" if t % 2 == 0 else "Bob",
                    created_at=dt.datetime(2023, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=day),
                    message_id=f"{sid}-{t}",
                )
                for t in range(turns)
            ],
            user_id="alice",
        )
        ids.append(c.end_session(sid).episode_id)
    return ids


def _expected_chunks(data: Path, episode_ids: list[str]) -> dict[str, set[str]]:
    """The chunk point ids a clean index of each episode gives (from the journal)."""
    s = WeaverSettings()
    with tier3(data) as (_state, journal, _vectors):
        out: dict[str, set[str]] = {}
        for eid in episode_ids:
            episode = load_episode(journal, eid)
            out[eid] = set()
            for window in chunk(episode, s.chunk_turns, s.chunk_overlap, s.chunk_max_tokens):
                srcs = sources(episode, [t.seq for t in window], with_text=True)
                text = chunk_text(window)
                out[eid].add(point_id(episode.scope, "episode_chunk", text, srcs))
        return out


@pytest.mark.timeout(300)  # seven model loads; the rest of the suite competes for the cores
def test_sigkill_during_indexing_and_consolidation(spawn, tmp_path):
    rng = random.Random(SEED + 1)
    print(f"FAULT_SEED={SEED}")
    data = tmp_path / "data"
    echo = EchoLLM()
    ids: list[str] = []
    began = time.monotonic()
    with FakeOpenAI(responder=lambda req: Reply.hang(0.05, then=echo(req))) as fake:
        llm = {"llm__model": "openai/test", "llm__api_base": fake.base_url}

        def start() -> ProcessDaemon:
            proc = spawn(data, **QUIET_ENV, **llm)
            with proc.client() as c:
                wait_until(lambda: c.admin.weaver_status().embedding_ready, 120, "for the model")
            return proc

        proc = start()
        for trial in range(WEAVER_TRIALS):
            with proc.client() as c:
                if trial % 2 == 0:
                    # Index stage: sessions end one after another while the indexer works.
                    ids += _episodes(c, f"t{trial}", 4, rng.randint(3, 9), trial)
                    kill_after = rng.uniform(0.0, 0.4)
                    stage = "index"
                else:
                    # Consolidation: a run over everything pending, killed once the LLM has
                    # been asked (after a restart, importing litellm alone takes seconds).
                    asked = echo.calls
                    events = c.admin.run_weaver(timeout=1)
                    next(events)  # queued
                    events.close()  # the run goes on
                    wait_until(lambda: echo.calls > asked, 120, "for the first LLM call")  # noqa: B023
                    kill_after = rng.uniform(0.0, 0.6)
                    stage = "consolidation"
                status = c.admin.weaver_status()
            print(
                f"trial {trial}: SIGKILL {kill_after:.3f} s into {stage} "
                f"(pending {status.pending}, unindexed {status.unindexed}, llm calls {echo.calls})"
            )
            time.sleep(kill_after)
            proc.kill()
            proc = start()

        with proc.client() as c:
            wait_until(lambda: c.admin.weaver_status().unindexed == 0, 120, "for the index backlog")
            report = next(e.report for e in c.admin.run_weaver(timeout=120) if e.HasField("report"))
            assert report.ok, report
            assert c.admin.weaver_status().pending == 0
        assert proc.terminate() == 0

    expected = _expected_chunks(data, ids)
    with tier3(data) as (state, journal, vectors):
        assert journal.pending() == [] and journal.unindexed() == []
        chunks = all_points(vectors, "alice", "episode_chunk")
        got: dict[str, set[str]] = {eid: set() for eid in ids}
        for p in chunks:
            got[p.episode_id].add(p.id)
        assert len(chunks) == sum(len(v) for v in expected.values())
        assert got == expected
        summaries = all_points(vectors, "alice", "summary")
        assert sorted(p.episode_id for p in summaries) == sorted(ids)
        facts = all_points(vectors, "alice", "fact")
        texts: dict[str, list[str]] = {eid: [] for eid in ids}
        for p in facts:
            texts[p.episode_id].append(p.text)
        # Tier 3 holds exactly the stored extraction of each episode: an episode asked twice
        # (EchoLLM numbers its replies) would show a second, different set of facts.
        assert {e: sorted(t) for e, t in texts.items()} == {
            e: sorted(stored_extraction_facts(state, e)) for e in ids
        }
        edges = [key.rsplit(b"\x00", 1)[1].decode() for key, _ in state.scan(GRAPH_CF, b"")]
        assert sorted(edges) == sorted(p.id for p in facts)  # one edge per fact, once
    assert echo.calls >= len(ids)
    print(
        f"{WEAVER_TRIALS} trials, {len(ids)} episodes, {echo.calls} LLM calls, "
        f"{time.monotonic() - began:.1f} s"
    )
