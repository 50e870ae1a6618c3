"""The point ids written in each user's scope since a version (:class:`WriteLog`), so that a
scope's graph, kept at the version it was built at, is brought up to date by reading only the
points those writes touched (:meth:`recall.graph.memory.MemoryGraphs.get`) rather than
listing every memory of the scope again: under a fleet every user writes between two of its
queries, and those listings were a fifth of the daemon's interpreter time at 10M points
(``docs/benchmarks.md``, 2026-12-06).

A write is told with the ids it touched (``Tier3Written.ids``: points written, facts whose
validity changed, points deleted by id; none for a write of edges alone), or without them
(a delete by episode or by user, a Forget): then the graphs of that user are built again from
the listing of their memories, as before. A user's log is kept only while a graph of theirs is
kept or being built (:meth:`WriteLog.hold`), and holds ``most_ids`` ids at the most; past
that (or past as many writes, those of edges alone included) it says "unknown", and the next
build lists the scope again.

Not thread-safe: :class:`~recall.graph.memory.MemoryGraphs` calls it under its lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field


@dataclass(slots=True)
class _UserLog:
    holders: Counter[int] = field(default_factory=Counter)  # version -> graphs held at it
    events: list[tuple[int, frozenset[str] | None]] = field(default_factory=list)
    size: int = 0  # what ``events`` cost: their ids, at least one an event


class WriteLog:
    """Per user, the ids each write touched, by the user's write count (its version) after
    it. :meth:`since` answers for a version that is held (:meth:`hold`)."""

    def __init__(self, most_ids: int) -> None:
        self.most_ids = most_ids
        self._users: dict[str, _UserLog] = {}

    def hold(self, user_id: str, version: int) -> None:
        """A graph of the user built (or being built) at ``version``: the writes after it
        are logged until it is let go (:meth:`release`)."""
        self._users.setdefault(user_id, _UserLog()).holders[version] += 1

    def release(self, user_id: str, version: int) -> None:
        """A graph held at ``version`` is gone (replaced, evicted, forgotten) or its build
        ended; writes no graph of the user needs are dropped."""
        log = self._users.get(user_id)
        if log is None or log.holders[version] <= 0:
            return
        log.holders[version] -= 1
        if not log.holders[version]:
            del log.holders[version]
        if not log.holders:
            del self._users[user_id]
            return
        oldest = min(log.holders)
        if log.events and log.events[0][0] <= oldest:
            log.events = [e for e in log.events if e[0] > oldest]
            log.size = sum(_cost(ids) for _v, ids in log.events)

    def written(self, user_id: str, version: int, ids: Collection[str] | None) -> None:
        """The user's write that made their version ``version`` touched ``ids`` (None: not
        known). Kept only while a graph of the user is held."""
        log = self._users.get(user_id)
        if log is None:
            return
        if ids is not None and log.size + _cost(ids) <= self.most_ids:
            log.events.append((version, frozenset(ids)))
            log.size += _cost(ids)
        else:  # unknown, or too many: every version before this one is unknown too
            log.events = [(version, None)]
            log.size = 1

    def since(self, user_id: str, version: int) -> frozenset[str] | None:
        """The ids the user's writes after ``version`` touched, or None when one of those
        writes was told without its ids, or the log does not reach back to ``version`` (it
        was not held)."""
        log = self._users.get(user_id)
        if log is None or version not in log.holders:
            return None
        touched: set[str] = set()
        for at, ids in log.events:
            if at <= version:
                continue
            if ids is None:
                return None
            touched |= ids
        return frozenset(touched)


def _cost(ids: Collection[str] | None) -> int:
    """What a write costs the log: its ids, and at least one (so writes of edges alone, which
    touch no point, are bounded too)."""
    return max(1, len(ids or ()))
