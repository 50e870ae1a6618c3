"""A fact's category: what kind of statement it is, for the recall recipe's importance
weights (``recall.importance_weights``). The weaver stores it in the fact's attributes
(``attrs["category"]``) whichever extractor wrote the fact.

- ``correction``: the fact sets something straight ("actually", "no longer", "not X but Y",
  "changed her mind");
- ``instruction``: a standing request of how things should be done ("always", "never",
  "from now on", "make sure to");
- ``preference``: a like, a dislike or a favourite ("loves", "prefers", "can't stand");
- none (``""``): a plain fact.

The first that matches wins, in that order. The cues are English phrases; a fact in another
language is plain.
"""

from __future__ import annotations

import re

CATEGORIES = ("preference", "instruction", "correction")

_CORRECTION = re.compile(
    r"\b(?:actually|correction|i meant|(?:is|was|are|were) not \w+(?: \w+)? but|no longer"
    r"|not any ?more|\w+n't \w+(?: \w+)? any ?more|changed (?:his|her|their|my|our) minds?"
    r"|instead of|turns? out|turned out|mistaken|misremembered|to clarify)\b",
    re.IGNORECASE,
)
_INSTRUCTION = re.compile(
    r"\b(?:from now on|going forward|make sure to|remember to|please (?:always|never|do|don't)"
    r"|(?:always|never) (?:use|answer|reply|respond|write|call|send|include|format|book|"
    r"schedule|add|cc|sign|address|mention|ask|remind|check))\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:loves?|loved|loving|likes|liked|enjoys?|enjoyed|enjoying|prefers?|preferred"
    r"|favou?rites?|hates?|hated|dislikes?|disliked|can't stand|cannot stand|(?:is|are|was"
    r"|were) (?:a )?(?:big |huge )?fans? of|passionate about|(?:is|are) into|allergic to)\b",
    re.IGNORECASE,
)


def categorize(text: str) -> str:
    """The category of a fact's sentence, or "" for a plain fact."""
    if _CORRECTION.search(text):
        return "correction"
    if _INSTRUCTION.search(text):
        return "instruction"
    if _PREFERENCE.search(text):
        return "preference"
    return ""
