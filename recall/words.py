"""The words of queries and memories: tokens, crude stems, stop words, the n-grams of a
query that may name an entity (:func:`mentions`) and the names a memory mentions
(:func:`names`). Used by the graph channel to link queries and memories to entities, and by
provenance ordering to weigh a query's content words.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from tiers.semantic.graph import normalize

_TOKEN = re.compile(r"[\w'-]+")
_SENTENCE_END = re.compile(r"[.!?:;\n]")
# A token with what comes between it and the one before (tokens are maximal runs of _TOKEN).
_GAP_TOKEN = re.compile(r"([^\w'-]*)([\w'-]+)")
_STOP_WORDS = """
a about above after again all am an and any are as at be been before being below between
both but by can could did do does doing done down during each ever few for from get got
had has have having he her here hers herself him himself his how i if in into is it its
itself just know let me more most my myself no nor not now of off on once only or other
our ours ourselves out over own please remember same she should so some such tell than
that the their theirs them themselves then there these they this those through to too
under until up us very was we were what when where which while who whom why will with
would you your yours yourself yourselves
"""
_STOP = frozenset(_STOP_WORDS.split())
_SUFFIXES = ("ing", "ed", "s")


def _words(text: str) -> list[tuple[str, bool]]:
    """The words of ``text`` as written (curly apostrophes made straight), each with whether
    it starts a sentence."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    out = []
    end = 0
    starts = True
    for match in _TOKEN.finditer(text):
        starts = starts or any(c in ".!?:;\n" for c in text[end : match.start()])
        end = match.end()
        word = match.group().strip("'-")
        if word:
            out.append((word, starts))
            starts = False
    return out


def tokens(text: str) -> list[str]:
    return [w.lower() for w, _start in _words(text)]


def _unpossessive(token: str) -> str:
    if token.endswith("'s"):
        return token[:-2]
    return token.rstrip("'")


def stem(word: str) -> str:
    """A crude stem, enough to match "works" with "work" and "lives_in" with "live"."""
    word = _unpossessive(word)
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_stems(words: Iterable[str]) -> set[str]:
    stems = set()
    for word in words:
        root = stem(word)
        if root and root not in _STOP and _unpossessive(word) not in _STOP:
            stems.add(root)
    return stems


def content_words(text: str, among: Collection[str] | None = None) -> set[str]:
    """``content_stems(tokens(text))``, faster on a long text: each distinct word is stemmed
    once. With ``among``, only those of its stems (the same as intersecting the whole set with
    it, faster still: a stem is a prefix of its word, so only the words that start with one
    of them are stemmed)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").lower()
    words = {m.strip("'-") for m in set(_TOKEN.findall(text))}
    if among is None:
        return content_stems(w for w in words if w)
    prefixes = tuple(among)
    if not prefixes:
        return set()
    return content_stems(w for w in words if w and w.startswith(prefixes)) & set(prefixes)


def mentions(text: str, max_words: int = 4) -> list[tuple[int, int, str]]:
    """Candidate entity keys in ``text``: ``(first token, end token, normalized key)`` for
    every n-gram of 1..``max_words`` tokens, longest first; the last word of an n-gram is
    tried as written and without a possessive. A single stop word is left out unless it is
    capitalised inside the sentence ("What did Will say?")."""
    written = _words(text)
    tokens = [w.lower() for w, _start in written]
    out: list[tuple[int, int, str]] = []
    for n in range(min(max_words, len(tokens)), 0, -1):
        for i in range(len(tokens) - n + 1):
            words = tokens[i : i + n]
            last = _unpossessive(words[-1])
            if n == 1 and (not last or last in _STOP) and not _named(written, i):
                continue
            keys = dict.fromkeys(
                (normalize(" ".join(words)), normalize(" ".join([*words[:-1], last])))
            )
            out.extend((i, i + n, key) for key in keys if key)
    return out


def _named(written: list[tuple[str, bool]], i: int) -> bool:
    """Whether word ``i`` looks like a name: capitalised, not starting a sentence, not "I"."""
    word, starts = written[i]
    return not starts and len(word) > 1 and word[0].isupper()


def names(text: str) -> tuple[set[str], set[str]]:
    """The keys of the runs of capitalised words in ``text`` ("Street Fighter", "Nate's"): the
    runs inside a sentence (names), and the candidates from runs that start one: the run, its
    first word and the rest ("Hey Joanna" gives "hey joanna", "hey", "joanna"), for the caller
    to keep only those known as names. Stop words, "I", all-capital words and punctuation
    end a run; a possessive ends it after its word."""
    inside: set[str] = set()
    initial: set[str] = set()

    def close(run: list[str], starts: bool) -> None:
        if not run:
            return
        if not starts:
            inside.add(normalize(" ".join(run)))
            return
        initial.update(normalize(" ".join(part)) for part in (run, run[:1], run[1:]) if part)

    text = text.replace("\u2019", "'").replace("\u2018", "'")
    run: list[str] = []
    run_starts = False
    sentence = True
    # Most tokens are lower case, one space apart: they are let through with the fewest calls
    # (a big user's first Recall reads every memory's names).
    for gap, token in _GAP_TOKEN.findall(text):
        if not sentence and gap != " ":
            sentence = _SENTENCE_END.search(gap) is not None
        word = token.strip("'-")
        if run and (gap.strip() or not word):  # punctuation between words ends a run
            close(run, run_starts)
            run = []
        starts, sentence = sentence, False
        if not word:
            continue
        if (
            len(word) > 1
            and word[0].isupper()
            and not word.isupper()
            and _unpossessive(word.lower()).split("'")[0] not in _STOP  # "Here's", "I'm"
        ):
            if not run:
                run_starts = starts
            run.append(_unpossessive(word))
            if word.lower().endswith("'s"):
                close(run, run_starts)
                run = []
        elif run:
            close(run, run_starts)
            run = []
    close(run, run_starts)
    inside.discard("")
    initial.discard("")
    return inside, initial
