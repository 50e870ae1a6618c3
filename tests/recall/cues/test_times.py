"""Time cues (recall.cues.times) and the engine's search within them: the dates and periods a
query names become windows of event time, and what was said then ranks above what matches as
well but was said at another time. Sentences written for this test."""

from __future__ import annotations

import datetime as dt

import pytest

from recall import Query
from recall.cache import SemanticCache
from recall.channels import KeywordChannel, VectorChannel
from recall.cues.times import cue
from recall.engine import RecallEngine
from recall.recipe import Recipe
from tests.recall.world import A, World

NOW = dt.datetime(2031, 3, 18, 15, 30, tzinfo=dt.UTC)  # a Tuesday


def day(y: int, m: int, d: int) -> dt.date:
    return dt.date(y, m, d)


def window(text: str) -> tuple[dt.date, dt.date, str] | None:
    found = cue(text, NOW)
    if found is None:
        return None
    start = dt.datetime.fromtimestamp(found.start_us / 1e6, dt.UTC)
    end = dt.datetime.fromtimestamp(found.end_us / 1e6, dt.UTC)
    return start.date(), end.date(), found.said


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a day, with a day either side
        (
            "Which kite did Bram fly on 4 August 2029?",
            (day(2029, 8, 3), day(2029, 8, 6), "4 August 2029"),
        ),
        (
            "What did Anouk bake on March 9th, 2030?",
            (day(2030, 3, 8), day(2030, 3, 11), "March 9th, 2030"),
        ),
        (
            "Notes from the 21st of Nov. 2028 standup",
            (day(2028, 11, 20), day(2028, 11, 23), "21st of Nov. 2028"),
        ),
        ("Deploy log for 2030-12-31", (day(2030, 12, 30), day(2031, 1, 2), "2030-12-31")),
        # a month of a year, a day either side
        (
            "Which plants did we repot in April 2030?",
            (day(2030, 3, 31), day(2030, 5, 2), "April 2030"),
        ),
        ("Budget talks in Dec 2030", (day(2030, 11, 30), day(2031, 1, 2), "Dec 2030")),
        # a year after in / during / throughout / since
        ("Where did Anouk teach during 2027?", (day(2027, 1, 1), day(2028, 1, 1), "during 2027")),
        ("What changed since 2030?", (day(2030, 1, 1), day(2031, 3, 19), "since 2030")),
        # relative to now
        ("What did we settle yesterday?", (day(2031, 3, 16), day(2031, 3, 19), "yesterday")),
        ("What did I order last week?", (day(2031, 3, 10), day(2031, 3, 18), "last week")),
        ("Anything new this month?", (day(2031, 3, 1), day(2031, 3, 19), "this month")),
        ("Which hike was last year?", (day(2030, 1, 1), day(2031, 1, 2), "last year")),
        ("The bug we saw two weeks ago", (day(2031, 2, 28), day(2031, 3, 8), "two weeks ago")),
        ("Her visit 3 days ago", (day(2031, 3, 14), day(2031, 3, 16), "3 days ago")),
        # the most specific cue wins over an earlier, vaguer one
        (
            "Since 2029, and on 4 August 2029 especially?",
            (day(2029, 8, 3), day(2029, 8, 6), "4 August 2029"),
        ),
        # no cue
        ("When did Bram fly the kite in June?", None),  # a month without a year
        ("You may 2 times retry", None),
        ("Order 2030 bolts", None),  # a bare number
        # no such day: its month still names when
        ("Meeting on 31 February 2030?", (day(2030, 1, 31), day(2030, 3, 2), "February 2030")),
        ("", None),
    ],
)
def test_cues(text: str, expected: tuple[dt.date, dt.date, str] | None) -> None:
    assert window(text) == expected


def us(d: dt.date) -> int:
    return int(dt.datetime(d.year, d.month, d.day, 12, tzinfo=dt.UTC).timestamp() * 1_000_000)


def test_what_was_said_then_ranks_first(world: World) -> None:
    # the same kite said on five days; the question names one of them
    days = [day(2029, 5, 2), day(2029, 6, 9), day(2029, 8, 4), day(2029, 9, 30), day(2029, 11, 1)]
    said = {}
    for seq, when in enumerate(days, start=1):
        text = f"Bram flew the red box kite at the dunes ({seq})."
        said[when] = world.turn(A, "Bram", text, seq=seq, at=us(when))
    channels = {"vector": VectorChannel(world.semantic), "keyword": KeywordChannel(world.semantic)}
    engine = RecallEngine(world.semantic, channels, {}, clock=NOW.timestamp)
    question = "Which kite did Bram fly on 4 August 2029?"
    plain = Recipe(graph_weight=0, learned_fusion="", answers_first=False)
    try:
        on = engine.recall(Query(question, A, 5, plain))
        off = engine.recall(Query(question, A, 5, plain.model_copy(update={"time_cues": 0.0})))
        # a time range that excludes the cue's window: no dated search
        before = engine.recall(Query(question, A, 5, plain, end_us=us(day(2029, 7, 1))))
        # a time range ending at the epoch holds nothing, the cue's window neither
        nothing = engine.recall(Query(question, A, 5, plain, end_us=0))
    finally:
        engine.close()
    assert on.hits[0].point.id == said[day(2029, 8, 4)]
    assert {"vector:dated", "keyword:dated"} <= set(on.hits[0].ranks)
    assert "dated" in on.timings and "dated" not in off.timings
    assert not any(":dated" in r for h in off.hits for r in h.ranks)
    assert not any(":dated" in r for h in before.hits for r in h.ranks)
    assert {h.point.id for h in before.hits} == {said[day(2029, 5, 2)], said[day(2029, 6, 9)]}
    assert nothing.hits == []
    # the result carries the weights it fused at (an explanation shows them)
    assert on.weights["keyword:dated"] == plain.time_cues * on.weights["keyword"]
    assert on.weights["vector:dated"] == plain.time_cues * on.weights["vector"]
    assert not any(name.endswith(":dated") for name in [*off.weights, *before.weights])


def test_a_cached_answer_to_last_week_is_not_served_once_the_week_has_turned(
    world: World,
) -> None:
    # NOW is a Tuesday: "last week" is 9-15 March 2031, a week later 16-22 March
    first = world.turn(
        A, "Bram", "Bram flew the red box kite at the dunes.", seq=1, at=us(day(2031, 3, 12))
    )
    second = world.turn(
        A, "Bram", "Bram flew the red box kite at the pier.", seq=2, at=us(day(2031, 3, 19))
    )
    now = [NOW.timestamp()]
    channels = {"vector": VectorChannel(world.semantic), "keyword": KeywordChannel(world.semantic)}
    cache = SemanticCache(ttl_seconds=30 * 86_400, size=10, similarity=0.99)
    engine = RecallEngine(world.semantic, channels, {}, cache=cache, clock=lambda: now[0])
    query = Query("Where did Bram fly the kite last week?", A, 1, Recipe(graph_weight=0))
    undated = Query("Where did Bram fly the red box kite?", A, 1, Recipe(graph_weight=0))
    try:
        answer = engine.recall(query)
        again = engine.recall(query)
        plain = engine.recall(undated)
        now[0] += 7 * 86_400
        turned = engine.recall(query)
        plain_later = engine.recall(undated)
    finally:
        engine.close()
    assert [h.point.id for h in answer.hits] == [first] and again.cached
    assert not turned.cached and [h.point.id for h in turned.hits] == [second]
    assert not plain.cached and plain_later.cached  # without a cue, the week does not matter
