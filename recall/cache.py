"""An optional semantic cache of recent recalls (off by default: ``recall.cache_ttl_seconds``).

A query is served from the cache when a query with the same parameters (scope, k, kinds,
time range, channels, rerank, recipe) and an embedding within ``cache_similarity`` cosine was
answered less than the TTL ago. Every write to Tier 3 in a scope invalidates that scope's
entries, so a cached answer never hides a newer memory.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from recall.result import RecallResult


@dataclass(slots=True)
class _Entry:
    user_id: str
    params: Hashable
    vector: np.ndarray
    result: RecallResult
    expires: float


class SemanticCache:
    def __init__(
        self,
        ttl_seconds: float,
        size: int,
        similarity: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl_seconds
        self.size = size
        self.similarity = similarity
        self._clock = clock
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, user_id: str, params: Hashable, vector: np.ndarray) -> RecallResult | None:
        now = self._clock()
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

    def put(self, user_id: str, params: Hashable, vector: np.ndarray, result: RecallResult) -> None:
        with self._lock:
            self._entries[self._next] = _Entry(
                user_id, params, vector, result, self._clock() + self.ttl
            )
            self._next += 1
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def invalidate(self, user_id: str) -> None:
        self.forget_scope(user_id)

    def forget_scope(self, user_id: str) -> int:
        """Drop every entry of ``user_id`` (Forget's hook too: entries are per user, so an
        agent's forget drops the user's); returns how many."""
        with self._lock:
            keys = [k for k, e in self._entries.items() if e.user_id == user_id]
            for key in keys:
                del self._entries[key]
            return len(keys)

    def __len__(self) -> int:
        return len(self._entries)
