"""The episode and the valid reply the LLM extractor's tests share
(``tests/weaver/extractors/test_llm*.py``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tiers.core.records import Scope
from weaver.extractors import EpisodeInput, Turn

T0 = datetime(2024, 5, 8, 14, 3, 0, tzinfo=UTC)


def us(dt: datetime) -> int:
    return int(dt.timestamp()) * 1_000_000


def episode(*texts: tuple[str, str]) -> EpisodeInput:
    turns = [
        Turn(
            seq=i,
            speaker=speaker,
            role="user" if i % 2 == 0 else "assistant",
            text=text,
            created_at_us=us(T0) + i * 60_000_000,
        )
        for i, (speaker, text) in enumerate(texts)
    ]
    return EpisodeInput("ep-1", "sess-1", Scope("u1"), turns)


EPISODE = episode(
    ("Alice", "I moved to Lisbon yesterday."),
    ("Bob", "Nice! Are you still at Acme?"),
    ("Alice", "Yes, I'm a data engineer there. My cat Miso loves the new flat."),
)


VALID: dict[str, Any] = {
    "summary": "On 2024-05-08 Alice told Bob she moved to Lisbon and still works at Acme.",
    "summary_source_seqs": [0, 2, 99],
    "facts": [
        {
            "text": "Alice moved to Lisbon on 2024-05-07.",
            "source_seqs": [0],
            "triplet": {"subject": "Alice", "predicate": "livesIn", "object": "Lisbon"},
            "valid_from": "2024-05-07",
            "confidence": 0.9,
        },
        {
            "text": "Alice works at Acme as a data engineer.",
            "source_seqs": [2, 1, 2],
            "triplet": {"subject": " Alice ", "predicate": "Works At", "object": "Acme"},
            "valid_from": "2024-05-08T14:05:00Z",
        },
        {
            "text": "Alice has a cat named Miso.",
            "source_seqs": [2],
            "triplet": {"subject": "Alice", "predicate": "has-pet", "object": "Miso"},
            "valid_from": "unknown",
            "confidence": 1,
        },
        {"text": "Alice started at Acme in 2023.", "source_seqs": [2], "valid_from": "2023"},
    ],
}
