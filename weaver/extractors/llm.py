"""The LLM extractor: any model behind ``litellm`` (OpenAI-compatible servers included).

One extraction is one chat completion, asked for a JSON object (``response_format`` plus the
JSON schema in the prompt), validated strictly, retried a bounded number of times. The prompt,
its injection hardening and the validation policy live in :mod:`weaver.extractors.llm_reply`;
this module sends the requests and decides what to retry.

A reply that fails validation is retried, and the next attempt is told why.
``finish_reason == "length"`` with an unparsable reply is a truncation: the next attempt gets
twice the ``max_tokens`` (at most four times the configured value).

Failures: a bad reply (not JSON, truncated, invalid) is retried at once; timeouts, 408, 429,
5xx and connection errors are retried after a backoff (exponential with jitter, capped; a
``Retry-After``/``retry-after-ms`` header is honoured, capped); any other error (401, 403, 400,
404, context window exceeded...) fails at once. In all cases at most ``max_retries + 1``
requests are sent, then :class:`weaver.errors.ExtractionFailed` says how many and the last
cause. ``litellm`` and the OpenAI SDK retry on their own by default (3 requests for one call):
both are switched off (``num_retries=0``, ``max_retries=0``), the retries here are the only ones.

``litellm`` takes about 3 s to import: it is imported on the first extraction, never at
module import, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` set first so that importing it does
not fetch the model cost map from the network.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random as _random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.llm import LLMTotals, import_litellm
from daemon.security_settings import read_secret_file
from weaver.errors import ExtractionFailed
from weaver.extractors import EpisodeInput, Extraction
from weaver.extractors.llm_reply import InvalidReply, build_messages, parse_reply

__all__ = [
    "LLMCallStats",
    "LLMExtractor",
]

log = logging.getLogger("strata.weaver.llm")

MAX_BACKOFF_SECONDS = 30.0


# -- the extractor ---------------------------------------------------------------------------


@dataclass
class LLMCallStats:
    """What one :meth:`LLMExtractor.extract` call cost (also filled when it fails)."""

    attempts: int = 0  # requests sent (= LLM calls)
    prompt_tokens: int = 0  # summed over the attempts that got a reply
    completion_tokens: int = 0
    failures: list[str] = field(default_factory=list)  # cause of each failed attempt
    dropped_facts: int = 0  # facts of the accepted reply dropped for citing unknown seqs
    slept_seconds: float = 0.0  # total backoff
    ok: bool = False


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _is_transient(exc: BaseException, litellm: Any) -> bool:
    """Timeouts, rate limits, 5xx and connection errors: worth another try after a pause."""
    transient_types = tuple(
        t
        for t in (
            getattr(litellm, name, None)
            for name in (
                "Timeout",
                "RateLimitError",
                "InternalServerError",
                "ServiceUnavailableError",
                "BadGatewayError",
                "APIConnectionError",
            )
        )
        if isinstance(t, type)
    )
    status = _status_of(exc)
    if status is not None:
        return status in (408, 429) or status >= 500
    return isinstance(exc, (*transient_types, TimeoutError, ConnectionError))


def _retry_after(exc: BaseException) -> float | None:
    """Seconds asked for by ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date).

    litellm puts the provider's response headers on ``exc.litellm_response_headers``
    (``exc.response.headers`` is empty for OpenAI-compatible providers)."""
    for source in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "headers", None),
    ):
        if source is None or not hasattr(source, "get"):
            continue
        try:
            ms = source.get("retry-after-ms")
            if ms is not None:
                return max(0.0, float(ms) / 1000.0)
            value = source.get("retry-after")
            if value is None:
                continue
            try:
                return max(0.0, float(value))
            except ValueError:
                when = email.utils.parsedate_to_datetime(str(value))
                return max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError, OverflowError):
            continue
    return None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class LLMExtractor:
    """:class:`weaver.extractors.Extractor` through ``litellm.completion``."""

    def __init__(
        self,
        *,
        model: str,
        api_base: str | None = None,
        api_key_env: str | None = None,
        api_key_file: Path | None = None,
        timeout_seconds: float = 30.0,
        max_retries: int = 3,
        backoff_seconds: float = 1.0,
        max_backoff_seconds: float = MAX_BACKOFF_SECONDS,
        max_tokens: int = 2048,
        temperature: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if not model:
            raise ValueError("model must not be empty")
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be > 0")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if backoff_seconds < 0 or max_backoff_seconds < 0:
            raise ValueError("backoff_seconds and max_backoff_seconds must be >= 0")
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        if not 0.0 <= temperature <= 2.0:
            raise ValueError("temperature must be in [0, 2]")
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.api_key_file = api_key_file
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.name = f"llm:{model}"
        self._sleep = sleep
        self._random = random
        self._local = threading.local()
        self._lock = threading.Lock()
        self.totals = LLMTotals()

    def __repr__(self) -> str:  # the key never appears: only the variable's name
        return (
            f"LLMExtractor(model={self.model!r}, api_base={self.api_base!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    @property
    def last_stats(self) -> LLMCallStats | None:
        """The stats of this thread's latest :meth:`extract` call (success or failure)."""
        stats: LLMCallStats | None = getattr(self._local, "stats", None)
        return stats

    def backoff(self, failures: int) -> float:
        """The pause after the ``failures``-th transient failure (1-based): exponential with
        "equal jitter" (between half and all of ``backoff * 2**(n-1)``), capped."""
        ceiling = min(self.max_backoff_seconds, self.backoff_seconds * 2 ** (failures - 1))
        return ceiling / 2 + self._random() * ceiling / 2

    def extract(self, episode: EpisodeInput) -> Extraction:
        stats = LLMCallStats()
        self._local.stats = stats
        try:
            extraction = self._extract(episode, stats)
        except BaseException:
            self._account(stats)
            raise
        stats.ok = True
        self._account(stats)
        return extraction

    def _account(self, stats: LLMCallStats) -> None:
        with self._lock:
            t = self.totals
            t.extractions += 1
            t.failed_extractions += 0 if stats.ok else 1
            t.llm_calls += stats.attempts
            t.failed_calls += len(stats.failures)
            t.prompt_tokens += stats.prompt_tokens
            t.completion_tokens += stats.completion_tokens

    def _api_key(self) -> str | None:
        if self.api_key_file is not None:  # read per call: a rotated key is picked up
            try:
                return read_secret_file(self.api_key_file)
            except OSError as exc:
                reason = f"cannot read the API key file: {exc.strerror}"
                raise ExtractionFailed(f"{self.name}: {reason}") from None
        if self.api_key_env is None:
            # A self-hosted server (api_base) often needs no key, but OpenAI-style clients
            # insist on one; elsewhere litellm falls back to the provider's usual variable.
            return "no-key" if self.api_base else None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise ExtractionFailed(
                f"{self.name}: environment variable {self.api_key_env} (the API key) is not set"
            )
        return key

    def _extract(self, episode: EpisodeInput, stats: LLMCallStats) -> Extraction:
        if not episode.turns:
            raise ExtractionFailed(f"episode {episode.episode_id} has no turns to extract from")
        api_key = self._api_key()
        litellm = import_litellm()
        total = self.max_retries + 1
        max_tokens = self.max_tokens
        rejected: str | None = None
        transient = 0
        cause = ""

        def redact(text: str) -> str:
            return text.replace(api_key, "***") if api_key else text

        for attempt in range(1, total + 1):
            stats.attempts = attempt
            try:
                response = litellm.completion(
                    model=self.model,
                    messages=build_messages(episode, rejected),
                    api_base=self.api_base,
                    api_key=api_key,
                    timeout=self.timeout_seconds,
                    max_tokens=max_tokens,
                    temperature=self.temperature,
                    response_format={"type": "json_object"},
                    drop_params=True,  # providers without JSON mode: the prompt still asks
                    num_retries=0,  # litellm's own retries: off (ours are below)
                    max_retries=0,  # the OpenAI SDK's retries (2 by default): off
                )
            except Exception as exc:
                status = _status_of(exc)
                label = type(exc).__name__ + (f" {status}" if status else "")
                cause = _short(redact(f"{label}: {exc}"))
                stats.failures.append(cause)
                if not _is_transient(exc, litellm):
                    raise ExtractionFailed(
                        f"{self.name}: extraction of episode {episode.episode_id} failed on "
                        f"attempt {attempt} of {total}, not retryable: {cause}"
                    ) from exc
                log.warning(
                    "%s: attempt %d/%d for episode %s failed: %s",
                    self.name,
                    attempt,
                    total,
                    episode.episode_id,
                    cause,
                )
                if attempt < total:
                    transient += 1
                    delay = self.backoff(transient)
                    hinted = _retry_after(exc)
                    if hinted is not None:
                        delay = min(hinted, self.max_backoff_seconds)
                    stats.slept_seconds += delay
                    self._sleep(delay)
                continue

            usage = getattr(response, "usage", None)
            stats.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            stats.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
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
                    rejected = _short(str(exc), 300)
                cause = _short(cause)
                stats.failures.append(cause)
                log.warning(
                    "%s: attempt %d/%d for episode %s: bad reply: %s",
                    self.name,
                    attempt,
                    total,
                    episode.episode_id,
                    cause,
                )
                continue
            stats.dropped_facts = dropped
            if dropped:
                log.info(
                    "%s: episode %s: dropped %d facts citing unknown turns",
                    self.name,
                    episode.episode_id,
                    dropped,
                )
            return extraction

        raise ExtractionFailed(
            f"{self.name}: extraction of episode {episode.episode_id} failed after {total} "
            f"attempts; last cause: {cause}"
        )
