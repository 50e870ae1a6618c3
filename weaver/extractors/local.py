"""The local extractor: no network, no LLM.

- Summary: the most central turns of the episode (cosine to the centroid of their embeddings,
  or of TF-IDF vectors without an embedder), picked with diversity (MMR) and framed with who
  and when.
- Facts: informative declarative sentences, rewritten to stand alone: "I"/"my"/"you"/"we"
  become names (with the verb agreeing: "I love" -> "Caroline loves") and relative dates
  become absolute ones (:mod:`weaver.extractors.dates`). "you" is resolved only when the
  episode has exactly two speakers (else such sentences are dropped). "we"/"us" is "Caroline
  and Melanie" when the sentence says so ("we should", "let's", "since we last talked",
  "both of us"); otherwise "Caroline and others", and "our" is "Caroline's", since in chats
  "we" is mostly the speaker's family or friends.
- Third persons: a clause-initial he/she/his/her becomes the person the conversation last
  named (:mod:`weaver.extractors.pronouns`).
- Triplets: pattern rules over the rewritten sentence (:mod:`weaver.extractors.rules`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime

import numpy as np

from weaver.errors import ExtractionFailed
from weaver.extractors import EpisodeInput, Extraction, Fact, Turn
from weaver.extractors.dates import anchor_dates, day_text
from weaver.extractors.pronouns import ThirdPersons
from weaver.extractors.rules import extract_triplet, word_set

Embed = Callable[[list[str]], np.ndarray]

_ROLES = frozenset({"user", "assistant", "system", "tool", "human", "ai", "model"})
_SKIP_ROLES = frozenset({"system", "tool"})
_PHOTO = re.compile(r"\s*\[shares? (?:an? )?(?:photo|image|picture|pic) of ([^\]]*)\]", re.I)
_CAPTION_LEAD = re.compile(r"^(?:(?:a|an) (?:photo|photography|image|picture) of\s+)+", re.I)
_SPLIT = re.compile(
    r"(?<=[.!?])\s+|\n+|\s+[-\u2013\u2014]+\s+|--+|;\s+|(?<=[a-z])-\s+|"
    r"(?<=[a-z])\s*[\u2013\u2014]\s*(?=[a-zA-Z])"
)
_PLURAL_BEFORE = re.compile(r"(?:\b[A-Z][a-z]+|'s [a-z]+|\bfriends?|\bfamily) (?:and|or|&) $")
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[^A-Za-z]+")
_LEADIN = (
    r"hey|hi|hello|wow|whoa|woah|oh my|oh no|oh|ah|aw+|ooh|yeah|yes|yep|yup|no|nope|ok|okay|"
    r"well|so|lol|haha+|omg|thanks|thank you|sure|totally|absolutely|definitely|cool|great|"
    r"awesome|nice|sweet|hmm+|um+|gosh|ha|congrats|congratulations|honestly|anyway|anyways|"
    r"by the way|btw|actually|true|exactly|right|aha|man|dude|yay|woohoo|wowza|indeed|"
    r"agreed|ugh|haha|hehe|phew|whew|also|and|but|plus"
)
_FILLER = re.compile(
    r"^(?:thanks|thank you|talk (?:to you )?soon|take care|see you|bye|good luck|good night|"
    r"you're welcome|no problem|me too|same here|you got this|keep it up|keep up the|"
    r"good to see you|(?:great|good|nice|glad|so glad) to (?:hear|see|know)|i'm glad|"
    r"(?:i )?hope (?:you|all|everything|it|that|so|your)|(?:i'm )?happy for you|"
    r"(?:i )?can't wait to (?:see|hear)|let me know|you're (?:so|such|really|right|the)|"
    r"you are (?:so|such|really|right)|i (?:totally )?agree|i know|what a|which|"
    r"you never know|you know|lemme know|wishing|don't|do not|never give up|keep (?:it|up|going|"
    r"pushing|at it)|stay (?:strong|positive|safe)|remember to|make sure)\b",
    re.I,
)
_REACTION = re.compile(r"^(?:that|this|it|sounds|it sounds|here's|here is|check out|look at|"
                       r"take a look)\b(?:'s)?", re.I)  # fmt: skip
_FIRST = re.compile(r"\b(?:i|i'm|i've|i'll|i'd|me|my|mine|myself|we|we're|we've|we'll|we'd|"
                    r"us|our|ours|ourselves|let's)\b", re.I)  # fmt: skip
_SECOND = re.compile(r"\b(?:you|you're|you've|you'll|you'd|your|yours|yourself|yourselves|"
                     r"ya|u|y'all)\b", re.I)  # fmt: skip
_JOINT = re.compile(
    r"\b(?:let's|we both|both of us|each other|you and (?:i|me)|me and you|you guys and|"
    r"we (?:should|could|can|must|need to|ought to|have to|'ll have to|gotta)|"
    r"(?:since|when) we (?:last )?(?:chatted|talked|spoke|met|caught up|hung out)|"
    r"we last (?:chatted|talked|spoke|met|caught up|hung out)|"
    r"our (?:chats?|talks?|conversations?|friendship))\b",
    re.I,
)
_SUBJECTLESS = re.compile(
    r"^(?:(?P<am>(?:gonna|going to)(?! be\b)|planning|thinking|hoping|working on|trying|"
    r"looking forward)|"
    r"(?P<have>been)|(?P<i>(?:just )?(?:got|finished|started|had|signed|joined|took|went|"
    r"bought|made|lost|tried|visited|painted|watched|saw|met|spent)|got into|loved|"
    r"can't wait to))\b",
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
_STOP = word_set(
    "a an the and or but so of to in on at for with from by about as into like than that this "
    "these those it its it's is are was were be been being am do does did have has had having "
    "i me my we us our you your he she him her they them their there here what which who when "
    "where why how not no yes yeah wow just really very so too also all any some much many "
    "more most can could will would should might must may shall get got getting make made "
    "really great good awesome amazing cool nice glad happy love loved loves like likes know "
    "knows think thinks feel feels thing things lot lots sure definitely totally always still "
    "even thanks thank that's what's there's sounds sound super pretty kind kinda way ways "
    "one something everything anything time times day well oh hey hi if then just stuff "
    "said says say tell told keep keeps going gonna want wants wanted need needs"
)


def _vocatives(speakers: list[str]) -> str:
    """A regex alternation of the speakers' names and their 3-4 letter nicknames."""
    forms = {re.escape(v) for s in speakers for v in (s, s[:3], s[:4]) if len(v) >= 3}
    return "|".join(sorted(forms, key=len, reverse=True)) or "(?!)"


def _gist(text: str, vocatives: str) -> str:
    """A turn without its photo, greetings, fillers and questions (for the summary)."""
    text = _PHOTO.sub("", text).strip()
    kept = []
    for raw in re.split(r"(?<=[.!?])\s+|\n+", text):
        sentence = _clean_sentence(raw.strip(), vocatives)
        if len(sentence.split()) < 3 or sentence.endswith("?") or _FILLER.match(sentence):
            continue
        if not _REACTION.match(sentence) or _FIRST.search(sentence):
            kept.append(sentence)
    return " ".join(kept)


def _utc_date(us: int) -> date:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC).date()


def _display(speaker: str) -> str:
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


class _Resolver:
    """Rewrites first- and second-person references of one turn's sentences as names."""

    def __init__(self, speaker: str, speakers: list[str]) -> None:
        self.me = _display(speaker)
        others = [s for s in speakers if s != speaker]
        self.you = _display(others[0]) if len(speakers) == 2 and others else None
        self.both = f"{self.me} and {self.you}" if self.you else None

    def resolvable(self, sentence: str) -> bool:
        return self.you is not None or not _SECOND.search(sentence)

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


def _clean_sentence(sentence: str, vocatives: str) -> str:
    lead = re.compile(rf"^(?:(?:{_LEADIN})\b(?:\s+(?:so much|a lot))?|{vocatives})"
                      rf"(?:\s*[,!.…]+\s*|\s+(?=(?:{vocatives})\b)|\s*$)", re.I)  # fmt: skip
    previous = None
    while previous != sentence:
        previous, sentence = sentence, lead.sub("", sentence, count=1).strip()
    sentence = re.sub(rf",\s*(?:{vocatives})\s*(?=[.!?]*$)", "", sentence)
    m = _SUBJECTLESS.match(sentence)
    if m:
        prefix = "I'm " if m.group("am") else "I've " if m.group("have") else "I "
        sentence = prefix + sentence[0].lower() + sentence[1:]
    return sentence


def _content_words(text: str, names: set[str]) -> list[str]:
    words = re.findall(r"[a-z][a-z'-]+|\d+", text.lower())
    return [w for w in words if w not in _STOP and w not in names and (len(w) > 2 or w.isdigit())]


def _informative(sentence: str, names: set[str]) -> bool:
    if sentence.endswith("?") or len(sentence.split()) < 4:
        return False
    if _FILLER.match(sentence):
        return False
    first = bool(_FIRST.search(sentence))
    if _REACTION.match(sentence) and not first:
        return False
    named = any(re.search(rf"\b{re.escape(n)}\b", sentence, re.I) for n in names)
    proper = bool(re.search(r"(?<![.!?] )\b[A-Z][a-z]+", sentence[1:]))
    return first or named or proper or bool(_SECOND.search(sentence))


def _finish(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip(" ,-")
    text = re.sub(r"[!.…]+$", "", text).rstrip(" ,")
    return text[:1].upper() + text[1:] + "."


def _midnight_us(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()) * 1_000_000


class LocalExtractor:
    """Extractive summary plus rule-based facts and triplets; see the module docstring."""

    name = "local"

    def __init__(self, embed: Embed | None = None, summary_turns: int = 4) -> None:
        self.embed = embed
        self.summary_turns = summary_turns

    def extract(self, episode: EpisodeInput) -> Extraction:
        turns = [t for t in episode.turns if t.role not in _SKIP_ROLES and t.text.strip()]
        if not turns:
            raise ExtractionFailed(f"episode {episode.episode_id} has no text to extract from")
        speakers = list(dict.fromkeys(t.speaker for t in turns))
        facts: list[Fact] = []
        seen: set[str] = set()
        people = ThirdPersons(speakers)
        for turn in turns:
            people.next_turn(_display(turn.speaker))
            for fact in self._turn_facts(turn, speakers, people):
                key = " ".join(re.findall(r"[a-z0-9]+", fact.text.lower()))
                if key not in seen:
                    seen.add(key)
                    facts.append(fact)
        summary, seqs = self._summary(turns, speakers, _vocatives(speakers))
        return Extraction(summary, seqs, facts, self.name)

    def _turn_facts(self, turn: Turn, speakers: list[str], people: ThirdPersons) -> list[Fact]:
        text = turn.text.replace("\u2019", "'").replace("\u2018", "'")
        text = text.replace("\u201c", '"').replace("\u201d", '"')
        captions = [_CAPTION_LEAD.sub("", c).strip(" .") for c in _PHOTO.findall(text)]
        text = _PHOTO.sub("", text)
        resolve = _Resolver(turn.speaker, speakers)
        names = {n.lower() for n in speakers}
        vocatives = _vocatives(speakers)
        today = _utc_date(turn.created_at_us)
        out: list[Fact] = []
        for raw in _SPLIT.split(text):
            sentence = people.resolve(_clean_sentence(raw.strip(), vocatives))
            people.observe(sentence)
            known = names | people.names()
            if not _informative(sentence, known) or not resolve.resolvable(sentence):
                continue
            resolved, start = anchor_dates(resolve(sentence), today)
            if len(_content_words(resolved, names | {"others"})) < 2:
                continue
            valid_from = turn.created_at_us
            if start is not None and start <= today:
                valid_from = _midnight_us(start)
            triplet = extract_triplet(resolved, {_display(s) for s in speakers})
            second_only = not _FIRST.search(sentence) and bool(_SECOND.search(sentence))
            out.append(Fact(_finish(resolved), [turn.seq], triplet, valid_from,
                            0.8 if second_only else 1.0))  # fmt: skip
        for caption in captions:
            if caption:
                text = f"{_display(turn.speaker)} shared a photo of {caption}"
                out.append(Fact(_finish(text), [turn.seq], None, turn.created_at_us, 0.6))
        return out

    # -- summary -------------------------------------------------------------------------

    def _vectors(self, texts: list[str]) -> np.ndarray:
        if self.embed is not None:
            try:
                vectors = np.asarray(self.embed(texts), dtype=np.float32)
            except Exception as exc:
                raise ExtractionFailed(f"embedding the turns failed: {exc}") from exc
            if vectors.ndim != 2 or vectors.shape[0] != len(texts):
                raise ExtractionFailed(f"embedder returned shape {vectors.shape} for {len(texts)}")
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            return vectors / np.where(norms == 0, 1, norms)
        # TF-IDF over crudely stemmed words (their first five letters)
        docs = [Counter(w[:5] for w in _content_words(t, set())) for t in texts]
        vocab = {w: i for i, w in enumerate(sorted(set().union(*docs)))}
        matrix = np.zeros((len(texts), max(len(vocab), 1)), dtype=np.float32)
        df = Counter(w for d in docs for w in d)
        for row, counts in enumerate(docs):
            for w, c in counts.items():
                matrix[row, vocab[w]] = (1 + math.log(c)) * (
                    1 + math.log((1 + len(texts)) / (1 + df[w]))
                )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1, norms)

    def _summary(
        self, turns: list[Turn], speakers: list[str], vocatives: str
    ) -> tuple[str, list[int]]:
        texts = [
            anchor_dates(_gist(t.text, vocatives), _utc_date(t.created_at_us))[0] for t in turns
        ]
        vectors = self._vectors([g or t.text for g, t in zip(texts, turns, strict=True)])
        centroid = vectors.mean(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-9)
        length = np.array([min(1.0, len(_content_words(t, set())) / 6) for t in texts])
        relevance = (vectors @ centroid) * length
        picked: list[int] = []
        while len(picked) < min(self.summary_turns, len(turns)):
            redundancy = (vectors @ vectors[picked].T).max(axis=1) if picked else 0.0
            score = 0.8 * relevance - 0.2 * redundancy
            score[picked] = -np.inf
            picked.append(int(np.argmax(score)))
        picked.sort()
        who = [_display(s) for s in speakers]
        names = who[0] if len(who) == 1 else ", ".join(who[:-1]) + " and " + who[-1]
        days = [_utc_date(t.created_at_us) for t in turns]
        first, last = min(days), max(days)
        when = f"on {day_text(first)}"
        if last != first:
            when = f"from {day_text(first)} to {day_text(last)}"
        head = f"Conversation {'with' if len(who) == 1 else 'between'} {names} {when}."
        body = [f"{_display(turns[i].speaker)}: {_trim(texts[i] or turns[i].text)}" for i in picked]
        return _finish_summary(" ".join([head, *body])), [turns[i].seq for i in picked]


def _trim(text: str, limit: int = 200) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > 0 else limit].rstrip(" ,;-") + "…"


def _finish_summary(text: str) -> str:
    return text[:1].upper() + text[1:]
