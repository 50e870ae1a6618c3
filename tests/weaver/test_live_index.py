"""The live index stage on a real daemon (real model, embedded Qdrant, RocksDB): a live
session's messages are recallable while it lives, by their words at once and by their
meaning once their batch is embedded; GetContext recalls what left the window and never a
window message; RemoveMessages, Forget and EndSession leave no orphan and no duplicate. The
interleavings are forced with a gate in the live batch's embedding (no sleeps)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from stratad_client import message
from tests.support import QUIET, ThreadDaemon, wait_indexed, wait_until
from tests.support.gates import DEADLINE, Hooks
from tiers.semantic.embedding.slices import FIRST_SLICE
from tiers.semantic.vectors import MemoryPoint, PointFilter
from weaver.live import LiveIndexer

pytestmark = pytest.mark.slow

FACT = "The staging database password rotates every Tuesday; the on-call is Priya."
FILLER = [
    "Let's look at the flaky integration test in the payments module next.",
    "I pushed a fix for the linter warnings on the build server.",
    "Can you summarise the open pull requests for the mobile app?",
    "The release notes draft needs a section on the new export button.",
    "Remind me what the retry policy is for the webhook deliveries.",
    "Our design review moved to the afternoon, after lunch.",
]
# Turns per batch in these tests: a batch is due after 4 messages or a minute, so that a
# test decides when one runs (it appends the fourth).
LIVE = {**QUIET, "live_batch_messages": 4, "live_batch_seconds": 60.0}


def filler(n: int, start: int = 0) -> list[Any]:
    return [
        message(f"{FILLER[i % len(FILLER)]} (note {i})", name="Dev")
        for i in range(start, start + n)
    ]


def live_indexer(d: ThreadDaemon) -> LiveIndexer:
    weaver = d.daemon.parts.weaver
    assert weaver is not None and weaver.live is not None
    return weaver.live.live


def stored(d: ThreadDaemon, user: str) -> list[MemoryPoint]:
    _embedder, vectors = d.daemon.parts.semantic.wait_ready(60)
    return vectors.scroll(PointFilter(user_id=user), 100_000)


def staged(d: ThreadDaemon, user: str) -> list[MemoryPoint]:
    return d.daemon.parts.semantic.pending.points(PointFilter(user_id=user))


def caught_up(d: ThreadDaemon) -> Callable[[], bool]:
    return lambda: live_indexer(d).backlog().messages == 0


class Gate:
    """Holds the live batch's embedding until released: what a test does meanwhile happens
    while the batch is being embedded."""

    def __init__(self, live: LiveIndexer) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        indexer = live.indexer
        inner = indexer.embed

        self.texts: list[str] = []  # what the weaver embedded

        def embed(
            points: list[MemoryPoint], stopping: threading.Event | None = None
        ) -> list[MemoryPoint]:
            self.texts += [p.text for p in points if p.dense is None]
            if threading.current_thread().name == "weaver" and not self.release.is_set():
                self.entered.set()
                assert self.release.wait(60), "the test never released the gate"
            return inner(points, stopping)

        indexer.embed = embed  # type: ignore[method-assign]


@pytest.fixture
def live(start_daemon: Callable[..., ThreadDaemon]) -> Iterator[ThreadDaemon]:
    d = start_daemon(weaver=LIVE)
    d.daemon.parts.semantic.wait_ready(120)
    yield d


def test_a_fact_that_left_the_window_is_recalled_while_the_session_lives(live):
    with live.client() as c:
        c.append("long", FACT, user_id="ops", name="Sam", message_id="fact")
        for batch in range(0, 120, 20):
            c.append_batch("long", filler(20, batch))
        window = c.get_working_memory("long")
        assert FACT not in [m.message.content for m in window.messages], "it left the window"
        # By its words: staged within moments of the append, before any embedding of it.
        wait_until(
            lambda: any("Priya" in h.text for h in c.recall("Priya", user_id="ops", k=5).hits),
            10,
            "for the staged turn",
        )
        wait_until(caught_up(live), 60, "for the live batches")
        # By its meaning: the dense channel alone finds it once its batch is embedded.
        hits = c.recall(
            "who is on call for the staging database?", user_id="ops", k=5, channels=["vector"]
        ).hits
        assert any("Priya" in h.text for h in hits)
        ctx = c.get_context(
            "long", max_tokens=2000, query="who is on call for the staging database?"
        )
        recalled = [m for m in ctx.memories]
        assert any("Priya" in m.text for m in recalled), "GetContext recalls it"
        in_window = {m.seq for m in window.messages}
        for memory in recalled:
            for source in memory.sources:
                assert source.session_id != "long" or source.seq not in in_window
        # The session ends: its episode is indexed past the live mark, nothing twice.
        before = {p.id: p for p in stored(live, "ops")}
        c.end_session("long")
        wait_indexed(c)
        after = stored(live, "ops")
        ids = [p.id for p in after]
        assert len(ids) == len(set(ids))
        episode = after[0].episode_id
        assert all(p.episode_id == episode for p in after)
        assert set(before) <= set(ids)
        # The same points as the ended episode indexed in one go.
        parts = live.daemon.parts
        assert parts.weaver is not None
        from weaver.episodes import load_episode

        indexer = live_indexer(live).indexer
        whole = indexer.episode_points(load_episode(parts.journal, episode, indexer.tool_text))
        assert {p.id for p in whole} == set(ids)
        assert not staged(live, "ops")


def test_a_message_appended_while_its_batch_is_embedded_is_indexed_next(live):
    gate = Gate(live_indexer(live))
    with live.client() as c:
        c.append_batch("s", filler(4), user_id="u")
        assert gate.entered.wait(30)
        c.append("s", "The gazebo paint colour is teal.", name="Dev")
        wait_until(
            lambda: any("gazebo" in h.text for h in c.recall("gazebo", user_id="u", k=3).hits),
            10,
            "for the staged turn",
        )
        gate.release.set()
        c.append_batch("s", filler(3, 10))
        wait_until(caught_up(live), 60, "for the live batches")
        # The batch embedded meanwhile was written: a later append did not void it.
        assert len(gate.texts) == len(set(gate.texts)), "no text embedded twice"
        texts = {p.text for p in stored(live, "u") if p.kind == "episode_turn"}
        assert "Dev: The gazebo paint colour is teal." in texts
        assert not staged(live, "u")


def test_remove_messages_during_a_batch_leaves_no_point_of_them(live):
    gate = Gate(live_indexer(live))
    with live.client() as c:
        c.append_batch("s", filler(3), user_id="u")
        c.append("s", "The vault code is 4711.", name="Dev")
        assert gate.entered.wait(30)
        c.remove_messages("s", last=1)  # the batch being embedded holds it
        assert not c.recall("vault code", user_id="u", k=5, channels=["keyword"]).hits
        gate.release.set()
        c.append_batch("s", filler(4, 20))
        wait_until(caught_up(live), 60, "for the live batches")
        points = stored(live, "u") + staged(live, "u")
        assert points and not [p for p in points if "vault" in p.text]
        assert not [
            h for h in c.recall("vault code 4711", user_id="u", k=10).hits if "vault" in h.text
        ]
        # Removed after its batch was written: its stored points go too.
        c.append("s", "The boat is called Marlin.", name="Dev")
        c.append_batch("s", filler(3, 40))
        wait_until(caught_up(live), 60, "for the live batches")
        assert [p for p in stored(live, "u") if "Marlin" in p.text]
        c.remove_messages("s", last=4)
        assert not [p for p in stored(live, "u") + staged(live, "u") if "Marlin" in p.text]
        c.end_session("s")
        wait_indexed(c)
        assert not [p for p in stored(live, "u") if "Marlin" in p.text or "vault" in p.text]


def test_forget_during_a_batch_leaves_no_point(live):
    gate = Gate(live_indexer(live))
    with live.client() as c:
        c.append_batch("s", filler(4), user_id="gone")
        c.append_batch("t", filler(4), user_id="kept")
        assert gate.entered.wait(30)
        c.forget(user_id="gone")
        gate.release.set()
        wait_until(caught_up(live), 60, "for the live batches")
        assert not stored(live, "gone") and not staged(live, "gone")
        assert not c.recall("flaky integration test", user_id="gone", k=5).hits
        assert c.recall("flaky integration test", user_id="kept", k=5).hits
        progress = live_indexer(live).progress
        assert all(p.scope.user_id != "gone" for _e, p in progress.all())


def test_end_session_during_a_batch_indexes_each_text_once(live):
    gate = Gate(live_indexer(live))
    embedded: list[str] = []
    indexer = live_indexer(live).indexer
    inner = indexer.embed

    def counted(
        points: list[MemoryPoint], stopping: threading.Event | None = None
    ) -> list[MemoryPoint]:
        embedded.extend(p.text for p in points if p.dense is None)
        return inner(points, stopping)

    indexer.embed = counted  # type: ignore[method-assign]
    with live.client() as c:
        c.append_batch("s", filler(6), user_id="u")
        assert gate.entered.wait(30)
        c.end_session("s")
        gate.release.set()
        wait_indexed(c)
        wait_until(caught_up(live), 60, "for the live batches")
        points = stored(live, "u")
        assert len({p.id for p in points}) == len(points) == 6 + 3  # six turns, three chunks
        assert len(embedded) == len(set(embedded)), "no text embedded twice"
        assert not list(live_indexer(live).progress.all())


def test_tenants_see_only_their_own_live_messages(live):
    with live.client() as c:
        c.append("a", "My locker combination is 31-07-19.", user_id="alice", name="Alice")
        c.append("b", "Nothing to see here.", user_id="mallory", name="Mallory")
        wait_until(lambda: c.recall("locker combination", user_id="alice", k=3).hits, 10, "staged")
        assert not c.recall("locker combination", user_id="mallory", k=5).hits


def test_get_node_of_a_live_hit_shows_its_message_staged_embedded_and_ended(live):
    """A hit of a live session (only staged, then embedded) drills down to its message from
    the session's log; once the session ends, to its episode. Another tenant: NOT_FOUND."""

    def drill() -> Any:
        hits = c.recall("gazebo paint", user_id="u", k=3).hits
        assert hits, "the live turn is found"
        return c.get_node(hits[0].id, user_id="u")

    with live.client() as c:
        c.append("s", "The gazebo paint colour is teal.", user_id="u", name="Dev")
        wait_until(lambda: c.recall("gazebo", user_id="u", k=3).hits, 10, "for the staged turn")
        assert staged(live, "u"), "not embedded yet"
        node = drill()
        assert [m.message.content for m in node.messages] == ["The gazebo paint colour is teal."]
        assert not node.journal_expired and not node.HasField("episode")
        with pytest.raises(Exception) as err:
            c.get_node(node.node.id, user_id="mallory")
        assert "not found" in str(err.value)
        c.append_batch("s", filler(3))  # the fourth message: the batch is due
        wait_until(caught_up(live), 60, "for the live batch")
        assert not staged(live, "u")
        node = drill()
        assert [m.message.content for m in node.messages] == ["The gazebo paint colour is teal."]
        episode_id = c.end_session("s").episode_id
        wait_indexed(c)
        node = drill()
        assert node.episode.episode_id == episode_id == node.node.episode_id
        assert [m.message.content for m in node.messages] == ["The gazebo paint colour is teal."]


def test_a_request_can_exclude_a_session(live):
    with live.client() as c:
        c.append("a", "The kayak is stored in the red shed.", user_id="u", name="Kim")
        c.append("b", "The canoe is stored in the blue shed.", user_id="u", name="Kim")
        wait_until(lambda: len(c.recall("stored shed", user_id="u", k=5).hits) == 2, 10, "staged")
        hits = c.recall("stored shed", user_id="u", k=5, exclude_session_ids=["a"]).hits
        assert [s.session_id for h in hits for s in h.sources] == ["b"]


def test_watch_tells_when_live_messages_are_indexed(live):
    with live.client() as c:
        c.append_batch("s", filler(4), user_id="u")
        wait_until(caught_up(live), 60, "for the live batch")
        watched = c.watch(user_id="u", from_oldest=True, types=["session.indexed"], catch_up=True)
        events = list(watched)
        assert [(e.session_id, e.attrs["through_seq"], e.count) for e in events] == [("s", "4", 5)]
        status = c.admin.weaver_status()
        assert status.live_unindexed == 0


def test_status_and_stats_show_the_live_backlog_apart(live):
    with live.client() as c:
        c.append_batch("s", filler(2), user_id="u")  # fewer than a batch: staged, not embedded
        staged_two = lambda: c.admin.stats().working_memory.unembedded_messages == 2  # noqa: E731
        wait_until(staged_two, 10, "staged")
        status = c.admin.weaver_status()
        assert (status.live_sessions_behind, status.unindexed) == (1, 0)
        assert status.live_unindexed == 2 and c.admin.stats().journal.unindexed == 0
        c.end_session("s")
        wait_indexed(c)
        status = c.admin.weaver_status()
        assert (status.live_unindexed, status.live_sessions_behind) == (0, 0)
        assert c.admin.stats().working_memory.unembedded_messages == 0


def test_a_stop_during_a_big_batch_waits_for_one_slice_of_it_and_writes_nothing(
    start_daemon, tmp_path
):
    """A batch is embedded a slice at a time, and a stop is looked at between two slices: a
    stop during a big batch (minutes, with long texts on a busy machine) waits for the slice
    at hand only. Nothing of the batch is written, and the next start embeds it
    all, once."""
    hooks = Hooks()
    big = {**QUIET, "live_batch_messages": 60, "live_batch_seconds": 60.0}
    d = start_daemon(data_dir=tmp_path / "data", weaver=big, factories=hooks.factories)
    d.daemon.parts.semantic.wait_ready(120)
    weaver = d.daemon.parts.weaver
    assert hooks.embedder is not None and weaver is not None
    pause = hooks.pause("the first slice of the live batch")
    slices: list[int] = []

    def hold(texts: list[str]) -> None:
        if threading.current_thread().name == "weaver":
            slices.append(len(texts))
            pause()

    hooks.embedder.before_documents.append(hold)
    with d.client() as c:
        c.append_batch("s", filler(60), user_id="u")  # 60 turns and their chunk windows
        try:
            pause.reached()
            stopping = threading.Thread(target=weaver.stop, kwargs={"timeout": DEADLINE})
            stopping.start()
            wait_until(lambda: weaver.submit(lambda: None).done(), 10, "for the stop to begin")
            pause.release()
            stopping.join(DEADLINE)
            assert not stopping.is_alive(), "the stop waited for the whole batch"
        finally:
            hooks.release_all()
        assert slices == [FIRST_SLICE]  # one slice, then the stop
        assert not [p for p in stored(d, "u") if p.session_id == "s"]
    d.stop()
    again = start_daemon(data_dir=tmp_path / "data", weaver=big)
    again.daemon.parts.semantic.wait_ready(120)

    def turns() -> list[str]:
        return [p.id for p in stored(again, "u") if p.kind == "episode_turn"]

    wait_until(lambda: len(turns()) >= 60, 120, "for the batch after the restart")
    wait_until(caught_up(again), 60, "for the rest of it")
    assert len(turns()) == len(set(turns())) == 60


@pytest.mark.daemon
def test_sigkill_between_the_append_and_the_index_loses_and_duplicates_nothing(spawn, tmp_path):
    """Killed with messages staged and not embedded (and a batch embedded before them): the
    restart stages them again from the log, embeds them by the same ids, and the ended
    episode holds exactly the points of its index made in one go."""
    env = {f"weaver__{k}": str(v) for k, v in LIVE.items()}
    proc = spawn(tmp_path / "data", **env)
    with proc.client() as c:
        c.append_batch("s", filler(4), user_id="u")  # a batch: embedded
        wait_until(lambda: c.admin.weaver_status().embedding_ready, 120, "for the model")
        wait_until(lambda: c.admin.weaver_status().live_unindexed == 0, 60, "the batch")
        c.append("s", "The spare key hangs behind the barometer.", name="Dev")
        c.append_batch("s", filler(2, 30))  # staged only (a batch is 4)
        wait_until(lambda: c.admin.weaver_status().live_unindexed == 3, 10, "staged")
    proc.kill()
    proc = spawn(tmp_path / "data", **env)
    with proc.client() as c:
        wait_until(
            lambda: (
                c.admin.weaver_status().embedding_ready
                and any("barometer" in h.text for h in c.recall("barometer", user_id="u", k=3).hits)
            ),
            120,
            "for the staged turn again",
        )
        c.append("s", "One more line after the restart.", name="Dev")  # the batch of 4 is due
        wait_until(lambda: c.admin.weaver_status().live_unindexed == 0, 60, "the batch")
        hits = c.recall("where is the spare key?", user_id="u", k=5, channels=["vector"]).hits
        assert any("barometer" in h.text for h in hits)
        ended = c.end_session("s")
        wait_indexed(c)
        episode = c.get_episode(ended.episode_id)
        assert len(episode.messages) == 8
        data = b"".join(chunk.data for chunk in c.admin.export("u"))
    lines = [json.loads(line) for line in data.splitlines() if line.strip()]
    ids = [line["id"] for line in lines if line["type"] == "point"]
    assert len(ids) == len(set(ids)) == 8 + 4  # eight turns, four chunk windows
    proc.terminate()


def test_removing_every_message_leaves_no_point_and_no_mark(live):
    with live.client() as c:
        c.append_batch("r", filler(5), user_id="u")
        wait_until(lambda: [p for p in stored(live, "u") if p.kind == "episode_chunk"], 60, "batch")
        c.remove_messages("r", all=True)
        assert not stored(live, "u") and not staged(live, "u")
        assert not list(live_indexer(live).progress.all())
        assert live_indexer(live).backlog().messages == 0
