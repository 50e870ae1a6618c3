"""The scopes whose derived memories wait for their rewrite: the weaver's consolidation state
per scope, beside the per-episode one (:mod:`tiers.journal.consolidation`).

A consolidation run rewrites a scope's entity profiles and its digests once, after all its
episodes (``weaver.consolidate.Consolidator.refresh_profiles``, ``weaver.digests.Digests``).
A stop ends that rewrite between two scopes, and a crash anywhere in the run; the scopes left
are marked here so that the next run, after a restart too, rewrites them, rather than only a
later run that consolidates one of their episodes. The weaver marks a scope once an episode
changed its facts or summaries, before the episode stops being pending (a crash in between
consolidates the episode again, and marks it then), and rewrites the marked scopes through
:meth:`StaleScopes.rewrite`, which takes a scope's mark away once its rewrite returned. A
scope whose rewrite raises keeps its mark and the scopes after it go on, so one scope that
always fails holds back no other; an error of a store rather than of the scope ends the
rewrite, since every scope after it would fail alike.

Key layout of the state store (``<data_dir>/state``)::

    stale_scopes  <user_id> 0x00 <agent_id> 0x00 <part>  -> {"t": marked µs}

``<part>`` is ``profiles``, ``digests`` or ``abstracts`` (:data:`Part`: the last is the digest
writer's rewrite of the scope's digests, an LLM configured). A mark names its user, so it is a
kind of scoped data (:class:`tiers.scoped.ScopedKind`): a Forget of the scope removes it, and
the weaver never deletes a mark that is not there (a delete writes the key, the user's id
in it, into the store's files). Not exported: it is this daemon's work left, and an import
starts none.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from tiers.core.errors import ResourceExhausted, Unavailable
from tiers.core.records import Scope, pack
from tiers.rocks import Batch, RocksStore
from tiers.scoped import Covered, Forgotten

STALE_CF = "stale_scopes"
STALE_CFS = (STALE_CF,)
Part = Literal["profiles", "digests", "abstracts"]


def _key(scope: Scope, part: Part) -> bytes:
    return f"{scope.user_id}\x00{scope.agent_id}\x00{part}".encode()


def _prefix(scope: Scope) -> bytes:
    """Every mark of ``scope``: of the user and all its agents when ``agent_id`` is empty."""
    if not scope.agent_id:
        return scope.user_id.encode() + b"\x00"
    return f"{scope.user_id}\x00{scope.agent_id}\x00".encode()


@dataclass(frozen=True, slots=True)
class Rewritten:
    """What :meth:`StaleScopes.rewrite` did: the sum of what the rewrites returned, and the
    scopes whose rewrite raised, with the error (their marks kept)."""

    written: int = 0
    failed: dict[Scope, Exception] = field(default_factory=dict)


class StaleScopes:
    """The marks in the state store; a scoped kind (:class:`tiers.scoped.ScopedKind`), not
    exported. Every method raises ``StoreUnavailable`` when the store cannot be read or
    written, and :meth:`mark` and :meth:`clear` raise ``DiskFull`` below the disk's reserve;
    each writes nothing then."""

    name = "stale_scopes"
    change_types: ClassVar[dict[str, str]] = {}  # the weaver's work left, no change of memory
    column_families = STALE_CFS

    def __init__(self, state: RocksStore, clock: Callable[[], float] = time.time) -> None:
        self._state = state
        self._clock = clock
        # Held by mark() and clear() (each a read, then a write) and by a Forget while it
        # writes its batch: a mark a Forget took is never deleted again.
        self.lock = threading.Lock()

    def mark(self, part: Part, scopes: Iterable[Scope]) -> None:
        """Mark ``part`` of each of ``scopes`` stale, unless it is already (one read, and a
        write only for a mark not there); durable on return."""
        keys = sorted({_key(scope, part) for scope in scopes})
        value = pack({"t": int(self._clock() * 1_000_000)})
        with self.lock:
            batch = self._state.batch()
            for key, found in zip(keys, self._state.get_many(STALE_CF, keys), strict=True):
                if found is None:
                    batch.put(STALE_CF, key, value)
            self._state.write(batch)  # an empty batch writes nothing

    def clear(self, part: Part, scope: Scope) -> None:
        """Take the mark of ``part`` of ``scope`` away, when there is one."""
        key = _key(scope, part)
        with self.lock:
            if self._state.get(STALE_CF, key) is None:
                return  # never a delete of a key not there: a forgotten scope's would stay
            batch = self._state.batch()
            batch.delete(STALE_CF, key)
            self._state.write(batch)

    def rewrite(
        self,
        part: Part,
        scopes: Collection[Scope],
        rewrite: Callable[[Scope], int],
        stopping: threading.Event | None = None,
    ) -> Rewritten:
        """Call ``rewrite`` for ``part`` of each of ``scopes``, by user and agent, and take the
        scope's mark away once it returned. A set ``stopping`` ends it between two scopes.
        A scope whose rewrite raises keeps its mark (:attr:`Rewritten.failed`) and the scopes
        after it go on; ``Unavailable`` (a store cannot be read or written, the daemon stops)
        and ``ResourceExhausted`` (the disk is full) are a store's, not the scope's: they end
        it and are raised, as is the clearing's own ``StoreUnavailable`` or ``DiskFull``."""
        written, failed = 0, {}
        for scope in sorted(scopes, key=lambda s: (s.user_id, s.agent_id)):
            if stopping is not None and stopping.is_set():
                break
            try:
                written += rewrite(scope)
            except (Unavailable, ResourceExhausted):
                raise
            except Exception as exc:
                failed[scope] = exc
                continue
            self.clear(part, scope)
        return Rewritten(written, failed)

    def marked(self, part: Part) -> set[Scope]:
        """The scopes whose ``part`` is marked, in every user."""
        found = set()
        for key, _value in self._state.scan(STALE_CF, b""):
            user_id, agent_id, marked = key.decode().split("\x00")
            if marked == part:
                found.add(Scope(user_id, agent_id))
        return found

    # -- a scoped kind: Forget, Stats (tiers.scoped) -------------------------------------------
    def count(self) -> int:
        return self._state.count_keys(STALE_CF)

    def owner(self, memory_id: str) -> Scope | None:
        return None  # a mark names a scope, no memory

    def forget_into(self, batch: Batch, covered: Covered) -> Forgotten:
        """Add to ``batch`` the deletes of the marks of ``covered.scope`` (every agent's when
        its ``agent_id`` is empty). A Forget of episodes or memories leaves the marks: the
        scope's profiles and digests are still to be rewritten."""
        if covered.scope is None:
            return Forgotten(0)
        keys = [key for key, _value in self._state.scan_prefix(STALE_CF, _prefix(covered.scope))]
        for key in keys:
            batch.delete(STALE_CF, key)
        return Forgotten(len(keys))
