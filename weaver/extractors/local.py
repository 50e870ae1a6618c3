"""The local extractor: no network, no LLM.

- Summary: the most central turns of the episode (cosine to the centroid of their embeddings,
  or of TF-IDF vectors without an embedder), picked with diversity (MMR) and framed with who
  and when.
- Facts: informative declarative sentences, rewritten to stand alone: "I"/"my"/"you"/"we"
  become names (:mod:`weaver.extractors.speakers`; a sentence with a "you" that cannot be
  resolved is dropped) and relative dates become absolute ones
  (:mod:`weaver.extractors.dates`).
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
from weaver.extractors.speakers import SECOND_PERSON, SpeakerResolver, display

Embed = Callable[[list[str]], np.ndarray]

_SKIP_ROLES = frozenset({"system", "tool"})
_PHOTO = re.compile(r"\s*\[shares? (?:an? )?(?:photo|image|picture|pic) of ([^\]]*)\]", re.I)
_CAPTION_LEAD = re.compile(r"^(?:(?:a|an) (?:photo|photography|image|picture) of\s+)+", re.I)
# A sentence ends at a full stop, not at a title's ("Dr. Okafor" is one name).
_END = r"(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bSt\.)(?<=[.!?])\s+"
_SPLIT = re.compile(
    _END + r"|\n+|\s+[-\u2013\u2014]+\s+|--+|;\s+|(?<=[a-z])-\s+|"
    r"(?<=[a-z])\s*[\u2013\u2014]\s*(?=[a-zA-Z])"
)
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
_SUBJECTLESS = re.compile(
    r"^(?:(?P<am>(?:gonna|going to)(?! be\b)|planning|thinking|hoping|working on|trying|"
    r"looking forward)|"
    r"(?P<have>been)|(?P<i>(?:just )?(?:got|finished|started|had|signed|joined|took|went|"
    r"bought|made|lost|tried|visited|painted|watched|saw|met|spent)|got into|loved|"
    r"can't wait to))\b",
    re.I,
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
    for raw in re.split(_END + r"|\n+", text):
        sentence = _clean_sentence(raw.strip(), vocatives)
        if len(sentence.split()) < 3 or sentence.endswith("?") or _FILLER.match(sentence):
            continue
        if not _REACTION.match(sentence) or _FIRST.search(sentence):
            kept.append(sentence)
    return " ".join(kept)


def _utc_date(us: int) -> date:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC).date()


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
    return first or named or proper or bool(SECOND_PERSON.search(sentence))


def _finish(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip(" ,-")
    text = re.sub(r"[!.…]+$", "", text).rstrip(" ,")
    return text[:1].upper() + text[1:] + "."


def _midnight_us(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()) * 1_000_000


class LocalExtractor:
    """Extractive summary plus rule-based facts and triplets; see the module docstring."""

    name = "local"
    reads_known = False  # supersession of its functional predicates is the weaver's

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
            people.next_turn(display(turn.speaker))
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
        resolve = SpeakerResolver(turn.speaker, speakers)
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
            triplet = extract_triplet(resolved, {display(s) for s in speakers})
            second_only = not _FIRST.search(sentence) and bool(SECOND_PERSON.search(sentence))
            out.append(Fact(_finish(resolved), [turn.seq], triplet, valid_from,
                            0.8 if second_only else 1.0))  # fmt: skip
        for caption in captions:
            if caption:
                text = f"{display(turn.speaker)} shared a photo of {caption}"
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
        who = [display(s) for s in speakers]
        names = who[0] if len(who) == 1 else ", ".join(who[:-1]) + " and " + who[-1]
        days = [_utc_date(t.created_at_us) for t in turns]
        first, last = min(days), max(days)
        when = f"on {day_text(first)}"
        if last != first:
            when = f"from {day_text(first)} to {day_text(last)}"
        head = f"Conversation {'with' if len(who) == 1 else 'between'} {names} {when}."
        body = [f"{display(turns[i].speaker)}: {_trim(texts[i] or turns[i].text)}" for i in picked]
        return _finish_summary(" ".join([head, *body])), [turns[i].seq for i in picked]


def _trim(text: str, limit: int = 200) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > 0 else limit].rstrip(" ,;-") + "…"


def _finish_summary(text: str) -> str:
    return text[:1].upper() + text[1:]
