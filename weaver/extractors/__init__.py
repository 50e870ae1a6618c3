"""The extractor seam: turn one episode into a summary, atomic facts and triplets.

Two back-ends implement :class:`Extractor`:

- :class:`weaver.extractors.local.LocalExtractor` (default): no network, no LLM. An extractive
  summary plus rule-based facts and triplets.
- :class:`weaver.extractors.llm.LLMExtractor`: any model through ``litellm``, with a JSON
  schema, validation, bounded retries and backoff.

Both resolve speakers ("I", "you", "my" become names) and anchor relative dates ("yesterday",
"last year") to absolute dates using the turns' timestamps, so every fact reads on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from tiers.core.records import Scope


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of an episode as the extractors see it."""

    seq: int
    speaker: str  # the message's name, else its role ("user", "assistant", ...)
    role: str
    text: str
    created_at_us: int  # event time, microseconds since the epoch (UTC)
    message_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    tool_call: str = ""  # the tool the message calls (its text says so: weaver.turn_text)


@dataclass(frozen=True, slots=True)
class KnownFact:
    """A current fact of the scope from earlier episodes, shown to an extractor that reads
    them (:attr:`Extractor.reads_known`) so it can say which of them a new fact updates."""

    id: str  # its point id
    text: str
    created_at_us: int


@dataclass(frozen=True, slots=True)
class EpisodeInput:
    episode_id: str
    session_id: str
    scope: Scope
    turns: list[Turn]
    known: list[KnownFact] = field(default_factory=list)  # only for a reads_known extractor

    @property
    def speakers(self) -> list[str]:
        """Distinct speakers in order of first appearance."""
        return list(dict.fromkeys(t.speaker for t in self.turns))


@dataclass(frozen=True, slots=True)
class Triplet:
    subject: str  # an entity name as written ("Alice", "Acme Corp")
    predicate: str  # snake_case ("lives_in", "works_at", "likes")
    object: str


@dataclass(frozen=True, slots=True)
class Fact:
    """A self-contained sentence: names instead of pronouns, absolute dates."""

    text: str
    source_seqs: list[int]  # the turns it comes from (at least one)
    triplet: Triplet | None = None
    valid_from_us: int | None = None  # when it became true, if known; else the turn's time
    confidence: float = 1.0
    # The ids of the episode's known facts (EpisodeInput.known) that this one updates,
    # corrects or contradicts: the weaver closes them (valid_to, replaced_by).
    updates: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Extraction:
    summary: str  # who, when, what was decided or learned
    summary_source_seqs: list[int]
    facts: list[Fact]
    extractor: str  # "local" or "llm:<model>"


class Extractor(Protocol):
    """Turns an episode into an :class:`Extraction` named ``extractor == name``: a non-empty
    summary and facts whose ``source_seqs`` (and ``summary_source_seqs``) are seqs of the
    episode's own turns, sorted; a fact's triplet, when it has one, has a snake_case
    predicate.

    ``extract`` raises :class:`weaver.errors.ExtractionFailed` when it cannot produce a valid
    result: an episode with no turns (or, for the local extractor, no text), or a model that failed
    (the model's error, e.g. :class:`tiers.core.errors.ModelUnavailable` or
    :class:`tiers.semantic.embedding.EmbeddingUnavailable`, is its ``__cause__``); it never returns
    a partial or unvalidated one. ``tests/contracts/test_extractor.py`` runs the
    contract against each implementation.

    ``reads_known``: whether it reads :attr:`EpisodeInput.known` (the scope's current facts
    nearest to the episode) and reports in :attr:`Fact.updates` which of them a new fact
    updates; only ids of ``known`` appear there."""

    name: str
    reads_known: bool

    def extract(self, episode: EpisodeInput) -> Extraction: ...
