"""Erasures: the users whose vector points a Forget took out of sight at once and deletes after
it returns.

Deleting a large user's points takes the engine seconds (about 11 µs a point here: 7-8 s for
200,000 points at 1M in the daemon). A Forget of a whole user with at least
:data:`ERASE_LATER_POINTS` points therefore does not wait for it
(:mod:`tiers.rights.forget.cascade`): in the batch of its tombstones it writes the user's
erasure mark, and from then on the vector store, seen through :class:`ErasingVectors` (which
:class:`tiers.semantic.store.SemanticStore` hands out), holds none of that user's points:

- reads for the user find nothing; reads of no user leave the user's points out;
- a delete for the user is left to the erasure (it tombstones what it deletes);
- a write of the user's points waits at Tier 3's door (:meth:`SemanticStore.write`) until
  the erasure is done (:data:`WAIT_SECONDS` at most, then it is refused and redone later), so
  no new point of the user is deleted with the old ones, and none comes back before its
  episode is tombstoned (:meth:`Erasures.wait_for`). It waits holding
  ``SemanticStore.write_lock``, so other Tier 3 writers wait with it: only when a user writes
  during its own erasure (a Forget held them all for as long before).

The purger's thread (:mod:`tiers.rights.forget.purge`) then tombstones the episodes of each
user's points and deletes them, holding :attr:`Erasures.lock`, then clears the mark and lets
the writers go. A backup waits for the erasures to end (:class:`Quiet`). The mark is
durable (state store, column family ``forgotten``, key ``u <user_id>``): after a stop or a
crash the user stays out of sight from the next start on, and the erasure goes on once Tier 3
is open.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from tiers.rocks import Batch, RocksStore
from tiers.semantic.tombstones import TOMBSTONES_CF
from tiers.semantic.vectors import (
    Hit,
    MemoryPoint,
    PointFilter,
    SparseVector,
    Validity,
    VectorStore,
    VectorStoreUnavailable,
)

_USER = b"u"
# A whole user's Forget leaves its points to the purger's thread from this many on.
ERASE_LATER_POINTS = 20_000
# The erasure's rest after each page it reads or deletes, in the page's time
# (tiers.core.priority.resting): the other users' Recalls get at least half the interpreter.
ERASE_REST = 1.0
# How long a write of a user being erased waits for the erasure's end (then it is refused).
WAIT_SECONDS = 10.0
# How long a backup waits for the erasures to end (then it is refused).
SETTLE_SECONDS = 300.0
# What an erasure reads of a user's episode ids: all of them.
_ALL = 10_000_000


class Erasures:
    """The users being erased (loaded from ``state`` when made). Thread-safe."""

    def __init__(self, state: RocksStore) -> None:
        self._state = state
        self._cond = threading.Condition()
        self._closed = False
        self._users = {k[1:].decode() for k, _ in state.scan_prefix(TOMBSTONES_CF, _USER)}
        # Held by the erasure while it tombstones and deletes a user's points, and by a backup.
        self.lock = threading.Lock()

    @staticmethod
    def add_into(batch: Batch, user_id: str) -> None:
        """Stage ``user_id``'s mark in ``batch`` (a Forget's tombstones); :meth:`hide` once
        it is written."""
        batch.put(TOMBSTONES_CF, _USER + user_id.encode(), b"")

    def hide(self, user_id: str) -> None:
        with self._cond:
            self._users.add(user_id)

    def hidden(self, user_id: str) -> bool:
        return bool(user_id) and user_id in self._users

    def users(self) -> list[str]:
        with self._cond:
            return sorted(self._users)

    def done(self, user_id: str) -> None:
        """The user's points are deleted: its mark goes, and writers waiting for it go on."""
        batch = self._state.batch()
        batch.delete(TOMBSTONES_CF, _USER + user_id.encode())
        self._state.write(batch)
        with self._cond:
            self._users.discard(user_id)
            self._cond.notify_all()

    def wait_for(self, user_ids: Iterable[str], timeout: float = WAIT_SECONDS) -> None:
        """Return once none of ``user_ids`` is being erased. Raises VectorStoreUnavailable
        when Tier 3 closes meanwhile or ``timeout`` passes (the writer's work is redone: its
        marks stay)."""
        wanted = set(user_ids)
        with self._cond:
            self._cond.wait_for(lambda: self._closed or not wanted & self._users, timeout)
            if wanted & self._users:
                raise VectorStoreUnavailable(
                    "a Forget of this user is still deleting its earlier points; try again"
                )

    def settle(self, timeout: float = SETTLE_SECONDS) -> None:
        """Return once no user is being erased. Raises VectorStoreUnavailable when Tier 3
        closes first or ``timeout`` passes (an erasure waits for Tier 3 to open)."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or not self._users, timeout)
            if self._users:
                raise VectorStoreUnavailable(
                    "a Forget is still deleting a user's points (an erasure); try again later"
                )

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class ErasingVectors:
    """A :class:`~tiers.semantic.vectors.VectorStore` without the points of the users being
    erased (module doc): its reads and deletes. The rest goes to ``inner`` as it is (an upsert
    too: the door waited for the erasures of its users), and so do a store's own extras
    (``builds``, ``copy_to``, ...)."""

    def __init__(self, inner: VectorStore, erasures: Erasures) -> None:
        self.inner = inner
        self._erasures = erasures

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _hidden(self, user_id: str) -> bool:
        return self._erasures.hidden(user_id)

    def _some_hidden(self, user_id: str) -> bool:
        """A read of no user while some user is being erased."""
        return not user_id and bool(self._erasures.users())

    def _seen(self, points: Iterable[MemoryPoint]) -> list[MemoryPoint]:
        return [p for p in points if not self._hidden(p.scope.user_id)]

    def _scroll_seen(self, flt: PointFilter, limit: int) -> list[MemoryPoint]:
        """Up to ``limit`` points of a read of no user, none of a hidden user's: as many more
        are read as the hidden users have matching points."""
        hidden = sum(self.inner.count(replace(flt, user_id=u)) for u in self._erasures.users())
        return self._seen(self.inner.scroll(flt, limit + hidden))[:limit]

    # -- without the hidden users ----------------------------------------------------------
    def search_dense(self, vector: Sequence[float], flt: PointFilter, limit: int) -> list[Hit]:
        if self._hidden(flt.user_id):
            return []
        hits = self.inner.search_dense(vector, flt, limit)
        return [] if self._hidden(flt.user_id) else hits  # hidden meanwhile

    def search_sparse(self, vector: SparseVector, flt: PointFilter, limit: int) -> list[Hit]:
        if self._hidden(flt.user_id):
            return []
        hits = self.inner.search_sparse(vector, flt, limit)
        return [] if self._hidden(flt.user_id) else hits

    def get(self, ids: Sequence[str], user_id: str = "") -> list[MemoryPoint]:
        if self._hidden(user_id):
            return []
        return self._seen(self.inner.get(ids, user_id))

    def dense(self, ids: Sequence[str], user_id: str = "") -> dict[str, list[float]]:
        if self._hidden(user_id):
            return {}
        found = self.inner.dense(ids, user_id)
        if self._some_hidden(user_id):
            seen = {p.id for p in self.get(list(found))}
            found = {i: v for i, v in found.items() if i in seen}
        return found

    def scroll(self, flt: PointFilter, limit: int = 1000) -> list[MemoryPoint]:
        if self._hidden(flt.user_id):
            return []
        if self._some_hidden(flt.user_id):
            return self._scroll_seen(flt, limit)
        return self._seen(self.inner.scroll(flt, limit))

    def ids(self, flt: PointFilter, limit: int = 1000) -> list[str]:
        if self._hidden(flt.user_id):
            return []
        if self._some_hidden(flt.user_id):
            return [p.id for p in self._scroll_seen(flt, limit)]
        return self.inner.ids(flt, limit)

    def episode_ids(self, flt: PointFilter, limit: int = 1000) -> set[str]:
        if self._hidden(flt.user_id):
            return set()
        if self._some_hidden(flt.user_id):
            return {p.episode_id for p in self._scroll_seen(flt, limit) if p.episode_id}
        return self.inner.episode_ids(flt, limit)

    def count(self, flt: PointFilter, *, exact: bool = True) -> int:
        if self._hidden(flt.user_id):
            return 0
        n = self.inner.count(flt, exact=exact)
        if self._some_hidden(flt.user_id):
            hidden = (replace(flt, user_id=u) for u in self._erasures.users())
            n = max(0, n - sum(self.inner.count(f, exact=exact) for f in hidden))
        return n

    def set_valid_to(self, ids: Sequence[str], validity: Validity, user_id: str = "") -> None:
        if not self._hidden(user_id):  # a hidden user's facts are being deleted
            self.inner.set_valid_to(ids, validity, user_id)

    def erase(self, user_id: str, tombstone: Callable[[set[str]], None]) -> int:
        """Delete a hidden user's points, calling ``tombstone`` with their episode ids first;
        returns how many there were. Raises VectorStoreUnavailable (Tier 3 closed: the mark
        stays, and the next start goes on)."""
        flt = PointFilter(user_id=user_id)
        tombstone(self.inner.episode_ids(flt, _ALL))
        return self.inner.delete(flt)

    def delete(self, flt: PointFilter) -> int:
        """Deletes, but nothing of a user being erased: the erasure deletes those points,
        tombstoning their episodes first."""
        return 0 if self._hidden(flt.user_id) else self.inner.delete(flt)


class Quiet:
    """Tier 3 held still, as a reusable context manager (a backup): ``write_lock`` held (no
    writer's step, no Forget) and no erasure going on. It waits for the erasures to end first,
    so a backup taken after a Forget holds none of the user's points. Raises what
    :meth:`Erasures.settle` raises."""

    def __init__(self, write_lock: Any, erasures: Erasures) -> None:
        self._write_lock = write_lock
        self._erasures = erasures
        self.settle_seconds = SETTLE_SECONDS

    def __enter__(self) -> None:
        while True:
            self._write_lock.acquire()  # no Forget begins an erasure while it is held
            if not self._erasures.users():
                self._erasures.lock.acquire()
                return
            self._write_lock.release()  # for the writers the erasure holds up
            self._erasures.settle(self.settle_seconds)

    def __exit__(self, *exc: object) -> None:
        self._erasures.lock.release()
        self._write_lock.release()
