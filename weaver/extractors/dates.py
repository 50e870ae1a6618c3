"""Anchor relative date phrases to absolute dates.

``anchor_dates("I went there yesterday", date(2023, 5, 8))`` returns
``("I went there on 7 May 2023", date(2023, 5, 7))``: the rewritten text and the start of the
first period it names (None when it names none). Supported: yesterday, today, tonight,
tomorrow, the day before yesterday, last night, this morning/afternoon/evening, the other day,
last/this/next week, last/this/next weekend (and "N weekends ago"), last/this/next month and
year, months without a year ("in March", "last May", "since early June"), last/this summer
(and the other seasons), "N days/weeks/months/years ago" (digits, number
words, "a few", "a couple of"), and weekdays: "last Friday", "on Friday" (the most recent one
before the turn; the coming one when the sentence speaks of the future), "this Friday",
"next Friday".
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

_WEEKDAYS = {
    "monday": 0, "mon": 0, "tuesday": 1, "tues": 1, "tue": 1, "wednesday": 2, "wed": 2,
    "thursday": 3, "thurs": 3, "thur": 3, "thu": 3, "friday": 4, "fri": 4, "saturday": 5,
    "sat": 5, "sunday": 6, "sun": 6,
}  # fmt: skip
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a couple": 2,
    "couple of": 2, "a few": 3, "few": 3, "several": 3,
}  # fmt: skip
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTH = "|".join(_MONTHS)
_PARTS = "morning|afternoon|evening|night"
_FULL_DAY = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_ABBR_DAY = "mon|tues?|wed|thur?s?|fri|sat|sun"
_NUM = r"\d+|" + "|".join(sorted(map(re.escape, _NUMBERS), key=len, reverse=True))

_PATTERN = re.compile(
    rf"""\b(?:
      (?P<dbyest>the\ day\ before\ yesterday)
    | (?P<rel>yesterday|today|tonight|tomorrow)(?:\ (?P<relpart>{_PARTS}))?(?P<poss>'s)?
    | (?P<lastnight>last\ night)
    | this\ (?P<thispart>morning|afternoon|evening)
    | (?P<otherday>the\ other\ day)
    | (?P<mwhich>in|last|this\ past|this|next|this\ coming|since|until|by)
      \ (?:(?P<mpart>early|mid|late)[-\ ])?(?P<month>{_MONTH})\b(?!,?\ ?\d)
    | (?:(?P<approx>about|around|roughly|almost|nearly|over|like)\ )?
      (?P<num>{_NUM})\ (?P<unit>day|week|weekend|month|year)s?\ (?:ago|back)
    | (?P<which>last|this\ past|past|this|next|on|coming|this\ coming)\ (?:
          (?P<period>week|weekend|month|year)
        | (?P<season>spring|summer|fall|autumn|winter)
        | (?P<wday>{_FULL_DAY}|{_ABBR_DAY})\b\.?(?:\ (?P<wpart>{_PARTS}))?
      )
    )\b""",
    re.IGNORECASE | re.VERBOSE,
)
_FUTURE = re.compile(
    r"\b(?:will|'ll|going to|gonna|plan(?:s|ning)?|hope|hoping|want|wanna|can't wait|"
    r"looking forward|upcoming|intend|about to)\b",
    re.IGNORECASE,
)
_BARE_BEFORE = re.compile(r"\b(?:since|from|until|till|by|before|after|of|through)\s*$", re.I)
_SUBJECT_AFTER = re.compile(r"^(?:'s\b|\s+(?:is|was|has|had|will|were)\b)", re.IGNORECASE)
_NO_ANCHOR_BEFORE = re.compile(r"\b(?:every|each|most|some|all)\s*$", re.IGNORECASE)


def day_text(d: date) -> str:
    return f"{d.day} {calendar.month_name[d.month]} {d.year}"


def _month_text(d: date) -> str:
    return f"{calendar.month_name[d.month]} {d.year}"


def add_months(d: date, months: int) -> date:
    index = d.year * 12 + d.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(d.day, calendar.monthrange(year, month + 1)[1]))


def _span(a: date, b: date) -> str:
    if a.month == b.month:
        return f"{a.day}-{day_text(b)}"
    if a.year == b.year:
        return f"{a.day} {calendar.month_name[a.month]}-{day_text(b)}"
    return f"{day_text(a)}-{day_text(b)}"


def _last_weekend(today: date, weeks_back: int = 1) -> date:
    """The Saturday of the most recent weekend that is over (one under way is "this weekend"),
    or of the one ``weeks_back - 1`` weekends before it."""
    saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
    if today.weekday() == 6:  # Sunday: yesterday's Saturday is this weekend
        saturday -= timedelta(days=7)
    return saturday - timedelta(days=7 * (weeks_back - 1))


def _season_start(season: str, today: date, which: str) -> date:
    month = _SEASONS[season]
    if month == 12:  # winter starts in December and runs into the next year
        current = today.year if today.month == 12 else today.year - 1
        year = current - 1 if which == "last" else current
    else:
        year = today.year - 1 if which == "last" else today.year
    return date(year, month, 1)


def _season_text(season: str, start: date) -> str:
    name = "fall" if season == "autumn" else season
    if name == "winter":
        return f"the winter of {start.year}-{start.year + 1}"
    return f"{name} {start.year}"


def _resolve(m: re.Match[str], today: date, future: bool) -> tuple[str, date] | None:
    """(phrase with its preposition, start date) for one match, or None to leave it alone."""
    g = m.groupdict()
    if g["dbyest"]:
        d = today - timedelta(days=2)
        return f"on {day_text(d)}", d
    if g["rel"]:
        rel = g["rel"].lower()
        if rel == "today" and g["poss"]:
            return None  # "today's world" is nearly always generic
        d = today + timedelta(days={"yesterday": -1, "tomorrow": 1}.get(rel, 0))
        if g["poss"]:
            return f"the {day_text(d)}", d
        part = g["relpart"] or ("evening" if rel == "tonight" else "")
        return (f"on the {part.lower()} of {day_text(d)}" if part else f"on {day_text(d)}"), d
    if g["lastnight"]:
        d = today - timedelta(days=1)
        return f"on the night of {day_text(d)}", d
    if g["thispart"]:
        return f"on the {g['thispart'].lower()} of {day_text(today)}", today
    if g["otherday"]:
        return f"a few days before {day_text(today)}", today - timedelta(days=3)
    if g["num"]:
        n = int(g["num"]) if g["num"].isdigit() else _NUMBERS[g["num"].lower()]
        unit = g["unit"].lower()
        vague = bool(g["approx"]) or g["num"].lower() in ("a few", "few", "several")
        if unit == "day":
            d = today - timedelta(days=n)
            return (f"around {day_text(d)}" if vague else f"on {day_text(d)}"), d
        if unit == "week":
            d = today - timedelta(weeks=n)
            return f"around {day_text(d)}", d
        if unit == "weekend":
            d = _last_weekend(today, n)
            return f"on the weekend of {_span(d, d + timedelta(days=1))}", d
        if unit == "month":
            d = add_months(today, -n)
            return f"around {_month_text(d)}", d
        d = add_months(today, -12 * n)
        return f"around {d.year}", d
    if g["month"]:
        return _month(g, today, future)
    which = g["which"].lower()
    last = which in ("last", "this past", "past")
    nxt = which in ("next", "coming", "this coming")
    if g["period"]:
        period = g["period"].lower()
        if which == "on" or (which == "past" and period in ("month", "year")):
            return None  # "over the past year" is the last twelve months, not last year
        if period == "week":
            if last:
                return f"in the week before {day_text(today)}", today - timedelta(days=7)
            if nxt:
                return f"in the week after {day_text(today)}", today + timedelta(days=7)
            return f"in the week of {day_text(today)}", today - timedelta(days=today.weekday())
        if period == "weekend":
            if last or (which == "this" and not future and today.weekday() < 5):
                d = _last_weekend(today)
            elif today.weekday() == 6 and which == "this":
                d = today - timedelta(days=1)
            else:
                d = today + timedelta(days=(5 - today.weekday()) % 7 or (7 if nxt else 0))
            return f"on the weekend of {_span(d, d + timedelta(days=1))}", d
        if period == "month":
            d = add_months(today.replace(day=1), -1 if last else 1 if nxt else 0)
            return f"in {_month_text(d)}", d
        d = date(today.year + (-1 if last else 1 if nxt else 0), 1, 1)
        return f"in {d.year}", d
    if g["season"]:
        if which == "on" or nxt:
            return None
        d = _season_start(g["season"].lower(), today, "last" if last else "this")
        return f"in {_season_text(g['season'].lower(), d)}", d
    wanted = _WEEKDAYS[g["wday"].lower()]
    if len(g["wday"]) <= 4 and which == "on" and g["wday"].lower() not in ("tues", "thur"):
        return None  # "on Sun", "on Sat": too ambiguous without last/next
    back = (today.weekday() - wanted) % 7 or 7
    ahead = (wanted - today.weekday()) % 7 or 7
    if last or (which in ("on", "this") and not future):
        d = today - timedelta(days=back)
    else:
        d = today + timedelta(days=ahead)
    if g["wpart"]:
        return f"on the {g['wpart'].lower()} of {day_text(d)}", d
    return f"on {day_text(d)}", d


def _month(g: dict[str, str], today: date, future: bool) -> tuple[str, date] | None:
    """A month named without its year ("in March", "last May", "next June", "since early
    April"): the most recent one, or the coming one when the sentence speaks of the future;
    "last" is before the current month, "next" after it, "this" in the current year."""
    if not g["month"][0].isupper():
        return None  # "in may" is nearly always the verb
    month = _MONTHS[g["month"].lower()]
    which = g["mwhich"].lower()
    if which in ("last", "this past"):
        year = today.year if month < today.month else today.year - 1
    elif which in ("next", "this coming"):
        year = today.year if month > today.month else today.year + 1
    elif which == "this":
        year = today.year
    elif future and which in ("in", "until", "by"):
        year = today.year if month >= today.month else today.year + 1
    else:
        year = today.year if month <= today.month else today.year - 1
    part = f"{g['mpart'].lower()} " if g["mpart"] else ""
    prep = which if which in ("since", "until", "by") else "in"
    return f"{prep} {part}{calendar.month_name[month]} {year}", date(year, month, 1)


def anchor_dates(text: str, today: date) -> tuple[str, date | None]:
    """Rewrite the relative date phrases of ``text`` as absolute dates seen from ``today``."""
    future = bool(_FUTURE.search(text))
    first: list[date] = []

    def replace(m: re.Match[str]) -> str:
        before = text[: m.start()]
        if _NO_ANCHOR_BEFORE.search(before):
            return m.group(0)
        resolved = _resolve(m, today, future)
        if resolved is None:
            return m.group(0)
        phrase, d = resolved
        first.append(d)
        if _BARE_BEFORE.search(before) or _SUBJECT_AFTER.match(text[m.end() :]):
            phrase = re.sub(
                r"^(?:on|in|around) (?:the (?=night|morning|evening|afternoon))?", "", phrase
            )
            if phrase.startswith(("night ", "morning ", "evening ", "afternoon ")):
                phrase = "the " + phrase
        if not before.strip() or re.search(r"[.!?]\s*$", before):
            phrase = phrase[:1].upper() + phrase[1:]
        return phrase

    out = _PATTERN.sub(replace, text)
    return out, (first[0] if first else None)
