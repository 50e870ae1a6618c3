"""The order of a search's hits: best first, ties by point id, whatever the engine's layout.

An engine breaks a tie by where a point sits in its segments, which depends on the order the
points were written in, and its sums are not exact. Two stores of one conversation ingested
twice held the same points, vectors and term counts, in another order within their segment
(the weaver's batches differ from run to run); asked the same keyword query, they gave one
point's score differing in its last float32 bit (14.003459930 against 14.003458023) and
other points among those tied at the search's limit: 13 of the conversation's 197 questions
had lists that differed (2026-12-06). So a search here:

- counts scores equal to :data:`TIE_DIGITS` significant digits as ties (:func:`tie_key`),
  and a tie goes to the smaller id (:func:`order_key`);
- asks the engine for more hits than it wants (:func:`first_ask`), and asks again for more
  while a tie at its limit may go on past what the engine gave (:func:`best`).

The hits keep their scores as the engine gave them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tiers.semantic.vectors import SPARSE

# Significant digits that tell two scores apart: a float32 has 7, and beyond 5 (a keyword
# score's thousandths, a cosine's hundred-thousandths) the difference says nothing.
TIE_DIGITS = 5
# Hits a dense search asks beyond its limit, so that a tie at the limit is seen whole. A
# keyword search asks for twice its limit (at least this many more): the engine reads its
# terms' points whole whatever it is asked for, while a dense search's walk of the index
# grows with it (the 200,000-point user of the 1M fill, 200 questions, 2026-12-06: keyword
# 1.60 ms for 100 hits against 1.67 for 50, which asked again for 17 % of them; dense 1.21
# against 0.94 ms for 58). On LoCoMo's first conversation, 3 of 600 keyword searches for 50
# asked again.
TIE_SLACK = 8
# Further asks, each for four times the hits, while a tie at the limit is not seen whole;
# past them the tie's first points by id among those given are kept.
TIE_ASKS = 2

Scored = tuple[str, float]  # a point's id and its score


def tie_key(score: float) -> float:
    """``score`` rounded to :data:`TIE_DIGITS` significant digits (zero, infinities and NaN
    as they are), as :func:`tie_keys` rounds each of an array's."""
    if score == 0.0 or not math.isfinite(score):
        return score
    scale = 10.0 ** (TIE_DIGITS - 1 - math.floor(math.log10(abs(score))))
    return round(score * scale) / scale


def tie_keys(values: np.ndarray) -> np.ndarray:
    """:func:`tie_key` of each of the positive ``values`` (a graph's masses)."""
    scale = 10.0 ** (TIE_DIGITS - 1 - np.floor(np.log10(values)))
    return np.round(values * scale) / scale


def tie_floor(score: float) -> float:
    """A bound under every positive value that may tie with the positive ``score``: a value
    within :data:`TIE_DIGITS` significant digits of it."""
    return score * (1.0 - 10.0 ** (1 - TIE_DIGITS))


def order_key(score: float, point_id: str) -> tuple[float, str]:
    """The sort key of a hit: best first, ties by id."""
    return (-tie_key(score), point_id)


def first_ask(limit: int, using: str) -> int:
    """The hits a search of the vector ``using`` that wants ``limit`` asks the engine for."""
    return limit + (max(limit, TIE_SLACK) if using == SPARSE else TIE_SLACK)


def best(search: Callable[[int], Sequence[Scored]], limit: int, using: str) -> list[Scored]:
    """The best ``limit`` of what ``search(n)`` (an engine's best ``n`` points of the vector
    ``using``, by its own order) finds, best first, ties by id. When the engine gives all it
    was asked for (:func:`first_ask`) and the tie of the last point given starts within
    ``limit``, points it left out may share that tie: it is asked again for four times as
    many (at most :data:`TIE_ASKS` times)."""
    if limit <= 0:
        return []
    wanted, asks = first_ask(limit, using), 0
    while True:
        given = sorted(search(wanted), key=lambda s: order_key(s[1], s[0]))
        if len(given) < wanted or asks == TIE_ASKS or _last_tie(given) >= limit:
            return given[:limit]
        wanted, asks = wanted * 4, asks + 1


def _last_tie(given: Sequence[Scored]) -> int:
    """Where the tie of the last of ``given`` (ordered, not empty) starts."""
    last = tie_key(given[-1][1])
    start = len(given)
    while start and tie_key(given[start - 1][1]) == last:
        start -= 1
    return start
