"""Tier 1: working memory.

Each open session has an in-memory *window* (its newest messages, bounded by
``working_memory.max_messages`` and ``max_tokens``) and a durable *log* of every message since
it opened, in the state store (RocksDB, no TTL). A message is in the log before ``append``
returns; one that leaves the window stays in the log until the session ends, when the whole log
becomes one episode in the journal.

Key layout of the state store (``<data_dir>/state``)::

    sessions  <session_id utf-8>                  -> meta: scope, generation, next seq, ...
    open      <session_id>                        -> b""   (the sessions that are open)
    log       <session_id> 0x00 <seq:u64>         -> StoredMessage (msgpack)
    msgids    <session_id> 0x00 <message_id>      -> <seq:u64>  (idempotency, open session)
    pending   <episode_id>                        -> see tiers.journal

Session ids contain no NUL byte (the daemon validates this). A session that ends keeps its
meta, so a second ``end_session`` is told it ended already; a later append reopens it as a new
*generation* whose log becomes a new episode. Episode ids are derived from (session, generation),
so a flush interrupted by a crash and redone writes the same episode again, never a second one.

The daemon calls it from its event loop; a lock guards it for the scheduler's threads.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from daemon.errors import InvalidArgument
from tiers.errors import ScopeMismatch, SessionEnded, SessionNotFound, TierError
from tiers.journal import Journal
from tiers.records import Episode, Message, Scope, StoredMessage, episode_id_for, pack, u64, unpack
from tiers.rocks import RocksStore
from tiers.tokens import count_tokens

STATE_CFS = [
    "sessions",
    "open",
    "log",
    "msgids",
    "pending",
    "unindexed",
    "extractions",
    "graph_edges",
]


class ScopeRequired(TierError, InvalidArgument):
    """A session's first message must name scope.user_id."""


@dataclass(frozen=True, slots=True)
class WindowLimits:
    max_messages: int = 50
    max_tokens: int = 4000
    idle_timeout_seconds: float = 1800.0
    max_sessions: int = 10_000
    max_log_messages: int = 2000


@dataclass(frozen=True, slots=True)
class AppendResult:
    seq: int
    duplicate: bool


@dataclass(frozen=True, slots=True)
class EndResult:
    session_id: str
    episode_id: str
    message_count: int
    reason: str


@dataclass(frozen=True, slots=True)
class WindowView:
    session_id: str
    scope: Scope
    open: bool
    messages: list[StoredMessage]
    total_tokens: int
    log_messages: int


@dataclass(frozen=True, slots=True)
class WorkingMemoryStats:
    live_sessions: int
    window_messages: int
    log_messages: int


@dataclass(slots=True)
class _Session:
    session_id: str
    scope: Scope
    generation: int
    next_seq: int  # the seq the next message gets
    log_count: int  # messages in the open log
    last_active_us: int
    window: deque[StoredMessage] = field(default_factory=deque)
    window_tokens: int = 0

    def meta(self, is_open: bool) -> bytes:
        return pack(
            {
                "u": self.scope.user_id,
                "a": self.scope.agent_id,
                "g": self.generation,
                "n": self.next_seq,
                "c": self.log_count,
                "t": self.last_active_us,
                "o": is_open,
            }
        )

    @classmethod
    def from_meta(cls, session_id: str, raw: bytes) -> tuple[_Session, bool]:
        d = unpack(raw)
        session = cls(session_id, Scope(d["u"], d["a"]), d["g"], d["n"], d["c"], d["t"])
        return session, d["o"]

    def push(self, message: StoredMessage, limits: WindowLimits) -> None:
        self.window.append(message)
        self.window_tokens += message.tokens
        while len(self.window) > 1 and (
            len(self.window) > limits.max_messages or self.window_tokens > limits.max_tokens
        ):
            self.window_tokens -= self.window.popleft().tokens


def _prefix(session_id: str) -> bytes:
    return session_id.encode() + b"\x00"


def message_tokens(message: Message) -> int:
    tokens = count_tokens(message.content)
    if message.tool_call is not None:
        tokens += count_tokens(message.tool_call.name) + count_tokens(message.tool_call.arguments)
    return tokens


class WorkingMemory:
    def __init__(
        self,
        state: RocksStore,
        journal: Journal,
        limits: WindowLimits,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._state = state
        self._journal = journal
        self.limits = limits
        self._clock = clock
        self._live: OrderedDict[str, _Session] = OrderedDict()  # least recently active first
        self._lock = threading.RLock()
        # Called with every EndResult once the episode is durable (e.g. the weaver's indexer).
        self.on_flush: list[Callable[[EndResult], None]] = []
        # Held by every write; a backup holds it to see all stores at one point in time.
        self.write_lock = self._lock

    def _now_us(self) -> int:
        return int(self._clock() * 1_000_000)

    # -- start-up --------------------------------------------------------------------------
    def recover(self) -> list[EndResult]:
        """Load every open session from the state store.

        Finishes flushes that a crash interrupted, and flushes the least recently active
        sessions beyond ``max_sessions``. Returns those flushes."""
        ended: list[EndResult] = []
        with self._lock:
            sessions: list[_Session] = []
            for key, _ in list(self._state.scan("open", b"")):
                raw = self._state.get("sessions", key)
                if raw is None:
                    continue
                session, _ = _Session.from_meta(key.decode(), raw)
                episode = self._journal.find(episode_id_for(session.session_id, session.generation))
                if episode is not None:
                    # The episode reached the journal but the state commit did not: finish it.
                    self._commit_end(session, episode)
                    ended.append(
                        EndResult(
                            session.session_id,
                            episode.episode_id,
                            episode.message_count,
                            episode.end_reason,
                        )
                    )
                    continue
                self._load_window(session)
                sessions.append(session)
            sessions.sort(key=lambda s: s.last_active_us)
            self._live = OrderedDict((s.session_id, s) for s in sessions)
            while len(self._live) > self.limits.max_sessions:
                ended.append(self._end(next(iter(self._live.values())), "capacity"))
        return ended

    def _load_window(self, session: _Session) -> None:
        newest: list[StoredMessage] = []
        tokens = 0
        for _key, value in self._state.scan_prefix(
            "log", _prefix(session.session_id), reverse=True
        ):
            message = StoredMessage.decode(value)
            if newest and (
                len(newest) >= self.limits.max_messages
                or tokens + message.tokens > self.limits.max_tokens
            ):
                break
            newest.append(message)
            tokens += message.tokens
        session.window = deque(reversed(newest))
        session.window_tokens = tokens

    # -- appending -------------------------------------------------------------------------
    def append(self, session_id: str, scope: Scope, messages: list[Message]) -> list[AppendResult]:
        """Store ``messages`` in order, atomically, durably; then acknowledge.

        ``scope`` with an empty ``user_id`` and ``agent_id`` means "the session's scope".
        Raises ScopeRequired, ScopeMismatch, StoreUnavailable; on any error nothing is stored.
        """
        with self._lock:
            now = self._now_us()
            session = self._live.get(session_id)
            opening = session is None
            if session is None:
                session = self._opening(session_id, scope, now)
            elif scope != Scope("") and scope != session.scope:
                raise ScopeMismatch(_mismatch(session_id))

            prefix = _prefix(session_id)
            batch = self._state.batch()
            results: list[AppendResult] = []
            stored: list[StoredMessage] = []
            ids_in_request: dict[str, int] = {}
            for message in messages:
                if message.message_id:
                    prior = ids_in_request.get(message.message_id)
                    if prior is None:
                        raw = self._state.get("msgids", prefix + message.message_id.encode())
                        prior = int.from_bytes(raw, "big") if raw is not None else None
                    if prior is not None:
                        results.append(AppendResult(prior, True))
                        continue
                seq = session.next_seq + len(stored)
                record = StoredMessage(
                    seq=seq,
                    role=message.role,
                    content=message.content,
                    created_at_us=message.created_at_us
                    if message.created_at_us is not None
                    else now,
                    received_at_us=now,
                    tokens=message_tokens(message),
                    name=message.name,
                    tool_call=message.tool_call,
                    message_id=message.message_id,
                    metadata=message.metadata,
                )
                batch.put("log", prefix + u64(seq), record.encode())
                if message.message_id:
                    batch.put("msgids", prefix + message.message_id.encode(), u64(seq))
                    ids_in_request[message.message_id] = seq
                stored.append(record)
                results.append(AppendResult(seq, False))
            if not stored:
                if not opening:
                    self._live.move_to_end(session_id)
                return results

            if opening:
                while len(self._live) >= self.limits.max_sessions:
                    self._end(next(iter(self._live.values())), "capacity")
            updated = _Session(
                session_id,
                session.scope,
                session.generation,
                session.next_seq + len(stored),
                session.log_count + len(stored),
                now,
                session.window,
                session.window_tokens,
            )
            batch.put("sessions", session_id.encode(), updated.meta(True))
            if opening:
                batch.put("open", session_id.encode(), b"")
            self._state.write(batch)  # raises StoreUnavailable: nothing changed in memory

            for record in stored:
                updated.push(record, self.limits)
            self._live[session_id] = updated
            self._live.move_to_end(session_id)
            if updated.log_count >= self.limits.max_log_messages:
                self._end(updated, "rollover")
            return results

    def _opening(self, session_id: str, scope: Scope, now: int) -> _Session:
        """The session an append to a session that is not live will open (not yet stored)."""
        raw = self._state.get("sessions", session_id.encode())
        if raw is None:
            if not scope.user_id:
                raise ScopeRequired(
                    f"scope.user_id is required on the first message of session {session_id!r}"
                )
            return _Session(
                session_id, scope, generation=1, next_seq=1, log_count=0, last_active_us=now
            )
        previous, _ = _Session.from_meta(session_id, raw)
        if scope != Scope("") and scope != previous.scope:
            raise ScopeMismatch(_mismatch(session_id))
        return _Session(
            session_id, previous.scope, previous.generation + 1, previous.next_seq, 0, now
        )

    # -- reading ---------------------------------------------------------------------------
    def window(
        self, session_id: str, max_messages: int | None = None, max_tokens: int | None = None
    ) -> WindowView:
        """The newest messages within the budgets (default: the configured window), newest
        last. Raises SessionNotFound."""
        with self._lock:
            session = self._live.get(session_id)
            if session is None:
                raw = self._state.get("sessions", session_id.encode())
                if raw is None:
                    raise SessionNotFound(f"session {session_id!r} not found")
                ended, _ = _Session.from_meta(session_id, raw)
                return WindowView(session_id, ended.scope, False, [], 0, 0)
            limit_messages = max_messages or self.limits.max_messages
            limit_tokens = max_tokens or self.limits.max_tokens
            picked: list[StoredMessage] = []
            tokens = 0
            for message in reversed(session.window):
                if len(picked) >= limit_messages or tokens + message.tokens > limit_tokens:
                    break
                picked.append(message)
                tokens += message.tokens
            picked.reverse()
            return WindowView(session_id, session.scope, True, picked, tokens, session.log_count)

    def stats(self) -> WorkingMemoryStats:
        with self._lock:
            return WorkingMemoryStats(
                live_sessions=len(self._live),
                window_messages=sum(len(s.window) for s in self._live.values()),
                log_messages=sum(s.log_count for s in self._live.values()),
            )

    # -- ending ----------------------------------------------------------------------------
    def end_session(self, session_id: str, reason: str = "client") -> EndResult:
        """Flush the session's log to the journal as one episode.

        Raises SessionNotFound, SessionEnded, StoreUnavailable."""
        with self._lock:
            session = self._live.get(session_id)
            if session is None:
                if self._state.get("sessions", session_id.encode()) is None:
                    raise SessionNotFound(f"session {session_id!r} not found")
                raise SessionEnded(
                    f"session {session_id!r} has already ended and has had no message since"
                )
            return self._end(session, reason)

    def end_idle(self) -> list[EndResult]:
        """End every session idle for longer than ``idle_timeout_seconds``."""
        cutoff = self._now_us() - int(self.limits.idle_timeout_seconds * 1_000_000)
        ended = []
        with self._lock:
            while self._live:
                oldest = next(iter(self._live.values()))
                if oldest.last_active_us > cutoff:
                    break
                ended.append(self._end(oldest, "idle"))
        return ended

    def _end(self, session: _Session, reason: str) -> EndResult:
        messages = [
            StoredMessage.decode(v)
            for _k, v in self._state.scan_prefix("log", _prefix(session.session_id))
        ]
        times = [m.created_at_us for m in messages]
        episode = Episode(
            episode_id=episode_id_for(session.session_id, session.generation),
            session_id=session.session_id,
            scope=session.scope,
            started_at_us=min(times),
            ended_at_us=max(times),
            flushed_at_us=self._now_us(),
            message_count=len(messages),
            first_seq=messages[0].seq,
            last_seq=messages[-1].seq,
            end_reason=reason,
        )
        self._journal.write_episode(episode, messages)
        self._commit_end(session, episode)
        result = EndResult(session.session_id, episode.episode_id, len(messages), reason)
        for listener in self.on_flush:
            listener(result)
        return result

    def _commit_end(self, session: _Session, episode: Episode) -> None:
        key = session.session_id.encode()
        prefix = _prefix(session.session_id)
        batch = self._state.batch()
        batch.delete_prefix("log", prefix)
        batch.delete_prefix("msgids", prefix)
        batch.delete("open", key)
        batch.put("sessions", key, session.meta(False))
        self._journal.mark_pending(batch, episode)
        self._state.write(batch)
        self._live.pop(session.session_id, None)


def _mismatch(session_id: str) -> str:
    return f"scope differs from the scope of session {session_id!r}, which its first message fixed"
