"""First- and second-person references of a speaker's sentence rewritten as names.

"I"/"my"/"you"/"we" become names (with the verb agreeing: "I love" -> "Caroline loves"), so
that a fact stands alone. "you" is resolved only when the episode has exactly two speakers
(else such sentences are dropped by the local extractor, :mod:`weaver.extractors.local`).
"we"/"us" is "Caroline and Melanie" when the sentence says so ("we should", "let's", "since we
last talked", "both of us"); otherwise "Caroline and others", and "our" is "Caroline's", since
in chats "we" is mostly the speaker's family or friends. Quoted text stays as written. Third
persons (he/she) are :mod:`weaver.extractors.pronouns`.
"""

from __future__ import annotations

import re

from weaver.extractors.rules import word_set

_ROLES = frozenset({"user", "assistant", "system", "tool", "human", "ai", "model"})
_PLURAL_BEFORE = re.compile(r"(?:\b[A-Z][a-z]+|'s [a-z]+|\bfriends?|\bfamily) (?:and|or|&) $")
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[^A-Za-z]+")
SECOND_PERSON = re.compile(
    r"\b(?:you|you're|you've|you'll|you'd|your|yours|yourself|yourselves|ya|u|y'all)\b", re.I
)
_JOINT = re.compile(
    r"\b(?:let's|we both|both of us|each other|you and (?:i|me)|me and you|you guys and|"
    r"we (?:should|could|can|must|need to|ought to|have to|'ll have to|gotta)|"
    r"(?:since|when) we (?:last )?(?:chatted|talked|spoke|met|caught up|hung out)|"
    r"we last (?:chatted|talked|spoke|met|caught up|hung out)|"
    r"our (?:chats?|talks?|conversations?|friendship))\b",
    re.I,
)
_ADVERBS = word_set(
    "also really just always never still usually often sometimes totally definitely actually "
    "absolutely truly recently finally even already only kinda sorta personally mostly "
    "generally rarely seriously honestly certainly probably currently now simply def "
    "genuinely especially literally both all once first too so"
)
_LY_VERBS = word_set("apply reply rely supply fly multiply imply comply ally bully tally")
_ED_VERBS = word_set("need feed bleed breed succeed proceed exceed speed embed")
_PAST = word_set(
    "was were went saw got made took thought felt found knew gave came became began bought "
    "brought caught taught told said heard held kept left lost met paid ran sat sent spent "
    "stood won wrote drove ate drank swam sang spoke chose broke forgot grew threw flew fell "
    "wore woke rode built learnt meant slept understood did had could would should might must "
    "may can will shall cannot can't couldn't won't wouldn't shouldn't didn't wasn't weren't "
    "mustn't read put set hit cut let quit hurt cost spread bet burst shut split began dug "
    "fought hung led lit sold shot shook sought stuck struck swore swept swung tore wept "
    "wound used gotten been done gone seen taken given known shown grown drawn drew"
)
_THIRD = {"am": "is", "are": "is", "have": "has", "haven't": "hasn't", "do": "does",
          "don't": "doesn't", "go": "goes", "were": "was", "aren't": "isn't",
          "weren't": "wasn't", "ain't": "isn't", "wanna": "wants to", "gotta": "has to",
          "'m": "is", "gonna": "is gonna"}  # fmt: skip
_COMMON_VERBS = word_set(
    "love like enjoy want need know think feel make go get say see look seem live work have "
    "take do play paint write run try keep help hope plan mean deserve inspire care bring "
    "find show give put believe remember understand teach learn study use spend sound create "
    "share support stay start continue listen watch travel visit volunteer cook bake dance "
    "sing swim hike practice collect own prefer hate miss wish worry agree always never "
    "should"
)
_OBJ_BEFORE = word_set(
    "make made makes let lets help helps helped helping see saw watch want wants wanted hear "
    "heard got get tell told ask asked thank love loved need needs for to with at from about "
    "by of on in like than as give gave show showed taught teach bring brought remind reminds "
    "reminded inspire inspires inspired encourage encouraged"
)


def display(speaker: str) -> str:
    """How a speaker is named in a fact: a role ("user") as "the user", a name as it is."""
    return f"the {speaker.lower()}" if speaker.lower() in _ROLES else speaker


def _third(verb: str) -> str:
    low = verb.lower()
    if low in _THIRD:
        return _THIRD[low]
    past_ed = low.endswith("ed") and low not in _ED_VERBS
    if low in _PAST or past_ed or low.endswith("n't") or not low.replace("'", "").isalpha():
        return verb
    if re.search(r"(?:s|sh|ch|x|z|o)$", low):
        return verb + "es"
    if re.search(r"[^aeiou]y$", low):
        return verb[:-1] + "ies"
    return verb + "s"


class SpeakerResolver:
    """Rewrites first- and second-person references of one turn's sentences as names."""

    def __init__(self, speaker: str, speakers: list[str]) -> None:
        self.me = display(speaker)
        others = [s for s in speakers if s != speaker]
        self.you = display(others[0]) if len(speakers) == 2 and others else None
        self.both = f"{self.me} and {self.you}" if self.you else None

    def resolvable(self, sentence: str) -> bool:
        return self.you is not None or not SECOND_PERSON.search(sentence)

    def __call__(self, sentence: str) -> str:
        parts = re.split(r'("[^"]*")', sentence)  # quoted text stays as written
        return "".join(p if i % 2 else self._resolve(p) for i, p in enumerate(parts))

    def _resolve(self, sentence: str) -> str:
        group = self.both if self.both and _JOINT.search(sentence) else f"{self.me} and others"
        group_poss = f"{group}'s" if group == self.both else f"{self.me}'s"
        tokens = _WORD.findall(sentence)
        out: list[str] = []
        conj: str | None = None  # "i": the next verb agrees with a name; "you": only known verbs
        for i, tok in enumerate(tokens):
            if not tok[0].isalpha():
                if tok.strip():
                    conj = None
                out.append(tok)
                continue
            low = tok.lower()
            if conj and (low in _ADVERBS or (low.endswith("ly") and low not in _LY_VERBS)):
                out.append(tok)
                continue
            if conj:
                known = low in _THIRD or low in _COMMON_VERBS
                out.append(_third(tok) if conj == "i" or known else tok)
                conj = None
                continue
            nxt = tokens[i + 2].lower() if i + 2 < len(tokens) and tokens[i + 1] == " " else ""
            prev = tokens[i - 2].lower() if i >= 2 and tokens[i - 1] == " " else ""
            had = "had" if nxt in ("been", "never", "already", "just", "done", "seen") else "would"
            rep: str | None = None
            if low == "i":  # "Mel and I love": no agreement with a plural subject
                plural = _PLURAL_BEFORE.search("".join(out))
                rep, conj = self.me, None if plural else "i"
            elif low in ("i'm", "im"):
                rep = f"{self.me} is"
            elif low == "i've":
                rep = f"{self.me} has"
            elif low == "i'll":
                rep = f"{self.me} will"
            elif low == "i'd":
                rep = f"{self.me} {had}"
            elif low == "me":
                rep = self.me
            elif low == "myself":  # "I painted it myself": the name is there already
                rep = "themself" if self.me in "".join(out) else self.me
            elif low in ("my", "mine"):
                rep = f"{self.me}'s"
            elif low in ("we", "us", "ourselves"):
                rep = group
            elif low in ("we're", "we've", "we'll", "we'd"):
                verb = {"re": "are", "ve": "have", "ll": "will", "d": had}[low.split("'")[1]]
                rep = f"{group} {verb}"
            elif low in ("our", "ours"):
                rep = group_poss
            elif low == "let's":
                rep = f"{group} plan to"
            elif self.you and low in ("you", "yourself", "ya", "u"):
                rep = self.you
                if low == "you" and prev not in _OBJ_BEFORE:
                    conj = "you"
            elif self.you and low in ("your", "yours"):
                rep = f"{self.you}'s"
            elif self.you and low in ("you're", "you've", "you'll", "you'd"):
                verb = {"re": "is", "ve": "has", "ll": "will", "d": had}[low.split("'")[1]]
                rep = f"{self.you} {verb}"
            out.append(tok if rep is None else rep)
        return "".join(out)
