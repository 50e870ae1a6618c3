"""The local extractor's date anchoring: relative dates in a turn become absolute ones, and a
fact's valid_from follows them."""

from __future__ import annotations

from datetime import date

import pytest

from tests.support.local_extraction import said, us
from weaver.extractors.dates import anchor_dates


@pytest.mark.parametrize(
    ("text", "today", "expected", "start"),
    [
        ("I went yesterday", date(2024, 3, 1), "I went on 29 February 2024", date(2024, 2, 29)),
        ("I rest today", date(2024, 3, 1), "I rest on 1 March 2024", date(2024, 3, 1)),
        (
            "a gig tonight",
            date(2024, 3, 1),
            "a gig on the evening of 1 March 2024",
            date(2024, 3, 1),
        ),
        ("I fly tomorrow", date(2023, 12, 31), "I fly on 1 January 2024", date(2024, 1, 1)),
        ("I slept badly last night", date(2024, 1, 1), "on the night of 31 December 2023", None),
        ("I ran this morning", date(2024, 1, 1), "I ran on the morning of 1 January 2024", None),
        ("the day before yesterday", date(2024, 3, 1), "On 28 February 2024", date(2024, 2, 28)),
        ("it broke last week", date(2024, 1, 3), "in the week before 3 January 2024", None),
        ("busy this week", date(2024, 1, 3), "in the week of 3 January 2024", date(2024, 1, 1)),
        ("I travel next week", date(2023, 12, 28), "in the week after 28 December 2023", None),
        # 2 October 2023 is a Monday
        ("I hiked last weekend", date(2023, 10, 2), "weekend of 30 September-1 October 2023", None),
        ("this past weekend", date(2023, 10, 2), "weekend of 30 September-1 October 2023", None),
        ("I camped two weekends ago", date(2023, 10, 2), "weekend of 23-24 September 2023", None),
        # 28 February 2024 is a Wednesday: "this weekend" is the coming one when planned...
        ("I will hike this weekend", date(2024, 2, 28), "on the weekend of 2-3 March 2024", None),
        # ... and the past one when told in the past tense
        ("this weekend I went out", date(2024, 2, 28), "On the weekend of 24-25 February", None),
        ("I quit last month", date(2024, 1, 15), "I quit in December 2023", date(2023, 12, 1)),
        ("my show is next month", date(2023, 12, 10), "my show is in January 2024", None),
        ("busy this month", date(2024, 2, 10), "busy in February 2024", None),
        ("I graduated last year", date(2024, 1, 5), "I graduated in 2023", date(2023, 1, 1)),
        ("I retire next year", date(2024, 1, 5), "I retire in 2025", date(2025, 1, 1)),
        ("it opened this year", date(2024, 1, 5), "it opened in 2024", date(2024, 1, 1)),
        ("I left 3 days ago", date(2024, 3, 2), "I left on 28 February 2024", date(2024, 2, 28)),
        ("I met her two weeks ago", date(2024, 1, 10), "around 27 December 2023", None),
        ("I moved a few months ago", date(2024, 1, 31), "I moved around October 2023", None),
        ("I started five years ago", date(2023, 8, 28), "I started around 2018", None),
        ("I started a year ago", date(2024, 2, 29), "I started around 2023", date(2023, 2, 28)),
        # 22 October 2023 is a Sunday, 2 January 2024 a Tuesday
        ("I passed last Friday", date(2023, 10, 22), "I passed on 20 October 2023", None),
        ("Last Fri I took my kids", date(2023, 10, 22), "On 20 October 2023 I took", None),
        ("I went out on Friday", date(2024, 1, 2), "on 29 December 2023", date(2023, 12, 29)),
        ("I will go out on Friday", date(2024, 1, 2), "on 5 January 2024", date(2024, 1, 5)),
        ("see you next Monday", date(2024, 1, 2), "on 8 January 2024", date(2024, 1, 8)),
        ("I ran last Tuesday", date(2024, 1, 2), "on 26 December 2023", date(2023, 12, 26)),
        ("on Friday night we danced", date(2024, 1, 2), "On the night of 29 December 2023", None),
        ("I swam a lot last summer", date(2023, 8, 20), "in summer 2022", date(2022, 6, 1)),
        ("Last night was amazing", date(2024, 1, 1), "The night of 31 December 2023 was", None),
        ("Yesterday was fun", date(2024, 3, 1), "29 February 2024 was fun", None),
        ("since last year", date(2024, 1, 5), "since 2023", None),
        ("I loved yesterday's game", date(2024, 3, 1), "loved the 29 February 2024 game", None),
        # a month without its year: the most recent one, the coming one in the future tense
        ("I ran a marathon in March", date(2023, 5, 8), "in March 2023", date(2023, 3, 1)),
        ("we met in October", date(2023, 5, 8), "we met in October 2022", date(2022, 10, 1)),
        ("I will visit in June", date(2023, 5, 8), "visit in June 2023", date(2023, 6, 1)),
        ("I'll move in January", date(2023, 5, 8), "in January 2024", date(2024, 1, 1)),
        ("I quit last May", date(2023, 5, 8), "I quit in May 2022", date(2022, 5, 1)),
        ("next May we travel", date(2023, 5, 8), "In May 2024 we travel", date(2024, 5, 1)),
        ("painting since early April", date(2023, 5, 8), "since early April 2023", None),
        ("busy this July", date(2023, 5, 8), "busy in July 2023", date(2023, 7, 1)),
    ],
)
def test_relative_dates_are_anchored(
    text: str, today: date, expected: str, start: date | None
) -> None:
    out, first = anchor_dates(text, today)
    assert expected in out, out
    assert first is not None
    if start is not None:
        assert first == start


@pytest.mark.parametrize(
    "text",
    [
        "I swim every Friday",
        "in today's world it is hard",
        "over the past year",
        "See you then",
        "it happened in March 2022",  # a year already
        "on March 5, we met",
        "that in may be true",  # the verb
    ],
)
def test_phrases_that_are_not_anchored(text: str) -> None:
    assert anchor_dates(text, date(2024, 1, 2)) == (text, None)


def test_fact_dates_and_valid_from() -> None:
    [past] = said("I went to a pottery workshop yesterday.")
    assert past.text == "Caroline went to a pottery workshop on 29 February 2024."
    assert past.valid_from_us == us(date(2024, 2, 29), hour=0)
    [plan] = said("I'm flying to Rome tomorrow.")
    assert plan.text == "Caroline is flying to Rome on 2 March 2024."
    assert plan.valid_from_us == us(date(2024, 3, 1)) + 1  # a plan holds from when it is told
    [plain] = said("I collect vintage cameras from flea markets.")
    assert plain.valid_from_us == us(date(2024, 3, 1)) + 1
