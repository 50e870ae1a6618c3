"""Points that the keyword channel finds before their dense vectors exist: the messages of
live sessions waiting for the index stage's next batch (``weaver.live``).

A message is appended with one durable write and no model; the live stage stages its
``episode_turn`` point here within milliseconds (:meth:`SemanticStore.stage`: tombstones
checked, keyword vector computed), and the index stage later writes the same point, by the
same id, with its dense vector (:meth:`SemanticStore.write`), which takes it out of here. A
staged point is scored like a stored one: its BM25 term weights against the query's terms
weighed by the store's IDF (:meth:`VectorStore.weigh`), so the keyword channel merges both
lists by score.

Nothing here is durable: after a restart the live stage stages the live sessions' messages
again from their logs. Deletes (Forget, RemoveMessages) reach it through
:meth:`SemanticStore.delete`, by the same filter as the vector store's.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterable, Sequence

from tiers.semantic.vectors import Hit, MemoryPoint, PointFilter, SparseVector, admits

__all__ = ["PendingPoints"]


class PendingPoints:
    """Staged points by user, each with its keyword vector. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, tuple[MemoryPoint, dict[int, float]]]] = {}

    def __len__(self) -> int:
        with self._lock:
            return sum(len(points) for points in self._users.values())

    def add(
        self,
        points: Sequence[MemoryPoint],
        admit: Callable[[list[MemoryPoint]], list[MemoryPoint]] | None = None,
    ) -> list[MemoryPoint]:
        """Stage ``points`` (each with its ``sparse`` vector; a staged id is replaced), those
        ``admit`` keeps, which it decides under this object's lock (a delete of the same
        points either comes after and removes them, or before and ``admit`` sees why).
        Returns the points staged."""
        with self._lock:
            points = list(points) if admit is None else admit(list(points))
            for p in points:
                terms = (
                    dict(zip(p.sparse.indices, p.sparse.values, strict=True)) if p.sparse else {}
                )
                self._users.setdefault(p.scope.user_id, {})[p.id] = (p, terms)
        return points

    def holds(self, user_id: str) -> bool:
        """Whether any point of this user is staged."""
        with self._lock:
            return bool(self._users.get(user_id))

    def discard(self, ids: Iterable[str]) -> None:
        """Unstage these ids (written with their dense vectors, or gone)."""
        wanted = set(ids)
        with self._lock:
            for user in list(self._users):
                points = self._users[user]
                for point_id in wanted & points.keys():
                    del points[point_id]
                if not points:
                    del self._users[user]

    def delete(self, flt: PointFilter) -> int:
        """Unstage the points ``flt`` matches (its user, agent, episodes and ids; an empty
        field matches every point). Returns how many."""
        removed = 0
        with self._lock:
            users = [flt.user_id] if flt.user_id else list(self._users)
            for user in users:
                points = self._users.get(user, {})
                gone = [i for i, (p, _t) in points.items() if _matches(flt, p)]
                for point_id in gone:
                    del points[point_id]
                removed += len(gone)
                if not points:
                    self._users.pop(user, None)
        return removed

    def get(self, ids: Iterable[str], user_id: str = "") -> list[MemoryPoint]:
        """The staged points of these ids (of this user; of any user if empty), as
        :meth:`VectorStore.get` finds the stored ones."""
        wanted = set(ids)
        with self._lock:
            users = [user_id] if user_id else list(self._users)
            return [
                point
                for user in users
                for point_id, (point, _terms) in self._users.get(user, {}).items()
                if point_id in wanted
            ]

    def points(self, flt: PointFilter) -> list[MemoryPoint]:
        """The staged points ``flt`` admits (its user's)."""
        with self._lock:
            staged = list(self._users.get(flt.user_id, {}).values())
        return [p for p, _terms in staged if admits(flt, p)]

    def search(self, weighed: SparseVector, flt: PointFilter, limit: int) -> list[Hit]:
        """The best ``limit`` staged points of ``flt`` for a query whose terms are already
        weighed (:meth:`VectorStore.weigh`): the same dot product as the store's."""
        with self._lock:
            staged = list(self._users.get(flt.user_id, {}).values())
        query = list(zip(weighed.indices, weighed.values, strict=True))
        scored = []
        for point, terms in staged:
            score = sum(w * terms.get(t, 0.0) for t, w in query)
            if score > 0 and admits(flt, point):
                scored.append(Hit(point, score))
        return heapq.nlargest(limit, scored, key=lambda h: (h.score, h.point.id))


def _matches(flt: PointFilter, point: MemoryPoint) -> bool:
    if flt.user_id and point.scope.user_id != flt.user_id:
        return False
    if flt.agent_id and point.scope.agent_id != flt.agent_id:
        return False
    if flt.episode_ids and point.episode_id not in flt.episode_ids:
        return False
    return not flt.ids or point.id in flt.ids
