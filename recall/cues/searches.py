"""The second searches a query's cues ask for: the query without the names of its scope's
speakers (:mod:`recall.cues.speakers`), and the query within the date or period it names
(:mod:`recall.cues.times`). Each adds the vector and keyword channels' lists for it to the
channels' results, at weights of their own; the engine fuses them all."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace

from recall import Channel, QueryContext
from recall.cache import QueryVectors
from recall.cues.speakers import without_speakers
from recall.cues.times import cue
from tiers.core.records import Scope
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint

log = logging.getLogger("strata.recall")
Results = dict[str, list[tuple[MemoryPoint, float]]]


class CueSearches:
    """The engine's searches for a query's cues. ``speakers``: the normalized names of a
    scope's speakers (None: no speaker-neutral search); ``clock``: now, in seconds, for the
    relative time cues."""

    def __init__(
        self,
        semantic: SemanticStore,
        channels: Mapping[str, Channel],
        queries: QueryVectors,
        speakers: Callable[[Scope], Collection[str]] | None,
        clock: Callable[[], float],
    ) -> None:
        self._semantic = semantic
        self._channels = channels
        self._queries = queries
        self._speakers = speakers
        self._clock = clock

    def neutral(
        self,
        ctx: QueryContext,
        results: Results,
        weights: dict[str, float],
        depth: int,
        timings: dict[str, float],
    ) -> dict[str, float]:
        """With the recipe's ``speaker_neutral`` and a query naming a speaker of its scope:
        the vector and keyword channels' hits for the query without those names, added to
        ``results`` as ``vector:neutral`` and ``keyword:neutral`` at their channels'
        weights. Returns the weights of every list to fuse."""
        query = ctx.query
        lexical = [n for n in ("vector", "keyword") if n in results]
        if not (query.recipe.speaker_neutral and self._speakers is not None and lexical):
            return weights
        t = time.perf_counter()
        try:
            text = without_speakers(query.text, self._speakers(query.scope))
            if text is None:
                return weights
            embedder, _vectors = self._semantic.wait_ready(0)
            vector = self._queries.vector(embedder, query.scope.user_id, text)
            neutral = QueryContext(replace(query, text=text), vector)
            out = dict(weights)
            for name in lexical:
                results[f"{name}:neutral"] = self._channels[name].search(neutral, depth)
                out[f"{name}:neutral"] = weights[name]
            return out
        except Exception as exc:  # the query as asked still answers
            log.warning("recall.neutral_failed", extra={"fields": {"error": str(exc)}})
            return weights
        finally:
            timings["neutral"] = _ms(t)

    def dated(
        self,
        ctx: QueryContext,
        results: Results,
        weights: dict[str, float],
        depth: int,
        timings: dict[str, float],
    ) -> dict[str, float]:
        """With the recipe's ``time_cues`` and a query naming a date or a period
        (:mod:`recall.cues.times`): the vector and keyword channels' hits within it (and
        within the query's own time range), added to ``results`` as ``vector:dated`` and
        ``keyword:dated`` at ``time_cues`` times their channels' weights. Returns the weights
        of every list to fuse."""
        query = ctx.query
        lexical = [n for n in ("vector", "keyword") if n in results]
        if not (query.recipe.time_cues > 0 and lexical):
            return weights
        window = cue(query.text, dt.datetime.fromtimestamp(self._clock(), dt.UTC))
        if window is None:
            return weights
        t = time.perf_counter()
        try:
            start = (
                window.start_us if query.start_us is None else max(window.start_us, query.start_us)
            )
            end = window.end_us if query.end_us is None else min(window.end_us, query.end_us)
            if start >= end:
                return weights
            dated = QueryContext(replace(query, start_us=start, end_us=end), ctx.vector)
            out = dict(weights)
            for name in lexical:
                results[f"{name}:dated"] = self._channels[name].search(dated, depth)
                out[f"{name}:dated"] = weights[name] * query.recipe.time_cues
            return out
        except Exception as exc:  # the query as asked still answers
            log.warning("recall.dated_failed", extra={"fields": {"error": str(exc)}})
            return weights
        finally:
            timings["dated"] = _ms(t)


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
