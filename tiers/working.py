"""Tier 1: working memory.

Each open session has an in-memory *window* (its newest messages, bounded by
``working_memory.max_messages`` and ``max_tokens``) and a durable *log* of every message since
it opened, in the state store (RocksDB, no TTL). A message is in the log before ``append``
returns; one that leaves the window stays in the log until the session ends, when the whole log
becomes one episode in the journal.

Sessions are per user: the same session id under two users is two sessions, and nothing one
user does reveals another's session ids. Calls name a session by its id and, when the caller
knows it, its user; without a user, the session id must belong to exactly one user
(:class:`AmbiguousSession` otherwise).

Key layout of the state store (``<data_dir>/state``), ``K`` = ``0x01 <session_id> 0x00
<user_id>`` (:class:`tiers.session.SessionKey`)::

    sessions  K                       -> meta: scope, generation, next seq, ...
    open      K                       -> b""   (the sessions that are open)
    log       K 0x00 <seq:u64>        -> StoredMessage (msgpack)
    msgids    K 0x00 <message_id>     -> <seq:u64>  (idempotency, open session)
    pending   <episode_id>            -> see tiers.journal

Ids contain no control characters (the daemon validates this). A session that ends keeps its
meta, so a second ``end_session`` is told it ended already; a later append reopens it as a new
*generation* whose log becomes a new episode. Episode ids are derived from (user, session,
generation), so a flush interrupted by a crash and redone writes the same episode again, never
a second one. Stores of the old layout (global session ids) are moved at start-up
(:mod:`tiers.session_migration`).

The daemon calls it from its event loop; a lock guards it for the scheduler's threads. A
session's record and window, and the values taken and returned here, are in
:mod:`tiers.session`.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import replace

from tiers.access import ACCESS_CFS
from tiers.anchors import ANCHOR_CFS
from tiers.documents import DOCUMENT_CFS
from tiers.errors import (
    InvalidArgument,
    ScopeMismatch,
    SessionEnded,
    SessionNotFound,
    StoreUnavailable,
    TierError,
)
from tiers.journal import Journal
from tiers.pins import PIN_CFS
from tiers.records import Episode, Message, Scope, StoredMessage, u64
from tiers.rocks import RocksStore
from tiers.session import (
    AppendResult,
    EndResult,
    RemoveResult,
    Session,
    SessionKey,
    WindowLimits,
    WindowView,
    WorkingMemoryStats,
    message_tokens,
    users_prefix,
)
from tiers.session_migration import migrate

STATE_CFS = [
    "sessions",
    "open",
    "log",
    "msgids",
    "pending",
    "unindexed",
    "extractions",
    "graph_edges",
    "forgotten",  # tiers.tombstones
    *DOCUMENT_CFS,
    *ANCHOR_CFS,  # tiers.anchors
    *PIN_CFS,  # tiers.pins
    *ACCESS_CFS,  # tiers.access
]


class ScopeRequired(TierError, InvalidArgument):
    """A session's first message must name scope.user_id."""


class AmbiguousSession(TierError, InvalidArgument):
    """A call names a session by its id alone, and several users have a session of that id."""


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
        # By (user_id, session_id), least recently active first.
        self._live: OrderedDict[tuple[str, str], Session] = OrderedDict()
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
            migrate(self._state)
            sessions: list[Session] = []
            for key, _ in list(self._state.scan("open", b"")):
                raw = self._state.get("sessions", key)
                if raw is None:
                    continue
                session, _ = Session.from_meta(SessionKey.parse(key).session_id, raw)
                episode = self._journal.find(session.episode_id())
                if episode is not None:
                    # The episode reached the journal but the state commit did not: finish it.
                    self._commit_end(session, episode)
                    ended.append(
                        EndResult(
                            session.session_id,
                            episode.episode_id,
                            episode.message_count,
                            episode.end_reason,
                            session.scope.user_id,
                        )
                    )
                    continue
                self._load_window(session)
                sessions.append(session)
            sessions.sort(key=lambda s: s.last_active_us)
            self._live = OrderedDict(((s.scope.user_id, s.session_id), s) for s in sessions)
            while len(self._live) > self.limits.max_sessions:
                ended.append(self._end(next(iter(self._live.values())), "capacity"))
        return ended

    def _load_window(self, session: Session) -> None:
        newest: list[StoredMessage] = []
        tokens = 0
        for _key, value in self._state.scan_prefix("log", session.ref.prefix(), reverse=True):
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
                raise ScopeMismatch(_mismatch(session_id))

            prefix = session.ref.prefix()
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
                    self._live.move_to_end((user, session_id))
                return results

            if opening:
                while len(self._live) >= self.limits.max_sessions:
                    self._end(next(iter(self._live.values())), "capacity")
            updated = Session(
                session_id,
                session.scope,
                session.generation,
                session.next_seq + len(stored),
                session.log_count + len(stored),
                now,
                session.window,
                session.window_tokens,
                session.legacy_ids,
            )
            key = updated.ref.key()
            batch.put("sessions", key, updated.meta(True))
            if opening:
                batch.put("open", key, b"")
            self._state.write(batch)  # raises StoreUnavailable: nothing changed in memory

            for record in stored:
                updated.push(record, self.limits)
            self._live[(user, session_id)] = updated
            self._live.move_to_end((user, session_id))
            if updated.log_count >= self.limits.max_log_messages:
                self._end(updated, "rollover")
            return results

    def _opening(self, ref: SessionKey, scope: Scope, now: int) -> Session:
        """The session an append to a session that is not live will open (not yet stored)."""
        session_id = ref.session_id
        raw = self._state.get("sessions", ref.key())
        if raw is None:
            if not scope.user_id:
                raise ScopeRequired(
                    f"scope.user_id is required on the first message of session {session_id!r}"
                )
            return Session(
                session_id, scope, generation=1, next_seq=1, log_count=0, last_active_us=now
            )
        previous, _ = Session.from_meta(session_id, raw)
        if scope != Scope("") and scope != previous.scope:
            raise ScopeMismatch(_mismatch(session_id))
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
            users = [
                SessionKey.parse(key).user_id
                for key, _ in self._state.scan_prefix("sessions", users_prefix(session_id))
            ]
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
        return (user_id, session_id) in self._live or self._state.get(
            "sessions", SessionKey(user_id, session_id).key()
        ) is not None

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
        """The newest messages within the budgets (default: the configured window), newest
        last. The session is named as for :meth:`resolve`. Raises SessionNotFound,
        AmbiguousSession."""
        with self._lock:
            user = self.resolve(session_id, user_id, allowed)
            session = self._live.get((user, session_id))
            if session is None:
                raw = self._state.get("sessions", SessionKey(user, session_id).key())
                if raw is None:
                    raise SessionNotFound(f"session {session_id!r} not found")
                ended, _ = Session.from_meta(session_id, raw)
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
            batch = self._state.batch()
            for s in dropped:
                batch.delete_prefix("log", s.ref.prefix())
                batch.delete_prefix("msgids", s.ref.prefix())
                batch.delete("open", s.ref.key())
                batch.put("sessions", s.ref.key(), replace(s, log_count=0).meta(False))
            self._state.write(batch)
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
        window, durably, before returning: an agent undoing a turn, or clearing its history.
        A later flush's episode does not hold them; their seqs are not reused, and their
        message ids may be appended again. A session left without messages closes, with no
        episode (the next append opens a new generation). A session that is not open has
        nothing to remove (its messages are an episode, which Forget removes). The session is
        named as for :meth:`resolve`. Raises SessionNotFound, AmbiguousSession,
        StoreUnavailable."""
        with self._lock:
            user, session = self._named(session_id, user_id, allowed)
            if session is None:
                return RemoveResult([], 0, False)
            prefix = session.ref.prefix()
            removed: list[StoredMessage] = []
            for _key, value in self._state.scan_prefix("log", prefix, reverse=True):
                if count is not None and len(removed) >= count:
                    break
                removed.append(StoredMessage.decode(value))
            removed.reverse()
            left = session.log_count - len(removed)
            updated = replace(session, log_count=left, last_active_us=self._now_us())
            batch = self._state.batch()
            for message in removed:
                batch.delete("log", prefix + u64(message.seq))
                if message.message_id:
                    batch.delete("msgids", prefix + message.message_id.encode())
            if left > 0:
                batch.put("sessions", updated.ref.key(), updated.meta(True))
            else:
                batch.delete("open", updated.ref.key())
                batch.put("sessions", updated.ref.key(), updated.meta(False))
            self._state.write(batch)  # raises StoreUnavailable: nothing changed in memory
            if left > 0:
                self._load_window(updated)
                self._live[(user, session_id)] = updated
                self._live.move_to_end((user, session_id))
            else:
                self._live.pop((user, session_id), None)
            return RemoveResult(removed, left, left > 0)

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
        messages = [
            StoredMessage.decode(v)
            for _k, v in self._state.scan_prefix("log", session.ref.prefix())
        ]
        times = [m.created_at_us for m in messages]
        episode = Episode(
            episode_id=session.episode_id(),
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
        try:
            self._commit_end(session, episode)
        except StoreUnavailable as exc:
            # The state store refused the end (disk full...): take the episode back out of the
            # journal, so the refused end does not happen at the next start after all.
            try:
                self._journal.delete_episode(episode)
            except StoreUnavailable:
                raise StoreUnavailable(
                    f"{exc}; the episode is in the journal already, so the session will end "
                    "when the daemon next starts"
                ) from exc
            raise
        result = EndResult(
            session.session_id, episode.episode_id, len(messages), reason, session.scope.user_id
        )
        for listener in self.on_flush:
            listener(result)
        return result

    def _commit_end(self, session: Session, episode: Episode) -> None:
        key = session.ref.key()
        prefix = session.ref.prefix()
        batch = self._state.batch()
        batch.delete_prefix("log", prefix)
        batch.delete_prefix("msgids", prefix)
        batch.delete("open", key)
        batch.put("sessions", key, session.meta(False))
        self._journal.mark_pending(batch, episode)
        self._state.write(batch)
        self._live.pop((session.scope.user_id, session.session_id), None)


def _mismatch(session_id: str) -> str:
    return f"scope differs from the scope of session {session_id!r}, which its first message fixed"
