"""The change log: every change to a scope's memory, written in the same RocksDB batch as the
change itself, numbered in one order, kept for a retention period and read from a cursor
(``MemoryService.Watch``).

A change says what changed and names it (ids and counts: never a message's or a document's
text; a watcher reads those through the RPCs that check its rights). Its ``seq`` is its
cursor. A writer reserves the seqs of its changes, puts them in its batch and writes the batch
(:meth:`ChangeLog.staged`, :meth:`ChangeLog.write`); a reader sees a change only once every
change numbered before it is settled (written, or failed and never to be), so a cursor never
skips a change whose write finished after a later one's.

Key layout of the state store (``<data_dir>/state``)::

    changes       <user_id> 0x00 <seq u64>  -> {"a": agent_id, "t": type, "at": µs, "d": {...}}
    changes       <user_id> 0x00            -> <seq u64>: the newest of the user's changes
                                               that retention removed
    change_order  <seq u64>                 -> [user_id, at µs]: every change, oldest first
    change_order  META "trimmed"            -> <seq u64>: the newest seq retention removed
    change_order  META "expired"            -> <µs u64>: episodes whose time to live ended
                                               before this were told (``episode.expired``)

A Forget deletes the changes of the scope it covers (of an agent: those of that agent), and
those that name its episodes or memories, with their ``change_order`` entries
(:meth:`ChangeLog.forget_into`). Retention (:meth:`ChangeLog.trim`) removes the changes older
than ``retention_seconds``; a reader whose cursor is older than what was removed of its user
gets :class:`CursorExpired` instead of a gap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tiers.core.errors import InvalidArgument, OutOfRange, TierError
from tiers.core.events import Events
from tiers.core.records import Scope, pack, u64, unpack
from tiers.rocks import Batch, RocksStore
from tiers.scoped import Covered, Forgotten

CHANGES_CF = "changes"
ORDER_CF = "change_order"
CHANGE_CFS = (CHANGES_CF, ORDER_CF)
META = b"\xff" * 8  # sorts after every seq: the log's own records
TRIMMED = META + b"trimmed"
EXPIRED = META + b"expired"

# What a change of the tiers can say (``Change.type``), and what each names in ``attrs``; the
# kinds of scoped data add theirs (``change_types``: "document.put", "pin.changed", ...), and
# ``tiers.schema.change_types`` composes them all.
CORE_TYPES: Mapping[str, str] = {
    "session.started": "session_id, episode_id (the episode the session becomes)",
    "session.appended": "session_id, episode_id, first_seq, last_seq, count",
    "session.messages_removed": "session_id, episode_id, count",
    "session.ended": "session_id, episode_id, count (messages; 0: no episode), reason",
    "session.indexed": "session_id, episode_id, through_seq (a live session's messages up to "
    "it are embedded), count (points written)",
    "episode.indexed": "episode_id, session_id, count (points written)",
    "episode.consolidated": "episode_id, session_id, summaries, facts, superseded",
    "episode.expired": "episode_id, session_id (its time to live ended, maybe before the "
    "weaver's work)",
    "memory.forgotten": "target (scope, episodes or memories), episodes, memories",
}


class CursorExpired(TierError, OutOfRange):
    """A reader's cursor is older than the changes retention (or a Forget) removed."""


@dataclass(frozen=True, slots=True)
class Change:
    """A change to record: its scope, its type (one of :attr:`ChangeLog.types`) and what it
    names."""

    scope: Scope
    type: str
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Entry:
    """A change as the log holds it: its cursor (``seq``) and when it was written."""

    seq: int
    at_us: int
    change: Change


@dataclass(frozen=True, slots=True)
class Page:
    """What :meth:`ChangeLog.page` read: the changes, and the seq a reader goes on after."""

    entries: list[Entry]
    upto: int


@dataclass(frozen=True, slots=True)
class ChangesVisible:
    """Event of :attr:`ChangeLog.events`: readers may now read up to ``seq``; ``users``
    have changes among those that just became visible."""

    seq: int
    users: frozenset[str]


def _prefix(user_id: str) -> bytes:
    return user_id.encode() + b"\x00"


class ChangeLog:
    """The change log in the state store; a scoped kind (:class:`tiers.scoped.ScopedKind`)
    that Forget reaches; not exported (a log of what happened here, not memory). Reads and
    writes raise StoreUnavailable when the store cannot be read or written."""

    name = "changes"
    column_families = CHANGE_CFS
    change_types = CORE_TYPES  # the tiers' own; ``types`` adds the kinds' (open_kinds)

    def __init__(
        self,
        state: RocksStore,
        retention_seconds: float = 7 * 86_400.0,
        clock: Callable[[], float] = time.time,
        types: Mapping[str, str] = CORE_TYPES,
    ) -> None:
        self._state = state
        self.retention_seconds = retention_seconds
        self.clock = clock
        self.lock = threading.Lock()  # a Forget's, and retention's
        self._seqs = threading.Lock()  # the numbering
        last = next((k for k, _ in state.scan(ORDER_CF, b"", META, reverse=True)), None)
        trimmed = state.get(ORDER_CF, TRIMMED)
        newest = max(int.from_bytes(last) if last else 0, int.from_bytes(trimmed or u64(0)))
        self._next = newest + 1
        self._pending: set[int] = set()
        self._users: dict[int, str] = {}  # whose change each seq not visible yet is
        self._visible = newest
        self.events = Events("changes")  # ChangesVisible
        # What a change may say: every kind's (``tiers.schema.open_kinds`` sets them).
        self.types = types

    def configured(self, retention_seconds: float, clock: Callable[[], float]) -> ChangeLog:
        """The log, with this retention and clock (the daemon's settings and clock)."""
        self.retention_seconds = retention_seconds
        self.clock = clock
        return self

    # -- writing ---------------------------------------------------------------------------
    @contextmanager
    def staged(self, batch: Batch, changes: Sequence[Change]) -> Iterator[list[int]]:
        """Put ``changes`` in ``batch``, numbered; the caller writes the batch inside the
        block. Readers see them (and anything numbered after them) once the block is left,
        whether the write succeeded or raised. Yields their seqs."""
        for change in changes:
            if change.type not in self.types:
                raise InvalidArgument(f"unknown change type {change.type!r}")
        with self._seqs:
            seqs = list(range(self._next, self._next + len(changes)))
            self._next += len(changes)
            self._pending.update(seqs)
            self._users.update(zip(seqs, (c.scope.user_id for c in changes), strict=True))
        try:
            now = int(self.clock() * 1_000_000)
            for seq, change in zip(seqs, changes, strict=True):
                user = change.scope.user_id
                value = {"a": change.scope.agent_id, "t": change.type, "at": now}
                value["d"] = dict(change.attrs)
                batch.put(CHANGES_CF, _prefix(user) + u64(seq), pack(value))
                batch.put(ORDER_CF, u64(seq), pack([user, now]))
            yield seqs
        finally:
            self._settle(seqs)

    def write(self, batch: Batch, changes: Sequence[Change]) -> list[int]:
        """Write ``batch`` with ``changes`` in it: both or neither. Returns their seqs."""
        with self.staged(batch, changes) as seqs:
            self._state.write(batch)
        return seqs

    def _settle(self, seqs: Iterable[int]) -> None:
        with self._seqs:
            self._pending.difference_update(seqs)
            visible = min(self._pending) - 1 if self._pending else self._next - 1
            shown = range(self._visible + 1, visible + 1)
            users = frozenset(self._users.pop(s) for s in shown if s in self._users)
            self._visible = max(visible, self._visible)
        if shown:
            self.events.publish(ChangesVisible(visible, users))

    # -- reading ---------------------------------------------------------------------------
    @property
    def visible(self) -> int:
        """The newest seq readers may read (0: none yet)."""
        with self._seqs:
            return self._visible

    def page(self, scope: Scope, after: int, limit: int) -> Page:
        """Up to ``limit`` visible changes of ``scope`` numbered after ``after``, oldest
        first (an agent's scope: that agent's and the user's own), and the seq up to which
        the scope has no other (a reader goes on after it: other users' changes are not
        read again). Raises CursorExpired when retention removed changes of the user
        numbered after ``after``, InvalidArgument for a cursor this log never reached."""
        visible = self.visible
        if after > visible:
            raise InvalidArgument(
                f"cursor {after} is ahead of this change log (its newest is {visible})"
            )
        prefix = _prefix(scope.user_id)
        trimmed = self._state.get(CHANGES_CF, prefix)
        if trimmed is not None and after < int.from_bytes(trimmed):
            raise CursorExpired(
                f"cursor {after} is older than the change log keeps (retention removed the "
                f"changes up to {int.from_bytes(trimmed)}); watch again from the oldest kept "
                "and read the current state"
            )
        out: list[Entry] = []
        end = prefix + u64(visible + 1)
        for key, raw in self._state.scan(CHANGES_CF, prefix + u64(after + 1), end):
            value = unpack(raw)
            if scope.agent_id and value["a"] not in (scope.agent_id, ""):
                continue
            change = Change(Scope(scope.user_id, value["a"]), value["t"], value["d"])
            out.append(Entry(int.from_bytes(key[len(prefix) :]), value["at"], change))
            if len(out) >= limit:
                return Page(out, out[-1].seq)
        return Page(out, visible)

    def oldest(self, scope: Scope) -> int:
        """The cursor that reads everything the log keeps of ``scope``'s user."""
        trimmed = self._state.get(CHANGES_CF, _prefix(scope.user_id))
        return int.from_bytes(trimmed) if trimmed is not None else 0

    def expired_through(self) -> int:
        """Episodes whose time to live ended before this (µs) were told as expired."""
        raw = self._state.get(ORDER_CF, EXPIRED)
        return int.from_bytes(raw) if raw is not None else 0

    def expired_until(self, batch: Batch, us: int) -> None:
        """Put in ``batch``: episodes whose time to live ended before ``us`` were told."""
        batch.put(ORDER_CF, EXPIRED, u64(us))

    # -- retention -------------------------------------------------------------------------
    def trim(self, batch_size: int = 1000) -> int:
        """Remove the changes older than ``retention_seconds``; returns how many."""
        cutoff = int((self.clock() - self.retention_seconds) * 1_000_000)
        removed = 0
        while True:
            with self.lock:
                batch = self._state.batch()
                newest: dict[str, int] = {}
                last = 0
                visible = self.visible
                for n, (key, raw) in enumerate(self._state.scan(ORDER_CF, b"", META)):
                    user, at = unpack(raw)
                    seq = int.from_bytes(key)
                    if at >= cutoff or seq > visible or n >= batch_size:
                        break
                    batch.delete(ORDER_CF, key)
                    batch.delete(CHANGES_CF, _prefix(user) + key)
                    newest[user] = seq
                    last = seq
                    removed += 1
                if not last:
                    return removed
                for user, seq in newest.items():
                    batch.put(CHANGES_CF, _prefix(user), u64(seq))
                batch.put(ORDER_CF, TRIMMED, u64(last))
                self._state.write(batch)

    # -- a scoped kind ---------------------------------------------------------------------
    def count(self) -> int:
        metas = sum(1 for _ in self._state.scan(ORDER_CF, META))
        return self._state.count_keys(ORDER_CF) - metas

    def owner(self, memory_id: str) -> Scope | None:
        return None

    def forget_into(self, batch: Batch, covered: Covered) -> Forgotten:
        count = 0
        scope = covered.scope
        if scope is not None:
            prefix = _prefix(scope.user_id)
            for key, raw in self._state.scan_prefix(CHANGES_CF, prefix):
                if key == prefix:
                    if not scope.agent_id:
                        batch.delete(CHANGES_CF, key)
                    continue
                if scope.agent_id and unpack(raw)["a"] != scope.agent_id:
                    continue
                batch.delete(CHANGES_CF, key)
                batch.delete(ORDER_CF, key[len(prefix) :])
                count += 1
        named: dict[str, set[str]] = {}
        for owner, item in (*covered.episodes, *covered.memories):
            named.setdefault(owner.user_id, set()).add(item)
        for user, ids in sorted(named.items()):
            if scope is not None and user == scope.user_id and not scope.agent_id:
                continue  # already gone with the scope
            prefix = _prefix(user)
            for key, raw in self._state.scan_prefix(CHANGES_CF, prefix):
                if key != prefix and ids & _names(unpack(raw)["d"]):
                    batch.delete(CHANGES_CF, key)
                    batch.delete(ORDER_CF, key[len(prefix) :])
                    count += 1
        return Forgotten(count)


def _names(attrs: Mapping[str, Any]) -> set[str]:
    """The episode and memory ids a change's attrs name."""
    out = {attrs[k] for k in ("episode_id", "memory_id") if attrs.get(k)}
    for k in ("episode_ids", "memory_ids"):
        out.update(attrs.get(k, ()))
    return out


def write(
    state: RocksStore, batch: Batch, log: ChangeLog | None, changes: Sequence[Change]
) -> None:
    """``batch`` written with ``changes`` in it when there is a change log; alone otherwise."""
    if log is None:
        state.write(batch)
    else:
        log.write(batch, changes)
