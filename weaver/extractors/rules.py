"""Pattern rules that read one (subject, predicate, object) triplet off a resolved sentence.

The sentence has already been rewritten by the local extractor: names instead of pronouns
("Caroline moved to Boston"), absolute dates. A rule is a regular expression over
``<Name> [adverbs] <verb phrase> <object>``, or ``<Name>'s <relation> [Name]``; the first rule
that matches with an acceptable object wins, and a sentence no rule matches has no triplet.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from weaver.extractors import Triplet


def word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NAME = r"[A-Z][a-z]+(?:[ -][A-Z][a-z]+)?"
_ROLE = r"[Tt]he (?:user|assistant|human|ai|model)"
_SUBJ = rf"(?P<subj>(?:{_ROLE}|{_NAME})(?: and (?:{_ROLE}|{_NAME}|others))?)"
_ADV = (
    r"(?: (?:also|really|now|still|currently|just|finally|recently|always|actually|absolutely|"
    r"truly|totally|definitely|usually|often|even|already|sometimes|mostly|never|originally|"
    r"officially|first|all))*"
)
_S = _ADV + " "
_NUMWORD = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|another|\d+)"
_PETS = (
    r"(?:dogs?|puppy|puppies|pupp?ers?|cats?|kittens?|kitty|pets?|parrots?|birds?|hamsters?|"
    r"rabbits?|bunny|bunnies|fish|horses?|turtles?|tortoises?|guinea pigs?|snakes?|lizards?)"
)
_KIDS = r"(?:kids?|children|child|sons?|daughters?|babies|baby|twins|boys?|girls?)"
_JOBS = (
    r"(?:teacher|nurse|doctor|counselor|counsellor|therapist|engineer|developer|programmer|"
    r"designer|artist|painter|writer|author|musician|singer|dancer|chef|cook|baker|lawyer|"
    r"accountant|manager|consultant|student|scientist|researcher|professor|firefighter|"
    r"officer|soldier|pilot|driver|mechanic|electrician|plumber|carpenter|photographer|"
    r"journalist|editor|architect|pharmacist|dentist|veterinarian|vet|social worker|coach|"
    r"trainer|athlete|player|entrepreneur|owner|analyst|intern|assistant|librarian|mentor|"
    r"activist|politician|blogger|streamer|gamer|youtuber|influencer|actor|actress|"
    r"filmmaker|producer|director|ceo|founder|clerk|cashier|waiter|waitress|barista|"
    r"bartender|farmer|gardener|hairdresser|stylist|sculptor|potter|poet|composer|dj|"
    r"volunteer|caregiver|babysitter|nanny|tutor|instructor|paramedic|surgeon)"
)
_DATE_WORDS = (
    r"January|February|March|April|May|June|July|August|September|October|November|December|"
    r"summer|spring|fall|winter"
)
# A full stop, not the one of a title ("Dr. Okafor" is one name).
_STOP = r"(?<!\bDr)(?<!\bMr)(?<!\bMs)(?<!\bMrs)(?<!\bSt)\."
# An object (noun phrase) ends at a clause boundary or a date phrase.
_NP_END = re.compile(
    r"(?:\s+(?:and (?:it|she|he|they|we|that|then|this|was|is|had|got|so|[A-Z]\w* (?:and|is|"
    r"was|has))|because|but|which|who|where|when|while|since|so|as|if|though|although|to|"
    r"with|during|on|at|in (?:\d+|the|" + _DATE_WORDS + r")|around|after|before|for|last|this|"
    r"next|yesterday|today|tomorrow|recently|lately|together|too|again|now|soon|every|once|"
    r"twice|often|sometimes|'cause|cause)\b|\s+[-\u2013\u2014]|[\u2013\u2014]|"
    r"\s*(?:[:;,!?(\[\"]|" + _STOP + r")).*$",
    re.DOTALL,
)
_VP_END = re.compile(
    r"(?:\s+(?:because|but|which|where|while|since|so that|so|though|although|on \d+|"
    r"in \d+|in the week|on the|around \d+|'cause|in (?:" + _DATE_WORDS + r"))\b|"
    r"\s+[-\u2013\u2014]|[\u2013\u2014]|\s*(?:[:;,!?(\[\"]|" + _STOP + r")).*$",
    re.DOTALL,
)
_VP_CUT = re.compile(r"\s+(?:to|and|so|that|when|with|for|if)\s")
_LEAD = re.compile(
    r"^(?:(?:a|an|the|some|another|this|these|those|new|also|just|really|all)\s+)+", re.I
)
_BAD_OBJECT = re.compile(
    r"^(?:it|that|this|them|those|these|you|him|her|us|me|what|how|when|where|why|who|"
    r"whatever|something|everything|anything|nothing|someone|everyone|lot|lots|bit|time|blast|"
    r"ton|way|chance|feeling|idea|point|thing|things|day|moment|one|more|much|so|such|like|"
    r"being|doing|getting|few|couple|bunch|great|good|hard|tough|fun|is|are|was|were|has|"
    r"have|had|on|in|at|around|often|sometimes|again|now|there|here|too|\d)\b",
    re.IGNORECASE,
)
_PRAISE = re.compile(
    r"(?:great|good|amazing|awesome|wonderful|talented|fantastic|incredible|natural|true|real|"
    r"total|such|born|brilliant|excellent|super|pretty|really|very|huge|big|fine|gifted|"
    r"terrific|fabulous|lovely|strong|inspiring|perfect|best|better)\b",
    re.I,
)
_NOT_SUBJECTS = word_set(
    "The This That These Those It Its There Here They He She We You I My Our Your His Her "
    "Their What Which Who When Where Why How And But So Also Just Yeah Yes No Oh Wow Thanks "
    "Thank Art Life Family Painting Music Being Having Everyone Someone Nobody Everything"
)

_Value = Callable[[re.Match[str]], str]


def _np(text: str, max_words: int = 6, cut_and: bool = False) -> str:
    text = _NP_END.sub("", text).strip()
    if cut_and:
        text = text.split(" and ")[0]
    text = _LEAD.sub("", text).strip(" '")
    return "" if len(text.split()) > max_words else text


def _noun(m: re.Match[str]) -> str:
    return _np(m.group("obj"))


def _job(m: re.Match[str]) -> str:
    """A job, not praise: "Caroline is a great painter" (said by a friend) is no job title."""
    return "" if _PRAISE.match(m.group("obj")) else _np(m.group("obj"))


def _place(m: re.Match[str]) -> str:
    return _np(m.group("obj"), cut_and=True)


def _phrase(text: str, max_words: int) -> str:
    """A verb phrase up to its clause boundary, shortened at a joint word when too long."""
    text = _VP_END.sub("", text).strip(" '")
    words = text.split()
    if len(words) > max_words:
        cut = _VP_CUT.search(text, len(" ".join(words[:2])))
        text = text[: cut.start()] if cut else ""
    return "" if len(text.split()) > max_words else text


def _activity(m: re.Match[str]) -> str:
    return _phrase(m.group("obj"), 6)


def _verb_phrase(m: re.Match[str]) -> str:
    text = _phrase(m.group("obj"), 8)
    if re.match(r"(?:the|a|an|[A-Z])\b", text):  # "is going to the beach"
        return "go to " + _LEAD.sub("", text)
    return text


def _gerund(verb: str) -> str:
    if verb.endswith("ie"):
        return verb[:-2] + "ying"
    if verb.endswith("e") and not verb.endswith(("ee", "ye", "oe")):
        return verb[:-1] + "ing"
    if re.fullmatch(r"[^aeiou]*[aeiou][bdglmnprt]", verb) and len(verb) <= 4:
        return verb + verb[-1] + "ing"  # swim -> swimming, run -> running
    return verb + "ing"


def _to_gerund(m: re.Match[str]) -> str:
    first, _, rest = m.group("obj").partition(" ")
    return _phrase(f"{_gerund(first)} {rest}".strip(), 6)


def _named(m: re.Match[str]) -> str:
    noun = re.sub(r"^(?:(?:a|an|the|another|new|little|\w+ly)\s+)+", "", m.group("what"))
    name = m.groupdict().get("name") or m.groupdict().get("name2")
    return f"{noun} named {name}" if name else noun


_REST = r"(?P<obj>[^.!?;]+)"
_GERUND = r"(?P<obj>\w+ing\b[^.!?;,]*)"
_PETNAME = (
    rf"(?P<what>(?:{_NUMWORD}|new) (?:\w+ ){{0,2}}?{_PETS})"
    rf"(?:,? (?:named|called) (?P<name>{_NAME})|, (?P<name2>{_NAME}),)?"
)
_RELATIVES = (
    r"husband|wife|partner|boyfriend|girlfriend|fiancée?|mom|mother|dad|father|sister|brother|"
    r"grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin"
)

# (predicate, verbs after the subject, object pattern, how to read the object)
_TABLE: list[tuple[str, str, str, _Value]] = [
    ("age", _S + "(?:is|turned|just turned|is turning) ", r"(?P<obj>\d{1,3}) years? old", _noun),
    ("age", _S + "(?:turned|just turned|is turning) ", r"(?P<obj>\d{1,3})\b", _noun),
    ("married_to", _S + "(?:is married to|got married to|married) ", rf"(?P<obj>{_NAME})\b", _noun),
    ("married_to", "'s (?:husband|wife|spouse),? ", rf"(?P<obj>{_NAME})\b", _noun),
    ("has_pet", _S + "(?:has|got|adopted|owns|is getting|bought|rescued) ", _PETNAME, _named),
    ("has_pet", "'s ", rf"(?P<what>{_PETS}),? (?:named |called )?(?P<name>{_NAME})\b", _named),
    ("has_child", _S + "(?:has|had) ", rf"(?P<obj>{_NUMWORD} (?:\w+ )?{_KIDS})\b", _noun),
    (
        "has_child",
        "'s ",
        rf"(?P<what>son|daughter|kid|child|baby),? (?:named )?(?P<name>{_NAME})\b",
        _named,
    ),
    (
        "lives_in",
        _S + "(?:lives|is living|has lived|has been living|resides|is based|settled) in ",
        _REST,
        _place,
    ),
    ("lives_in", _S + "(?:moved|relocated|has moved) (?:back )?to ", _REST, _place),
    ("lived_in", _S + "(?:lived|used to live) in ", _REST, _place),
    ("from", _S + "(?:is|was|comes|came|moved) (?:here |originally )?from ", _REST, _place),
    ("from", _S + "grew up in ", _REST, _place),
    (
        "job_title",
        _S + "(?:works|is working|started working|got a job) as (?:an? )?",
        _REST,
        _place,
    ),
    ("worked_as", _S + "(?:worked|has worked|used to work) as (?:an? )?", _REST, _place),
    (
        "works_at",
        _S + "(?:works|is working|started working|got a job|has a job|interns|is interning) "
        "(?:at|for) ",
        _REST,
        _place,
    ),
    ("worked_at", _S + "(?:worked|has worked|used to work) (?:at|for) ", _REST, _place),
    ("works_in", _S + "(?:works|is working|has worked|worked) in ", _REST, _place),
    (
        "volunteers_at",
        _S + "(?:volunteers|is volunteering|volunteered|has been volunteering) (?:at|for|with) ",
        _REST,
        _place,
    ),
    (
        "job_title",
        _S + "(?:is|became|has become) an? ",
        rf"(?P<obj>(?:[\w-]+ ){{0,2}}{_JOBS})\b",
        _job,
    ),
    (
        "studies",
        _S + "(?:studies|is studying|studied|majors in|is majoring in|majored in|is taking "
        "(?:an? )?(?:class|classes|course|courses) (?:in|on)|is going to school for) ",
        _REST,
        _place,
    ),
    (
        "went_to",
        _S + "(?:went|has been|had been|goes|traveled|travelled|flew|drove|headed|returned|"
        "went back|came back|got back|is back) (?:home )?(?:to|from) ",
        _REST,
        _place,
    ),
    ("went_to", _S + "(?:visited|attended|is attending|attends) ", _REST, _place),
    ("went_to", _S + r"(?:took|brought) [\w' ]{1,30}? to ", _REST, _place),
    ("did_activity", _S + "(?:went|goes|go|is going) ", r"(?P<obj>\w+ing)\b(?! to)", _noun),
    (
        "plans_to",
        _S + "(?:(?:plans|is planning|intends|hopes|is hoping|wants|would love|would like|"
        "is going|is looking forward) to|is gonna|is planning on|is thinking of|"
        "is thinking about|is considering|is keen on) ",
        _REST,
        _verb_phrase,
    ),
    ("hobby", "'s (?:favorite )?hobb(?:y|ies) (?:is|are|include|includes) ", _REST, _noun),
    (
        "hobby",
        _S + "(?:took up|has taken up|got into|picked up|likes|loves|enjoys|is into) ",
        _GERUND,
        _activity,
    ),
    ("hobby", _S + "(?:likes|loves|enjoys) to (?:just )?", r"(?P<obj>[a-z]+[^.!?;,]*)", _to_gerund),
    (
        "dislikes",
        _S + "(?:hates|dislikes|doesn't like|does not like|can't stand|isn't a fan of|"
        "is not a fan of|doesn't enjoy) ",
        _REST,
        _noun,
    ),
    (
        "likes",
        _S + "(?:likes|loves|enjoys|adores|is into|is passionate about|is a (?:big |huge )?"
        "fan of|is obsessed with|has (?:always )?had a (?:love|passion) for|has a (?:love|"
        "passion) for) ",
        _REST,
        _noun,
    ),
    ("has", _S + "(?:has|owns|bought) ", rf"(?P<obj>(?:{_NUMWORD}|new) [^.!?;]+)", _noun),
    ("has_child", "'s ", r"(?P<obj>kids|children|son|daughter|sons|daughters)\b", _noun),
    ("has", "'s ", rf"(?P<obj>{_RELATIVES})\b", _noun),
]
_RULES = [(p, re.compile(rf"\b{_SUBJ}{verbs}{obj}"), value) for p, verbs, obj, value in _TABLE]


def extract_triplet(sentence: str, speakers: Collection[str]) -> Triplet | None:
    """The first matching rule's triplet for ``sentence``, or None. Subjects are the speakers
    or other capitalised names (not at the very start, where any word is capitalised);
    "Caroline and others" (from "we") and "Caroline and Melanie" give Caroline."""
    known = {s.lower(): s for s in speakers}
    for predicate, pattern, value in _RULES:
        for m in pattern.finditer(sentence):
            head = m.group("subj").split(" and ")[0]
            head = known.get(head.lower(), head)
            if head not in speakers and (head.split()[0] in _NOT_SUBJECTS or m.start() == 0):
                continue
            obj = value(m).strip(" ,'")
            if obj and not _BAD_OBJECT.match(obj) and len(obj) <= 80:
                return Triplet(head, predicate, obj)
    return None
