"""recall.cues.updates: the newer of two rival statements first for a question about the present,
the order kept for one about the past; values read from many wordings, none of which the
rule names."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from recall import Candidate, Query
from recall.channels import KeywordChannel, VectorChannel
from recall.cues.updates import asks_about_past, asks_about_present, newer_first, related_by, values
from recall.engine import RecallEngine
from recall.recipe import Recipe
from tests.recall.world import A, World
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, Source

DAY = 86_400_000_000
USER = Scope("u")


def hit(pid: str, text: str, day: int, speaker: str = "Ana") -> Candidate:
    source = Source("s", day, speaker=speaker, text=text)
    point = MemoryPoint(
        pid, "episode_turn", f"{speaker}: {text}", USER, "e", "s", [source], day * DAY, "index"
    )
    return Candidate(point, 1.0 / (day + 1))


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("My budget for the kitchen is $20,000.", "money", "20 000"),
        ("We can put 26,000 dollars into it now.", "money", "26 000 dollars"),
        ("Advisor moved the deadline to October 22.", "date", "october 22"),
        ("It's due on the 3rd of March.", "date", "3rd of march"),
        ("The studio moved my class to Thursdays.", "weekday", "thursdays"),
        ("We finally moved to Porto last week.", "name", "porto"),
        ("Booked my checkup with Dr. Okafor.", "name", "okafor"),
        ("Dr. Okafor took over my dental care.", "name", "okafor"),
        ("My new ride is a Tesla Model 3.", "name", "tesla model"),
        ("I have a new manager now: Aisha.", "name", "aisha"),
        ("We are 4 people on the team.", "number", "4"),
        # A capitalised word starting a sentence is a name when it is the subject of a verb
        # in the third person singular.
        ("Marta runs the design team now.", "name", "marta"),
        ("Globex pays my salary these days.", "name", "globex"),
        ("Lisbon suits us better.", "name", "lisbon"),
    ],
)
def test_values_are_read_from_any_wording(text, kind, value):
    assert value in values(f"Ana: {text}").get(kind, set())


@pytest.mark.parametrize(
    "text",
    [
        "Advisor moved the deadline.",
        "I love it.",
        "The weather is grey.",
        "OK, I will call.",
        "Thanks for the help.",
        "Everything is fine.",
        "Traffic in the centre was awful.",
        "Rent is high.",
    ],
)
def test_a_statement_without_a_value_holds_none(text):
    assert values(text) == {}


@pytest.mark.parametrize(
    ("query", "past"),
    [
        ("Which city did I live in before?", True),
        ("Where did I use to work?", True),
        ("What was the original deadline?", True),
        ("Who was my manager previously?", True),
        ("Which city do I live in?", False),
        ("When is my thesis chapter due?", False),
        ("Who is my boss now?", False),
        ("How much can I spend on the kitchen?", False),
    ],
)
def test_questions_about_the_past(query, past):
    assert asks_about_past(query) is past


@pytest.mark.parametrize(
    ("query", "present"),
    [
        ("Which city do I live in?", True),
        ("What's our rent?", True),
        ("Who is your owner?", True),
        ("Who runs the platform team now?", True),
        ("What is Caroline's job currently?", True),
        ("What is Caroline's job?", False),
        ("What is the budget for the remodel?", True),
        ("Where did I live before?", False),
    ],
)
def test_questions_about_the_present(query, present):
    assert asks_about_present(query, ["caroline", "melanie"]) is present
    if not asks_about_past(query):
        assert asks_about_present(query), "no speaker named: about the present"


def test_the_newer_rival_moves_right_above_the_older_and_both_are_marked():
    old = hit("old", "My thesis chapter is due October 15.", 1)
    other = hit("other", "I like the library.", 2)
    new = hit("new", "Advisor moved it to October 22.", 9)
    out = newer_first([old, other, new], "When is my chapter due?", top=3, depth=10)
    assert [h.point.id for h in out] == ["new", "old", "other"]
    assert out[1].point.valid_to_us == 9 * DAY and out[1].point.replaced_by == "new"
    assert out[0].point.attrs["replaces"] == "old" and out[0].point.valid_to_us is None


def test_a_question_about_the_past_keeps_the_order():
    old = hit("old", "I live in Lisbon.", 1)
    new = hit("new", "We moved to Porto.", 9)
    out = newer_first([old, new], "Which city did I live in before?", top=3, depth=10)
    assert [h.point.id for h in out] == ["old", "new"]
    assert out[0].point.valid_to_us is None


@pytest.mark.parametrize(
    ("older", "newer", "why"),
    [
        (("I live in Lisbon.", 1, "Ana"), ("Bo moved to Porto.", 9, "Bo"), "another speaker"),
        (("I live in Lisbon.", 9, "Ana"), ("We moved to Porto.", 1, "Ana"), "older, not newer"),
        (("I live in Lisbon.", 1, "Ana"), ("Is Porto nice?", 9, "Ana"), "a question"),
        (("Rent is $900.", 1, "Ana"), ("We moved to Porto.", 9, "Ana"), "another kind of value"),
        (("I live in Lisbon.", 1, "Ana"), ("Lisbon is lovely.", 9, "Ana"), "the same value"),
        (("I live in Lisbon.", 1, "Ana"), ("Work was hectic.", 9, "Ana"), "no value"),
    ],
)
def test_no_rivals_no_move(older, newer, why):
    a, b = hit("a", *older), hit("b", *newer)
    out = newer_first([a, b], "Where do I live?", top=3, depth=10)
    assert [h.point.id for h in out] == ["a", "b"], why


def test_a_summary_is_no_rival():
    old = hit("old", "I live in Lisbon.", 1)
    new = hit("new", "We moved to Porto.", 9)
    new.point = replace(new.point, kind="summary")
    out = newer_first([old, new], "Where do I live?", top=3, depth=10)
    assert [h.point.id for h in out] == ["old", "new"]


def test_only_within_the_depth_and_above_the_top():
    old = hit("old", "I live in Lisbon.", 1)
    fill = [hit(f"f{i}", "Nothing of note here.", 2) for i in range(4)]
    new = hit("new", "We moved to Porto.", 9)
    hits = [old, *fill, new]
    assert [h.point.id for h in newer_first(hits, "Where do I live?", top=3, depth=5)] == [
        h.point.id for h in hits
    ], "beyond the depth: not looked at"
    assert newer_first(hits, "Where do I live?", top=3, depth=6)[0].point.id == "new"
    below = [*fill[:3], old, new]
    assert [h.point.id for h in newer_first(below, "Where do I live?", top=3, depth=6)] == [
        h.point.id for h in below
    ], "the older one below the top: left alone"


def test_related_by_the_query_or_by_each_other():
    vectors = {"old": [1.0, 0.0, 0.0], "near": [0.8, 0.6, 0.0], "far": [0.0, 0.0, 1.0]}
    reads: list[list[str]] = []

    def dense(ids: list[str]) -> dict[str, list[float]]:
        reads.append(ids)
        return {i: vectors[i] for i in ids if i in vectors}

    old, near, far = hit("old", "x", 1), hit("near", "y", 2), hit("far", "z", 3)
    staged = hit("staged", "w", 4)
    related = related_by([1.0, 0.0, 0.0], dense, 0.7, 0.5)
    # near: 0.8 >= 0.7 x 1.0; far: neither near the query nor the old one; staged: no vector
    assert related([(old, near), (old, far), (old, staged), (near, staged)]) == {("old", "near")}
    assert reads == [["old", "near", "far", "staged"]], "every vector in one read, each once"
    by_each_other = related_by([0.6, -0.8, 0.0], dense, 0.7, 0.5)
    # near: 0.0 to the query, under 0.7 x 0.6; but old . near = 0.8
    assert by_each_other([(old, near), (old, far)]) == {("old", "near")}
    assert related([]) == set() and len(reads) == 2, "no pairs, no read"


def test_related_is_asked_once_and_only_of_rivals():
    old = hit("old", "I live in Lisbon.", 1)
    other = hit("other", "I like the library.", 2)
    new = hit("new", "We moved to Porto.", 9)
    bo = hit("bo", "Bo moved to Madrid.", 8, speaker="Bo")
    asked: list[list[tuple[str, str]]] = []

    def related(keep: bool):
        def ask(pairs):
            asked.append([(a.point.id, b.point.id) for a, b in pairs])
            return {("old", "new")} if keep else set()

        return ask

    hits = [old, other, bo, new]
    out = newer_first(hits, "Where do I live?", top=3, depth=10, related=related(False))
    assert [h.point.id for h in out] == ["old", "other", "bo", "new"], "not related: no move"
    assert asked == [[("old", "new")]]
    out = newer_first(hits, "Where do I live?", top=3, depth=10, related=related(True))
    assert [h.point.id for h in out] == ["new", "old", "other", "bo"]
    asked.clear()
    newer_first([old, other], "Where do I live?", top=3, depth=10, related=related(True))
    assert asked == [], "no rivals: nothing to ask"


def test_a_recall_reads_the_rivals_vectors_at_once_and_weighs_only_for_staged_points(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each call to the store may be a trip to its process (``vectors.process``): two pairs of
    rivals are read in one ``dense`` call, and the keyword channel weighs the query's terms
    for the staged points only when the user has some."""
    for seq, (text, day) in enumerate(
        [
            ("I live in Lisbon, near the river.", 1),
            ("My rent in Lisbon was $900.", 2),
            ("The rent in Porto is $700 now.", 8),
            ("We moved to Porto last spring.", 9),
        ],
        start=1,
    ):
        world.turn(A, "Ana", text, seq=seq, episode=f"ep{seq}", at=day * DAY)
    calls: Counter[str] = Counter()
    for name in ("dense", "weigh"):
        real = getattr(world.vectors, name)

        def counted(*args: Any, _name: str = name, _real: Any = real) -> Any:
            calls[_name] += 1
            return _real(*args)

        monkeypatch.setattr(world.vectors, name, counted)
    channels: dict[str, Any] = {
        "vector": VectorChannel(world.semantic),
        "keyword": KeywordChannel(world.semantic),
    }
    recall = RecallEngine(world.semantic, channels, {})
    query = Query(
        "Where do I live now, and what is my rent in Porto?", A, 10, Recipe(graph_weight=0)
    )
    try:
        result = recall.recall(query)
        assert len(result.hits) == 4 and not result.degraded
        assert calls == {"dense": 1}, "rivals read at once; nothing staged, nothing weighed"
        staged = MemoryPoint(
            "live-1",
            "episode_turn",
            "Ana: Porto rent goes up in May.",
            A,
            "",
            "sess-live",
            [Source("sess-live", 1, "m1", speaker="Ana")],
            10 * DAY,
            "index",
        )
        assert world.semantic.stage([staged])
        hits = recall.recall(query).hits
        assert "live-1" in [h.point.id for h in hits] and calls["weigh"] == 1
    finally:
        recall.close()
