"""Third-person pronouns resolved to the person the conversation last named.

"My sister Carol moved to Lyon. She works as a nurse there." makes the fact "Carol works as a
nurse there", not "She works ...". The local extractor keeps a :class:`ThirdPersons` per
episode: every sentence it reads is :meth:`~ThirdPersons.observe`-d for names, and each new
sentence is :meth:`~ThirdPersons.resolve`-d first.

Conservative by design (a wrong name is worse than a pronoun):

- only "he" and "she" that start a sentence or a clause (after a comma, "and", "but", "so",
  "because"), and "his" and "her" that start a sentence or follow a comma; "they" and "it"
  stay as written;
- a name is a capitalised word that is not a speaker (they say "I" and "you"), not the
  sentence's first word (unless a kinship word or "named"/"called" introduces it), not after
  a preposition or an article (a place or a thing: "in Lyon"), not a month, weekday or other
  common capitalised word;
- "my grandma" with no name after it is a person too ("Caroline's grandma");
- the gender comes from a kinship word before the name ("my sister Carol": she), else from the
  pronoun that follows the name once; a pronoun takes the last person of its gender, or the last
  person of unknown gender;
- a name is forgotten after ``window`` turns without a mention.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass

_FEMALE = (
    "sister|mom|mum|mother|wife|daughter|girlfriend|aunt|grandma|grandmother|niece|"
    "girl|lady|woman|fiancee|stepmom|stepmother|granddaughter"
)
_MALE = (
    "brother|dad|father|husband|son|boyfriend|uncle|grandpa|grandfather|nephew|boy|guy|man|"
    "fiance|stepdad|stepfather|grandson"
)
_KIN = re.compile(
    rf"\b(?:(?P<f>{_FEMALE})|(?P<m>{_MALE})|friend|cousin|colleague|coworker|boss|neighbou?r|"
    r"partner|named|called)\s+(?P<name>[A-Z][a-z]+)\b"
)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}(?:\s+[A-Z][a-z]+)*\b")
# A capitalised word after one of these is a place or a thing, not a person.
_PLACE_BEFORE = re.compile(
    r"\b(?:(?:in|at|to|from|near|into|around|visit(?:ed|ing)?|the|a|an|of|on)\s+|"
    r"(?:country|city|town|state|island|place|street|school|company),?\s+)$",
    re.IGNORECASE,
)
# "my grandma" (with no name after it) is a person too: "Caroline's grandma".
_MY_KIN = re.compile(rf"\b[Mm]y\s+(?:(?P<f>{_FEMALE})|(?P<m>{_MALE}))\b(?!\s+[A-Z])")
_COMMON_CAPITALISED = """
the this that these those there then what when where which who why how hey hi hello thanks
thank yes yeah wow oh okay god christmas easter halloween thanksgiving english french spanish
german italian chinese japanese american european internet instagram facebook youtube google
netflix covid lgbtq lgbt pride mr mrs ms dr
"""
_NOT_NAMES = frozenset(
    {m.lower() for m in calendar.month_name if m}
    | {d.lower() for d in calendar.day_name}
    | set(_COMMON_CAPITALISED.split())
)
# Subjects start a sentence or a clause; a possessive only a sentence or a comma's clause
# ("a girl and her family" joins two nouns: "her" is left alone there).
_SUBJECT = re.compile(
    r"(?P<lead>^|[,;]\s+|\b(?:and|but|so|because|since|when)\s+)(?P<pron>[Hh]e|[Ss]he)"
    r"(?P<tail>\s+[a-z])|(?P<plead>^|[,;]\s+)(?P<poss>[Hh]is|[Hh]er)(?P<ptail>\s+(?!own\b)[a-z])"
)


_KIN_WORDS = frozenset(_FEMALE.split("|") + _MALE.split("|"))


@dataclass(slots=True)
class _Person:
    name: str
    gender: str  # "f", "m" or "" (unknown)
    turn: int  # the turn index of the last mention


class ThirdPersons:
    """The people a conversation names, for resolving he/she/his/her (see the module doc)."""

    def __init__(self, speakers: list[str], window: int = 3) -> None:
        self._speakers = {s.lower() for s in speakers} | {
            w.lower() for s in speakers for w in s.split()
        }
        self._people: dict[str, _Person] = {}
        self._turn = 0
        self._speaker = ""
        self.window = window

    def next_turn(self, speaker: str = "") -> None:
        self._turn += 1
        self._speaker = speaker

    def observe(self, sentence: str) -> None:
        """Remember the people ``sentence`` names (the last one named counts most)."""
        if self._speaker:
            for match in _MY_KIN.finditer(sentence):
                kin = (match.group("f") or match.group("m")).lower()
                self._remember(f"{self._speaker}'s {kin}", "f" if match.group("f") else "m")
        for match in _KIN.finditer(sentence):
            gender = "f" if match.group("f") else "m" if match.group("m") else ""
            self._remember(match.group("name"), gender)
        for match in _NAME.finditer(sentence):
            if _PLACE_BEFORE.search(sentence[: match.start()]):
                continue
            self._remember(match.group(), "")
            after = sentence[match.end() : match.end() + 12].lower()
            person = self._people.get(match.group().lower())
            if person is not None and not person.gender:
                if re.match(r"\W+(?:she|her)\b", after):
                    person.gender = "f"
                elif re.match(r"\W+(?:he|his|him)\b", after):
                    person.gender = "m"

    def _remember(self, name: str, gender: str) -> None:
        key = name.lower()
        if key in _NOT_NAMES or key in self._speakers or key in _KIN_WORDS:
            return
        person = self._people.pop(key, None) or _Person(name, gender, self._turn)
        person.turn = self._turn
        person.gender = gender or person.gender
        self._people[key] = person  # re-inserted: the last one named is last

    def names(self) -> set[str]:
        """The people named within the window, lower-cased (a sentence about one of them is
        about someone, like a sentence about a speaker)."""
        return {key for key, p in self._people.items() if self._turn - p.turn <= self.window}

    def referent(self, pronoun: str) -> str | None:
        """The name "he"/"his" or "she"/"her" stands for, if one is clear."""
        gender = "m" if pronoun.lower() in ("he", "his") else "f"
        recent = [p for p in self._people.values() if self._turn - p.turn <= self.window]
        for person in reversed(recent):
            if person.gender == gender:
                return person.name
        unknown = [p for p in recent if not p.gender]
        return unknown[-1].name if unknown else None

    def resolve(self, sentence: str) -> str:
        """``sentence`` with its clause-initial he/she/his/her replaced by names."""

        def swap(match: re.Match[str]) -> str:
            possessive = match.group("poss") is not None
            low = (match.group("poss") if possessive else match.group("pron")).lower()
            self.observe(sentence[: match.start()])  # "my brother Tom got a job, he is ..."
            name = self.referent(low)
            if name is None:
                return match.group()
            if possessive:
                return match.group("plead") + f"{name}'s" + match.group("ptail")
            return match.group("lead") + name + match.group("tail")

        return _SUBJECT.sub(swap, sentence)
