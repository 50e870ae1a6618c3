"""Query embeddings, each distinct text of a user computed once while it is recent.

An agent's turn often asks the same thing twice (GetContext, then Pack or Recall with the same
text; a retry), and concurrent requests share one model call (:class:`tiers.batcher.Batcher`).
So the engine's query vectors come from here: a small LRU cache of the most recent
``(user, text)`` pairs' vectors in front of a batcher over the embedder's ``encode_queries``.
A query's text may say what a user told the agent, so the cache is per user and a Forget
drops the user's entries (:class:`tiers.forget_plan.ScopeCache`); it is in memory only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from tiers.batcher import Batcher
from tiers.embedding import Embedder

__all__ = ["QueryVectors"]


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
        key = (user_id, text)
        with self._lock:
            if self._model is None or self._model[0] is not embedder:
                batcher: Batcher[str, np.ndarray] = Batcher(
                    lambda texts: list(embedder.encode_queries(texts))
                )
                self._model = (embedder, batcher)
                self._cache.clear()
            batcher = self._model[1]
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return found
        vector = np.array(batcher(text), dtype=np.float32)
        vector.setflags(write=False)
        with self._lock:
            self.computed += 1
            if self._size and self._model[1] is batcher:
                self._cache[key] = vector
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
        return vector

    def forget_scope(self, user_id: str) -> int:
        """Forget's hook: drop the user's cached query texts and vectors. Returns how many."""
        with self._lock:
            keys = [key for key in self._cache if key[0] == user_id]
            for key in keys:
                del self._cache[key]
        return len(keys)
