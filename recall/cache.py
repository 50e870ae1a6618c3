"""What Recall keeps of recent queries, per user: the query vectors (:class:`QueryVectors`)
and an optional semantic cache of answers (:class:`SemanticCache`). Both are
:class:`tiers.rights.forget.plan.ScopeCache` s: a Forget empties a user's entries.

**Query vectors.** An agent's turn often asks the same thing twice (GetContext, then Pack or
Recall with the same text; a retry), and concurrent requests share one model call
(:class:`tiers.core.batcher.Batcher`). So the engine's query vectors come from a small LRU cache
of the most recent ``(user, text)`` pairs' vectors in front of a batcher over the
embedder's ``encode_queries``; a query's text may say what a user told the agent, so the
cache is per user, in memory only.

**Semantic cache** (off by default: ``recall.cache_ttl_seconds``).

A query is served from the cache when a query with the same parameters (scope, k, kinds,
time range, channels, rerank, recipe) and an embedding within ``cache_similarity`` cosine was
answered less than the TTL ago. Every write to Tier 3 in a scope invalidates that scope's
entries, so a cached answer never hides a newer memory.

An answer is kept only if no write (nor Forget) of its scope came between the moment the
recall began reading Tier 3 and its :meth:`SemanticCache.put`: the recall takes a
:meth:`SemanticCache.stamp` first and hands it to ``put``, which drops the answer when the
scope's write count has moved. Otherwise a recall that read the old text and finished after
the write had emptied the entries would put the old answer back, for every later recall to
get (after one had already returned the new text), or keep a forgotten memory.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from recall.result import RecallResult
from tiers.core.batcher import Batcher
from tiers.semantic.embedding import Embedder

if TYPE_CHECKING:
    from recall import Query


@dataclass(slots=True)
class _Entry:
    user_id: str
    params: Hashable
    vector: np.ndarray
    result: RecallResult
    expires: float


@dataclass(eq=False, slots=True)
class SemanticCache:
    ttl_seconds: float
    size: int
    similarity: float
    clock: Callable[[], float] = time.monotonic
    _entries: OrderedDict[int, _Entry] = field(init=False, repr=False, default_factory=OrderedDict)
    # user -> invalidations (writes, Forgets) seen
    _writes: dict[str, int] = field(init=False, repr=False, default_factory=dict)
    _next: int = field(init=False, repr=False, default=0)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)
    hits: int = field(init=False, default=0)
    misses: int = field(init=False, default=0)

    def get(self, user_id: str, params: Hashable, vector: np.ndarray) -> RecallResult | None:
        now = self.clock()
        with self._lock:
            for key, entry in list(self._entries.items()):
                if entry.expires <= now:
                    del self._entries[key]
                    continue
                if (
                    entry.user_id == user_id
                    and entry.params == params
                    and float(np.dot(entry.vector, vector)) >= self.similarity
                ):
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return entry.result
            self.misses += 1
            return None

    def stamp(self, user_id: str) -> int:
        """The scope's write count: taken before a recall reads Tier 3, handed to :meth:`put`."""
        with self._lock:
            return self._writes.get(user_id, 0)

    def put(
        self, user_id: str, params: Hashable, vector: np.ndarray, result: RecallResult, stamp: int
    ) -> bool:
        """Keep ``result``, read since :meth:`stamp` gave ``stamp``, unless the scope was
        written or forgotten meanwhile (the answer may predate that). Returns whether it was
        kept."""
        with self._lock:
            if self._writes.get(user_id, 0) != stamp:
                return False
            self._entries[self._next] = _Entry(
                user_id, params, vector, result, self.clock() + self.ttl_seconds
            )
            self._next += 1
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
            return True

    def invalidate(self, user_id: str) -> None:
        self.forget_scope(user_id)

    def forget_scope(self, user_id: str) -> int:
        """Drop every entry of ``user_id`` (Forget's hook too: entries are per user, so an
        agent's forget drops the user's); returns how many."""
        with self._lock:
            self._writes[user_id] = self._writes.get(user_id, 0) + 1
            keys = [k for k, e in self._entries.items() if e.user_id == user_id]
            for key in keys:
                del self._entries[key]
            return len(keys)

    def __len__(self) -> int:
        return len(self._entries)


def cache_key(query: Query, window: tuple[int, int] | None) -> Hashable:
    """What must be equal, besides a near-identical query text, for a hit of
    :class:`SemanticCache`: the query's parameters and the window its time cue names
    (``window``: "last week" is another week once the week has turned)."""
    return (
        window,
        query.scope.agent_id,
        query.k,
        query.kinds,
        query.episode_ids,
        query.exclude_sessions,
        query.exclude_from,
        query.start_us,
        query.end_us,
        query.channels,
        query.rerank,
        query.explain,
        query.recipe.model_dump_json(),
    )


class QueryVectors:
    """``vector(embedder, user_id, text)``: the query embedding of ``text`` by ``embedder``,
    from the cache of the ``size`` most recent ``(user_id, text)`` pairs or computed (batched
    with concurrent callers). Another embedder than the last one's (a model switched at
    start-up) empties the cache. The arrays returned are read-only and shared. Raises what
    ``embedder.encode_queries`` raises (nothing is cached then)."""

    def __init__(self, size: int = 256) -> None:
        if size < 0:
            raise ValueError(f"the query vector cache holds 0 or more texts, not {size}")
        self._size = size
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._model: tuple[Embedder, Batcher[str, np.ndarray]] | None = None
        self.hits = 0  # answers from the cache (for tests and figures)
        self.computed = 0  # answers from the model

    def vector(self, embedder: Embedder, user_id: str, text: str) -> np.ndarray:
        return self.vectors(embedder, user_id, [text])[0]

    def vectors(self, embedder: Embedder, user_id: str, texts: Sequence[str]) -> list[np.ndarray]:
        """:meth:`vector` of each of ``texts``, in order; those not cached are computed in one
        batch (with concurrent callers' texts)."""
        found: list[np.ndarray | None] = []
        with self._lock:
            if self._model is None or self._model[0] is not embedder:
                batcher: Batcher[str, np.ndarray] = Batcher(
                    lambda texts: list(embedder.encode_queries(texts))
                )
                self._model = (embedder, batcher)
                self._cache.clear()
            batcher = self._model[1]
            for text in texts:
                vector = self._cache.get((user_id, text))
                if vector is not None:
                    self._cache.move_to_end((user_id, text))
                    self.hits += 1
                found.append(vector)
        missing = [text for text, vector in zip(texts, found, strict=True) if vector is None]
        computed = iter(batcher.many(missing) if missing else [])
        out: list[np.ndarray] = []
        for text, vector in zip(texts, found, strict=True):
            if vector is None:
                vector = np.array(next(computed), dtype=np.float32)
                vector.setflags(write=False)
                with self._lock:
                    self.computed += 1
                    if self._size and self._model[1] is batcher:
                        self._cache[(user_id, text)] = vector
                        while len(self._cache) > self._size:
                            self._cache.popitem(last=False)
            out.append(vector)
        return out

    def forget_scope(self, user_id: str) -> int:
        """Forget's hook: drop the user's cached query texts and vectors. Returns how many."""
        with self._lock:
            keys = [key for key in self._cache if key[0] == user_id]
            for key in keys:
                del self._cache[key]
        return len(keys)
