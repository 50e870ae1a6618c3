"""The Recall engine: vector, keyword and graph channels fused with Reciprocal Rank Fusion.

A query runs through the channels of its recipe (``recall.*`` settings, or a named recipe),
each returning a ranked list of Tier 3 points within the caller's scope. The lists are fused
(:func:`recall.fusion.rrf`), hits sharing their source messages merge, superseded facts sink,
an optional recency decay and MMR apply, and an optional reranker orders the top. Every hit
keeps its provenance: the source messages with their client metadata.

This module holds the seams shared by the parts: :class:`Query`, :class:`Candidate`,
:class:`Channel` and :class:`Reranker`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from recall.recipe import Recipe
from tiers.core.errors import StrataError
from tiers.core.records import Scope
from tiers.semantic.vectors import KINDS, Hit, MemoryPoint, PointFilter
from tiers.semantic.vectors.ranking import order_key

CHANNELS = ("vector", "keyword", "graph")
# Kinds whose points draw on many episodes: a thread filter (Query.thread) leaves them out.
ACROSS_EPISODES = ("profile", "digest", "thread")


class RecallError(StrataError):
    """Root of the recall engine's errors."""


class RerankFailed(RecallError):
    """The reranker could not order the candidates (timeout, bad reply); the fused order
    stands and the response says so."""


class ChannelNotReady(RecallError):
    """A channel has nothing for the query's scope yet: what it searches is being built in
    the background (a scope's graph: see :mod:`recall.graph.memory`). The engine reports the
    channel as degraded, without a warning, and goes on with the others."""


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    scope: Scope  # user_id is required
    k: int
    recipe: Recipe
    kinds: tuple[str, ...] = ()
    start_us: int | None = None
    end_us: int | None = None
    channels: tuple[str, ...] = ()  # empty: the recipe's channels (weight > 0)
    rerank: str = ""  # empty: the recipe's
    explain: bool = False
    # A story thread's topic: only the memories of its episodes (episode_ids), none of the
    # kinds that draw on many (ACROSS_EPISODES).
    thread: str = ""
    # The thread's episodes (tiers.semantic.threads.episodes_of), set before the engine runs.
    episode_ids: tuple[str, ...] = ()
    # No memory of these sessions (a benchmark asking about a conversation from within it).
    exclude_sessions: tuple[str, ...] = ()
    # (session_id, first, last): no memory citing a message of that session with a seq from
    # first to last (GetContext: the session's window, which the block shows as it is).
    exclude_from: tuple[tuple[str, int, int], ...] = ()

    def filter(self) -> PointFilter:
        kinds = self.kinds or tuple(self.recipe.kinds)
        if self.episode_ids:  # a thread's: no memory of many episodes (their newest passes)
            kinds = tuple(k for k in kinds or KINDS if k not in ACROSS_EPISODES)
        return PointFilter(
            user_id=self.scope.user_id,
            agent_id=self.scope.agent_id,
            kinds=kinds,
            episode_ids=self.episode_ids,
            created_from_us=self.start_us,
            created_to_us=self.end_us,
            exclude_sessions=self.exclude_sessions,
            exclude_from=self.exclude_from,
        )

    def weights(self) -> dict[str, float]:
        r = self.recipe
        weights = {"vector": r.vector_weight, "keyword": r.keyword_weight, "graph": r.graph_weight}
        if self.channels:
            return {c: weights[c] or 1.0 for c in self.channels}
        return {c: w for c, w in weights.items() if w > 0}


class SharedSearch:
    """One dense search of a query that several channels read: the vector channel's list and
    the graph channel's dense seeds. The first caller runs ``search`` (the query's filter,
    ``depth`` hits), the others wait for its hits (or its error) instead of searching again."""

    def __init__(self, depth: int, search: Callable[[], list[Hit]]) -> None:
        self.depth = depth
        # Dropped once run: a search that refers to its query's context (which holds this
        # object) would otherwise be a reference cycle, and its hits garbage that only the
        # collector frees, in passes that stop every thread.
        self._search: Callable[[], list[Hit]] | None = search
        self._lock = threading.Lock()
        self._hits: list[Hit] | None = None
        self._error: BaseException | None = None

    def hits(self) -> list[Hit]:
        with self._lock:
            search = self._search
            if search is not None:  # not run yet, or interrupted: the next caller tries again
                try:
                    self._hits = search()
                except Exception as exc:
                    self._error = exc
                self._search = None  # run, its error kept
            if self._error is not None:
                raise self._error
            assert self._hits is not None
            return self._hits


@dataclass(slots=True)
class QueryContext:
    """What the engine computes once per query and the channels share."""

    query: Query
    vector: np.ndarray  # the query embedding (the model's query prompt applied)
    # The query's dense search, set by the engine (None: each channel searches for itself).
    dense: SharedSearch | None = None
    # The normalized names of the scope's speakers, once the engine asked for them.
    speakers: frozenset[str] | None = None

    def dense_hits(self, limit: int, kinds: tuple[str, ...] = ()) -> list[Hit] | None:
        """The shared dense search's best ``limit`` hits (of ``kinds`` when given), or None
        when it cannot answer: there is none, it is shallower than ``limit``, or ``kinds``
        are not all among the query's."""
        shared = self.dense
        if shared is None or limit > shared.depth:
            return None
        searched = self.query.filter().kinds
        if kinds and searched and not set(kinds) <= set(searched):
            return None
        hits = shared.hits()
        if kinds:
            hits = [h for h in hits if h.point.kind in kinds]
        # Ties by id before the cut (tiers.semantic.vectors.ranking): which of two tied points
        # a shorter list keeps must not depend on how they happen to be stored.
        return sorted(hits, key=lambda h: order_key(h.score, h.point.id))[:limit]


@dataclass(slots=True)
class Candidate:
    point: MemoryPoint
    score: float = 0.0
    fused: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)
    channel_scores: dict[str, float] = field(default_factory=dict)
    superseded_factor: float = 1.0
    recency_factor: float = 1.0
    kind_factor: float = 1.0
    importance_factor: float = 1.0  # the recipe's weight for a fact's category
    accesses: int = 0  # tiers.keyed.access: Pack and GetContext hand-outs (read with reinforcement)
    found_via: str = ""  # per_message: the id of the hit that brought this message's point
    merged_ids: list[str] = field(default_factory=list)
    rerank_note: str = ""
    rerank_score: float = 0.0

    @property
    def superseded(self) -> bool:
        return self.point.valid_to_us is not None


class Channel(Protocol):
    """One way of finding memories. ``search`` returns at most ``limit`` (point, score)
    pairs, best first (scores never increase; none for ``limit <= 0``, an empty scope or a
    query it has nothing for), all inside the query's scope and filter: never another user's
    point, nor another agent's when the scope names one.

    ``search`` raises on failure (the engine reports the channel as degraded and goes on with the
    others): :class:`tiers.semantic.embedding.EmbeddingUnavailable` while Tier 3 is starting (or
    failed to), :class:`tiers.semantic.vectors.VectorStoreUnavailable` when the vector store fails a
    read, :class:`ChannelNotReady` while what it searches for the scope is being built, and
    :class:`ValueError` for a query without a ``user_id`` (scope is a hard filter).
    ``tests/contracts/test_channel.py`` runs the contract against each
    channel."""

    name: str

    def search(self, ctx: QueryContext, limit: int) -> list[tuple[MemoryPoint, float]]: ...


@runtime_checkable
class Closable(Protocol):
    """A channel with work of its own in the background (the graph's builds), which the
    engine's ``close`` stops: ``close`` starts no more of it, is idempotent and raises
    nothing."""

    def close(self) -> None: ...


@runtime_checkable
class Textual(Protocol):
    """A channel that searches by the query's text and filter alone, never its embedding (the
    keyword channel): ``search_text(query, limit)`` answers as ``search`` does for any context
    of ``query``, and raises what ``search`` raises. For a scope whose graph walk is large,
    the engine runs it on a thread of its own beside the query's embedding
    (:meth:`recall.channels.fanout.Fanout.ahead`)."""

    def search_text(self, query: Query, limit: int) -> list[tuple[MemoryPoint, float]]: ...


@runtime_checkable
class Deferring(Protocol):
    """A channel whose background work a query may ask for (a scope's first graph build):
    within ``deferred()``, a context entered around one query on its thread, that work waits
    until the block ends, so that its reads do not slow the query's own (the engine holds
    the interpreter through its reads). Nested blocks start it at the outermost one's end.
    Raises nothing of its own."""

    def deferred(self) -> AbstractContextManager[None]: ...


class Reranker(Protocol):
    """Orders candidates (best first): returns every candidate it was given, each once (the
    same objects, with ``rerank_score`` and ``rerank_note`` set, the note starting with
    ``"<name>: "``), and a new list (the caller's keeps its order). Candidates it cannot tell
    apart, or leaves out of its ranking, follow in their given (fused) order; no candidates
    give ``[]`` without a call to any model.

    ``rerank`` raises :class:`RerankFailed` when it cannot order them (a model that is down,
    slow or gives an unusable reply, vectors that cannot be read or computed; the cause is
    its ``__cause__``): the engine keeps the fused order and says so.
    ``tests/contracts/test_reranker.py`` runs the contract against each reranker."""

    name: str

    def rerank(self, ctx: QueryContext, candidates: list[Candidate]) -> list[Candidate]: ...
