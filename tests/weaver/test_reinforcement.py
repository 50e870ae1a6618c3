"""Access reinforcement and importance per fact category, end to end over gRPC against a real
daemon: Pack and GetContext count what they hand out (Recall does not), a recipe with a
recency half-life and reinforcement keeps a used memory near the top, counts survive a
restart and Forget removes them; the weaver marks a fact's category and a recipe weighs it.
The store itself: tests/tiers/keyed/test_access.py."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from daemon.settings import Settings
from stratad_client import MemoryClient, message
from stratad_client.pb import memory_pb2 as pb
from tests.support import MODEL_CACHE, QUIET, ThreadDaemon, wait_indexed

pytestmark = pytest.mark.slow
NOW = dt.datetime.now(dt.UTC)
QUESTION = "Which hiking trail do I like best?"
# The old message answers the question; the new one only shares words with it.
OLD = "The hiking trail I like best is the Ridge Loop above the old quarry."
NEW = "We walked a hiking trail yesterday."
RECIPES = {
    "decay": {"recency_half_life_days": 30},
    "reinforced": {"recency_half_life_days": 30, "reinforcement": 10},
    "important": {"importance_weights": {"preference": 4.0}},
}


def settings(data_dir: Path) -> Settings:
    return Settings(
        data_dir=data_dir,
        listen="127.0.0.1:0",
        shutdown_grace_seconds=2.0,
        embedding={"cache_dir": MODEL_CACHE},
        weaver=QUIET,
        recall={"recipes": RECIPES},
    )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reinforcement") / "data"


@pytest.fixture(scope="module")
def daemon(data_dir: Path) -> Iterator[ThreadDaemon]:
    d = ThreadDaemon(settings(data_dir))
    try:
        yield d
    finally:
        d.stop()


@contextmanager
def client_of_a_daemon(data_dir: Path) -> Iterator[MemoryClient]:
    """A client of a daemon on ``data_dir`` (with the recipes), stopped when the block ends."""
    d = ThreadDaemon(settings(data_dir))
    try:
        with MemoryClient(d.address, timeout=60) as c:
            yield c
    finally:
        d.stop()


def said(c: MemoryClient, user: str, sid: str, text: str, days_ago: float) -> str:
    when = NOW - dt.timedelta(days=days_ago)
    c.append_batch(sid, [message(text, name="Dana", created_at=when)], user_id=user)
    return c.end_session(sid, user_id=user).episode_id


def top(c: MemoryClient, user: str, recipe: str) -> list[pb.Hit]:
    return list(c.recall(QUESTION, user_id=user, k=5, recipe=recipe, explain=True).hits)


def hit_of(hits: list[pb.Hit], text: str) -> pb.Hit:
    (hit,) = [h for h in hits if h.text.endswith(text)]
    return hit


def test_pack_and_get_context_reinforce_a_memory_that_recall_does_not(daemon, data_dir):
    with MemoryClient(daemon.address, timeout=60) as c:
        said(c, "dana", "hike-old", OLD, days_ago=120)
        said(c, "dana", "hike-new", NEW, days_ago=1)
        wait_indexed(c)
        # Without decay the old message answers best; a 30-day half-life sinks it (1/16).
        assert top(c, "dana", "default")[0].text.endswith(OLD)
        hits = top(c, "dana", "decay")
        assert hits[0].text.endswith(NEW)
        old = hit_of(hits, OLD)
        assert old.explanation.accesses == 0
        assert old.explanation.recency_factor == pytest.approx(0.5**4, rel=0.02)
        # Recall counts nothing, however often it is asked.
        for _ in range(3):
            top(c, "dana", "reinforced")
        assert hit_of(top(c, "dana", "reinforced"), OLD).explanation.accesses == 0
        assert top(c, "dana", "reinforced")[0].text.endswith(NEW)

        # The agent uses the old memory: twice through Pack, once through GetContext.
        for _ in range(2):
            packed = c.pack("Ridge Loop quarry", user_id="dana", max_tokens=200)
            assert packed.items[0].text.endswith(OLD)
        c.append("hike-now", "Remind me of the Ridge Loop by the quarry.", user_id="dana")
        ctx = c.get_context("hike-now", 200, user_id="dana")
        assert any(m.text.endswith(OLD) for m in ctx.memories)

        hits = top(c, "dana", "reinforced")
        old = hit_of(hits, OLD)
        assert old.explanation.accesses == 3
        # Half-life 30 x (1 + 10 x 3) = 930 days: the used memory is back on top.
        assert old.explanation.recency_factor == pytest.approx(0.5 ** (120 / 930), rel=0.02)
        assert hits[0].id == old.id
        # The recipe without reinforcement still decays it; the counts are read only with it.
        assert top(c, "dana", "decay")[0].text.endswith(NEW)

    # Durable: the counts survive a restart.
    daemon.stop()
    with client_of_a_daemon(data_dir) as c:
        wait_indexed(c)
        hits = top(c, "dana", "reinforced")
        assert hits[0].text.endswith(OLD) and hits[0].explanation.accesses == 3
        # Forget removes them with the memories: nothing of dana is counted afterwards.
        counts = c.forget(user_id="dana")
        assert counts.access_counts >= 2  # the message's point and the chunk holding it
        said(c, "dana", "hike-old-2", OLD, days_ago=120)
        wait_indexed(c)
        assert hit_of(top(c, "dana", "reinforced"), OLD).explanation.accesses == 0


def test_forget_by_episode_and_by_memory_removes_their_counts(tmp_path):
    with client_of_a_daemon(tmp_path / "data") as c:
        old_episode = said(c, "erin", "e-old", OLD, days_ago=120)
        said(c, "erin", "e-new", NEW, days_ago=1)
        wait_indexed(c)
        c.pack(QUESTION, user_id="erin", max_tokens=500)  # both messages handed out
        hits = top(c, "erin", "reinforced")
        assert all(h.explanation.accesses == 1 for h in hits)
        new_id = hit_of(hits, NEW).id

        # Each message's point and the chunk merged into it were counted.
        by_id = c.forget(memory_ids=[new_id])
        assert by_id.access_counts == 1  # the message's point; its chunk stays
        by_episode = c.forget(episode_ids=[old_episode])
        assert by_episode.access_counts == 2  # the message's point and its chunk
        assert c.forget(user_id="erin").access_counts == 1  # the new message's chunk
        assert c.forget(user_id="erin").access_counts == 0


def test_a_preference_fact_is_marked_and_weighed_by_the_recipe(tmp_path):
    with client_of_a_daemon(tmp_path / "data") as c:
        c.append_batch(
            "pref",
            [
                message("I love green tea in the morning.", name="Finn", created_at=NOW),
                message("I drank green tea at the station.", name="Finn", created_at=NOW),
            ],
            user_id="finn",
        )
        c.end_session("pref", user_id="finn")
        wait_indexed(c)
        events = list(c.admin.run_weaver())
        assert events[-1].report.ok and events[-1].report.facts >= 1

        def facts(recipe: str) -> list[pb.Hit]:
            hits = c.recall(
                "green tea", user_id="finn", kinds=["fact"], recipe=recipe, explain=True
            ).hits
            return [h for h in hits if "tea" in h.text]

        plain = {h.text: h.explanation.importance_factor for h in facts("default")}
        assert plain and set(plain.values()) == {1.0}
        weighed = {h.text: h.explanation.importance_factor for h in facts("important")}
        loves = [t for t in weighed if "love" in t]
        assert loves and all(weighed[t] == 4.0 for t in loves)
        assert all(f == 1.0 for t, f in weighed.items() if "love" not in t)
        assert "love" in facts("important")[0].text
