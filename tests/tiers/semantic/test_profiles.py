"""Entity profiles (tiers.semantic.profiles): built from facts, superseded not duplicated,
rewritten by
Forget, found by Recall."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.support import QUIET
from tests.support.weaving import conversation, run
from tiers.core.records import Scope
from tiers.semantic.profiles import MAX_FACTS, build_profiles, profile_id, topics_of
from tiers.semantic.vectors import MemoryPoint, PointFilter, Source

ALICE = Scope("alice")
MAY = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC)
JUNE = dt.datetime(2023, 6, 20, 9, 30, tzinfo=dt.UTC)


def fact(text: str, speaker: str, seq: int, at: int, **attrs: object) -> MemoryPoint:
    return MemoryPoint(
        id=f"00000000-0000-0000-0000-{seq:012d}",
        kind="fact",
        text=text,
        scope=ALICE,
        episode_id=f"e{at}",
        session_id=f"s{at}",
        sources=[Source(f"s{at}", seq, speaker=speaker, text=f"({text})")],
        created_at_us=at,
        extractor="local",
        attrs=dict(attrs),
    )


def test_topics_are_whole_words_and_their_plurals():
    assert topics_of("Alice loves painting landscapes.") == ["hobbies and activities", "art"]
    assert topics_of("Bob played a song for his son.") == ["family", "music"]
    assert topics_of("Two dogs and three cats.") == ["pets"]
    assert topics_of("They went on a road trip.") == ["travel and places"]
    # prefixes are not words: "ready" is no reading, "plant" no plan, "painful" no painting
    assert topics_of("It was ready to plant, if painful.") == []


def test_profiles_group_current_facts_by_entity_and_topic():
    facts = [
        fact("Alice adopted a dog called Rex.", "Alice", 1, 100, predicate="has_pet"),
        fact("Alice's cat Miso sleeps all day.", "Alice", 2, 200),
        # spoken by Alice, about Bob: the speaker named first in the text is the entity
        fact("Bob has two hamsters.", "Alice", 3, 300),
        fact("Alice took up pottery.", "Alice", 4, 400),  # one fact: no profile of its own
        fact("Alice had a parrot.", "Alice", 5, 50),
        fact("Bob is on a trip.", "Bob", 6, 60),  # Bob speaks too: a name the scope knows
    ]
    closed = MemoryPoint(**{**_fields(facts[4]), "valid_to_us": 250})
    profiles = build_profiles(ALICE, [*facts[:4], closed, facts[5]])
    assert [(p.attrs["entity"], p.attrs["topic"]) for p in profiles] == [("Alice", "pets")]
    (pets,) = profiles
    assert pets.kind == "profile" and pets.scope == ALICE
    # newest first; the superseded parrot and Bob's hamsters are not Alice's current pets
    assert pets.text == (
        "Alice - pets: Alice's cat Miso sleeps all day. | Alice adopted a dog called Rex."
    )
    assert [(s.session_id, s.seq) for s in pets.sources] == [("s200", 2), ("s100", 1)]
    assert pets.attrs["facts"] == [facts[1].id, facts[0].id]
    assert pets.created_at_us == 200 and pets.episode_id == "e200"
    # another scope's facts never enter a profile
    assert build_profiles(Scope("bob"), facts) == []


def test_a_profile_keeps_its_id_and_the_newest_facts():
    facts = [fact(f"Alice adopted dog number {i}.", "Alice", i, i) for i in range(1, 21)]
    (few,) = build_profiles(ALICE, facts[:2])
    (many,) = build_profiles(ALICE, facts)
    assert few.id == many.id == profile_id(ALICE, "Alice", "pets")
    assert len(many.attrs["facts"]) == MAX_FACTS
    assert many.attrs["facts"][0] == facts[-1].id  # the newest
    assert profile_id(ALICE, "Alice", "pets") != profile_id(Scope("bob"), "Alice", "pets")


def _fields(point: MemoryPoint) -> dict[str, object]:
    return {name: getattr(point, name) for name in point.__dataclass_fields__}


def _profiles(vectors, topic: str | None = None) -> list[MemoryPoint]:  # type: ignore[no-untyped-def]
    points = vectors.scroll(PointFilter(user_id="alice", kinds=("profile",)))
    return [p for p in points if topic is None or p.attrs["topic"] == topic]


@pytest.mark.slow
def test_profiles_are_superseded_not_duplicated_and_forget_rewrites_them(start_daemon):
    daemon = start_daemon(weaver=QUIET)
    _embedder, vectors = daemon.daemon.parts.semantic.wait_ready(120)
    with daemon.client() as c:
        first = conversation(
            c,
            "s1",
            MAY,
            "I adopted a dog called Rex last week.",
            "Aww, what breed is he?",
            "My cat Miso sleeps all day, but Rex never stops.",
            "Ha, cute.",
            "I live in Boston, near the harbour.",
            "Nice city.",
            "I visited Lisbon on a trip in April.",
        )
        assert run(c).profiles >= 1
        (pets,) = _profiles(vectors, "pets")
        assert pets.attrs["entity"] == "Alice"
        assert "Rex" in pets.text and "Miso" in pets.text
        (places,) = _profiles(vectors, "travel and places")
        assert "Boston" in places.text and "Lisbon" in places.text

        second = conversation(
            c,
            "s2",
            JUNE,
            "We got a puppy named Bolt yesterday.",
            "Congrats!",
            "I moved to Denver in June.",
        )
        run(c)
        # the same profile, rewritten: one point per entity and topic, with the new facts
        (pets2,) = _profiles(vectors, "pets")
        assert pets2.id == pets.id
        assert pets2.text.index("Bolt") < pets2.text.index("Rex")  # newest first
        assert {s.session_id for s in pets2.sources} == {"s1", "s2"}
        assert all(s.text for s in pets2.sources)  # the messages, for turn hits
        # Denver superseded Boston (lives_in has one current value): Boston left the profile
        (places2,) = _profiles(vectors, "travel and places")
        assert "Denver" in places2.text and "Boston" not in places2.text

        # a rebuild from the journal and the stored extractions writes the same profiles
        before = {p.id: (p.text, p.sources) for p in _profiles(vectors)}
        c.admin.rebuild(user_id="alice")
        assert {p.id: (p.text, p.sources) for p in _profiles(vectors)} == before

        # Recall finds the profile, with its sources
        hits = c.recall("What pets does Alice have?", user_id="alice", kinds=["profile"]).hits
        assert hits and hits[0].id == pets.id and hits[0].kind == "profile"
        assert {s.session_id for s in hits[0].sources} == {"s1", "s2"}
        # GetNode: its messages are its sources' own, across both sessions
        node = c.get_node(pets.id, user_id="alice")
        assert [m.message.content for m in node.messages] == [s.text for s in pets2.sources]
        assert not node.HasField("episode")

        # Forget an episode: the profile is rebuilt from the facts that remain
        c.forget(episode_ids=[second])
        (pets3,) = _profiles(vectors, "pets")
        assert "Bolt" not in pets3.text and "Rex" in pets3.text
        assert {s.session_id for s in pets3.sources} == {"s1"}
        assert all("Denver" not in p.text for p in _profiles(vectors))

        # Forget a fact: a topic left with one fact has no profile any more
        facts = vectors.scroll(PointFilter(user_id="alice", kinds=("fact",)))
        rex = next(f for f in facts if "Rex" in f.text and "Miso" not in f.text)
        r = c.forget(memory_ids=[rex.id])
        assert r.vector_points >= 2  # the fact and the profile
        assert _profiles(vectors, "pets") == []
        assert all(rex.text not in p.text for p in _profiles(vectors))

        c.forget(episode_ids=[first])
        assert _profiles(vectors) == []
