"""Errors of the Memory Weaver."""

from __future__ import annotations

from tiers.core.errors import StrataError, Unavailable


class WeaverError(StrataError):
    """Root of the weaver's errors."""


class ExtractionFailed(WeaverError):
    """An extractor could not produce a valid result for an episode (after its retries)."""


class ExtractionDeferred(WeaverError, Unavailable):
    """The LLM failed an episode and ``llm.on_failure`` is "wait": it stays pending for a later
    run (the weaver backs off)."""


class RewriteFailed(WeaverError):
    """A rebuild rewrote every scope but some, whose entity profiles or digests raised
    (:meth:`tiers.journal.stale.StaleScopes.rewrite`); they stay marked for the next run."""
