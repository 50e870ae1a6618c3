"""The current truth: when two of the best hits state different values of the same kind, the
newer one is the update, and a question about the present gets it first.

A memory that changes a value an earlier one stated (a budget raised, a move to another city,
a new manager, a deadline pushed) often shares few words with the question, and the earlier
statement is the plainer match. Nothing here depends on how an update is worded: it reads
only what every statement of a value has, the value itself, and when it was said.

- **Values** (:func:`values`): amounts of money, other numbers, dates (a month and a day),
  weekdays, and names (capitalised words that do not start a sentence).
- **Rivals**: two hits of the same speaker, each a statement (:data:`STATEMENTS`: a turn,
  a chunk, a fact or a document) and not a question, each holding a value of one
  kind (a date and a date, a name and a name) that the other does not hold.
- **Newer first**: a question about the present (:func:`asks_about_past` says no) moves a
  rival among the best :attr:`Recipe.updates_depth` hits right above the older rival it
  follows, when that one is among the best :attr:`Recipe.updates_top`. The older hit is shown
  as replaced (``valid_to`` the newer one's time, ``attrs["replaced_by"]`` its id) and the
  newer one names it (``attrs["replaces"]``). Only the order of the hits already found
  changes: R@k at ``updates_depth`` and beyond never moves.
- Only a question about the present (:func:`asks_about_present`) is reordered: not about
  the past, and not about a speaker of the scope by name unless in the first or second
  person or with a cue such as "now". A question
  about the past ("before", "used to", "originally", a past tense, or a time range) keeps
  the order: the earlier value is what it asks for.

A pure function over the engine's top hits; the policy (on or off, both depths) is the
recipe's. GetNode shows a memory's chain (:func:`chain`): what it replaces and what replaced
it, the facts the weaver closed (stored ``replaced_by``) and the statements of its kind and
speaker nearest to it that hold a rival value (compared as above, without a question).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

import numpy as np

from recall import Candidate, Query
from recall.cues.speakers import mentioned
from tiers.semantic.vectors import MemoryPoint, PointFilter, VectorStore

__all__ = [
    "asks_about_past",
    "asks_about_present",
    "chain",
    "current_first",
    "newer_first",
    "values",
]

# Of rival pairs (older, newer), the ids of those about the same thing.
Related = Callable[[Sequence[tuple[Candidate, Candidate]]], Collection[tuple[str, str]]]
# The kinds that state something once; a summary, a profile, a digest or a thread gathers
# many statements (and their values) and is never taken for an update or a replaced value.
STATEMENTS = frozenset({"episode_turn", "episode_chunk", "fact", "document"})


_PERSON = re.compile(r"\b(?:i|i'm|i've|me|my|mine|we|we're|us|our|ours|you|your|yours)\b", re.I)
_NOW = re.compile(
    r"\b(?:now|currently|current|these days|at the moment|at present|still|anymore|any more|"
    r"latest|nowadays)\b",
    re.I,
)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_MONTHS = _words(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_WEEKDAYS = _words("monday tuesday wednesday thursday friday saturday sunday")
_MONEY = re.compile(
    r"[$€£¥]\s?\d[\d,.]*\s?[kKmM]?\b|\b\d[\d,.]*\s?(?:dollars|euros|pounds|usd|eur|gbp)\b", re.I
)
_DATE = re.compile(
    rf"\b(?:{'|'.join(_MONTHS)})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{'|'.join(_MONTHS)})\b"
    r"|\b\d{4}-\d{2}-\d{2}\b",
    re.I,
)
_WEEKDAY = re.compile(rf"\b(?:{'|'.join(_WEEKDAYS)})s?\b", re.I)
_NUMBER = re.compile(r"\b\d[\d,.]*\b")
_NAME = re.compile(r"\b[A-Z][\w'-]*(?:\.?\s+[A-Z0-9][\w'-]*)*")
_SENTENCE = re.compile(r"(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<=[.!?])\s+")
_SPEAKER = re.compile(r"^[^:\n]{1,60}:\s+")
# After a capitalised word starting a sentence, a verb of the third person singular in -s:
# the word is the subject, most often a name ("Helen runs our team", "Hooli pays my salary").
# Not "is", "was" or "has", which follow any noun as often ("Rent is $900").
_SUBJECT_VERB = re.compile(r"\s+(?!(?:was|has|does|goes|seems|looks|feels)\b)[a-z]+[^\Wsu]s\b")
# Capitalised words that name no value.
_NOT_NAMES = frozenset(
    (
        *_words("i i'm i've i'll i'd ok okay dr mr mrs ms the a an my our we you it this that"),
        *_words("he she they his her their its there here what who how when where why which"),
        *_words("everything everyone something someone nothing nobody each every one"),
        *_words("today tomorrow yesterday"),
        *_MONTHS,
        *_WEEKDAYS,
    )
)
_PAST = re.compile(
    r"\b(?:did|was|were|had|before|used to|originally|original|previous|previously|former|"
    r"formerly|earlier|initially|at first|back then|ago)\b",
    re.I,
)


def values(text: str) -> dict[str, frozenset[str]]:
    """The values a statement holds, by kind: ``money``, ``date``, ``weekday``, ``number``,
    ``name`` (lower-cased; a number inside an amount or a date is not counted again)."""
    body = _SPEAKER.sub("", text, count=1)
    found: dict[str, set[str]] = {}

    def take(kind: str, pattern: re.Pattern[str], s: str) -> str:
        for m in pattern.finditer(s):
            found.setdefault(kind, set()).add(re.sub(r"\W+", " ", m.group(0).lower()).strip())
        return pattern.sub(" ", s)

    rest = take("money", _MONEY, body)
    rest = take("date", _DATE, rest)
    rest = take("weekday", _WEEKDAY, rest)
    rest = take("number", _NUMBER, rest)
    for sentence in _SENTENCE.split(rest):
        for m in _NAME.finditer(sentence.strip()):
            words = [w for w in m.group(0).split() if w.lower().strip("'.") not in _NOT_NAMES]
            alone = m.start() == 0 and len(words) == 1 and len(m.group(0).split()) == 1
            if alone and not _SUBJECT_VERB.match(sentence.strip(), m.end()):
                continue  # one capitalised word starting a sentence: any word, unless a subject
            if words:
                found.setdefault("name", set()).add(" ".join(words).lower())
    return {k: frozenset(v) for k, v in found.items()}


def asks_about_past(query: str) -> bool:
    """Whether a question asks about an earlier state ("Where did I live before?")."""
    return bool(_PAST.search(query))


def asks_about_present(query: str, speakers: Collection[str] = ()) -> bool:
    """Whether a question asks for a current state: not about the past, and not about one of
    the scope's ``speakers`` by name unless it is asked in the first or second person or with
    a cue of the present ("now", "currently"). "What is Caroline's job?" asked of a
    conversation between Caroline and Melanie often means what was said at some time, which
    the plain order answers; "Where do I live?" or "What is the budget?" asks for now."""
    if asks_about_past(query):
        return False
    return not mentioned(query, speakers) or bool(_PERSON.search(query) or _NOW.search(query))


def _speaker(c: Candidate) -> str:
    return _speaker_of(c.point)


def _rivals(older: dict[str, frozenset[str]], newer: dict[str, frozenset[str]]) -> bool:
    return any(newer[k] - older[k] and older[k] - newer[k] for k in older.keys() & newer.keys())


def current_first(
    hits: Sequence[Candidate],
    query: Query,
    query_vector: Sequence[float],
    vectors: VectorStore,
    speakers: Collection[str] = (),
) -> list[Candidate]:
    """The engine's stage: :func:`newer_first` with the query's recipe, a question with a
    time range taken as one about the past, and rivals related as :func:`related_by` says
    (the stored vectors of the rival hits read in one call, none when there are no rivals)."""
    recipe = query.recipe
    ranged = query.start_us is not None or query.end_us is not None
    if ranged or not recipe.updates_top or not asks_about_present(query.text, speakers):
        return list(hits)
    return newer_first(
        hits,
        query.text,
        top=recipe.updates_top,
        depth=recipe.updates_depth,
        past=False,
        related=related_by(
            query_vector,
            lambda ids: vectors.dense(ids, query.scope.user_id),
            recipe.updates_relevance,
            recipe.updates_similarity,
        ),
    )


def related_by(
    query_vector: Sequence[float],
    dense: Callable[[list[str]], dict[str, list[float]]],
    relevance: float,
    similarity: float,
) -> Related:
    """Which rival pairs (older, newer) are about the same thing: the newer one answers the
    query nearly as well (its cosine to the query at least ``relevance`` times the older
    one's), or says something close to it (their cosine at least ``similarity``). The
    vectors of every point in the pairs are read in one ``dense`` call: stored vectors are
    read from disk at random (at 1M points with the page cache dropped, two took 3.4 ms at
    p50 and ten 10.1 ms; 2026-12-01), and from a store in a process of its own each call is a
    trip, so one call costs less than a call per pair. A point without one (staged, not
    embedded yet) is related to none."""

    def unit(v: Sequence[float]) -> np.ndarray:
        a = np.asarray(v, dtype=np.float32)
        n = float(np.linalg.norm(a))
        return a / n if n else a

    qn = unit(query_vector)

    def related(pairs: Sequence[tuple[Candidate, Candidate]]) -> set[tuple[str, str]]:
        ids = list(dict.fromkeys(c.point.id for pair in pairs for c in pair))
        read = dense(ids) if ids else {}
        found = {i: unit(v) for i, v in read.items()}
        kept = set()
        for older, newer in pairs:
            a, b = found.get(older.point.id), found.get(newer.point.id)
            if a is None or b is None:
                continue
            if float(qn @ b) >= relevance * float(qn @ a) or float(a @ b) >= similarity:
                kept.add((older.point.id, newer.point.id))
        return kept

    return related


def newer_first(
    hits: Sequence[Candidate],
    query: str,
    *,
    top: int,
    depth: int,
    past: bool | None = None,
    related: Related | None = None,
) -> list[Candidate]:
    """``hits`` (best first) with each newer rival among the first ``depth`` moved right
    above the older rival it follows among the first ``top`` (see the module's docstring),
    when ``related`` (if given) says the two are about the same thing; the hits unchanged
    for a question about the past. ``related`` is asked once, when the first pair of rivals
    is met, about every pair that could be met (one read of their vectors, not one a pair)."""
    out = list(hits)
    if (not asks_about_present(query) if past is None else past) or len(out) < 2:
        return out
    window = out[:depth]
    held = [_statement(c.point) for c in window]
    pairs = [
        (older, newer)
        for older, older_values in zip(window, held, strict=True)
        for newer, newer_values in zip(window, held, strict=True)
        if older_values
        and newer_values
        and older.point.created_at_us < newer.point.created_at_us
        and _speaker(older) == _speaker(newer)
        and _rivals(older_values, newer_values)
    ]
    # An older one is among the first ``top`` when it is there now or moves up, right above an
    # older one among them: only those pairs can be asked about.
    reach = {c.point.id for c in window[:top]}
    while grown := {b.point.id for a, b in pairs if a.point.id in reach} - reach:
        reach |= grown
    pairs = [(a, b) for a, b in pairs if a.point.id in reach]
    rivals = {(a.point.id, b.point.id) for a, b in pairs}
    kept: Collection[tuple[str, str]] | None = None  # asked once, when first needed
    moved: set[str] = set()
    for j in range(1, len(window)):
        newer = window[j]
        if newer.point.id in moved:
            continue
        for i in range(min(j, top)):
            older = window[i]
            if (older.point.id, newer.point.id) not in rivals:
                continue
            if kept is None:
                kept = rivals if related is None else related(pairs)
            if (older.point.id, newer.point.id) in kept:
                window.insert(i, window.pop(j))
                _mark(older, newer)
                moved.add(newer.point.id)
                break
    return window + out[depth:]


def _statement(point: MemoryPoint) -> dict[str, frozenset[str]] | None:
    """The values a statement holds (None for another kind, or a question)."""
    if point.kind not in STATEMENTS or point.text.rstrip().endswith("?"):
        return None
    return values(point.text)


def chain(
    point: MemoryPoint, vectors: VectorStore, *, depth: int = 10, similarity: float = 0.5
) -> tuple[list[MemoryPoint], list[MemoryPoint]]:
    """The memories ``point`` replaces (newest first) and those that replace it (oldest
    first), of its scope: the facts closed with ``replaced_by`` it and the fact that closed
    it (stored by the weaver), and among the ``depth`` statements of its kind nearest to it
    those of the same speaker holding a rival value whose cosine to it is at least
    ``similarity`` (what :func:`newer_first` compares). A point not embedded yet has only its
    stored links."""
    user = point.scope.user_id
    scope = PointFilter(user_id=user, agent_id=point.scope.agent_id)
    older: dict[str, MemoryPoint] = {}
    newer: dict[str, MemoryPoint] = {}
    stored = replace(scope, replaced_by=(point.id,))
    for p in vectors.scroll(stored, limit=max(1, vectors.count(stored))):
        older[p.id] = p
    if point.replaced_by:
        for p in vectors.get([point.replaced_by], user):
            newer[p.id] = p
    mine = _statement(point)
    vector = vectors.dense([point.id], user).get(point.id) if mine else None
    if mine and vector is not None:
        near = replace(scope, kinds=(point.kind,))  # a turn's rivals are turns, and so on
        for hit in vectors.search_dense(vector, near, depth + 1):
            other = hit.point
            theirs = _statement(other)
            if other.id == point.id or hit.score < similarity or not theirs:
                continue
            if _speaker_of(other) != _speaker_of(point):
                continue
            if other.created_at_us < point.created_at_us and _rivals(theirs, mine):
                older.setdefault(other.id, other)
            elif other.created_at_us > point.created_at_us and _rivals(mine, theirs):
                newer.setdefault(other.id, other)
    by_time = sorted(older.values(), key=lambda p: (p.created_at_us, p.id), reverse=True)
    return by_time, sorted(newer.values(), key=lambda p: (p.created_at_us, p.id))


def _speaker_of(point: MemoryPoint) -> str:
    return point.sources[0].speaker if point.sources else ""


def _mark(older: Candidate, newer: Candidate) -> None:
    """Show the older hit as replaced by the newer one (in this answer; nothing stored)."""
    if older.point.valid_to_us is None:
        older.point = replace(
            older.point, valid_to_us=newer.point.created_at_us, replaced_by=newer.point.id
        )
    newer.point = replace(newer.point, attrs={**newer.point.attrs, "replaces": older.point.id})
