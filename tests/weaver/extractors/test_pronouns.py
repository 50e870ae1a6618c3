"""Third-person pronouns in the local extractor's facts (weaver.extractors.pronouns)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tiers.core.records import Scope
from weaver.extractors import EpisodeInput, Turn
from weaver.extractors.local import LocalExtractor
from weaver.extractors.pronouns import ThirdPersons

T0 = int(datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp() * 1_000_000)


def facts(*turns: tuple[str, str]) -> list[str]:
    episode = EpisodeInput(
        "e1",
        "s1",
        Scope("u"),
        [Turn(i, who, "user", text, T0 + i) for i, (who, text) in enumerate(turns, 1)],
    )
    return [f.text for f in LocalExtractor().extract(episode).facts]


def test_she_and_he_become_the_person_last_named_of_that_gender() -> None:
    out = facts(
        ("Alice", "My sister Carol just moved to France. She works as a nurse in Lyon now."),
        ("Bob", "Wow! My brother Tom got a new job, he is a chef at Noma."),
        ("Alice", "She started night shifts at the children's hospital."),
    )
    assert "Carol works as a nurse in Lyon now." in out
    assert "Bob's brother Tom got a new job, Tom is a chef at Noma." in out
    # "she" skips Tom (a brother) for Carol, two turns back
    assert "Carol started night shifts at the children's hospital." in out, out


def test_a_relative_without_a_name_is_the_speakers_relative() -> None:
    out = facts(
        (
            "Caroline",
            "This necklace is a gift from my grandma. She gave it to me when I was young.",
        ),
        ("Melanie", "That's lovely! My son loves necklaces. His favourite is a shark tooth."),
    )
    assert "Caroline's grandma gave it to Caroline when Caroline was young." in out
    assert "Melanie's son's favourite is a shark tooth." in out


@pytest.mark.parametrize(
    ("context", "sentence"),
    [
        ("I read a book about a trans girl.", "It is about a trans girl and her family."),
        ("I moved to Lyon last year.", "She likes it."),  # a place is nobody
        ("Caroline: hi", "She is great."),  # the speakers say I and you
        ("", "He left early."),  # nobody named yet
    ],
)
def test_unclear_pronouns_stay_as_written(context: str, sentence: str) -> None:
    people = ThirdPersons(["Caroline", "Melanie"])
    people.next_turn("Melanie")
    people.observe(context)
    assert people.resolve(sentence) == sentence


def test_a_name_is_forgotten_after_a_few_turns() -> None:
    people = ThirdPersons(["Alice", "Bob"], window=2)
    people.next_turn("Alice")
    people.observe("My friend Dana visited.")
    people.next_turn("Bob")
    assert people.resolve("She is funny.") == "Dana is funny."
    for _ in range(3):
        people.next_turn("Alice")
    assert people.resolve("She is funny.") == "She is funny."
