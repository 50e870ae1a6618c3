"""Time cues: the date or period a query names ("on 13 October 2023", "in July 2023",
"during 2022", "last week"), as a window of event time.

A question that names when ("What did Odile paint in July 2023?") is about what was said
then, while its words match what was said at any time. The engine searches such a query
a second time within the window (``vector:dated``, ``keyword:dated``, :mod:`recall.engine`),
and fuses both, so what was said then ranks higher without what was said at other times
being dropped (a person may tell in August what they did in July).

What counts as a cue, the most specific first:

- a day: ``13 October 2023``, ``October 13, 2023``, ``Oct 13th 2023``, ``2023-10-13`` (the
  window is the day, with a day either side: the message's time is in UTC, the speaker's
  calendar may not be);
- a month of a year: ``July 2023``, ``in Sept. 2023``;
- a year after ``in``, ``during``, ``throughout`` or ``since`` (``since``: to now);
- relative to now (the daemon's clock): ``yesterday``, ``today``, ``this``/``last``
  ``week``/``month``/``year``, ``N days``/``weeks``/``months``/``years ago`` (the unit around
  that point).

A month alone ("in June") names no year and is no cue; neither is a bare number.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_WORDS = "|".join(_NUMBERS)
_UNIT = r"(?P<unit>day|week|month|year)"
_PATTERNS = [
    ("day", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I)),
    ("day", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I)),
    ("day", re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mm>[01]\d)-(?P<day>[0-3]\d)\b")),
    ("month", re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)),
    ("year", re.compile(rf"\b(?P<how>in|during|throughout|since)\s+{_YEAR}\b", re.I)),
    ("ago", re.compile(rf"\b(?P<n>\d{{1,3}}|{_WORDS})\s+{_UNIT}s?\s+ago\b", re.I)),
    ("this", re.compile(r"\b(?P<which>this|last|past)\s+(?P<unit>week|month|year)\b", re.I)),
    ("day_word", re.compile(r"\b(?P<which>yesterday|today)\b", re.I)),
]


@dataclass(frozen=True, slots=True)
class Window:
    """Event time from ``start_us`` (inclusive) to ``end_us`` (exclusive), UTC
    microseconds, and the words of the query that named it."""

    start_us: int
    end_us: int
    said: str


def cue(text: str, now: dt.datetime) -> Window | None:
    """The window of the first kind of cue :data:`_PATTERNS` finds in ``text`` (the most
    specific kind first), or None. ``now`` (aware) anchors the relative cues."""
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            window = _window(kind, match, now)
            if window is not None:
                return Window(_us(window[0]), _us(window[1]), match.group())
    return None


def _window(
    kind: str, m: re.Match[str], now: dt.datetime
) -> tuple[dt.datetime, dt.datetime] | None:
    g = m.groupdict()
    today = dt.datetime(now.year, now.month, now.day, tzinfo=dt.UTC)
    try:
        if kind == "day":
            month = int(g["mm"]) if g.get("mm") else _MONTHS[g["month"].lower()]
            day = dt.datetime(int(g["year"]), month, int(g["day"]), tzinfo=dt.UTC)
            return day - dt.timedelta(days=1), day + dt.timedelta(days=2)
        if kind == "month":
            start = dt.datetime(int(g["year"]), _MONTHS[g["month"].lower()], 1, tzinfo=dt.UTC)
            return start - dt.timedelta(days=1), _next_month(start) + dt.timedelta(days=1)
        if kind == "year":
            start = dt.datetime(int(g["year"]), 1, 1, tzinfo=dt.UTC)
            if g["how"].lower() == "since":
                return start, max(now, start) + dt.timedelta(days=1)
            return start, dt.datetime(start.year + 1, 1, 1, tzinfo=dt.UTC)
    except ValueError:  # "31 February 2023": no such day
        return None
    if kind == "day_word":
        day = today - dt.timedelta(days=1 if g["which"].lower() == "yesterday" else 0)
        return day - dt.timedelta(days=1), day + dt.timedelta(days=2)
    unit = g["unit"].lower()
    if kind == "this":
        start = _period_start(today, unit)
        if g["which"].lower() != "this":
            start = _period_start(start - dt.timedelta(days=1), unit)
            return start, _period_start(today, unit) + dt.timedelta(days=1)
        return start, now + dt.timedelta(days=1)
    n = _NUMBERS.get(g["n"].lower()) or int(g["n"])  # kind == "ago"
    days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * n
    half = {"day": 1, "week": 4, "month": 16, "year": 183}[unit]
    point = now - dt.timedelta(days=days)
    return point - dt.timedelta(days=half), point + dt.timedelta(days=half)


def _period_start(day: dt.datetime, unit: str) -> dt.datetime:
    if unit == "week":
        return day - dt.timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    return day.replace(month=1, day=1)


def _next_month(start: dt.datetime) -> dt.datetime:
    return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)


def _us(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1_000_000)
