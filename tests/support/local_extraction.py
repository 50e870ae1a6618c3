"""Episodes of ``(speaker, text)`` turns for the local extractor's tests
(``tests/weaver/extractors/test_*.py``)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from tiers.core.records import Scope
from weaver.extractors import EpisodeInput, Extraction, Fact, Turn
from weaver.extractors.local import LocalExtractor


def us(d: date, hour: int = 12) -> int:
    return int(datetime(d.year, d.month, d.day, hour, tzinfo=UTC).timestamp()) * 1_000_000


def episode(*turns: tuple[str, str], on: date = date(2024, 3, 1)) -> EpisodeInput:
    return EpisodeInput(
        "ep-1",
        "s-1",
        Scope("u"),
        [Turn(i + 1, who, "user", text, us(on) + i) for i, (who, text) in enumerate(turns)],
    )


def extract(*turns: tuple[str, str], on: date = date(2024, 3, 1)) -> Extraction:
    return LocalExtractor().extract(episode(*turns, on=on))


def said(text: str, by: str = "Caroline", on: date = date(2024, 3, 1)) -> list[Fact]:
    """The facts of one turn in a two-person chat (the other person only greets)."""
    other = "Melanie" if by == "Caroline" else "Caroline"
    facts = extract((other, "Hey! Good to see you!"), (by, text), on=on).facts
    assert all(f.source_seqs == [2] for f in facts)
    return facts


def texts(facts: list[Fact]) -> list[str]:
    return [f.text for f in facts]
