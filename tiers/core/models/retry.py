"""The retry policy of model calls (:class:`tiers.core.models.ModelClient`): which failures are
worth another request, and how long to wait before it.

Timeouts, 408, 429, 5xx and connection errors are retried after a backoff (exponential with
"equal jitter", capped; a ``Retry-After`` or ``retry-after-ms`` header is honoured, capped
too); any other error (400, 401, 403, 404, context window exceeded...) fails at once. A
caller may also reject a reply (:class:`RetryReply`): it is retried at once, possibly with
changed arguments.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from typing import Any

MAX_BACKOFF_SECONDS = 30.0


class RetryReply(Exception):
    """Raised by a reply check: the reply is unusable, try again at once (no backoff), with
    ``changes`` applied to the request's arguments (e.g. a larger ``max_tokens``)."""

    def __init__(self, cause: str, **changes: Any) -> None:
        super().__init__(cause)
        self.cause = cause
        self.changes = changes


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


_TRANSIENT_NAMES = (
    "Timeout",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "BadGatewayError",
    "APIConnectionError",
)


def is_transient(exc: BaseException, litellm: Any) -> bool:
    """Timeouts, rate limits, 5xx and connection errors: worth another try after a pause."""
    status = status_of(exc)
    if status is not None:
        return status in (408, 429) or status >= 500
    types = tuple(
        t
        for t in (getattr(litellm, name, None) for name in _TRANSIENT_NAMES)
        if isinstance(t, type)
    )
    return isinstance(exc, (*types, TimeoutError, ConnectionError))


def retry_after(exc: BaseException) -> float | None:
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


def backoff(failures: int, base: float, cap: float, random: Callable[[], float]) -> float:
    """The pause after the ``failures``-th transient failure (1-based): exponential with
    "equal jitter" (between half and all of ``base * 2**(n-1)``), capped at ``cap``."""
    ceiling = min(cap, base * 2 ** (failures - 1))
    return ceiling / 2 + random() * ceiling / 2
