"""A query without the names of its scope's speakers: the speaker-neutral query.

A turn is indexed as ``Speaker: text``, so a question that names a speaker matches every turn
that speaker said, by that name, in the keyword and the dense channel alike. When the
question is right about who, that adds little (a conversation has few speakers, each with
many turns); when it names the wrong one, as a mistaken or adversarial question does ("What
did Caroline realise after her charity race?" when Melanie ran it), it ranks the wrong
speaker's turns first. The engine therefore also searches the query with those names taken
out, and fuses both (``Recipe.speaker_neutral``); the graph channel still seeds from the
names as asked. A speaker named like a common word ("Will", "May") takes that word out of the
neutral query too (matching is by whole word, case aside); the query as asked still runs.
"""

from __future__ import annotations

import re
from collections.abc import Collection

# Roles stand in for a speaker without a name (weaver.episodes: name, else role); they are
# ordinary words in a query ("the user interface"), never taken out.
ROLES = frozenset({"user", "assistant", "system", "tool"})
_SPACE = re.compile(r"\s+")


def mentioned(text: str, speakers: Collection[str]) -> frozenset[str]:
    """The ``speakers`` (normalized names; roles never count) that ``text`` names, by whole
    word, case aside."""
    pattern = _pattern(speakers)
    if pattern is None:
        return frozenset()
    found = (_possessive(m.group()) for m in pattern.finditer(text))
    return frozenset(f.lower() for f in found)


def without_speakers(text: str, speakers: Collection[str]) -> str | None:
    """``text`` without the whole-word mentions of ``speakers`` (normalized names, as the
    graph keys them: lower case; a possessive ``'s`` goes with the name), or None when it
    names none of them or nothing else is left."""
    pattern = _pattern(speakers)
    if pattern is None:
        return None
    stripped, count = pattern.subn(" ", text)
    stripped = _SPACE.sub(" ", stripped).strip()
    if not count or not re.search(r"\w", stripped):
        return None
    return stripped


def _pattern(speakers: Collection[str]) -> re.Pattern[str] | None:
    """A whole-word match of any of ``speakers`` but roles (longest first), a possessive with
    it; None when there is none."""
    names = sorted((s for s in speakers if s and s not in ROLES), key=len, reverse=True)
    if not names:
        return None
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"\b(?:{alternatives})(?:['\u2019]s)?\b", re.IGNORECASE)


def _possessive(word: str) -> str:
    """A name as matched, without its possessive ``'s``."""
    return re.sub(r"['\u2019]s$", "", word)
