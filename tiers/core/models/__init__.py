"""The one client for models behind ``litellm``: chat completions (the weaver's LLM extractor,
the LLM reranker) and embeddings (:mod:`tiers.semantic.embedding.remote`).

:class:`ModelClient` owns everything a call to a model needs, once:

- the API key: from an environment variable, or from a file read on every call (a rotated key
  is picked up); a self-hosted server (``api_base``) without a key gets a placeholder, since
  OpenAI-style clients insist on one. The key never appears in ``repr`` or in an error.
- the timeout of each request, and the retries (which failures, how long a pause:
  :mod:`tiers.core.models.retry`). At most ``max_retries + 1`` requests are sent per call.
  ``litellm`` and the OpenAI SDK retry on their own by default: both are switched off, the
  retries here are the only ones.
- embedding batches: ``batch_size`` texts per request, up to ``max_in_flight`` of a call at
  once (:mod:`tiers.core.models.batches`) on a thread pool of the client's, ended by ``close``.
- the errors: :class:`tiers.core.errors.ModelUnavailable` (the endpoint is down, slow or
  overloaded: gRPC UNAVAILABLE) and :class:`tiers.core.errors.ModelRequestFailed` (it refused the
  request or its replies were unusable: FAILED_PRECONDITION), each naming the model, the
  endpoint, the number of attempts and the last cause.
- the counters (:class:`LLMTotals`), read by the metrics collector.

``litellm`` takes about 3 s to import: it is imported on the first call, or in the background
once a client is configured, never at module import (:mod:`tiers.core.models.library`).
"""

from __future__ import annotations

import logging
import os
import random as _random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from tiers.core.errors import ModelRequestFailed, ModelUnavailable
from tiers.core.models.batches import Abandoned, PoolClosed, in_flight, vectors_of
from tiers.core.models.library import import_litellm, preload_litellm
from tiers.core.models.retry import (
    MAX_BACKOFF_SECONDS,
    RetryReply,
    backoff,
    is_transient,
    retry_after,
    status_of,
)

__all__ = [
    "CallStats",
    "LLMTotals",
    "ModelClient",
    "import_litellm",
    "preload_litellm",
    "read_secret_file",
]

log = logging.getLogger("strata.models")
T = TypeVar("T")


def read_secret_file(path: Path) -> str:
    """A secret kept in a file: its content without surrounding whitespace."""
    return path.read_text().strip()


@dataclass
class LLMTotals:
    """Counters over a client's lifetime, updated under its lock (:meth:`ModelClient.account`)
    and read by the metrics collector."""

    extractions: int = 0  # the extractor's episodes (the others leave these at 0)
    failed_extractions: int = 0
    llm_calls: int = 0  # requests sent
    failed_calls: int = 0  # requests that failed or whose reply was rejected
    prompt_tokens: int = 0  # from the replies' usage
    completion_tokens: int = 0
    embedded_texts: int = 0  # texts sent to an embedding model


@dataclass
class CallStats:
    """What one call cost (also filled when it fails)."""

    attempts: int = 0  # requests sent
    prompt_tokens: int = 0  # summed over the attempts that got a reply
    completion_tokens: int = 0
    failures: list[str] = field(default_factory=list)  # cause of each failed attempt
    slept_seconds: float = 0.0  # total backoff
    ok: bool = False

    def add(self, other: CallStats) -> None:
        """Add what ``other`` (one batch of the same call) cost."""
        self.attempts += other.attempts
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.failures += other.failures
        self.slept_seconds += other.slept_seconds


def short(text: str, limit: int = 300) -> str:
    """One line, at most ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class ModelClient:
    """Calls one model through litellm: :meth:`complete` and :meth:`embed`. Thread-safe."""

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
        batch_size: int = 64,
        max_in_flight: int = 1,
        name: str = "",
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
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.model = model
        self.api_base = api_base or None
        self.api_key_env = api_key_env or None
        self.api_key_file = api_key_file
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.batch_size = batch_size
        self.max_in_flight = max_in_flight
        self._pool: ThreadPoolExecutor | None = None  # made by the first concurrent call
        self._closed = threading.Event()
        # How errors and logs name this client: the caller's name, or the model and endpoint.
        self.name = name or self.endpoint
        self._sleep = sleep
        self._random = random
        self._lock = threading.Lock()
        self.totals = LLMTotals()

    @property
    def endpoint(self) -> str:
        """The model and where it is served, for messages."""
        return f"{self.model} at {self.api_base}" if self.api_base else self.model

    def __repr__(self) -> str:  # the key never appears: only where it is kept
        return (
            f"ModelClient(model={self.model!r}, api_base={self.api_base!r}, "
            f"api_key_env={self.api_key_env!r}, api_key_file={self.api_key_file!r})"
        )

    # -- the key -----------------------------------------------------------------------------

    def api_key(self) -> str | None:
        """The key for the next request; raises ModelRequestFailed when it cannot be had."""
        if self.api_key_file is not None:  # read per call: a rotated key is picked up
            try:
                return read_secret_file(self.api_key_file)
            except OSError as exc:
                self._refuse(f"cannot read the API key file: {exc.strerror}")
        if self.api_key_env is None:
            # A self-hosted server (api_base) often needs no key, but OpenAI-style clients
            # insist on one; elsewhere litellm falls back to the provider's usual variable.
            return "no-key" if self.api_base else None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            self._refuse(f"environment variable {self.api_key_env} (the API key) is not set")
        return key

    def _refuse(self, detail: str) -> NoReturn:
        raise ModelRequestFailed(f"{self.name}: {detail}", detail=detail) from None

    # -- accounting --------------------------------------------------------------------------

    def account(self, **deltas: int) -> None:
        """Add to :attr:`totals` (under the lock)."""
        with self._lock:
            for name, delta in deltas.items():
                setattr(self.totals, name, getattr(self.totals, name) + delta)

    # -- calls -------------------------------------------------------------------------------

    def _request(self, api_key: str | None) -> dict[str, Any]:
        """What every request sends besides its own arguments."""
        return {
            "model": self.model,
            "api_base": self.api_base,
            "api_key": api_key,
            "timeout": self.timeout_seconds,
            "num_retries": 0,  # litellm's own retries: off (ours are in _call)
            "max_retries": 0,  # the OpenAI SDK's retries (2 by default): off
        }

    def complete(
        self,
        check: Callable[[Any], T],
        *,
        what: str = "completion",
        stats: CallStats | None = None,
        **kwargs: Any,
    ) -> T:
        """``litellm.completion(**kwargs)`` with the model, endpoint, key, timeout and retries
        filled in; ``check(response)`` gives the result or raises :class:`RetryReply`."""

        def send(litellm: Any, api_key: str | None, args: dict[str, Any]) -> Any:
            return litellm.completion(**self._request(api_key), **args)

        return self._call(send, check, what, stats or CallStats(), dict(kwargs))

    def embed(self, texts: list[str], stats: CallStats | None = None) -> list[list[float]]:
        """One vector per text, in order: ``batch_size`` texts per request, up to
        ``max_in_flight`` requests at once (:mod:`tiers.core.models.batches`), each retried on its
        own; a reply with the wrong number of vectors, or vectors of different sizes, is
        retried like any unusable reply. A failing batch fails the call with its error."""
        stats = stats if stats is not None else CallStats()
        size = self.batch_size
        batches = [texts[i : i + size] for i in range(0, len(texts), size)]
        if len(batches) < 2 or self.max_in_flight < 2:
            return [v for batch in batches for v in self._embed_batch(batch, stats)]
        each = [CallStats() for _ in batches]
        jobs = [partial(self._embed_batch, b, s) for b, s in zip(batches, each, strict=True)]
        try:
            rows = in_flight(jobs, self._executor, self.max_in_flight)
        except PoolClosed:
            self._refuse_closed()
        finally:
            for batch_stats in each:
                stats.add(batch_stats)
        stats.ok = True
        return [v for batch_rows in rows for v in batch_rows]

    def _embed_batch(
        self, batch: list[str], stats: CallStats, stop: threading.Event | None = None
    ) -> list[list[float]]:
        def send(litellm: Any, api_key: str | None, args: dict[str, Any]) -> Any:
            return litellm.embedding(**self._request(api_key), **args)

        def check(response: Any) -> list[list[float]]:
            return vectors_of(response, len(batch))

        what = f"embedding {_plural(len(batch), 'text')}"
        vectors = self._call(send, check, what, stats, {"input": batch}, stop)
        self.account(embedded_texts=len(batch))
        return vectors

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._closed.is_set():
                self._refuse_closed()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_in_flight, "model-requests")
            return self._pool

    def close(self) -> None:
        """Refuse new calls, end retries and, after the requests in flight, the thread pool."""
        self._closed.set()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _refuse_closed(self) -> NoReturn:
        detail = "the client is closed"
        raise ModelUnavailable(f"{self.name}: {detail}", detail=detail)

    def _halt(self, stop: threading.Event | None) -> None:
        """Before a retry: stop when the client closed or another batch of the call failed."""
        if self._closed.is_set():
            self._refuse_closed()
        if stop is not None and stop.is_set():
            raise Abandoned

    def _call(
        self,
        send: Callable[[Any, str | None, dict[str, Any]], Any],
        check: Callable[[Any], T],
        what: str,
        stats: CallStats,
        args: dict[str, Any],
        stop: threading.Event | None = None,
    ) -> T:
        self._halt(None)
        api_key = self.api_key()
        litellm = import_litellm()
        total = self.max_retries + 1
        transient = 0
        cause = ""
        down = False  # whether the last failure was the endpoint's (not a rejected reply)

        secret = api_key if self.api_key_env or self.api_key_file else None  # not "no-key"

        def redact(text: str) -> str:
            return text.replace(secret, "***") if secret else text

        for attempt in range(1, total + 1):
            if attempt > 1:
                self._halt(stop)
            stats.attempts += 1
            self.account(llm_calls=1)
            try:
                response = send(litellm, api_key, args)
            except Exception as exc:
                status = status_of(exc)
                label = type(exc).__name__ + (f" {status}" if status else "")
                cause = short(redact(f"{label}: {exc}"))
                stats.failures.append(cause)
                self.account(failed_calls=1)
                if not is_transient(exc, litellm):
                    detail = f"failed on attempt {attempt} of {total}, not retryable: {cause}"
                    raise ModelRequestFailed(
                        f"{self.name}: {what} {detail}", detail=detail, cause=cause
                    ) from exc
                down = True
                log.warning(
                    "model.attempt_failed",
                    extra={
                        "fields": {
                            "model": self.name,
                            "what": what,
                            "attempt": f"{attempt}/{total}",
                            "error": cause,
                        }
                    },
                )
                if attempt < total:
                    self._halt(stop)  # no pause before a retry that will not be sent
                    transient += 1
                    delay = backoff(
                        transient, self.backoff_seconds, self.max_backoff_seconds, self._random
                    )
                    hinted = retry_after(exc)
                    if hinted is not None:
                        delay = min(hinted, self.max_backoff_seconds)
                    stats.slept_seconds += delay
                    self._sleep(delay)
                continue

            usage = getattr(response, "usage", None)
            prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
            completion = int(getattr(usage, "completion_tokens", 0) or 0)
            stats.prompt_tokens += prompt
            stats.completion_tokens += completion
            self.account(prompt_tokens=prompt, completion_tokens=completion)
            try:
                result = check(response)
            except RetryReply as exc:
                cause = short(redact(exc.cause))
                stats.failures.append(cause)
                self.account(failed_calls=1)
                args.update(exc.changes)
                down = False
                continue
            stats.ok = True
            return result

        detail = f"failed after {_plural(total, 'attempt')}; last cause: {cause}"
        error = ModelUnavailable if down else ModelRequestFailed
        raise error(f"{self.name}: {what} {detail}", detail=detail, cause=cause)
