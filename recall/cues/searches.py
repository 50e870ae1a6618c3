"""The second searches a query's cues ask for: the query without the names of its scope's
speakers (:mod:`recall.cues.speakers`), and the query within the date or period it names
(:mod:`recall.cues.times`). Each adds the vector and keyword channels' lists for it to the
channels' results, at weights of their own; the engine fuses them all."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future
from dataclasses import replace

from recall import Channel, ChannelNotReady, Query, QueryContext
from recall.cache import QueryVectors
from recall.cues.speakers import without_speakers
from recall.cues.times import cue
from tiers.core.records import Scope
from tiers.semantic.embedding import Embedder
from tiers.semantic.vectors import MemoryPoint

log = logging.getLogger("strata.recall")
Hits = list[tuple[MemoryPoint, float]]
Results = dict[str, Hits]


class CueSearches:
    """The engine's searches for a query's cues. ``queries`` embeds them; ``speakers``: the
    normalized names of a scope's speakers (None: no speaker-neutral search); ``clock``: now,
    in seconds, for the relative time cues."""

    def __init__(
        self,
        channels: Mapping[str, Channel],
        queries: QueryVectors,
        speakers: Callable[[Scope], Collection[str]] | None,
        clock: Callable[[], float],
    ) -> None:
        self._channels = channels
        self._queries = queries
        self._speakers = speakers
        self._clock = clock

    def neutral(self, query: Query) -> tuple[frozenset[str] | None, Query | None]:
        """The normalized names of the query's scope's speakers (None: the recipe's
        ``speaker_neutral`` is off or no scope has any; empty: not known yet), and the query
        without them (None when it names none): known before the query is embedded, so that
        its textual searches can start beside the model's call
        (:meth:`recall.channels.fanout.Fanout.ahead`)."""
        if not query.recipe.speaker_neutral or self._speakers is None:
            return None, None
        try:
            speakers = frozenset(self._speakers(query.scope))
        except ChannelNotReady:  # the scope's speakers are not known yet: the query as asked
            return frozenset(), None
        except Exception as exc:  # the query as asked still answers
            log.warning("recall.neutral_failed", extra={"fields": {"error": str(exc)}})
            return None, None
        text = without_speakers(query.text, speakers)
        return speakers, None if text is None else replace(query, text=text)

    def embedded(
        self,
        embedder: Embedder,
        query: Query,
        speakers: frozenset[str] | None,
        neutral: Query | None,
    ) -> tuple[QueryContext, QueryContext | None]:
        """The query's context, and the context of its ``neutral`` form (:meth:`neutral`),
        None without one: both embedded in one model call. Raises what the embedder raises."""
        texts = [query.text] if neutral is None else [query.text, neutral.text]
        vectors = self._queries.vectors(embedder, query.scope.user_id, texts)
        ctx = QueryContext(query, vectors[0], speakers=speakers)
        if neutral is None:
            return ctx, None
        return ctx, QueryContext(neutral, vectors[1], speakers=speakers)

    def searched(
        self,
        ctx: QueryContext,
        neutral: QueryContext | None,
        results: Results,
        weights: dict[str, float],
        depth: int,
        timings: dict[str, float],
        started: Mapping[str, Future[Hits]],
    ) -> dict[str, float]:
        """The vector and keyword channels' hits for the query's cues, added to ``results``;
        returns the weights of every list to fuse. A list among ``started`` (a search begun
        ahead of the embedding, by its list's name) is read from there:

        - with ``neutral``, the query without the names of its scope's speakers (the engine
          embeds it with the query, :mod:`recall.cues.speakers`): as ``vector:neutral`` and
          ``keyword:neutral``, at their channels' weights;
        - with the recipe's ``time_cues`` and a query naming a date or a period
          (:mod:`recall.cues.times`): the hits within it (and within the query's own time
          range), as ``vector:dated`` and ``keyword:dated``, at ``time_cues`` times their
          channels' weights."""
        if neutral is not None:
            weights = self._again(
                "neutral", lambda _ctx: neutral, 1.0, ctx, results, weights, depth, timings, started
            )
        factor = ctx.query.recipe.time_cues
        if factor > 0:
            weights = self._again(
                "dated", self._within_time, factor, ctx, results, weights, depth, timings, started
            )
        return weights

    def _again(
        self,
        name: str,
        variant: Callable[[QueryContext], QueryContext | None],
        factor: float,
        ctx: QueryContext,
        results: Results,
        weights: dict[str, float],
        depth: int,
        timings: dict[str, float],
        started: Mapping[str, Future[Hits]],
    ) -> dict[str, float]:
        """The vector and keyword channels (those that ran) search ``variant(ctx)`` again,
        when there is one, or read the search ``started`` for it; their lists join
        ``results`` as ``<channel>:<name>`` at ``factor`` times their channels' weights
        (stage ``name``). A failure is logged and leaves the query as asked: none of the
        cue's lists is fused."""
        lexical = [n for n in ("vector", "keyword") if n in results]
        if not lexical:
            return weights
        t = time.perf_counter()
        try:
            again = variant(ctx)
            if again is None:
                return weights
            names = [f"{c}:{name}" for c in lexical]
            lists = {  # the searches begun ahead read last: they had the most time
                n: self._channels[c].search(again, depth)
                for c, n in zip(lexical, names, strict=True)
                if n not in started
            }
            lists.update({n: started[n].result() for n in names if n in started})
            # all or none: a list without its weight would count 1.0
            results.update({n: lists[n] for n in names})
            return {**weights, **{f"{c}:{name}": weights[c] * factor for c in lexical}}
        except Exception as exc:  # the query as asked still answers
            log.warning(f"recall.{name}_failed", extra={"fields": {"error": str(exc)}})
            return weights
        finally:
            timings[name] = _ms(t)

    def window(self, query: Query) -> tuple[int, int] | None:
        """The window of event time (µs, end exclusive) the query's time cue names now, with
        the recipe's ``time_cues``; None without either."""
        if not query.recipe.time_cues > 0:
            return None
        found = cue(query.text, dt.datetime.fromtimestamp(self._clock(), dt.UTC))
        return None if found is None else (found.start_us, found.end_us)

    def _within_time(self, ctx: QueryContext) -> QueryContext | None:
        """The query within the window of its time cue and its own time range; None when it
        names no time, or the two do not meet."""
        query = ctx.query
        window = self.window(query)
        if window is None:
            return None
        start = window[0] if query.start_us is None else max(window[0], query.start_us)
        end = window[1] if query.end_us is None else min(window[1], query.end_us)
        if start >= end:
            return None
        return QueryContext(replace(query, start_us=start, end_us=end), ctx.vector)


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
