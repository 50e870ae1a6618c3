"""The Recall engine: channels in, ranked and explained candidates out.

Stages (each timed): read the names of the scope's speakers (``speakers``: from its graph,
loaded, or built when it is small, on a first visit; the user's vectors opened if they were
not); embed the query (for a scope whose graph walk is large, the
textual channels, :class:`recall.Textual`, search beside it on threads of their own, the query
as asked, then without the names of its scope's speakers); run the
channels (the graph channel, the slow one, in parallel with the others); when the query names
a speaker of its scope, run the vector and keyword channels again on the query without those
names (``neutral``), and when it names a date or a period, within it (``dated``; both
:mod:`recall.cues.searches`); fuse with RRF; merge hits that share their sources; apply the
superseded factor and the recency decay; MMR; rerank the top, or reorder the hits by the
recipe's learned fusion (``learned``, :mod:`recall.learned`); put a newer statement of a rival
value first (:mod:`recall.cues.updates`). A failed channel is degraded and the others go on;
a failed reranker keeps the fused order.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Collection, Hashable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import TypeVar

from recall import (
    Candidate,
    Channel,
    ChannelNotReady,
    Closable,
    Deferring,
    Query,
    QueryContext,
    Reranker,
    RerankFailed,
    SharedSearch,
    learned,
)
from recall.cache import QueryVectors, SemanticCache, cache_key
from recall.channels.fanout import Fanout, drop
from recall.cues.searches import CueSearches
from recall.cues.speakers import mentioned
from recall.cues.updates import current_first
from recall.expansion import expand
from recall.fusion import mmr, rrf
from recall.messages import answers_first, fuse_messages, message_hits
from recall.provenance import merge_by_sources, order_sources
from recall.recipe import THREADS
from recall.result import RecallResult
from tiers.core.events import Events
from tiers.core.priority import RECALL_NICE, REQUESTS, lower_this_thread
from tiers.core.records import Scope
from tiers.keyed.access import AccessCounts
from tiers.rights.forget.cascade import ScopeCache
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint

log = logging.getLogger("strata.recall")
T = TypeVar("T")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Recalled:
    """Event of :attr:`RecallEngine.events`: a Recall finished (the metrics observe it)."""

    result: RecallResult


class RecallEngine:
    def __init__(
        self,
        semantic: SemanticStore,
        channels: Mapping[str, Channel],
        rerankers: Mapping[str, Reranker],
        cache: SemanticCache | None = None,
        clock: Callable[[], float] = time.time,
        access: AccessCounts | None = None,
        query_vectors: int = 256,
        speakers: Callable[[Scope], Collection[str]] | None = None,
        threads: int = THREADS,
        ahead: Callable[[Scope], bool] | None = None,
    ) -> None:
        """``speakers``: the normalized names of a scope's speakers (the graph channel's
        :meth:`~recall.graph.channel.GraphChannel.speakers`), for the speaker-neutral query;
        None: no such query. ``threads``: requests computed at once (``recall.threads``).
        ``ahead``: whether a query of the scope starts its textual channels' searches before
        its embedding (:meth:`recall.channels.fanout.Fanout.ahead`; the graph channel's
        :meth:`~recall.graph.channel.GraphChannel.walks_large`); None: never."""
        self.cache = cache
        self._speakers = speakers
        self._access = access
        self._semantic = semantic
        self._channels = dict(channels)
        self._rerankers = dict(rerankers)
        self._clock = clock
        # Recall requests run on their own threads, so that a burst of them does not queue
        # the daemon's other blocking work (session ends, listings) behind it; below the
        # event loop's CPU priority, so that the appends are served first (tiers.core.priority).
        self._requests = ThreadPoolExecutor(
            threads, "recall-request", lower_this_thread, (RECALL_NICE,)
        )
        self._fanout = Fanout(self._channels, threads, ahead)
        # Query vectors, cached per user and text; concurrent requests share model calls (a
        # batch of 8 costs about 2x one).
        self._queries = QueryVectors(query_vectors)
        self._cues = CueSearches(self._channels, self._queries, speakers, clock)
        # Observers (metrics), called with every result; they must be quick and not raise.
        self.events = Events("recall")  # Recalled

    def close(self) -> None:
        """Stop the request threads and the channels' background work. Idempotent."""
        self._requests.shutdown(wait=False, cancel_futures=True)
        self._fanout.close()
        for channel in self._channels.values():
            if isinstance(channel, Closable):
                channel.close()

    def submit(self, query: Query) -> Future[RecallResult]:
        """:meth:`recall` on the engine's request threads."""
        return self._requests.submit(self.recall, query)

    def submit_then(self, query: Query, answer: Callable[[RecallResult], T]) -> Future[T]:
        """:meth:`recall`, then ``answer`` on its result, on the same request thread: what
        a caller builds of the result (packing, the reply's messages) is not built on the
        event loop that serves the appends."""

        def run() -> T:
            with REQUESTS.serving(), self.deferred():
                return answer(self.recall(query))

        return self._requests.submit(run)

    def deferred(self) -> ExitStack:
        """A context around one query on its thread: the background work its channels are
        asked for starts at its end (:class:`recall.Deferring`)."""
        stack = ExitStack()
        for channel in self._channels.values():
            if isinstance(channel, Deferring):
                stack.enter_context(channel.deferred())
        return stack

    def scope_caches(self) -> list[ScopeCache]:
        """What holds per-user recall data (the semantic cache, channel caches), for Forget."""
        found: list[object] = [self.cache, self._queries, *self._channels.values()]
        return [c for c in found if isinstance(c, ScopeCache)]

    def recall(self, query: Query) -> RecallResult:
        """Raises EmbeddingUnavailable while Tier 3 is starting. Served within
        :data:`~tiers.core.priority.REQUESTS`: the background reads step aside meanwhile."""
        with REQUESTS.serving(), self.deferred():
            return self._recall(query)

    def _recall(self, query: Query) -> RecallResult:
        timings: dict[str, float] = {}
        began = time.perf_counter()
        embedder, _vectors = self._semantic.wait_ready(0)
        # Before any read of Tier 3: an answer read before a write is not cached after it.
        stamp = self.cache.stamp(query.scope.user_id) if self.cache is not None else 0
        weights = query.weights()
        depth = max(query.recipe.depth, query.k)
        t = time.perf_counter()  # a scope's graph is read here first (its speakers' names)
        speakers, neutral_query = self._cues.neutral(query)
        if speakers is not None:
            timings["speakers"] = _ms(t)
        ahead = self._fanout.ahead(query, list(weights), depth, timings, neutral_query)
        try:
            t = time.perf_counter()
            ctx, neutral = self._cues.embedded(embedder, query, speakers, neutral_query)
            timings["embed"] = _ms(t)
            cached = None
            if self.cache is not None:
                cached = self.cache.get(query.scope.user_id, self._params(query), ctx.vector)
        except BaseException:
            drop(ahead)
            raise
        if cached is not None:
            drop(ahead)
            timings = {n: ms for n, ms in timings.items() if n not in ahead}
            timings["total"] = _ms(began)
            return self._observed(replace(cached, timings=timings, cached=True))

        if "vector" in weights:  # one dense search for the vector channel and the graph's seeds
            vector, flt = ctx.vector.tolist(), query.filter()  # not ctx: it holds the search
            ctx.dense = SharedSearch(depth, lambda: _vectors.search_dense(vector, flt, depth))
        results, degraded = self._fanout.run(ctx, list(weights), depth, timings, ahead)
        weights = self._cues.searched(ctx, neutral, results, weights, depth, timings, ahead)
        # With per_message, the graph channel joins the others' order over messages (below).
        late = query.recipe.per_message and "graph" in weights and len(weights) > 1
        graph_hits = results.pop("graph", []) if late else []

        t = time.perf_counter()
        points: dict[str, MemoryPoint] = {}
        scores: dict[str, dict[str, float]] = {}
        rankings: dict[str, list[str]] = {}
        for name, hits in results.items():
            rankings[name] = []
            for point, score in hits:
                points.setdefault(point.id, point)
                scores.setdefault(point.id, {})[name] = score
                rankings[name].append(point.id)
        fused = rrf(
            rankings, {c: w for c, w in weights.items() if c in rankings}, query.recipe.rrf_k
        )
        candidates = [
            Candidate(points[f.id], f.score, f.score, f.ranks, scores[f.id]) for f in fused
        ]
        self._adjust(candidates, query)
        if query.recipe.merge_sources:
            candidates = merge_by_sources(candidates)
        if query.recipe.mmr_lambda < 1.0:
            candidates = self._diversify(candidates, query)
        timings["fuse"] = _ms(t)

        rerank_name = query.rerank or query.recipe.rerank
        note = ""
        if rerank_name != "none" and candidates:
            t = time.perf_counter()
            candidates, rerank_name, note = self._rerank(ctx, candidates, rerank_name)
            timings["rerank"] = _ms(t)
        if query.recipe.per_message:
            t = time.perf_counter()
            top = self._per_message(query, candidates, graph_hits, weights.get("graph", 0.0))
            timings["messages"] = _ms(t)
        else:
            top = candidates[: query.k]
            if query.recipe.order_sources:
                top = order_sources(top, query.text)
        if query.recipe.learned_fusion and rerank_name == "none":
            t = time.perf_counter()
            top = self._learned(ctx, top)
            timings["learned"] = _ms(t)
        t = time.perf_counter()  # the current truth first (recall.cues.updates)
        top = current_first(top, query, ctx.vector.tolist(), _vectors, self._speakers_of(ctx))
        timings["updates"] = _ms(t)
        if query.recipe.expand_digests:  # last: what follows a digest stays after it
            top = expand(top, query.k, _vectors, query.filter())[: query.k]
        timings["total"] = _ms(began)
        result = RecallResult(top, timings, rerank_name, note, degraded, weights=weights)
        if self.cache is not None and not degraded and not note:
            self.cache.put(query.scope.user_id, self._params(query), ctx.vector, result, stamp)
        return self._observed(result)

    def _per_message(
        self,
        query: Query,
        candidates: list[Candidate],
        graph_hits: list[tuple[MemoryPoint, float]],
        graph_weight: float,
    ) -> list[Candidate]:
        """One hit per message: the fused candidates' messages, the graph's joined by RRF,
        replies above their questions with the recipe's ``answers_first``
        (:mod:`recall.messages`)."""
        candidates = candidates[: query.k]  # the graph's messages may displace the others
        if query.recipe.order_sources:
            candidates = order_sources(candidates, query.text)
        graph = [
            Candidate(p, s, s, {"graph": i}, {"graph": s}) for i, (p, s) in enumerate(graph_hits, 1)
        ]
        order = fuse_messages(candidates, graph_hits, graph_weight, query.recipe.rrf_k)
        _embedder, vectors = self._semantic.wait_ready(0)
        hits = message_hits(order, [*candidates, *graph], vectors, query.filter(), query.k)
        return answers_first(hits) if query.recipe.answers_first else hits

    def _speakers_of(self, ctx: QueryContext) -> frozenset[str]:
        """The names of the query's scope's speakers, asked once per query (the neutral
        search, the updates' cue and the learned fusion read them); none while they are not
        known yet (:class:`recall.ChannelNotReady`)."""
        if ctx.speakers is None:
            try:
                names = self._speakers(ctx.query.scope) if self._speakers is not None else ()
            except ChannelNotReady:
                names = ()
            ctx.speakers = frozenset(names)
        return ctx.speakers

    def _learned(self, ctx: QueryContext, hits: list[Candidate]) -> list[Candidate]:
        """``hits`` reordered by the recipe's learned fusion (:mod:`recall.learned`); the
        hand-set order when it cannot run."""
        query = ctx.query
        try:
            model = learned.load(query.recipe.learned_fusion)
            return model.reorder(hits, query.text, mentioned(query.text, self._speakers_of(ctx)))
        except Exception as exc:  # the hand-set order still answers
            log.warning("recall.learned_failed", extra={"fields": {"error": str(exc)}})
            return hits

    def _params(self, query: Query) -> Hashable:
        return cache_key(query, self._cues.window(query))

    def _observed(self, result: RecallResult) -> RecallResult:
        self.events.publish(Recalled(result))
        return result

    def _adjust(self, candidates: list[Candidate], query: Query) -> None:
        """Superseded facts sink; the recipe's weight per kind and per fact category; an
        optional recency decay by event time, slowed by access reinforcement."""
        recipe = query.recipe
        half_life = recipe.recency_half_life_days
        kind_weights = recipe.kind_weights
        importance = recipe.importance_weights
        now_us = self._clock() * 1_000_000
        accesses: dict[str, int] = {}
        if half_life > 0 and recipe.reinforcement > 0 and self._access is not None:
            accesses = self._access.counts([(c.point.scope, c.point.id) for c in candidates])
        for c in candidates:
            c.kind_factor = kind_weights.get(c.point.kind, 1.0)  # type: ignore[call-overload]
            category = c.point.attrs.get("category")
            if category:
                c.importance_factor = importance.get(category, 1.0)
            if c.superseded:
                c.superseded_factor = recipe.superseded_factor
            if half_life > 0:
                c.accesses = accesses.get(c.point.id, 0)
                life = half_life * (1.0 + recipe.reinforcement * c.accesses)
                age_days = max(0.0, (now_us - c.point.created_at_us) / 86_400e6)
                c.recency_factor = math.pow(0.5, age_days / life)
            c.score = (
                c.fused * c.superseded_factor * c.recency_factor * c.kind_factor
            ) * c.importance_factor
        candidates.sort(key=lambda c: (-c.score, c.superseded, c.point.id))

    def _diversify(self, candidates: list[Candidate], query: Query) -> list[Candidate]:
        pool = candidates[: max(query.k * 3, query.k)]
        words = {c.point.id: set(_WORD.findall(c.point.text.lower())) for c in pool}
        top = pool[0].score if pool and pool[0].score > 0 else 1.0

        def jaccard(a: str, b: str) -> float:
            union = words[a] | words[b]
            return len(words[a] & words[b]) / len(union) if union else 0.0

        order = mmr(
            [c.point.id for c in pool],
            {c.point.id: c.score / top for c in pool},
            jaccard,
            k=len(pool),
            lambda_=query.recipe.mmr_lambda,
        )
        by_id = {c.point.id: c for c in pool}
        return [by_id[i] for i in order] + candidates[len(pool) :]

    def reranker(self, name: str) -> Reranker | None:
        """The reranker registered as ``name`` ("local", "llm"), if any."""
        return self._rerankers.get(name)

    def _rerank(
        self, ctx: QueryContext, candidates: list[Candidate], name: str
    ) -> tuple[list[Candidate], str, str]:
        reranker = self._rerankers.get(name)
        if reranker is None:
            return candidates, "none", f"reranker {name!r} is not configured; fused order kept"
        top = candidates[: ctx.query.recipe.rerank_top]
        try:
            ordered = reranker.rerank(ctx, list(top))
        except RerankFailed as exc:
            log.warning(
                "recall.rerank_failed", extra={"fields": {"reranker": name, "error": str(exc)}}
            )
            return candidates, "none", f"{name} rerank failed ({exc}); fused order kept"
        return ordered + candidates[len(top) :], name, ""


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)
