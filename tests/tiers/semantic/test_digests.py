"""The digests' and threads' builders (tiers.semantic.digests, tiers.semantic.threads): pure
functions of a scope's summaries."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from tiers.core.records import Scope
from tiers.semantic.digests import (
    DigestPolicy,
    build_digests,
    gist,
    period_label,
    period_start,
)
from tiers.semantic.threads import build_threads, hints, topics_of_episode
from tiers.semantic.vectors import MemoryPoint, Source, point_id

A = Scope("ana")


def us(day: dt.date) -> int:
    return int(dt.datetime(day.year, day.month, day.day, 12, tzinfo=dt.UTC).timestamp() * 1e6)


def summary(day: dt.date, text: str, session: str, **attrs: object) -> MemoryPoint:
    src = [Source(session, 1, speaker="Ana", created_at_us=us(day))]
    return MemoryPoint(
        id=point_id(A, "summary", text, src),
        kind="summary",
        text=f"Conversation with Ana on {day:%-d %B %Y}. {text}",
        scope=A,
        episode_id=f"e-{session}",
        session_id=session,
        sources=src,
        created_at_us=us(day),
        extractor="local",
        attrs=dict(attrs),
    )


def test_weeks_start_on_monday_and_other_periods_on_the_epoch() -> None:
    for day in (dt.date(2023, 5, 8), dt.date(2023, 5, 10), dt.date(2023, 5, 14)):
        assert period_label(period_start(us(day), 7), 7) == "Week of 2023-05-08"
    assert period_label(period_start(us(dt.date(2023, 5, 15)), 7), 7) == "Week of 2023-05-15"
    assert period_label(period_start(us(dt.date(2023, 5, 10)), 1), 1) == "2023-05-10"
    label = period_label(period_start(us(dt.date(1970, 1, 5)), 3), 3)
    assert label == "1970-01-04 to 1970-01-06"


def test_periods_and_the_story_from_summaries() -> None:
    points = [
        summary(dt.date(2023, 5, 8), "Ana: I started pottery.", "s1"),
        summary(dt.date(2023, 5, 9), "Ana: The kiln broke.", "s2"),
        summary(dt.date(2023, 5, 16), "Ana: We went camping.", "s3"),
    ]
    policy = DigestPolicy()
    out = build_digests(A, reversed(points), policy)
    assert [d.attrs["level"] for d in out] == ["period", "period", "story"]
    week1, week2, story = out
    assert week1.text == (
        "Week of 2023-05-08 (Ana; 2 conversations). 8 May 2023: Ana: I started pottery. "
        "9 May 2023: Ana: The kiln broke."
    )
    assert week1.attrs["children"] == [points[0].id, points[1].id]
    assert [s.session_id for s in week1.sources] == ["s1", "s2"]
    assert story.attrs["children"] == [week1.id, week2.id]
    assert story.text.startswith("The story so far (8 May 2023 to 16 May 2023; Ana; 3 ")
    assert build_digests(A, points, policy) == out  # deterministic
    assert build_digests(A, [], policy) == []
    one = DigestPolicy(story_periods=1)
    newest = build_digests(A, points, one)[-1]
    assert newest.attrs["children"] == [week2.id]
    assert newest.text.startswith("The story so far (16 May 2023 to 16 May 2023; Ana; 1 ")


def test_a_written_text_stays_while_its_children_do() -> None:
    points = [summary(dt.date(2023, 5, 8), "Ana: I started pottery.", "s1")]
    week, _story = build_digests(A, points, DigestPolicy())
    written = replace(week, text="Ana took up pottery.", extractor="llm:m")
    kept = build_digests(A, points, DigestPolicy(), {week.id: written})
    assert (kept[0].text, kept[0].extractor) == ("Ana took up pottery.", "llm:m")
    assert kept[1].text.endswith("Week of 2023-05-08: Ana took up pottery.")
    more = [*points, summary(dt.date(2023, 5, 9), "Ana: The kiln broke.", "s2")]
    again = build_digests(A, more, DigestPolicy(), {week.id: written})
    assert again[0].extractor == "digest" and "kiln" in again[0].text


def test_gist_drops_the_local_header_only() -> None:
    assert gist("Conversation between A and B on 8 May 2023. A: hi.") == "A: hi."
    assert gist("Conversation with A from 8 May 2023 to 9 May 2023. A: hi.") == "A: hi."
    assert gist("Ana and Bo talked.") == "Ana and Bo talked."


def test_hints_and_the_weavers_topics() -> None:
    assert hints([{"topic": " kitchen  renovation, budget"}, {"topic": "budget"}, {}]) == [
        "kitchen renovation",
        "budget",
    ]
    assert hints([{"topic": "x" * 100}]) == ["x" * 80]
    facts = [("Ana has a dog.", "has_pet"), ("Ana's cat sleeps.", ""), ("Ana hiked.", "")]
    assert topics_of_episode(facts) == ["pets"]


def test_threads_need_two_episodes_unless_hinted() -> None:
    pets = {"weaver_topics": ["pets"]}
    points = [
        summary(dt.date(2023, 5, 8), "Ana: my dog.", "s1", **pets),
        summary(dt.date(2023, 5, 9), "Ana: my cat.", "s2", topics=["vet"], **pets),
        summary(dt.date(2023, 5, 10), "Ana: hiking.", "s3", weaver_topics=["travel"]),
    ]
    threads = {t.attrs["topic"]: t for t in build_threads(A, points)}
    # A hinted episode is in its hinted threads only; one weaver episode makes no thread.
    assert set(threads) == {"vet"}
    more = [*points, summary(dt.date(2023, 5, 11), "Ana: my parrot.", "s4", **pets)]
    threads = {t.attrs["topic"]: t for t in build_threads(A, more)}
    assert set(threads) == {"vet", "pets"}
    assert threads["pets"].attrs["episodes"] == ["e-s1", "e-s4"]
    assert threads["vet"].attrs["origin"] == "hint"
    assert threads["pets"].text.startswith("Thread: pets (2 conversations, 8 May 2023 to 11 ")


def fact(day: int, text: str, category: str = "", valid_to_us: int | None = None) -> MemoryPoint:
    when = us(dt.date(2023, 5, day))
    src = [Source(f"s{day}", 1, speaker="Ana", created_at_us=when, text=text)]
    return MemoryPoint(
        id=point_id(A, "fact", text, src),
        kind="fact",
        text=text,
        scope=A,
        episode_id=f"e{day}",
        session_id=f"s{day}",
        sources=src,
        created_at_us=when,
        extractor="local",
        valid_to_us=valid_to_us,
        attrs={"category": category} if category else {},
    )


def test_the_story_keeps_in_mind_the_current_facts_of_a_kept_category() -> None:
    summaries = [summary(dt.date(2023, 5, 8), "Ana: I started pottery.", "s1")]
    facts = [
        fact(1, "Ana is allergic to penicillin", "preference"),
        fact(2, "Ana likes jazz.", "preference", valid_to_us=us(dt.date(2023, 5, 3))),
        fact(3, "Ana lives in Porto."),  # a plain fact
        fact(4, "Always answer Ana in French.", "instruction"),
        fact(5, "Ana is allergic to penicillin.", "preference"),  # said again
        replace(fact(6, "Bo hates mornings.", "preference"), scope=Scope("bo")),
    ]
    story = build_digests(A, summaries, DigestPolicy(), facts=facts)[-1]
    head, kept = story.text.split(" Week of", 1)[0].split(" To keep in mind: ")
    assert head.startswith("The story so far")
    assert kept == "Always answer Ana in French. Ana is allergic to penicillin."
    assert story.attrs["kept"] == [facts[3].id, facts[4].id]
    without = build_digests(A, summaries, DigestPolicy())[-1]
    assert "To keep in mind" not in without.text
    assert without.attrs["basis"] != story.attrs["basis"], "a kept fact rewrites the story"
    many = [fact(d, f"Ana prefers tea number {d}.", "preference") for d in range(1, 12)]
    kept_many = build_digests(A, summaries, DigestPolicy(), facts=many)[-1].attrs["kept"]
    assert kept_many == [f.id for f in many[-8:]]
