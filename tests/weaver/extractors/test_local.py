"""The local extractor: speaker resolution, triplet rules, filtering, summary. Date anchoring is
in ``test_dates.py``, the run over the LoCoMo dev conversations in
``test_local_locomo.py``."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

import numpy as np
import pytest

from tests.support.fakes import hash_embed
from tests.support.local_extraction import episode, extract, said, texts, us
from tiers.core.records import Scope
from weaver.errors import ExtractionFailed
from weaver.extractors import EpisodeInput, Turn
from weaver.extractors.local import LocalExtractor

# -- speaker resolution -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("by", "text", "expected"),
    [
        ("Caroline", "I love hiking with my dog.", "Caroline loves hiking with Caroline's dog."),
        ("Caroline", "I am moving to a new flat.", "Caroline is moving to a new flat."),
        ("Caroline", "I'm going to the lake with my sister.", "Caroline is going to the lake"),
        ("Caroline", "I've been painting landscapes.", "Caroline has been painting landscapes."),
        ("Caroline", "I have a garden full of roses.", "Caroline has a garden full of roses."),
        ("Caroline", "I'll bring my guitar to the party.", "Caroline will bring Caroline's guitar"),
        ("Caroline", "I'd love to visit Japan someday.", "Caroline would love to visit Japan"),
        ("Caroline", "I don't eat meat anymore.", "Caroline doesn't eat meat anymore."),
        ("Caroline", "I really enjoy long walks.", "Caroline really enjoys long walks."),
        ("Caroline", "I watch documentaries every night.", "Caroline watches documentaries"),
        ("Caroline", "My sister and I love baking bread.", "Caroline's sister and Caroline love"),
        ("Caroline", "It was hard, and I want to rest now.", "It was hard, and Caroline wants to"),
        ("Caroline", "The old blue bike is mine now.", "The old blue bike is Caroline's now."),
        (
            "Caroline",
            "The support group made me feel accepted.",
            "The support group made Caroline feel",
        ),
        ("Caroline", "I painted this mural myself.", "Caroline painted this mural themself."),
        (
            "Caroline",
            "Gonna start a pottery class soon.",
            "Caroline is gonna start a pottery class",
        ),
        ("Melanie", "Your painting of the lake is stunning.", "Caroline's painting of the lake"),
        ("Melanie", "You have two kids and a dog.", "Caroline has two kids and a dog."),
        ("Melanie", "You're a painter and a dancer.", "Caroline is a painter and a dancer."),
        ("Melanie", "We went camping in the mountains.", "Melanie and others went camping"),
        ("Melanie", "Our kids loved the beach trip.", "Melanie's kids loved the beach trip."),
        ("Melanie", "We should go hiking together sometime.", "Melanie and Caroline should go"),
        (
            "Melanie",
            "Let's grab coffee at the new cafe.",
            "Melanie and Caroline plan to grab coffee",
        ),
        ("Melanie", 'My motto is "I am enough" these days.', 'Melanie\'s motto is "I am enough"'),
    ],
)
def test_speaker_resolution(by: str, text: str, expected: str) -> None:
    facts = said(text, by=by)
    assert len(facts) == 1, texts(facts)
    assert facts[0].text.startswith(expected), facts[0].text
    unquoted = re.sub(r'"[^"]*"', "", facts[0].text)
    assert not re.search(r"\b(?:I|I'm|my|me|we|our|us|you|your)\b", unquoted, re.I), unquoted


def test_second_person_is_dropped_without_exactly_one_listener() -> None:
    x = extract(
        ("Caroline", "Your garden in Portland looks amazing these days."),
        ("Melanie", "I planted tomatoes in my garden."),
        ("Jon", "I bought a new bike for my commute."),
    )
    assert texts(x.facts) == [
        "Melanie planted tomatoes in Melanie's garden.",
        "Jon bought a new bike for Jon's commute.",
    ]


def test_second_person_only_facts_are_less_certain() -> None:
    [first] = said("I moved to Lisbon with my family.")
    [second] = said("You moved to Lisbon with your family.", by="Melanie")
    assert first.text == second.text == "Caroline moved to Lisbon with Caroline's family."
    assert first.confidence == 1.0 and second.confidence < 1.0


def test_role_speakers_read_as_the_user_and_the_assistant() -> None:
    x = extract(("user", "I live in Berlin with my cat."), ("assistant", "Noted, thanks!"))
    [fact] = x.facts
    assert fact.text == "The user lives in Berlin with the user's cat."
    assert fact.triplet is not None
    assert (fact.triplet.subject, fact.triplet.predicate, fact.triplet.object) == (
        "the user",
        "lives_in",
        "Berlin",
    )
    assert x.summary.startswith("Conversation between the user and the assistant on 1 March 2024.")


# -- triplets -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "predicate", "obj"),
    [
        ("I live in Seattle with my partner.", "lives_in", "Seattle"),
        ("I moved to Sweden in 2019.", "lives_in", "Sweden"),
        ("I lived in Tokyo as a student.", "lived_in", "Tokyo"),
        ("I used to work at a small bookstore.", "worked_at", "small bookstore"),
        ("I work at Google as a designer.", "works_at", "Google"),
        ("I work as a nurse at the city hospital.", "job_title", "nurse"),
        ("I'm a high school teacher these days.", "job_title", "high school teacher"),
        ("I'm originally from Sweden.", "from", "Sweden"),
        ("I grew up in a small town in Ohio.", "from", "small town in Ohio"),
        ("I love pottery and jazz.", "likes", "pottery and jazz"),
        ("I'm a big fan of horror movies.", "likes", "horror movies"),
        ("I really enjoy hiking in the mountains.", "hobby", "hiking in the mountains"),
        ("I like to swim at the lake.", "hobby", "swimming at the lake"),
        ("I took up knitting during the winter.", "hobby", "knitting during the winter"),
        ("I hate spiders with a passion.", "dislikes", "spiders"),
        ("I have a dog named Max.", "has_pet", "dog named Max"),
        ("My cat Oliver sleeps all day.", "has_pet", "cat named Oliver"),
        ("I have two kids in primary school.", "has_child", "two kids"),
        ("My son Jake loves soccer.", "has_child", "son named Jake"),
        ("I'm married to John since 2015.", "married_to", "John"),
        ("My husband Tom cooks every Sunday.", "married_to", "Tom"),
        ("I went to Paris with my sister.", "went_to", "Paris"),
        ("I visited the Louvre with my mom.", "went_to", "Louvre"),
        ("I took my kids to the zoo.", "went_to", "zoo"),
        ("I went camping with my friends.", "did_activity", "camping"),
        ("I'm planning to adopt a child.", "plans_to", "adopt a child"),
        ("I'm going to the beach with friends.", "plans_to", "go to beach with friends"),
        ("I'm studying psychology at the university.", "studies", "psychology"),
        ("I volunteer at the animal shelter.", "volunteers_at", "animal shelter"),
        ("I just turned 30 and feel great.", "age", "30"),
        ("I own a small bakery downtown.", "has", "small bakery downtown"),
        ("My grandma knits the best scarves.", "has", "grandma"),
    ],
)
def test_triplet_rules(text: str, predicate: str, obj: str) -> None:
    facts = said(text)
    assert len(facts) == 1, texts(facts)
    triplet = facts[0].triplet
    assert triplet is not None, facts[0].text
    assert (triplet.subject, triplet.predicate, triplet.object) == ("Caroline", predicate, obj)


@pytest.mark.parametrize(
    "text",
    [
        "You're a brilliant painter and a kind soul.",  # praise, not a job title
        "I was a shy kid in a big family.",
        "I have always liked turtles and frogs.",
        "You got the horse's grace just right in that painting.",
        "I love that so much, honestly it made my whole week better.",
        "I went through a lot of stress at the office.",
        "Painting reminds me of my childhood summers.",
    ],
)
def test_no_triplet_without_a_rule(text: str) -> None:
    [fact] = said(text, by="Melanie" if text.startswith("You") else "Caroline")
    assert fact.triplet is None


def test_named_third_person_subject() -> None:
    [fact] = said("My friend Jen lives in Boston now.")
    assert fact.triplet is not None
    assert (fact.triplet.subject, fact.triplet.predicate, fact.triplet.object) == (
        "Jen",
        "lives_in",
        "Boston",
    )


# -- filtering, dedup, photos ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Hey Mel! Good to see you! How have you been?",
        "Did you go to the park with the kids?",
        "What kinda jobs are you thinking of?",
        "Thanks so much, Melanie!",
        "That's awesome! Wow, so cool.",
        "Talk to you soon! Take care.",
        "I agree.",
        "Me too!",
        "Sounds like a great plan for the weekend.",
        "I'm so happy for you!",
        "It's special to me.",
    ],
)
def test_questions_greetings_and_fillers_give_no_facts(text: str) -> None:
    assert said(text) == []


def test_leading_interjections_and_vocatives_are_dropped() -> None:
    facts = said("Yeah, Melanie! Wow, I finally finished my first marathon, Mel!")
    assert texts(facts) == ["Caroline finally finished Caroline's first marathon."]


def test_facts_are_deduplicated_within_an_episode() -> None:
    x = extract(
        ("Caroline", "I adopted a puppy named Rex. He is so fluffy!"),
        ("Melanie", "Aww, how cute!"),
        ("Caroline", "I adopted a puppy named Rex!"),
    )
    # the repeated adoption is one fact; "He" is Rex (weaver.extractors.pronouns)
    assert texts(x.facts) == ["Caroline adopted a puppy named Rex.", "Rex is so fluffy."]
    assert x.facts[0].source_seqs == [1]


def test_photo_captions_become_facts_without_corrupting_the_text() -> None:
    text = "I finished my new painting. [shares a photo of a photo of a sunset over a lake]"
    facts = said(text)
    assert texts(facts) == [
        "Caroline finished Caroline's new painting.",
        "Caroline shared a photo of a sunset over a lake.",
    ]
    assert facts[1].confidence < facts[0].confidence


def test_system_turns_are_ignored() -> None:
    """(An empty episode fails too: tests/contracts/test_extractor.py.)"""
    turns = [
        Turn(1, "system", "system", "I am a helpful assistant with my own rules.", us(date.today()))
    ]
    with pytest.raises(ExtractionFailed):
        LocalExtractor().extract(EpisodeInput("e", "s", Scope("u"), turns))


# -- summary -------------------------------------------------------------------------------------

CAMPING = [
    ("Melanie", "Hey Caroline! Long time no see!"),
    ("Caroline", "Hi Mel! How are you?"),
    ("Melanie", "We went camping in the mountains yesterday and the lake view was great."),
    ("Caroline", "Camping in the mountains sounds lovely, I love sleeping by a lake."),
    ("Melanie", "The kids loved camping, we roasted marshmallows by the lake."),
    ("Caroline", "My car broke down on the highway and the mechanic charged a fortune."),
    ("Melanie", "Next time we go camping at the mountain lake you should join us."),
    ("Caroline", "I would love to go camping with you by the lake in the mountains."),
    ("Caroline", "Bye! Talk soon!"),
]


def fake_embed(sentences: list[str]) -> np.ndarray:
    return hash_embed(sentences, words=r"[a-z]{4,}")


@pytest.mark.parametrize("embed", [None, fake_embed])
def test_summary_names_who_and_when_and_picks_central_turns(embed: Any) -> None:
    x = LocalExtractor(embed=embed, summary_turns=2).extract(episode(*CAMPING, on=date(2023, 5, 8)))
    assert x.summary.startswith("Conversation between Melanie and Caroline on 8 May 2023. ")
    assert len(x.summary_source_seqs) == 2
    assert x.summary_source_seqs == sorted(x.summary_source_seqs)
    # the central camping turns, never the greetings or the off-topic car trouble
    assert set(x.summary_source_seqs) <= {3, 4, 5, 7, 8}
    for seq in x.summary_source_seqs:
        speaker, text = CAMPING[seq - 1]
        assert f"{speaker}: {text.split()[0]}" in x.summary
    assert "Hey Caroline" not in x.summary and "mechanic" not in x.summary
    assert x.extractor == "local"


def test_summary_anchors_dates_and_spans_days() -> None:
    turns = [
        Turn(1, "Melanie", "user", "We went camping yesterday by the lake.", us(date(2023, 5, 8))),
        Turn(2, "Caroline", "user", "I love camping by the lake too.", us(date(2023, 5, 9))),
    ]
    x = LocalExtractor(summary_turns=4).extract(EpisodeInput("e", "s", Scope("u"), turns))
    assert x.summary.startswith(
        "Conversation between Melanie and Caroline from 8 May 2023 to 9 May"
    )
    assert "Melanie: We went camping on 7 May 2023 by the lake." in x.summary
    assert x.summary_source_seqs == [1, 2]


def _broken_embed(sentences: list[str]) -> np.ndarray:
    raise RuntimeError("model not loaded")


def test_embed_with_the_wrong_shape_or_an_error_fails() -> None:
    extractor = LocalExtractor(embed=lambda s: np.ones((len(s) + 1, 8)))
    with pytest.raises(ExtractionFailed, match="shape"):
        extractor.extract(episode(*CAMPING))
    with pytest.raises(ExtractionFailed, match="model not loaded"):
        LocalExtractor(embed=_broken_embed).extract(episode(*CAMPING))
