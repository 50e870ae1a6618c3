"""Digests: a scope's episode summaries rolled up into period digests and a story so far.

A digest is a Tier 3 point of kind ``digest`` at one of two levels (``attrs["level"]``):

- ``period``: the summaries of the scope's episodes whose event time falls in one period
  (``digests.period_days`` days; weeks start on Monday), oldest first, for example::

      Week of 2023-05-08 (Caroline, Melanie; 2 conversations). 8 May: Caroline went to an
      LGBTQ support group ... 12 May: Melanie ...

- ``story``: one per scope, the story so far: what to keep in mind (the scope's current
  facts that the weaver categorised as a standing instruction, a correction or a preference,
  such as an allergy: at most :data:`MAX_KEPT`, the newest), then its newest period digests
  (at most ``digests.story_periods``), oldest first, each by the first sentence of its
  newest three summaries. A fact superseded or forgotten leaves the story at its next
  refresh.

A digest's sources are the messages of what it quotes: the summaries a period digest quotes
(its newest :data:`MAX_QUOTED`), the first message of each summary the story quotes.

Each digest names its children (``attrs["children"]``: the summaries of a period, the period
digests of the story) and their episodes, and its sources are its children's source messages,
so ``GetNode`` drills down from a digest to its children and to the messages they cite.

Like an entity profile (:mod:`tiers.semantic.profiles`), a digest is a function of what its
scope holds now (:func:`build_digests`), and its id depends only on the scope and the
period, so writing it again replaces it:

- incremental: a refresh (:meth:`tiers.semantic.store.SemanticStore.refresh_digests`) writes
  only the digests whose children changed (``attrs["basis"]``, a hash of the children's ids
  and texts): an episode arriving rewrites its period's digest and the story, no other;
- abstractive with an LLM: a :class:`DigestWriter` may rewrite a digest's text from its
  children's texts (the weaver's, after a run); the text is kept while the basis stays the
  same, and replaced by the extractive one as soon as it changes;
- Forget: a digest whose summaries are forgotten is built again from the summaries left (or
  deleted when none is), extractively at once, so no digest quotes a forgotten text.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Protocol

from tiers.core.errors import TierError
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, Source, point_id

KIND = "digest"
PERIOD = "period"
STORY = "story"
EXTRACTIVE = "digest"  # the extractor name of an extractive digest
DAY_US = 86_400_000_000
_MONDAY = 3  # the epoch (1970-01-01) was a Thursday: day + 3 is a multiple of 7 on Mondays
MAX_QUOTED = 12  # the newest children a period digest quotes (all are its children)
MAX_WORDS = 60  # words of a summary quoted in a period digest
MAX_KEPT = 8  # facts the story keeps in mind
# The categories of facts the story keeps in mind (attrs["category"], weaver.categories).
KEPT = ("instruction", "correction", "preference")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# The local extractor's first sentence of a summary, which a digest says with its own date.
_HEADER = re.compile(r"^Conversation (?:between|with) [^.]*? (?:on|from) [^.]*?\.\s+")


class DigestFailed(TierError):
    """A :class:`DigestWriter` could not write a digest (the extractive text stays)."""


class DigestWriter(Protocol):
    """Writes a digest's text from its children's texts (an LLM: ``weaver.digest_writer``).

    Raises :class:`DigestFailed` when it cannot (the extractive text is kept)."""

    name: str  # the points' extractor, "llm:<model>"

    def write(self, title: str, parts: Sequence[str]) -> str: ...


@dataclass(frozen=True, slots=True)
class DigestPolicy:
    period_days: int = 7
    story_periods: int = 12


def period_start(created_at_us: int, days: int) -> int:
    """The first day (days since the epoch) of the period holding ``created_at_us``."""
    day = created_at_us // DAY_US
    offset = _MONDAY if days == 7 else 0
    return (day + offset) // days * days - offset


def _day(day: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(days=day)


def period_label(start: int, days: int) -> str:
    first = _day(start)
    if days == 1:
        return first.strftime("%Y-%m-%d")
    if days == 7:
        return f"Week of {first:%Y-%m-%d}"
    return f"{first:%Y-%m-%d} to {_day(start + days - 1):%Y-%m-%d}"


def digest_id(scope: Scope, key: str) -> str:
    """Depends on scope and period (``key``: the period's first day, or "story") only."""
    return point_id(scope, KIND, key, [])


def basis(children: Sequence[MemoryPoint]) -> str:
    """What a digest's text is made of: its children's ids and texts, hashed."""
    h = hashlib.sha256()
    for child in children:
        h.update(f"{child.id}\x00{child.text}\x00".encode())
    return h.hexdigest()[:32]


def quote(text: str, words: int = MAX_WORDS) -> str:
    parts = text.split()
    return text.strip() if len(parts) <= words else " ".join(parts[:words]) + " ..."


def gist(summary: str) -> str:
    """A summary without the local extractor's header ("Conversation between A and B on
    8 May 2023."): a digest gives each summary its date itself."""
    return _HEADER.sub("", summary.strip(), count=1) or summary.strip()


def first_sentence(text: str) -> str:
    return quote(_SENTENCE.split(gist(text), maxsplit=1)[0], 30)


def event_date(us: int) -> str:
    when = datetime.fromtimestamp(us / 1e6, UTC)
    return f"{when.day} {when:%b %Y}"


def merged_sources(children: Iterable[MemoryPoint]) -> list[Source]:
    out: dict[tuple[str, int], Source] = {}
    for child in children:
        for s in child.sources:
            out.setdefault((s.session_id, s.seq), replace(s, text=""))
    return list(out.values())


def speakers_of(points: Iterable[MemoryPoint]) -> list[str]:
    return list(dict.fromkeys(s.speaker for p in points for s in p.sources if s.speaker))


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def build_digests(
    scope: Scope,
    summaries: Iterable[MemoryPoint],
    policy: DigestPolicy,
    known: Mapping[str, MemoryPoint] | None = None,
    facts: Iterable[MemoryPoint] = (),
) -> list[MemoryPoint]:
    """The digests of ``scope`` from its episode summaries, without vectors: the period
    digests, oldest first, then the story (none without summaries), which keeps in mind the
    current ``facts`` of a :data:`KEPT` category. ``known`` (the stored digests by id) keeps
    a written text (an LLM's) whose basis has not changed. Deterministic: the same
    summaries, facts and digests give the same points."""
    known = known or {}
    current = sorted(
        (p for p in summaries if p.kind == "summary" and p.scope == scope and p.text),
        key=lambda p: (p.created_at_us, p.id),
    )
    groups: dict[int, list[MemoryPoint]] = defaultdict(list)
    for summary in current:
        groups[period_start(summary.created_at_us, policy.period_days)].append(summary)
    periods = [
        _kept(_period(scope, start, members, policy), known)
        for start, members in sorted(groups.items())
    ]
    if not periods:
        return []
    kept = kept_facts(scope, facts)
    story = _story(scope, periods[-policy.story_periods :], groups, kept)
    return [*periods, _kept(story, known)]


def kept_facts(scope: Scope, facts: Iterable[MemoryPoint]) -> list[MemoryPoint]:
    """The facts a story keeps in mind: the scope's current ones of a :data:`KEPT` category,
    each text once, the newest :data:`MAX_KEPT`, oldest first."""
    current = sorted(
        (
            f
            for f in facts
            if f.kind == "fact"
            and f.scope == scope
            and f.valid_to_us is None
            and f.attrs.get("category") in KEPT
        ),
        key=lambda f: (f.created_at_us, f.id),
    )
    by_text = {f.text.strip().rstrip(".").lower(): f for f in current}
    return sorted(by_text.values(), key=lambda f: (f.created_at_us, f.id))[-MAX_KEPT:]


def _kept(new: MemoryPoint, known: Mapping[str, MemoryPoint]) -> MemoryPoint:
    old = known.get(new.id)
    if old is None or old.attrs.get("basis") != new.attrs.get("basis"):
        return new
    if old.extractor == EXTRACTIVE:
        return new
    return replace(new, text=old.text, extractor=old.extractor)


def _period(
    scope: Scope, start: int, members: list[MemoryPoint], policy: DigestPolicy
) -> MemoryPoint:
    label = period_label(start, policy.period_days)
    head = f"{label} ({', '.join(speakers_of(members)) or 'no speaker named'}; "
    head += f"{plural(len(members), 'conversation')})."
    attrs = {
        "level": PERIOD,
        "period": _day(start).strftime("%Y-%m-%d"),
        "title": label,
        "from_us": members[0].created_at_us,
    }
    return overview(digest_id(scope, str(start)), KIND, head, members, EXTRACTIVE, attrs)


def overview(
    point_id: str,
    kind: str,
    head: str,
    members: list[MemoryPoint],
    extractor: str,
    attrs: Mapping[str, object],
) -> MemoryPoint:
    """A digest or thread of ``members`` (summaries, oldest first): ``head``, then the
    newest :data:`MAX_QUOTED` of them with their dates, citing what it quotes."""
    quoted = members[-MAX_QUOTED:]
    lines = [f"{event_date(m.created_at_us)}: {quote(gist(m.text))}" for m in quoted]
    if len(members) > len(quoted):
        lines.insert(0, f"({len(members) - len(quoted)} earlier not quoted.)")
    newest = members[-1]
    return MemoryPoint(
        id=point_id,
        kind=kind,
        text=" ".join([head, *lines]),
        scope=newest.scope,
        episode_id=newest.episode_id,
        session_id=newest.session_id,
        sources=merged_sources(quoted),
        created_at_us=newest.created_at_us,
        extractor=extractor,
        attrs={
            **attrs,
            "children": [m.id for m in members],
            "episodes": list(dict.fromkeys(m.episode_id for m in members)),
            "basis": basis(members),
        },
    )


def _story(
    scope: Scope,
    periods: list[MemoryPoint],
    groups: Mapping[int, list[MemoryPoint]],
    kept: Sequence[MemoryPoint] = (),
) -> MemoryPoint:
    first, newest = periods[0], periods[-1]
    speakers = list(dict.fromkeys(s for p in periods for s in speakers_of([p])))
    total = sum(len(groups[_start_of(p)]) for p in periods)
    span = f"{event_date(first.attrs['from_us'])} to {event_date(newest.created_at_us)}"
    head = (
        f"The story so far ({span}; {', '.join(speakers) or 'no speaker named'}; "
        f"{plural(total, 'conversation')})."
    )
    lines = []
    cited: list[Source] = []  # what it quotes: the first message of each summary it quotes
    if kept:
        said = " ".join(f.text.strip().rstrip(".") + "." for f in kept)
        lines.append(f"To keep in mind: {said}")
        cited += [s for f in kept for s in f.sources[:1]]
    for period in periods:
        children = groups[_start_of(period)][-3:]
        if period.extractor != EXTRACTIVE:  # an LLM's digest: its own first sentence
            body = first_sentence(period.text)
            cited += merged_sources([period])
        else:
            body = " ".join(first_sentence(c.text) for c in children)
            cited += [replace(c.sources[0], text="") for c in children if c.sources]
        lines.append(f"{period.attrs['title']}: {body}")
    return MemoryPoint(
        id=digest_id(scope, STORY),
        kind=KIND,
        text=" ".join([head, *lines]),
        scope=scope,
        episode_id=newest.episode_id,
        session_id=newest.session_id,
        sources=list({(s.session_id, s.seq): s for s in cited}.values()),
        created_at_us=newest.created_at_us,
        extractor=EXTRACTIVE,
        attrs={
            "level": STORY,
            "title": "The story so far",
            "children": [p.id for p in periods],
            "episodes": [e for p in periods for e in p.attrs["episodes"]],
            "basis": basis([*periods, *kept]),
            **({"kept": [f.id for f in kept]} if kept else {}),
        },
    )


def _start_of(period: MemoryPoint) -> int:
    when = datetime.strptime(str(period.attrs["period"]), "%Y-%m-%d").replace(tzinfo=UTC)
    return (when - datetime(1970, 1, 1, tzinfo=UTC)).days
