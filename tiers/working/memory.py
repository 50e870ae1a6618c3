"""Tier 1: working memory.

Each open session has an in-memory *window* (its newest messages, bounded by
``working_memory.max_messages`` and ``max_tokens``) and a durable *log* of every message since
it opened, in the state store (RocksDB, no TTL). A message is in the log before ``append``
returns; one that leaves the window stays in the log until the session ends, when the whole log
becomes one episode in the journal.

Sessions are per user (the same id under two users is two sessions). A call names a session by
its id and, when it knows it, its user; else the id must be one user's (AmbiguousSession). An
ended session keeps its meta (a second ``end_session`` is told it ended); a later append
reopens it as a new *generation*, whose log becomes a new episode. Live sessions, windows,
naming and when a session ends are here (a rollover the disk refuses waits for the next
append); what is durable is :mod:`tiers.working.log`, the records
:mod:`tiers.working.session`. A lock guards it."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace

from tiers.changes.log import ChangeLog
from tiers.core.errors import (
    InvalidArgument,
    ScopeMismatch,
    SessionEnded,
    SessionNotFound,
    TierError,
)
from tiers.core.events import Events
from tiers.core.records import Episode, Message, Scope, StoredMessage
from tiers.journal.store import Journal
from tiers.rocks import RocksStore
from tiers.working.log import SessionLog
from tiers.working.session import (
    AppendResult,
    EndResult,
    LiveSession,
    MessagesAppended,
    MessagesRemoved,
    RemoveResult,
    Session,
    SessionFlushed,
    SessionKey,
    WindowLimits,
    WindowView,
    WorkingMemoryStats,
    mismatch,
)


class ScopeRequired(TierError, InvalidArgument):
    """A session's first message must name scope.user_id."""


class AmbiguousSession(TierError, InvalidArgument):
    """A call names a session by its id alone, and several users have a session of that id."""


class WorkingMemory:
    """Errors (:mod:`tiers.core.errors` kinds): ScopeRequired and AmbiguousSession
    (InvalidArgument), ScopeMismatch and SessionEnded (FailedPrecondition), SessionNotFound
    (NotFound), as each method's docstring says; and StoreUnavailable from every method that
    writes when a write is refused: it changed nothing."""

    def __init__(
        self,
        state: RocksStore,
        journal: Journal,
        limits: WindowLimits,
        clock: Callable[[], float] = time.time,
        changes: ChangeLog | None = None,
    ) -> None:
        self._log = SessionLog(state, journal, changes)
        self.limits = limits
        self._clock = clock
        # By (user_id, session_id), least recently active first.
        self._live: OrderedDict[tuple[str, str], Session] = OrderedDict()
        self._lock = threading.RLock()
        # SessionFlushed once an episode is durable; MessagesAppended, MessagesRemoved.
        self.events = Events("working_memory")
        # Held by every write; a backup holds it to see all stores at one point in time.
        self.write_lock = self._lock

    def _now_us(self) -> int:
        return int(self._clock() * 1_000_000)

    # -- start-up --------------------------------------------------------------------------
    def recover(self) -> list[EndResult]:
        """Load every open session from the state store.

        Finishes flushes that a crash interrupted, and flushes the least recently active
        sessions beyond ``max_sessions``. Returns those flushes."""
        with self._lock:
            sessions, finished = self._log.recover()
            ended = [
                EndResult(
                    session.session_id,
                    episode.episode_id,
                    episode.message_count,
                    episode.end_reason,
                    session.scope.user_id,
                )
                for session, episode in finished
            ]
            for session in sessions:
                self._load_window(session)
            sessions.sort(key=lambda s: s.last_active_us)
            self._live = OrderedDict(((s.scope.user_id, s.session_id), s) for s in sessions)
            while len(self._live) > self.limits.max_sessions:
                ended.append(self._end(next(iter(self._live.values())), "capacity"))
        return ended

    def _load_window(self, session: Session) -> None:
        newest = self._log.newest(session, self.limits)
        session.window = deque(newest)
        session.window_tokens = sum(m.tokens for m in newest)

    # -- appending -------------------------------------------------------------------------
    def append(
        self,
        session_id: str,
        scope: Scope,
        messages: list[Message],
        *,
        user_id: str = "",
        allowed: Callable[[str], bool] | None = None,
    ) -> list[AppendResult]:
        """Store ``messages`` in order, atomically, durably; then acknowledge.

        ``scope`` with an empty ``user_id`` and ``agent_id`` means "the session's scope": the
        session of ``user_id`` (the caller's user), or with that empty too, the one session of
        this id among the users ``allowed`` accepts (:meth:`resolve`); a new session then takes
        ``Scope(user_id)``. Raises ScopeRequired, ScopeMismatch, AmbiguousSession,
        StoreUnavailable; on any error nothing is stored.
        """
        with self._lock:
            now = self._now_us()
            user = scope.user_id or user_id
            if not user:
                try:
                    user = self.resolve(session_id, allowed=allowed)
                except SessionNotFound:
                    raise ScopeRequired(
                        f"scope.user_id is required on the first message of session {session_id!r}"
                    ) from None
            elif scope == Scope(""):
                scope = Scope("") if self._exists(user, session_id) else Scope(user)
            session = self._live.get((user, session_id))
            opening = session is None
            if session is None:
                session = self._opening(SessionKey(user, session_id), scope, now)
            elif scope != Scope("") and scope != session.scope:
                raise ScopeMismatch(mismatch(session_id))

            results, stored = self._log.new_records(session, messages, now)
            if not stored:
                if not opening:
                    self._live.move_to_end((user, session_id))
                return results

            if opening:
                while len(self._live) >= self.limits.max_sessions:
                    self._end(next(iter(self._live.values())), "capacity")
            updated = replace(
                session,
                next_seq=session.next_seq + len(stored),
                log_count=session.log_count + len(stored),
                last_active_us=now,
            )
            self._log.append(updated, stored, opening)  # StoreUnavailable: nothing changed

            for record in stored:
                updated.push(record, self.limits)
            self._live[(user, session_id)] = updated
            self._live.move_to_end((user, session_id))
            self.events.publish(MessagesAppended(updated.live(), stored[-1].seq))
            if updated.log_count >= self.limits.max_log_messages:  # the append stays stored
                episode = self._log.roll_over(updated, self._now_us())
                if episode is not None:
                    self._ended(updated, episode, "rollover")
            return results

    def _opening(self, ref: SessionKey, scope: Scope, now: int) -> Session:
        """The session an append to a session that is not live will open (not yet stored)."""
        session_id = ref.session_id
        previous = self._log.record(ref)
        if previous is None:
            if not scope.user_id:
                raise ScopeRequired(
                    f"scope.user_id is required on the first message of session {session_id!r}"
                )
            return Session(
                session_id, scope, generation=1, next_seq=1, log_count=0, last_active_us=now
            )
        if scope != Scope("") and scope != previous.scope:
            raise ScopeMismatch(mismatch(session_id))
        return Session(
            session_id,
            previous.scope,
            previous.generation + 1,
            previous.next_seq,
            0,
            now,
            legacy_ids=previous.legacy_ids,
        )

    # -- naming ----------------------------------------------------------------------------
    def resolve(
        self, session_id: str, user_id: str = "", allowed: Callable[[str], bool] | None = None
    ) -> str:
        """The user of the session a call names: ``user_id`` when given, else the one user
        (among those ``allowed`` accepts) with a session of this id. Raises SessionNotFound,
        AmbiguousSession."""
        if user_id:
            return user_id
        with self._lock:
            users = self._log.users(session_id)
        users = [u for u in users if allowed is None or allowed(u)]
        if not users:
            raise SessionNotFound(f"session {session_id!r} not found")
        if len(users) > 1:
            raise AmbiguousSession(
                f"session {session_id!r} exists for {len(users)} users: name scope.user_id"
            )
        return users[0]

    def _named(
        self, session_id: str, user_id: str, allowed: Callable[[str], bool] | None
    ) -> tuple[str, Session | None]:
        """The user of the session a call names (:meth:`resolve`) and the session if it is
        open (None: it has ended). Raises SessionNotFound, AmbiguousSession."""
        user = self.resolve(session_id, user_id, allowed)
        session = self._live.get((user, session_id))
        if session is None and not self._exists(user, session_id):
            raise SessionNotFound(f"session {session_id!r} not found")
        return user, session

    def _exists(self, user_id: str, session_id: str) -> bool:
        return (user_id, session_id) in self._live or self._log.exists(
            SessionKey(user_id, session_id)
        )

    # -- reading ---------------------------------------------------------------------------
    def window(
        self,
        session_id: str,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        *,
        user_id: str = "",
        allowed: Callable[[str], bool] | None = None,
    ) -> WindowView:
        """The newest messages within the budgets (default: the configured window, which keeps
        the newest even over its token budget), newest last. The session is named as for
        :meth:`resolve`. Raises SessionNotFound, AmbiguousSession."""
        with self._lock:
            user = self.resolve(session_id, user_id, allowed)
            session = self._live.get((user, session_id))
            if session is None:
                ended = self._log.record(SessionKey(user, session_id))
                if ended is None:
                    raise SessionNotFound(f"session {session_id!r} not found")
                return WindowView(session_id, ended.scope, False, [], 0, 0)
            limit_messages = max_messages or self.limits.max_messages
            limit_tokens = max_tokens or self.limits.max_tokens
            picked: list[StoredMessage] = []
            tokens = 0
            for message in reversed(session.window):  # a max_tokens given is a hard limit
                over = tokens + message.tokens > limit_tokens and bool(picked or max_tokens)
                if len(picked) >= limit_messages or over:
                    break
                picked.append(message)
                tokens += message.tokens
            picked.reverse()
            return WindowView(session_id, session.scope, True, picked, tokens, session.log_count)

    def live(self, session: LiveSession, after_seq: int, limit: int) -> list[StoredMessage] | None:
        """Up to ``limit`` messages of this generation of a live session after ``after_seq``,
        oldest first; None once the generation is not live (ended, or dropped by Forget)."""
        with self._lock:
            s = self._live.get((session.scope.user_id, session.session_id))
            if s is None or s.episode_id() != session.episode_id:
                return None
            if s.window and s.window[0].seq <= after_seq + 1:
                return [m for m in s.window if m.seq > after_seq][:limit]
            return self._log.since(s, after_seq, limit)

    def live_sessions(self) -> list[LiveSession]:
        with self._lock:
            return [s.live() for s in self._live.values()]

    def stats(self) -> WorkingMemoryStats:
        with self._lock:
            live = self._live.values()
            windows, logs = sum(len(s.window) for s in live), sum(s.log_count for s in live)
            return WorkingMemoryStats(len(self._live), windows, logs)

    def drop_sessions(self, user_id: str, agent_id: str = "") -> list[tuple[str, int]]:
        """Forget the open sessions of a scope (an empty ``agent_id``: every agent of the
        user): their windows and durable logs, without an episode. Each session's meta stays,
        closed, so a reused session id never gets a forgotten episode's id. Returns
        ``(session_id, messages dropped)``. Call with :attr:`write_lock` held."""
        with self._lock:
            dropped = [
                s
                for s in self._live.values()
                if s.scope.user_id == user_id and (not agent_id or s.scope.agent_id == agent_id)
            ]
            self._log.drop(dropped)
            for s in dropped:
                self._live.pop((s.scope.user_id, s.session_id), None)
            return [(s.session_id, s.log_count) for s in dropped]

    # -- removing --------------------------------------------------------------------------
    def remove_last(
        self,
        session_id: str,
        count: int | None,
        *,
        user_id: str = "",
        allowed: Callable[[str], bool] | None = None,
    ) -> RemoveResult:
        """Take the newest ``count`` messages (None: all) out of the open session's log and
        window, durably (an agent undoing a turn). Their seqs are not reused; their message
        ids may be appended again. A session left empty closes, with no episode; one not
        open has nothing to remove. Named as for :meth:`resolve`. Raises SessionNotFound,
        AmbiguousSession, StoreUnavailable; ``settled`` of the answer: MessagesRemoved."""
        with self._lock:
            user, session = self._named(session_id, user_id, allowed)
            if session is None:
                return RemoveResult([], 0, False)
            removed = self._log.last(session, count)
            left = session.log_count - len(removed)
            updated = replace(session, log_count=left, last_active_us=self._now_us())
            self._log.remove(updated, removed)  # raises StoreUnavailable: nothing changed
            if left > 0:
                self._load_window(updated)
                self._live[(user, session_id)] = updated
                self._live.move_to_end((user, session_id))
            else:
                self._live.pop((user, session_id), None)
            settled: Future[None] | None = None
            if removed and self.events.handlers(MessagesRemoved):
                settled = Future()
                seqs = tuple(m.seq for m in removed)
                self.events.publish(MessagesRemoved(session.live(), seqs, settled))
            return RemoveResult(removed, left, left > 0, settled)

    # -- ending ----------------------------------------------------------------------------
    def end_session(
        self,
        session_id: str,
        reason: str = "client",
        *,
        user_id: str = "",
        allowed: Callable[[str], bool] | None = None,
    ) -> EndResult:
        """Flush the session's log to the journal as one episode. The session is named as for
        :meth:`resolve`.

        Raises SessionNotFound, AmbiguousSession, SessionEnded, StoreUnavailable."""
        with self._lock:
            _user, session = self._named(session_id, user_id, allowed)
            if session is None:
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

    def _end(self, session: Session, reason: str) -> EndResult:
        return self._ended(session, self._log.flush(session, reason, self._now_us()), reason)

    def _ended(self, session: Session, episode: Episode, reason: str) -> EndResult:
        self._live.pop((session.scope.user_id, session.session_id), None)
        result = EndResult(
            session.session_id,
            episode.episode_id,
            episode.message_count,
            reason,
            session.scope.user_id,
        )
        self.events.publish(SessionFlushed(result))
        return result
