"""Tier 1's durable side: the sessions' records and logs in the state store, their recovery
at start-up, and the flush of a session's log into the journal as one episode.

Key layout of the state store (``<data_dir>/state``), ``K`` = ``0x01 <session_id> 0x00
<user_id>`` (:class:`tiers.working.session.SessionKey`)::

    sessions  K                       -> meta: scope, generation, next seq, ...
    open      K                       -> b""   (the sessions that are open)
    log       K 0x00 <seq:u64>        -> StoredMessage (msgpack)
    msgids    K 0x00 <message_id>     -> <seq:u64>  (idempotency, open session)
    pending   <episode_id>            -> see tiers.journal.consolidation

Ids contain no control characters (the daemon validates this). A session that ends keeps its
meta, so a second ``end_session`` is told it ended already. Episode ids are derived from
(user, session, generation), so a flush interrupted by a crash and redone writes the same
episode again, never a second one. Stores of the old layout (global session ids) are moved at
start-up (:mod:`tiers.working.migration`).

Each write is one batch: it raises StoreUnavailable with nothing changed. The in-memory side
(windows, naming, when a session ends) is :class:`tiers.working.memory.WorkingMemory`, which holds
its lock around these calls.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from tiers.changes import log as changelog
from tiers.changes.log import Change, ChangeLog
from tiers.core.errors import StoreUnavailable
from tiers.core.records import Episode, Message, StoredMessage, u64
from tiers.journal.store import Journal
from tiers.rocks import Batch, RocksStore, prefix_end
from tiers.space import DiskFull, freeing
from tiers.working.migration import migrate
from tiers.working.session import (
    LOG_CF,
    MSGIDS_CF,
    OPEN_CF,
    SESSION_OWNERS_CF,
    SESSIONS_CF,
    AppendResult,
    Session,
    SessionKey,
    WindowLimits,
    message_tokens,
    owner_key,
    users_prefix,
)

log = logging.getLogger("strata.working")


class EndInJournal(StoreUnavailable):
    """A session's end that the state store refused after its episode reached the journal,
    and whose episode could not be taken back out: it ends at the next start."""


class SessionLog:
    """``changes``: the change log each write records its change in (None: none)."""

    def __init__(
        self, state: RocksStore, journal: Journal, changes: ChangeLog | None = None
    ) -> None:
        self._state = state
        self._journal = journal
        self._changes = changes

    def _write(self, batch: Batch, changes: list[Change]) -> None:
        changelog.write(self._state, batch, self._changes, changes)

    # -- records ---------------------------------------------------------------------------
    def record(self, ref: SessionKey) -> Session | None:
        """The session's stored meta, open or ended (None: never seen)."""
        raw = self._state.get(SESSIONS_CF, ref.key())
        return None if raw is None else Session.from_meta(ref.session_id, raw)[0]

    def exists(self, ref: SessionKey) -> bool:
        return self._state.get(SESSIONS_CF, ref.key()) is not None

    def users(self, session_id: str) -> list[str]:
        """The users with a session (open or ended) of this id."""
        return [
            SessionKey.parse(key).user_id
            for key, _ in self._state.scan_prefix(SESSIONS_CF, users_prefix(session_id))
        ]

    # -- start-up --------------------------------------------------------------------------
    def recover(self) -> tuple[list[Session], list[tuple[Session, Episode]]]:
        """Move an old layout (:func:`tiers.working.migration.migrate`), then read every open
        session. Returns the open sessions (windows not loaded) and the sessions whose flush a
        crash interrupted, finished here, with their episodes."""
        migrate(self._state)
        sessions: list[Session] = []
        finished: list[tuple[Session, Episode]] = []
        for key, _ in list(self._state.scan(OPEN_CF, b"")):
            raw = self._state.get(SESSIONS_CF, key)
            if raw is None:
                continue
            session, _ = Session.from_meta(SessionKey.parse(key).session_id, raw)
            episode = self._journal.find(session.episode_id())
            if episode is not None:
                # The episode reached the journal but the state commit did not: finish it.
                self._commit_end(session, episode)
                finished.append((session, episode))
                continue
            sessions.append(session)
        return sessions, finished

    # -- the log ---------------------------------------------------------------------------
    def _seq_of(self, ref: SessionKey, message_id: str) -> int | None:
        """The seq of the open session's message with this client id, if it was appended."""
        raw = self._state.get(MSGIDS_CF, ref.prefix() + message_id.encode())
        return int.from_bytes(raw, "big") if raw is not None else None

    def newest(self, session: Session, limits: WindowLimits) -> list[StoredMessage]:
        """The newest messages of the session's log within the window's limits (at least one
        if the log has any), oldest first."""
        newest: list[StoredMessage] = []
        tokens = 0
        for _key, value in self._state.scan_prefix(LOG_CF, session.ref.prefix(), reverse=True):
            message = StoredMessage.decode(value)
            if newest and (
                len(newest) >= limits.max_messages or tokens + message.tokens > limits.max_tokens
            ):
                break
            newest.append(message)
            tokens += message.tokens
        newest.reverse()
        return newest

    def last(self, session: Session, count: int | None) -> list[StoredMessage]:
        """The newest ``count`` messages of the session's log (None: all), oldest first."""
        found: list[StoredMessage] = []
        for _key, value in self._state.scan_prefix(LOG_CF, session.ref.prefix(), reverse=True):
            if count is not None and len(found) >= count:
                break
            found.append(StoredMessage.decode(value))
        found.reverse()
        return found

    def since(self, session: Session, after_seq: int, limit: int) -> list[StoredMessage]:
        """Up to ``limit`` messages of the session's log after ``after_seq``, oldest first."""
        found: list[StoredMessage] = []
        prefix = session.ref.prefix()
        for _key, value in self._state.scan(
            LOG_CF, prefix + u64(after_seq + 1), prefix_end(prefix)
        ):
            if len(found) >= limit:
                break
            found.append(StoredMessage.decode(value))
        return found

    def new_records(
        self, session: Session, messages: list[Message], now_us: int
    ) -> tuple[list[AppendResult], list[StoredMessage]]:
        """Each message's AppendResult, and the records the new ones add to the session's log,
        numbered from its next seq. A message whose id the log (or an earlier message of the
        same call) holds already is a duplicate, with the seq it got then."""
        results: list[AppendResult] = []
        stored: list[StoredMessage] = []
        ids_in_request: dict[str, int] = {}
        for message in messages:
            if message.message_id:
                prior = ids_in_request.get(message.message_id)
                if prior is None:
                    prior = self._seq_of(session.ref, message.message_id)
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
                else now_us,
                received_at_us=now_us,
                tokens=message_tokens(message),
                name=message.name,
                tool_call=message.tool_call,
                message_id=message.message_id,
                metadata=message.metadata,
            )
            if message.message_id:
                ids_in_request[message.message_id] = seq
            stored.append(record)
            results.append(AppendResult(seq, False))
        return results, stored

    def append(self, session: Session, records: list[StoredMessage], opening: bool) -> None:
        """Write ``records`` into the session's log and ``session`` (updated) as its open
        meta; ``opening``: mark it open too."""
        prefix = session.ref.prefix()
        batch = self._state.batch()
        for record in records:
            batch.put(LOG_CF, prefix + u64(record.seq), record.encode())
            if record.message_id:
                batch.put(MSGIDS_CF, prefix + record.message_id.encode(), u64(record.seq))
        key = session.ref.key()
        batch.put(SESSIONS_CF, key, session.meta(True))
        changes = []
        if opening:
            batch.put(OPEN_CF, key, b"")
            batch.put(SESSION_OWNERS_CF, owner_key(session.ref), b"")
            changes.append(Change(session.scope, "session.started", _named(session)))
        if records:
            attrs = {"first_seq": records[0].seq, "last_seq": records[-1].seq}
            attrs["count"] = len(records)
            changes.append(Change(session.scope, "session.appended", _named(session, **attrs)))
        self._write(batch, changes)

    def remove(self, session: Session, removed: list[StoredMessage]) -> None:
        """Delete ``removed`` from the log and store ``session`` (updated) as its meta: open
        while its log holds messages, closed without an episode otherwise."""
        prefix = session.ref.prefix()
        batch = self._state.batch()
        for message in removed:
            batch.delete(LOG_CF, prefix + u64(message.seq))
            if message.message_id:
                batch.delete(MSGIDS_CF, prefix + message.message_id.encode())
        changes = [
            Change(session.scope, "session.messages_removed", _named(session, count=len(removed)))
        ]
        if session.log_count > 0:
            batch.put(SESSIONS_CF, session.ref.key(), session.meta(True))
        else:
            batch.delete(OPEN_CF, session.ref.key())
            batch.put(SESSIONS_CF, session.ref.key(), session.meta(False))
            changes.append(Change(session.scope, "session.ended", _named(session, count=0)))
        self._write(batch, changes)

    def drop(self, sessions: list[Session]) -> None:
        """Delete the logs of open ``sessions``, without an episode; their metas stay, closed
        and emptied."""
        batch = self._state.batch()
        for s in sessions:
            batch.delete_prefix(LOG_CF, s.ref.prefix())
            batch.delete_prefix(MSGIDS_CF, s.ref.prefix())
            batch.delete(OPEN_CF, s.ref.key())
            batch.put(SESSIONS_CF, s.ref.key(), replace(s, log_count=0).meta(False))
        self._state.write(batch)

    # -- ending ----------------------------------------------------------------------------
    def flush(self, session: Session, reason: str, now_us: int) -> Episode:
        """Write the session's log to the journal as one episode, then close the session in
        the state store. Raises StoreUnavailable or DiskFull with neither done."""
        messages = [
            StoredMessage.decode(v)
            for _k, v in self._state.scan_prefix(LOG_CF, session.ref.prefix())
        ]
        times = [m.created_at_us for m in messages]
        episode = Episode(
            episode_id=session.episode_id(),
            session_id=session.session_id,
            scope=session.scope,
            started_at_us=min(times),
            ended_at_us=max(times),
            flushed_at_us=now_us,
            message_count=len(messages),
            first_seq=messages[0].seq,
            last_seq=messages[-1].seq,
            end_reason=reason,
        )
        self._journal.write_episode(episode, messages)
        try:
            self._commit_end(session, episode)
        except (StoreUnavailable, DiskFull) as exc:
            # The state store refused the end (disk full...): take the episode back out of the
            # journal, so the refused end does not happen at the next start after all. That
            # frees space: it may use the disk's reserve (tiers.space).
            try:
                with freeing(self._state.space):
                    self._journal.delete_episode(episode)
            except (StoreUnavailable, DiskFull):
                raise EndInJournal(
                    f"{exc}; the episode is in the journal already, so the session will end "
                    "when the daemon next starts"
                ) from exc
            raise
        return episode

    def roll_over(self, session: Session, now_us: int) -> Episode | None:
        """:meth:`flush` a session whose log reached its limit, after an append that is stored
        already: None when the disk's reserve or the store refused it with nothing done
        (logged, ``session.rollover_deferred``), so the append still succeeds and the next
        one tries again. Raises :class:`EndInJournal` (half done: the journal holds it)."""
        try:
            return self.flush(session, "rollover", now_us)
        except EndInJournal:
            raise
        except (StoreUnavailable, DiskFull) as exc:
            log.warning(
                "session.rollover_deferred",
                extra={"fields": {"session_id": session.session_id, "error": str(exc)}},
            )
            return None

    def _commit_end(self, session: Session, episode: Episode) -> None:
        key = session.ref.key()
        prefix = session.ref.prefix()
        batch = self._state.batch()
        batch.delete_prefix(LOG_CF, prefix)
        batch.delete_prefix(MSGIDS_CF, prefix)
        batch.delete(OPEN_CF, key)
        batch.put(SESSIONS_CF, key, session.meta(False))
        self._journal.mark_pending(batch, episode)
        ended = _named(session, count=episode.message_count, reason=episode.end_reason)
        self._write(batch, [Change(session.scope, "session.ended", ended)])


def _named(session: Session, **attrs: object) -> dict[str, object]:
    """A session change's attrs: the session, the episode it becomes, and ``attrs`` (a
    Forget of the episode removes the change)."""
    return {"session_id": session.session_id, "episode_id": session.episode_id(), **attrs}
