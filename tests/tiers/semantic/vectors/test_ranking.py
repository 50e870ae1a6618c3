"""The order of a search's hits (tiers.semantic.vectors.ranking): ties by id, whatever the
engine's order, and a tie at the limit seen whole."""

from __future__ import annotations

import math

import pytest

from tiers.semantic.vectors import DENSE, SPARSE
from tiers.semantic.vectors.ranking import TIE_ASKS, TIE_SLACK, Scored, best, tie_key


class Engine:
    """An engine's answer: its best ``n`` points in its own order (``points``, which breaks
    ties as the caller laid them out), with the sizes it was asked for kept."""

    def __init__(self, points: list[Scored]) -> None:
        self.points = sorted(points, key=lambda p: -p[1])  # a stable sort: ties as laid out
        self.asked: list[int] = []

    def __call__(self, n: int) -> list[Scored]:
        self.asked.append(n)
        return self.points[:n]


def named(i: int) -> str:
    return f"p{i:03d}"


def test_scores_equal_to_five_significant_digits_tie():
    # The same point's keyword score in two stores of the same points (2026-12-06).
    assert tie_key(14.003459930419922) == tie_key(14.003458023071289)
    assert tie_key(0.83511614799) == tie_key(0.83511611)
    assert tie_key(14.0034) != tie_key(14.0044)
    assert tie_key(0.000123456) != tie_key(0.000123446)
    assert tie_key(-2.5000001) == tie_key(-2.5)
    assert tie_key(0.0) == 0.0
    assert tie_key(math.inf) == math.inf


def test_ties_go_by_id_whatever_the_engine_order():
    better = [(named(50), 0.9), (named(60), 0.8)]
    tied = [(named(i), 0.5) for i in (7, 3, 9, 1)]  # laid out not by id
    near_tied = [(named(5), 0.5 + 1e-7), (named(2), 0.5 - 1e-7)]  # an engine's last bits
    engine = Engine([*tied, *near_tied, *better])

    got = best(engine, 6, DENSE)

    assert got[:2] == better
    assert [pid for pid, _score in got[2:]] == [named(i) for i in (1, 2, 3, 5)]
    assert dict(got)[named(5)] == 0.5 + 1e-7  # the engine's score kept
    assert engine.asked == [6 + TIE_SLACK]  # it gave fewer than asked: all there is


def test_a_tie_at_the_limit_is_asked_for_until_seen_whole():
    limit = 5
    tied = [(named(i), 0.25) for i in range(40, 0, -1)]  # 40 ties, the smallest ids laid out last
    engine = Engine([(named(99), 0.75), *tied])

    got = best(engine, limit, DENSE)

    assert got == [(named(99), 0.75), *[(named(i), 0.25) for i in range(1, 5)]]
    assert engine.asked == [limit + TIE_SLACK, (limit + TIE_SLACK) * 4]


def test_a_tie_past_the_limit_costs_no_second_ask():
    limit = 5
    points = [(named(i), 1.0 - i / 100) for i in range(limit + 2)]
    engine = Engine([*points, *[(named(100 + i), 0.1) for i in range(30)]])

    assert best(engine, limit, DENSE) == points[:limit]
    assert engine.asked == [limit + TIE_SLACK]


def test_a_tie_larger_than_every_ask_keeps_the_first_by_id_of_those_given():
    engine = Engine([(named(i), 0.5) for i in range(999, 0, -1)])

    got = best(engine, 3, DENSE)

    assert len(engine.asked) == TIE_ASKS + 1
    assert engine.asked[-1] == (3 + TIE_SLACK) * 4**TIE_ASKS
    given = engine.points[: engine.asked[-1]]
    assert got == sorted(given)[:3]


def test_a_keyword_search_asks_for_twice_its_limit_at_first():
    # Its engine reads the terms' points whole whatever it is asked for (ranking's text).
    tied = [(named(i), 0.25) for i in range(60, 0, -1)]
    engine = Engine([(named(99), 0.75), *tied])

    got = best(engine, 40, SPARSE)

    assert got == [(named(99), 0.75), *[(named(i), 0.25) for i in range(1, 40)]]
    assert engine.asked == [80]  # 61 given: the tie seen whole at once
    small = Engine([(named(1), 1.0)])
    best(small, 2, SPARSE)
    assert small.asked == [2 + TIE_SLACK]


@pytest.mark.parametrize("limit", [0, -1])
def test_no_limit_asks_nothing(limit):
    engine = Engine([(named(1), 1.0)])
    assert best(engine, limit, DENSE) == []
    assert engine.asked == []
