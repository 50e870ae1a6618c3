"""Digests and story threads end to end, through gRPC against real daemons: period digests
and the story so far written as episodes arrive, only the changed ones rewritten; GetNode's
drill-down; threads from topic hints and the thread filter on Recall and Pack; Forget
rewriting them with no byte of the forgotten episode left; a restart; another tenant; an
LLM (the loopback fake: the plumbing only) writing them abstractively."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from daemon.cli import weaverctl as ctl
from stratad_client import InvalidArgumentError, MemoryClient, NotFoundError, message
from stratad_client.pb import memory_pb2 as pb
from tests.support import QUIET, ThreadDaemon, consolidate, wait_indexed
from tests.support.disk import gone_within
from tests.support.exporting import exported, records
from tests.support.llm_server import FakeOpenAI, Reply

pytestmark = pytest.mark.slow

WEEK1 = dt.datetime(2023, 5, 8, 10, tzinfo=dt.UTC)  # a Monday
WEEK2 = dt.datetime(2023, 5, 16, 10, tzinfo=dt.UTC)
SECRET = "Quokka-5521-Marble"


def talk(
    c: MemoryClient, user: str, sid: str, when: dt.datetime, turns: list[str], topic: str = ""
) -> str:
    meta = {"topic": topic} if topic else {}
    c.append_batch(
        sid,
        [
            message(text, name=("Alice", "Bob")[i % 2], created_at=when, metadata=meta)
            for i, text in enumerate(turns)
        ],
        user_id=user,
    )
    return c.end_session(sid, user_id=user).episode_id


GARDEN_1 = [
    "I planted tomatoes and basil in the new raised bed this weekend.",
    "Nice, did you use the compost from the community garden?",
    f"Yes, the compost was great. The gate code there is {SECRET}.",
]
GARDEN_2 = [
    "The tomatoes in my raised bed finally have flowers.",
    "Good news, you should stake them before the storm.",
]
TRIP_1 = [
    "We booked the train to Lisbon for our June holiday.",
    "Lisbon in June is lovely, take the tram to Belem.",
]
TRIP_2 = [
    "I found a small hotel in Alfama for the Lisbon trip.",
    "Alfama is perfect, close to the castle.",
]


def digests(c: MemoryClient, user: str) -> dict[str, pb.Hit]:
    """The user's digests by level and period ("story" for the story so far)."""
    hits = c.recall("what happened", user_id=user, k=50, kinds=["digest"]).hits
    return {h.attrs.get("period") or h.attrs["level"]: h for h in hits}


def threads(c: MemoryClient, user: str) -> dict[str, pb.Hit]:
    hits = c.recall("what happened", user_id=user, k=50, kinds=["thread"]).hits
    return {h.attrs["topic"]: h for h in hits}


def sessions(hits: Any) -> set[str]:
    return {s.session_id for h in hits for s in h.sources}


@pytest.fixture
def daemon(quiet_daemon: ThreadDaemon) -> ThreadDaemon:
    """The quiet daemon, for this module's tests and for the ``client`` fixture."""
    return quiet_daemon


def weave(c: MemoryClient) -> pb.RunReport:
    wait_indexed(c)
    consolidate(c)
    return c.admin.weaver_status().last_run


def test_digests_roll_up_incrementally_and_drill_down(daemon, client: MemoryClient) -> None:
    talk(client, "ana", "g1", WEEK1, GARDEN_1, "garden")
    talk(client, "ana", "g2", WEEK1 + dt.timedelta(days=2), GARDEN_2, "garden")
    talk(client, "ana", "t1", WEEK2, TRIP_1, "lisbon trip")
    report = weave(client)
    # Two periods, the story, two threads.
    assert report.digests == 5, report
    first = digests(client, "ana")
    assert set(first) == {"2023-05-08", "2023-05-15", "story"}
    week1 = first["2023-05-08"]
    assert week1.text.startswith("Week of 2023-05-08 (Alice, Bob; 2 conversations).")
    assert "raised bed" in week1.text and "8 May 2023" in week1.text
    assert first["story"].text.startswith("The story so far (8 May 2023 to 16 May 2023;")
    assert "Week of 2023-05-15" in first["story"].text

    # Drill down: the story to its periods, a period to its summaries and their messages.
    story = client.get_node(first["story"].id, user_id="ana")
    assert [c.id for c in story.children] == [week1.id, first["2023-05-15"].id]
    node = client.get_node(week1.id, user_id="ana")
    assert [c.kind for c in node.children] == ["summary", "summary"]
    assert {m.message.content for m in node.messages} <= set(GARDEN_1 + GARDEN_2)
    assert any("tomatoes" in m.message.content for m in node.messages)

    # A new episode in week 2: its period, the story and its thread are written, not week 1.
    talk(client, "ana", "t2", WEEK2 + dt.timedelta(days=1), TRIP_2, "lisbon trip")
    report = weave(client)
    assert report.digests == 3, report
    second = digests(client, "ana")
    assert second["2023-05-08"].text == week1.text
    assert "Alfama" in second["2023-05-15"].text
    assert "2 conversations" in threads(client, "ana")["lisbon trip"].text


def test_the_story_keeps_in_mind_what_the_user_asked_to_keep(daemon, client) -> None:
    """An allergy said in passing is in the story so far, though no summary leads with it;
    a fact forgotten leaves it at once (the story is rewritten by Forget)."""
    allergy = "By the way, I'm allergic to penicillin, remember that."
    talk(client, "ana", "g1", WEEK1, [*GARDEN_1[:2], allergy, GARDEN_1[2]])
    talk(client, "ana", "t1", WEEK2, TRIP_1)
    weave(client)
    story = digests(client, "ana")["story"]
    assert "allergic to penicillin" in story.text, story.text
    head, rest = story.text.split("To keep in mind:", 1)
    assert head.startswith("The story so far") and "Week of" in rest
    fact = next(
        h
        for h in client.recall("allergic penicillin", user_id="ana", k=10, kinds=["fact"]).hits
        if "penicillin" in h.text
    )
    client.forget(memory_ids=[fact.id])
    assert "penicillin" not in digests(client, "ana")["story"].text


def test_threads_filter_recall_and_pack(daemon, client: MemoryClient) -> None:
    ids = {
        "g1": talk(client, "ana", "g1", WEEK1, GARDEN_1, "garden"),
        "t1": talk(client, "ana", "t1", WEEK2, TRIP_1, "lisbon trip, holidays"),
    }
    talk(client, "bo", "b1", WEEK1, GARDEN_2, "garden")
    weave(client)
    found = threads(client, "ana")
    assert set(found) == {"garden", "lisbon trip", "holidays"}
    assert found["garden"].attrs["origin"] == "hint"
    hits = client.recall("tomatoes Lisbon", user_id="ana", k=20, thread="garden").hits
    assert hits and {h.episode_id for h in hits} == {ids["g1"]}
    packed = client.pack("Lisbon train", user_id="ana", max_tokens=500, thread="lisbon trip")
    assert packed.items and sessions(packed.items) == {"t1"}
    with pytest.raises(NotFoundError, match="no story thread 'knitting'"):
        client.recall("anything", user_id="ana", thread="knitting")
    # Another tenant's thread of the same topic is its own; its digests are not ana's.
    assert sessions(client.recall("tomatoes", user_id="bo", thread="garden").hits) == {"b1"}
    assert sessions(digests(client, "bo").values()) == {"b1"}
    with pytest.raises(NotFoundError):
        client.get_node(found["garden"].id, user_id="bo")


def test_forget_rewrites_digests_and_threads(daemon, client: MemoryClient, tmp_path) -> None:
    g1 = talk(client, "ana", "g1", WEEK1, GARDEN_1, "garden")
    talk(client, "ana", "g2", WEEK1 + dt.timedelta(days=2), GARDEN_2, "garden")
    weave(client)
    before = digests(client, "ana")
    assert "compost" in before["2023-05-08"].text
    client.forget(episode_ids=[g1])
    after = digests(client, "ana")
    week1 = client.get_node(after["2023-05-08"].id, user_id="ana")
    assert len(week1.children) == 1 and "(Alice, Bob; 1 conversation)" in week1.node.text
    assert "compost" not in week1.node.text and "compost" not in after["story"].text
    assert sessions([week1.node]) == {"g2"}
    assert "1 conversation" in threads(client, "ana")["garden"].text
    # No byte of the forgotten episode anywhere: its words were in its digest and thread.
    gone_within(daemon.settings.data_dir, [SECRET])
    # Forget the last one: no digest, no thread is left.
    client.forget(episode_ids=[h.episode_id for h in week1.children])
    assert digests(client, "ana") == {} and threads(client, "ana") == {}


def test_digests_survive_a_restart_and_go_on(start_daemon) -> None:
    first = start_daemon(weaver=QUIET)
    first.daemon.parts.semantic.wait_ready(120)
    with first.client() as c:
        talk(c, "ana", "g1", WEEK1, GARDEN_1, "garden")
        weave(c)
        before = digests(c, "ana")
    first.stop()
    second = start_daemon(weaver=QUIET)
    second.daemon.parts.semantic.wait_ready(120)
    with second.client() as c:
        assert digests(c, "ana")["2023-05-08"].text == before["2023-05-08"].text
        talk(c, "ana", "t1", WEEK2, TRIP_1)
        assert weave(c).digests == 2  # the new period and the story; week 1 is kept
        after = digests(c, "ana")
        assert after["2023-05-08"].id == before["2023-05-08"].id
        assert "Week of 2023-05-15" in after["story"].text


def test_an_llm_writes_digests_abstractively(start_daemon) -> None:
    """The loopback fake answers every call with one text: this checks the plumbing (an
    extraction, then digests written by the model), not the quality of a digest."""
    with FakeOpenAI(default=Reply.text("Alice and Bob tended the garden in May 2023.")) as llm:
        d = start_daemon(
            weaver=QUIET,
            llm={
                "model": "openai/fake",
                "api_base": llm.base_url,
                "api_key_env": "",
                "max_retries": 0,
                "on_failure": "local",
            },
        )
        d.daemon.parts.semantic.wait_ready(120)
        with d.client() as c:
            talk(c, "ana", "g1", WEEK1, GARDEN_1, "garden")
            weave(c)
            found = digests(c, "ana")
    assert found["2023-05-08"].text == "Alice and Bob tended the garden in May 2023."
    assert found["story"].text == "Alice and Bob tended the garden in May 2023."


PETS_1 = [
    "I adopted a puppy called Rex last week.",
    "Rex is a lovely dog, how is he settling in?",
    "My cat Tom is not happy about the puppy yet.",
]
PETS_2 = [
    "I have a dog named Rex and a cat named Tom.",
    "Nice pets!",
    "My dog Rex loves the park and my cat Tom loves to sleep.",
]


def test_without_hints_threads_come_from_the_weavers_topics(daemon, client) -> None:
    talk(client, "ana", "p1", WEEK1, PETS_1)
    talk(client, "ana", "p2", WEEK2, PETS_2)
    talk(client, "ana", "g1", WEEK2, GARDEN_1)  # one episode about gardening: no thread
    weave(client)
    found = threads(client, "ana")
    assert "pets" in found, {t: h.text for t, h in found.items()}
    assert found["pets"].attrs["origin"] == "weaver"
    assert sessions([found["pets"]]) <= {"p1", "p2"}
    assert "2 conversations" in found["pets"].text
    with pytest.raises(InvalidArgumentError, match="thread: keeps to the memories"):
        client.recall("dog", user_id="ana", thread="pets", kinds=["digest", "thread"])
    with pytest.raises(InvalidArgumentError, match="80 characters at most"):
        client.recall("dog", user_id="ana", thread="x" * 81)


def test_recall_expands_a_digest_into_its_children(start_daemon) -> None:
    weights = {"kind_weights": {"summary": 0.1, "digest": 1.0}}  # the digests rank first
    recipes = {"flat": weights, "wide": {**weights, "expand_digests": True}}
    d = start_daemon(weaver=QUIET, recall={"recipes": recipes})
    d.daemon.parts.semantic.wait_ready(120)
    with d.client() as c:
        talk(c, "ana", "g1", WEEK1, GARDEN_1, "garden")
        talk(c, "ana", "g2", WEEK1 + dt.timedelta(days=2), GARDEN_2, "garden")
        weave(c)
        asked = {"user_id": "ana", "k": 10, "kinds": ["digest", "summary"]}
        plain = c.recall("week of tomatoes", recipe="flat", **asked).hits
        wide = c.recall("week of tomatoes", recipe="wide", **asked).hits
        period = next(h for h in wide if h.attrs.get("level") == "period")
        children = [c.id for c in c.get_node(period.id, user_id="ana").children]
    kinds = [h.kind for h in wide]
    at = [h.id for h in wide].index(period.id)
    # Its two summaries right after it, newest first.
    assert [h.id for h in wide[at + 1 : at + 3]] == children[::-1], kinds
    assert {h.id for h in plain} <= {h.id for h in wide}
    assert plain[0].kind == "digest"


def test_get_context_leads_with_the_story_so_far(start_daemon) -> None:
    d = start_daemon(weaver=QUIET, context={"story_below_tokens": 200})
    d.daemon.parts.semantic.wait_ready(120)
    with d.client() as c:
        talk(c, "ana", "g1", WEEK1, GARDEN_1, "garden")
        talk(c, "ana", "t1", WEEK2, TRIP_1, "lisbon trip")
        weave(c)
        story = digests(c, "ana")["story"]
        led = "the story so far: the session's window is short"
        # A new session of a known user: no window, no query, the story so far.
        fresh = c.get_context("new", 1000, user_id="ana", explain=True)
        assert [(m.id, m.why) for m in fresh.memories] == [(story.id, led)]
        assert fresh.text.startswith("From memory:\n[digest · 2023-05-16] The story so far")
        assert not c.get_context("new", 1000, user_id="ana", story=False).memories
        assert not c.get_context("new", 1000, user_id="ana", kinds=["fact"]).memories
        # A window longer than story_below_tokens: recall alone, unless asked.
        c.append_batch("long", [message(" ".join(["Lisbon"] * 400), name="Alice")], user_id="ana")
        long = c.get_context("long", 1000, user_id="ana", explain=True)
        assert led not in [m.why for m in long.memories]  # Recall may still find it
        asked = c.get_context("long", 1000, user_id="ana", story=True, explain=True)
        assert (asked.memories[0].id, asked.memories[0].why) == (story.id, led)


def test_digests_and_threads_are_exported(daemon, client, tmp_path, capsys) -> None:
    talk(client, "ana", "g1", WEEK1, GARDEN_1, "garden")
    weave(client)
    kinds = [r["kind"] for r in records(exported(client, "ana")) if r.get("type") == "point"]
    assert kinds.count("digest") == 2 and kinds.count("thread") == 1
    # weaverctl's Markdown tree: the story, the thread, links to the episode.
    out = tmp_path / "ana"
    assert ctl.main(["--address", daemon.address, "export", "--user", "ana", str(out)]) == 0
    capsys.readouterr()
    (thread,) = (out / "threads").glob("*.md")
    text = thread.read_text()
    assert text.startswith("# Thread: garden\n") and "raised bed" in text
    assert "](../episodes/" in text and "](index.md)" in (out / "story.md").read_text()
    assert "- [Thread: garden](threads/" in (out / "index.md").read_text()
