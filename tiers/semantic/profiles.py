"""Entity profiles: per entity and topic, what the conversations say, drawn from its facts.

A profile is a Tier 3 point of kind ``profile``, for example::

    Melanie - hobbies and activities: Melanie signed up for a pottery class. | Melanie went
    camping with the kids. | ...

It is extractive: its text is the entity's current facts on one topic, newest first (at most
:data:`MAX_FACTS`), and its sources are exactly those facts' source messages. It answers the
"what activities does X do?" questions whose evidence is spread over many sessions.

A profile is a pure function of the scope's current facts (:func:`build_profiles`), so it is
never stored twice and never goes stale:

- its id depends only on scope, entity and topic, so writing it again replaces it (a new fact
  supersedes the old profile, it does not add a second one);
- a fact superseded by a newer one (``valid_to``) leaves the profile;
- Forget rebuilds the profiles of the scopes it touched from the facts that remain, and
  deletes the ones left without facts, so no forgotten text survives in a profile.

Entity: the speaker named first in the fact's text (or a triplet's subject that is a speaker),
else the speaker of its first source. Topic: a triplet's predicate when it names one, else
every topic whose words the fact's text contains (:data:`TOPICS`: general vocabulary, not
tuned on a data set). A fact can be in several topics; a topic needs two facts to make a
profile.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, Source, point_id

KIND = "profile"
MAX_FACTS = 12
MIN_FACTS = 2

# topic -> its words: a word of a fact matches one of them when it is the word, or the word
# plus "s" or "es"; "a+b" is the phrase "a b".
TOPICS: dict[str, str] = {
    "hobbies and activities": (
        "hobby hobbies activity activities painting painted pottery camping camped hike "
        "hiking hiked swim swimming dance dancing bake baking baked cook cooking garden "
        "gardening yoga surfing skiing climbing fishing knitting drawing photography "
        "volunteer volunteering craft crafting reading writing running jogging biking cycling"
    ),
    "family": (
        "family families kid child children son daughter husband wife wives mom mother dad "
        "father sister brother sibling grandma grandmother grandpa grandfather grandkid "
        "grandchild grandchildren parent cousin aunt uncle nephew niece married marriage baby "
        "babies"
    ),
    "pets": (
        "pet dog puppy puppies cat kitten turtle bird parrot horse hamster rabbit bunny "
        "bunnies snake lizard"
    ),
    "work and career": (
        "job work works worked working career company companies boss office business startup "
        "promotion promoted hired client interview salary manager colleague coworker customer"
    ),
    "education": (
        "school class course degree study studies studied studying student college university "
        "universities exam teacher learn learning lesson workshop"
    ),
    "travel and places": (
        "trip travel traveling travelling visit visited city cities country countries beach "
        "vacation flight roadtrip road+trip abroad tour moved festival park lake mountain"
    ),
    "food": "food recipe restaurant dinner lunch breakfast dish cake pizza meal cookie pie coffee",
    "music": "music song band concert guitar piano violin singing sang album drum drums playlist",
    "books, films and shows": (
        "book novel author movie film tv tv+show series watch watched watching cinema story "
        "stories character"
    ),
    "games": "game gaming console tournament xbox playstation nintendo",
    "sports and fitness": (
        "basketball football soccer tennis baseball hockey golf match training gym marathon "
        "workout exercise fitness sport team coach season league"
    ),
    "health": (
        "health doctor hospital sick injury injured therapy therapist diet illness surgery "
        "medical medicine medication accident"
    ),
    "art": "art artist artwork painting drawing sculpture pottery museum gallery canvas",
    "events and celebrations": (
        "wedding birthday party parties festival conference ceremony parade graduation "
        "graduated anniversary holiday christmas thanksgiving celebrate celebrated "
        "celebration"
    ),
    "plans and goals": "plan planning planned goal dream hope future wish",
    "causes and beliefs": (
        "support supporting cause charity charities community communities activism activist "
        "rights donate donated donation fundraiser fundraising advocate advocacy faith church "
        "belief equality lgbtq"
    ),
}
_VOCAB = {topic: words.split() for topic, words in TOPICS.items()}
_WORDS = {topic: frozenset(w for w in words if "+" not in w) for topic, words in _VOCAB.items()}
_PHRASES = {
    topic: [re.compile(rf"\b{re.escape(w.replace('+', ' '))}\b") for w in words if "+" in w]
    for topic, words in _VOCAB.items()
}

# A triplet predicate that names its topic (the local extractor's; an LLM's free predicates
# fall back to the words).
PREDICATE_TOPICS: dict[str, str] = {
    "hobby": "hobbies and activities",
    "did_activity": "hobbies and activities",
    "likes": "hobbies and activities",
    "has_child": "family",
    "married_to": "family",
    "has_pet": "pets",
    "job_title": "work and career",
    "worked_as": "work and career",
    "works_at": "work and career",
    "worked_at": "work and career",
    "works_in": "work and career",
    "volunteers_at": "causes and beliefs",
    "studies": "education",
    "went_to": "travel and places",
    "lives_in": "travel and places",
    "lived_in": "travel and places",
    "from": "travel and places",
    "plans_to": "plans and goals",
}

_WORD = re.compile(r"[a-z][a-z'-]*")


def topics_of(text: str) -> list[str]:
    """The topics whose words ``text`` contains, in :data:`TOPICS` order."""
    lowered = text.lower()
    forms = set()
    for word in _WORD.findall(lowered):
        forms.add(word)
        forms.add(word[:-1] if word.endswith("s") else word)
        forms.add(word[:-2] if word.endswith("es") else word)
    return [
        topic
        for topic in TOPICS
        if forms & _WORDS[topic] or any(p.search(lowered) for p in _PHRASES[topic])
    ]


def _entity(fact: MemoryPoint, speakers: Sequence[str]) -> str:
    subject = str(fact.attrs.get("subject") or "")
    named = [
        (m.start(), name)
        for name in speakers
        if (m := re.search(rf"\b{re.escape(name)}\b", fact.text)) is not None
    ]
    if subject in speakers:
        return subject
    if named:
        return min(named)[1]
    return fact.sources[0].speaker if fact.sources else ""


def profile_id(scope: Scope, entity: str, topic: str) -> str:
    """Depends on scope, entity and topic only: a newer profile replaces the older one."""
    return point_id(scope, KIND, f"{entity}\x00{topic}", [])


def build_profiles(scope: Scope, facts: Iterable[MemoryPoint]) -> list[MemoryPoint]:
    """The profiles of ``scope`` from its facts (superseded ones are left out), without
    vectors. Deterministic: the same facts give the same points."""
    current = [f for f in facts if f.kind == "fact" and f.valid_to_us is None and f.scope == scope]
    speakers = sorted({s.speaker for f in current for s in f.sources if s.speaker}, key=len)
    speakers.reverse()  # longer names first ("Jon" must not shadow "Jonathan")
    groups: dict[tuple[str, str], list[MemoryPoint]] = defaultdict(list)
    for fact in current:
        entity = _entity(fact, speakers)
        if not entity:
            continue
        topic = PREDICATE_TOPICS.get(str(fact.attrs.get("predicate") or ""))
        for name in [topic] if topic else topics_of(fact.text):
            groups[(entity, name)].append(fact)
    out = []
    for (entity, topic), members in sorted(groups.items()):
        if len(members) < MIN_FACTS:
            continue
        members = sorted(members, key=lambda f: (-f.created_at_us, f.id))[:MAX_FACTS]
        out.append(_profile(scope, entity, topic, members))
    return out


def _profile(scope: Scope, entity: str, topic: str, facts: list[MemoryPoint]) -> MemoryPoint:
    sources: list[Source] = []
    seen: set[tuple[str, int]] = set()
    for fact in facts:
        for src in fact.sources:
            if (src.session_id, src.seq) not in seen:
                seen.add((src.session_id, src.seq))
                sources.append(src)
    newest = facts[0]
    return MemoryPoint(
        id=profile_id(scope, entity, topic),
        kind=KIND,
        text=f"{entity} - {topic}: " + " | ".join(f.text for f in facts),
        scope=scope,
        episode_id=newest.episode_id,
        session_id=newest.session_id,
        sources=sources,
        created_at_us=newest.created_at_us,
        extractor="profile",
        attrs={"entity": entity, "topic": topic, "facts": [f.id for f in facts]},
    )
