"""The LLM extractor: any model behind ``litellm`` (OpenAI-compatible servers included).

One extraction is one chat completion, asked for a JSON object (``response_format`` plus the
JSON schema in the prompt), validated strictly, retried a bounded number of times. The prompt,
its injection hardening and the validation policy live in :mod:`weaver.extractors.llm_reply`;
this module sends the requests and decides what to retry.

A reply that fails validation is retried, and the next attempt is told why.
``finish_reason == "length"`` with an unparsable reply is a truncation: the next attempt gets
twice the ``max_tokens`` (at most four times the configured value).

Failures: a bad reply (not JSON, truncated, invalid) is retried at once; timeouts, 408, 429,
5xx and connection errors are retried after a backoff; any other error fails at once. In all
cases at most ``max_retries + 1`` requests are sent, then :class:`weaver.errors.ExtractionFailed`
says how many and the last cause. The requests, the key, the backoff and the retries are the
model client's (:class:`tiers.core.models.ModelClient`); this module builds the prompt and judges
the replies.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from tiers.core.errors import ModelError
from tiers.core.models import CallStats, LLMTotals, ModelClient, short
from tiers.core.models.retry import RetryReply
from weaver.errors import ExtractionFailed
from weaver.extractors import EpisodeInput, Extraction
from weaver.extractors.llm_reply import InvalidReply, build_messages, parse_reply

__all__ = [
    "LLMCallStats",
    "LLMExtractor",
]

log = logging.getLogger("strata.weaver.llm")


@dataclass
class LLMCallStats(CallStats):
    """What one :meth:`LLMExtractor.extract` call cost (also filled when it fails)."""

    dropped_facts: int = 0  # facts of the accepted reply dropped for citing unknown seqs


class LLMExtractor:
    """:class:`weaver.extractors.Extractor` through the model client's chat completions."""

    def __init__(
        self, client: ModelClient, *, max_tokens: int = 2048, temperature: float = 0.0
    ) -> None:
        """``client`` sends the requests (its key, timeout, retries and counters)."""
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        if not 0.0 <= temperature <= 2.0:
            raise ValueError("temperature must be in [0, 2]")
        self.client = client
        self.reads_known = True  # a fact may update one the scope knows (Fact.updates)
        self.name = f"llm:{client.model}"
        self.model = client.model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._local = threading.local()

    def __repr__(self) -> str:  # the client's: the key never appears
        return f"LLMExtractor({self.client!r})"

    @property
    def totals(self) -> LLMTotals:
        return self.client.totals

    @property
    def last_stats(self) -> LLMCallStats | None:
        """The stats of this thread's latest :meth:`extract` call (success or failure)."""
        stats: LLMCallStats | None = getattr(self._local, "stats", None)
        return stats

    def extract(self, episode: EpisodeInput) -> Extraction:
        stats = LLMCallStats()
        self._local.stats = stats
        try:
            if not episode.turns:
                raise ExtractionFailed(f"episode {episode.episode_id} has no turns to extract from")
            extraction = self._extract(episode, stats)
        except BaseException:
            self.client.account(extractions=1, failed_extractions=1)
            raise
        self.client.account(extractions=1)
        return extraction

    def _extract(self, episode: EpisodeInput, stats: LLMCallStats) -> Extraction:
        max_tokens = self.max_tokens

        def check(response: Any) -> Extraction:
            nonlocal max_tokens
            try:
                choice = response.choices[0]
                content = choice.message.content
                finish = choice.finish_reason
            except (AttributeError, IndexError, TypeError):
                content, finish = None, None
            try:
                extraction, dropped = parse_reply(content, episode, self.name)
            except InvalidReply as exc:
                if finish == "length":
                    cause = f"reply truncated at max_tokens={max_tokens} ({exc})"
                    rejected = "it was cut off at the token limit; be more concise"
                    max_tokens = min(max_tokens * 2, self.max_tokens * 4)
                else:
                    cause = str(exc)
                    rejected = short(str(exc), 300)
                log.warning(
                    "%s: attempt %d/%d for episode %s: bad reply: %s",
                    self.name,
                    stats.attempts,
                    self.client.max_retries + 1,
                    episode.episode_id,
                    short(cause),
                )
                raise RetryReply(
                    cause, messages=build_messages(episode, rejected), max_tokens=max_tokens
                ) from None
            stats.dropped_facts = dropped
            if dropped:
                log.info(
                    "%s: episode %s: dropped %d facts citing unknown turns",
                    self.name,
                    episode.episode_id,
                    dropped,
                )
            return extraction

        try:
            return self.client.complete(
                check,
                what=f"extraction of episode {episode.episode_id}",
                stats=stats,
                messages=build_messages(episode, None),
                max_tokens=max_tokens,
                temperature=self.temperature,
                response_format={"type": "json_object"},
                drop_params=True,  # providers without JSON mode: the prompt still asks
            )
        except ModelError as exc:
            raise ExtractionFailed(str(exc)) from exc
