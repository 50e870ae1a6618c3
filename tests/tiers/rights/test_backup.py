"""weaverctl backup against a live daemon, stratad restore into a fresh data dir, and
weaverctl rebuild after losing the vector store (real daemon subprocesses)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest

from stratad_client import MemoryClient, StrataClientError, message
from tests.support import QUIET_ENV, ROOT, ProcessDaemon, daemon_env, wait_indexed, wait_until
from tests.support.daemons import python
from tests.support.disk import taken
from tests.support.llm_server import FakeOpenAI
from tests.support.weaving import EchoLLM

pytestmark = pytest.mark.slow
CHANNELS = ("vector", "keyword", "graph")
QUERY = "What did Alice say about the apples at the market?"


def run(
    args: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return python("-m", *args, env=env, timeout=timeout)


def ctl(proc: ProcessDaemon, *args: str) -> subprocess.CompletedProcess[str]:
    env = daemon_env(ROOT / "unused") | {"STRATA_ADDRESS": proc.address}
    return run(["daemon.cli.weaverctl", "--timeout", "120", *args], env)


def wait_tier3(c: MemoryClient) -> None:
    wait_until(lambda: c.admin.weaver_status().embedding_ready, 90, "for Tier 3 to open")


@contextmanager
def tier3_client(proc: ProcessDaemon) -> Iterator[MemoryClient]:
    """A client of ``proc`` once its Tier 3 is open."""
    with proc.client(timeout=120) as c:
        wait_tier3(c)
        yield c


def episodes(c: MemoryClient, user: str, n: int, first: int = 0) -> list[str]:
    """``n`` ended episodes of ``user``, three turns each (Alice and Bob)."""
    ids = []
    for i in range(first, first + n):
        c.append_batch(
            f"{user}-s{i}",
            [
                message(
                    f"Episode {i} turn {t}: I bought {i * 10 + t} apples at the market.",
                    name="Alice" if t % 2 == 0 else "Bob",
                    created_at=dt.datetime(2023, 1, 1 + i, t, tzinfo=dt.UTC),
                    metadata={"dia_id": f"D{i}:{t}"},
                )
                for t in range(3)
            ],
            user_id=user,
        )
        ids.append(c.end_session(f"{user}-s{i}").episode_id)
    return ids


def consolidate(c: MemoryClient) -> None:
    events = list(c.admin.run_weaver(timeout=120))
    assert events[-1].report.ok, events[-1].report


# What a rebuild derives as it was: the kinds but digests and threads (an LLM wrote those, and
# a rebuild writes them extractively until the next run has the LLM write them again).
DERIVED = ("episode_chunk", "episode_turn", "summary", "fact", "profile", "document")


@pytest.fixture
def echo() -> EchoLLM:
    return EchoLLM()


@pytest.fixture
def llm(echo: EchoLLM) -> Iterator[dict[str, str]]:
    """The settings that point a daemon's LLM at a fake server answering with ``echo``."""
    with FakeOpenAI(responder=echo) as fake:
        yield {"llm__model": "openai/test", "llm__api_base": fake.base_url}


def recall_ids(c: MemoryClient, user: str, kinds: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """The hit ids of each channel alone (k above the number of points: every match)."""
    return {
        ch: {h.id for h in c.recall(QUERY, user_id=user, k=100, channels=[ch], kinds=kinds).hits}
        for ch in CHANNELS
    }


def test_backup_while_running_and_restore(spawn, tmp_path, echo, llm):
    proc = spawn(tmp_path / "live", **QUIET_ENV, **llm)
    with tier3_client(proc) as c:
        done = episodes(c, "alice", 2)
        consolidate(c)
        pending = episodes(c, "alice", 1, first=5)[0]  # indexed, not consolidated
        c.append_batch("open", [message(f"new {i}") for i in range(3)], user_id="bob")
        wait_indexed(c)
        before = recall_ids(c, "alice")
        fact = next(h for h in c.recall(QUERY, user_id="alice", kinds=["fact"]).hits)
        node_before = c.get_node(fact.id, user_id="alice")
    assert all(before[ch] for ch in CHANNELS), before
    calls = echo.calls

    out = ctl(proc, "backup", str(tmp_path / "bk"), "--json")
    assert out.returncode == 0, out.stderr
    assert set(json.loads(out.stdout)["stores"]) == {"state", "journal", "vectors"}
    manifest = json.loads((tmp_path / "bk" / "manifest.json").read_text())
    assert manifest["embedding"]["dim"] == 384 and manifest["embedding"]["model"]
    assert manifest["vectors"]["captured"] is True
    assert set(manifest["sizes"]) == {"state", "journal", "vectors"}
    assert all(size > 0 for size in manifest["sizes"].values())
    assert manifest["sizes"]["vectors"] == taken(tmp_path / "bk" / "vectors")  # not apparent
    again = ctl(proc, "backup", str(tmp_path / "bk"))
    assert again.returncode == 1 and "ALREADY_EXISTS" in again.stderr
    with proc.client() as c:  # writes after the backup are not in it
        c.append("open", "after the backup", user_id="bob")
        episodes(c, "alice", 1, first=9)
    proc.terminate()

    fresh = tmp_path / "fresh"
    restored = run(["daemon", "restore", str(tmp_path / "bk")], daemon_env(fresh))
    assert restored.returncode == 0, restored.stderr
    # The vector store's sparse files stay sparse: the restore takes what the backup takes.
    assert taken(fresh / "vectors") <= 2 * taken(tmp_path / "bk" / "vectors") < 50 << 20
    refused = run(["daemon", "restore", str(tmp_path / "bk")], daemon_env(fresh))
    assert refused.returncode == 1 and "not empty" in refused.stderr

    proc = spawn(fresh, **QUIET_ENV)  # no LLM configured: nothing can be re-extracted
    with proc.client(timeout=60) as c:
        wm = c.get_working_memory("open")
        assert [m.message.content for m in wm.messages] == [f"new {i}" for i in range(3)]
        listed = [e.episode_id for e in c.list_episodes(user_id="alice").episodes]
        assert sorted(listed) == sorted([*done, pending])
        got = c.get_episode(done[0])
        assert [m.message.content for m in got.messages] == [
            f"Episode 0 turn {t}: I bought {t} apples at the market." for t in range(3)
        ]
        assert c.admin.stats().journal.pending_consolidation == 1
        assert c.admin.weaver_status().pending == 1
        wait_tier3(c)
        # Tier 3 is back as it was, without the weaver running again.
        assert recall_ids(c, "alice") == before
        node = c.get_node(fact.id, user_id="alice")
        assert node.episode.episode_id == node_before.episode.episode_id
        assert [m.message.content for m in node.messages] == [
            m.message.content for m in node_before.messages
        ]
    assert echo.calls == calls
    proc.terminate()


def test_restore_refuses_a_data_dir_with_anything_in_it(tmp_path):
    (tmp_path / "bk").mkdir()
    (tmp_path / "bk" / "manifest.json").write_text(
        json.dumps({"format": 2, "taken_at": 0, "stores": ["state"]})
    )
    (tmp_path / "bk" / "state").mkdir()
    (tmp_path / "data" / "vectors").mkdir(parents=True)
    out = run(["daemon", "restore", str(tmp_path / "bk")], daemon_env(tmp_path / "data"))
    assert out.returncode == 1 and "is not empty (vectors)" in out.stderr
    shutil.rmtree(tmp_path / "data" / "vectors")
    (tmp_path / "data" / "models").mkdir()  # the model cache is not data
    out = run(["daemon", "restore", str(tmp_path / "bk")], daemon_env(tmp_path / "data"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "data" / "state").is_dir()


def test_rebuild_after_losing_the_vector_store(spawn, tmp_path, echo, llm):
    data = tmp_path / "data"
    proc = spawn(data, **QUIET_ENV, **llm)
    with tier3_client(proc) as c:
        alice = episodes(c, "alice", 3)
        episodes(c, "bob", 1)
        consolidate(c)
        # Forgotten data stays forgotten: one episode, and one fact of another.
        c.forget(episode_ids=[alice[0]])
        fact = next(
            h.id
            for h in c.recall(QUERY, user_id="alice", k=100, kinds=["fact"]).hits
            if c.get_node(h.id, user_id="alice").episode.episode_id == alice[1]
        )
        c.forget(memory_ids=[fact])
        before = {user: recall_ids(c, user, DERIVED) for user in ("alice", "bob")}
        digests = {h.id: h.text for h in c.recall(QUERY, user_id="bob", kinds=["digest"]).hits}
    # The LLM's (the fake numbers its digests): bob's period and story.
    assert len(digests) == 2 and all(t.startswith("Digest ") for t in digests.values())
    assert all(before["alice"][ch] for ch in CHANNELS), before
    assert not any(fact in ids for ids in before["alice"].values())
    calls = echo.calls
    assert proc.terminate() == 0

    shutil.rmtree(data / "vectors")
    proc = spawn(data, **QUIET_ENV, **llm)
    with tier3_client(proc) as c:
        assert recall_ids(c, "alice") == {ch: set() for ch in CHANNELS}
    out = ctl(proc, "rebuild", "--user", "bob", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["episodes"] == "1" and report["recordsReplayed"] == "0"
    with proc.client(timeout=120) as c:
        assert recall_ids(c, "bob", DERIVED) == before["bob"]
        assert recall_ids(c, "alice") == {ch: set() for ch in CHANNELS}
        again = {h.id: h.text for h in c.recall(QUERY, user_id="bob", kinds=["digest"]).hits}
        assert again.keys() == digests.keys()  # the same digests, extractive for now
        assert not set(again.values()) & set(digests.values())
    out = ctl(proc, "--json", "rebuild")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["episodes"] == "3" and report["recordsReplayed"] == "0"
    assert report["graphEdges"] == str(3 * 3 - 1)  # a triplet per turn, one forgotten
    assert int(report["vectorPoints"]) > 3 * (1 + 3) - 1  # chunks, summaries, facts
    human = ctl(proc, "rebuild")  # again: the same points, none doubled
    assert human.returncode == 0 and "3 journal episodes" in human.stdout
    with proc.client(timeout=120) as c:
        assert {user: recall_ids(c, user, DERIVED) for user in ("alice", "bob")} == before
        written = echo.digests
        consolidate(c)  # the next run has the LLM write the rebuilt digests again
        assert echo.digests > written
        texts = {h.text for h in c.recall(QUERY, user_id="bob", kinds=["digest"]).hits}
        assert all(t.startswith("Digest ") for t in texts), texts
    assert echo.calls == calls  # not one extraction asked again
    proc.terminate()


def test_rebuild_replays_the_records_of_expired_episodes(spawn, tmp_path, echo, llm):
    data = tmp_path / "data"
    proc = spawn(data, **QUIET_ENV, **llm)
    with tier3_client(proc) as c:
        ids = episodes(c, "alice", 2)
        consolidate(c)
        memories = recall_ids(c, "alice", kinds=("summary", "fact"))
    assert all(memories[ch] for ch in CHANNELS), memories
    calls = echo.calls
    assert proc.terminate() == 0

    shutil.rmtree(data / "vectors")
    time.sleep(1.1)
    # A one-second journal TTL: every episode has expired; the consolidation records have not.
    proc = spawn(data, **QUIET_ENV, journal__ttl_seconds="1")
    with proc.client(timeout=120) as c:
        with pytest.raises(StrataClientError) as gone:
            c.get_episode(ids[0])
        assert gone.value.code == grpc.StatusCode.NOT_FOUND
        wait_tier3(c)
        assert c.admin.rebuild("bob", timeout=120).records_replayed == 0  # not bob's records
        response = c.admin.rebuild("alice", timeout=120)  # by their owners' entries
        assert (response.episodes, response.records_replayed) == (0, 2)
        again = c.admin.rebuild(timeout=120)  # every user's: the same, none doubled
        assert (again.episodes, again.records_replayed) == (0, 2)
        assert again.graph_edges == response.graph_edges
        assert again.vector_points >= 2 * (1 + 3)  # the digests, unchanged, not rewritten
        # A summary and three facts per episode, and the digests and threads made of them.
        overviews = c.recall(QUERY, user_id="alice", k=100, kinds=["digest", "thread"]).hits
        assert {h.attrs.get("level") for h in overviews if h.kind == "digest"} == {
            "period",
            "story",
        }
        assert response.graph_edges == 2 * 3
        assert response.vector_points == 2 * (1 + 3) + len(overviews)
        # The summaries, facts and edges are back from the records alone; the chunks were
        # only in the lost vector store and the expired journal.
        assert recall_ids(c, "alice", kinds=("summary", "fact")) == memories
        assert not c.recall(QUERY, user_id="alice", k=100, kinds=["episode_chunk"]).hits
    assert echo.calls == calls
    proc.terminate()


def test_every_weaverctl_command_has_help_and_json(spawn, tmp_path):
    env = daemon_env(tmp_path / "unused")
    commands = ["run-now", "status", "stats", "backup", "rebuild", "forget"]
    top = run(["daemon.cli.weaverctl", "--help"], env)
    assert top.returncode == 0
    present = [name for name in commands if name in top.stdout]
    assert {"run-now", "status", "stats", "backup", "rebuild"} <= set(present)
    for name in present:
        out = run(["daemon.cli.weaverctl", name, "--help"], env)
        assert out.returncode == 0 and "--json" in out.stdout, (name, out.stdout)

    proc = spawn(tmp_path / "data", **QUIET_ENV)
    with tier3_client(proc) as c:
        episodes(c, "alice", 1)
    calls: dict[str, list[str]] = {
        "run-now": ["run-now"],
        "status": ["status"],
        "stats": ["stats"],
        "backup": ["backup", str(tmp_path / "bk")],
        "rebuild": ["rebuild"],
    }
    for name, args in calls.items():
        for where in ("before", "after"):
            argv = ["--json", *args] if where == "before" else [*args, "--json"]
            if name == "backup":
                argv = [
                    a if a != str(tmp_path / "bk") else str(tmp_path / f"bk-{where}") for a in argv
                ]
            out = ctl(proc, *argv)
            assert out.returncode == 0, (name, out.stderr)
            assert isinstance(json.loads(out.stdout), dict), (name, out.stdout)
    out = ctl(proc, "stats")  # the human form: a line per count, each kind of data's too
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(None, 1) for line in out.stdout.splitlines() if " " in line)
    assert {"documents", "anchors", "pins", "access_counts"} <= set(lines), out.stdout
    assert lines["episodes"].strip() == "1"
    proc.terminate()


def test_weaverctl_reports_an_unreachable_daemon(tmp_path):
    env = daemon_env(tmp_path / "x") | {"STRATA_ADDRESS": "127.0.0.1:1"}
    out = run(["daemon.cli.weaverctl", "--timeout", "2", "stats"], env)
    assert out.returncode == 3 and "UNAVAILABLE" in out.stderr
