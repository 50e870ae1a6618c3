"""Tier 2: the episodic journal.

A finished session becomes an *episode*: a header plus its messages, in a RocksDB database
opened with a TTL (``journal.ttl_seconds``). RocksDB drops expired entries only at compaction,
which :meth:`Journal.compact` runs on a schedule; every read also checks the stored
``flushed_at`` so an expired episode is never returned, compacted or not.

Key layout of the journal store (``<data_dir>/journal``, raw bytes, big-endian integers)::

    episodes  <episode_id:32 ascii hex>                        -> Episode (msgpack)
    messages  <episode_id> <seq:u64>                          -> StoredMessage (msgpack)
    by_time   <started_at:time_key> <episode_id>              -> [flushed_at, user_id, agent_id]
    by_user   <user_id utf-8> 0x00 <started_at:time_key> <id> -> [flushed_at, user_id, agent_id]

``time_key`` is microseconds since the epoch plus 2**63, so pre-1970 times sort too.

Consolidation state is *not* in this store, so it never expires with the TTL: the episodes'
marks and stored extractions live in the state store (no TTL), laid out by
:mod:`tiers.journal.consolidation`. :class:`Journal` writes and deletes the marks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tiers.changes import log as changelog
from tiers.changes.log import Change, ChangeLog
from tiers.core.errors import EpisodeNotFound
from tiers.core.records import Episode, Scope, StoredMessage, pack, time_key, u64, unpack
from tiers.journal.consolidation import (
    PENDING_CF,
    UNINDEXED_CF,
    delete_mark_owner,
    mark,
    marked_of,
    put_mark_owner,
)
from tiers.journal.tally import EpisodeTally
from tiers.rocks import Batch, InvalidPageToken, RocksStore, page_key, page_token_of, prefix_end

EPISODES_CF = "episodes"
MESSAGES_CF = "messages"
BY_TIME_CF = "by_time"
BY_USER_CF = "by_user"
JOURNAL_CFS = (EPISODES_CF, MESSAGES_CF, BY_TIME_CF, BY_USER_CF)  # the journal store
_ID_LEN = 32


@dataclass(frozen=True, slots=True)
class PendingEpisode:
    episode_id: str
    flushed_at_us: int
    user_id: str
    agent_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class EpisodePage:
    episodes: list[Episode]
    next_page_token: str


class Journal:
    """The journal store plus the consolidation state kept in the (no-TTL) state store.

    Errors: every write (:meth:`write_episode`, :meth:`delete_episode`, :meth:`set_marks`,
    :meth:`mark_indexed`, :meth:`mark_consolidated`) raises
    :class:`~tiers.core.errors.StoreUnavailable` when its store refuses it, and then stores
    nothing. :meth:`get` raises :class:`~tiers.core.errors.EpisodeNotFound` (a ``NotFound``) for
    an episode never written, deleted or expired; :meth:`list` raises
    :class:`InvalidPageToken` (an ``InvalidArgument``) for a token it did not issue for this
    listing. The other reads raise nothing of their own: an unknown id reads as ``None`` or
    empty. ``tests/contracts/test_journal.py`` is the contract."""

    def __init__(
        self,
        store: RocksStore,
        state: RocksStore,
        ttl_seconds: int,
        clock: Callable[[], float] = time.time,
        changes: ChangeLog | None = None,
    ) -> None:
        """``changes``: the change log the marks record their changes in (None: none)."""
        self._store = store
        self._state = state
        self.ttl_us = ttl_seconds * 1_000_000
        self._clock = clock
        self._changes = changes
        self._marks_lock = threading.Lock()  # a mark's delete and its owner's entry
        self._tally = EpisodeTally(
            lambda: (unpack(v)[0] for _k, v in self._store.scan(BY_TIME_CF, b""))
        )

    # -- writing ---------------------------------------------------------------------------
    def write_episode(self, episode: Episode, messages: list[StoredMessage]) -> None:
        """Write the episode and its messages atomically (idempotent for the same id)."""
        eid = episode.episode_id.encode()
        batch = self._store.batch()
        batch.put(EPISODES_CF, eid, episode.encode())
        for message in messages:
            batch.put(MESSAGES_CF, eid + u64(message.seq), message.encode())
        entry = pack([episode.flushed_at_us, episode.scope.user_id, episode.scope.agent_id])
        tkey = time_key(episode.started_at_us) + eid
        batch.put(BY_TIME_CF, tkey, entry)
        batch.put(BY_USER_CF, episode.scope.user_id.encode() + b"\x00" + tkey, entry)

        def write() -> tuple[list[int], list[int]]:
            stored = self._store.get(EPISODES_CF, eid) is not None
            self._store.write(batch)
            return ([] if stored else [episode.flushed_at_us]), []

        self._tally.write(write)

    def delete_episode(self, episode: Episode) -> None:
        """Undo :meth:`write_episode` (when the end of its session could not be committed)."""
        batch = self._store.batch()
        self.delete_into(batch, episode)
        self.write_deletes(batch, [episode])

    def write_deletes(self, batch: Batch, episodes: Sequence[Episode]) -> None:
        """Write ``batch``, a batch of the journal store holding the deletes of ``episodes``
        (:meth:`delete_into`), so that :meth:`count` counts them out."""

        def write() -> tuple[list[int], list[int]]:
            eids = [e.episode_id.encode() for e in episodes]
            stored = [self._store.get(EPISODES_CF, eid) is not None for eid in eids]
            self._store.write(batch)
            return [], [e.flushed_at_us for e, was in zip(episodes, stored, strict=True) if was]

        self._tally.write(write)

    @staticmethod
    def delete_into(batch: Batch, episode: Episode) -> None:
        """Add the deletes of ``episode`` (header, messages, index entries) to ``batch``, a
        batch of the journal store."""
        eid = episode.episode_id.encode()
        tkey = time_key(episode.started_at_us) + eid
        batch.delete(EPISODES_CF, eid)
        batch.delete_prefix(MESSAGES_CF, eid)
        batch.delete(BY_TIME_CF, tkey)
        batch.delete(BY_USER_CF, episode.scope.user_id.encode() + b"\x00" + tkey)

    def stored_messages(self, episode_id: str) -> int:
        """How many messages of the episode are stored (expired or not)."""
        return sum(1 for _ in self._store.scan_prefix(MESSAGES_CF, episode_id.encode()))

    @staticmethod
    def mark_pending(state_batch: Batch, episode: Episode) -> None:
        """Add "waiting for indexing and consolidation" to a batch of the state store."""
        key, raw = episode.episode_id.encode(), mark(episode)
        state_batch.put(UNINDEXED_CF, key, raw)
        state_batch.put(PENDING_CF, key, raw)
        put_mark_owner(state_batch, episode.episode_id, raw)

    def set_marks(self, episode: Episode, *, indexed: bool, consolidated: bool) -> None:
        """An imported episode's marks as its exporting daemon had them: ``unindexed`` unless
        ``indexed``, ``pending`` unless ``consolidated`` (and no mark otherwise)."""
        key, raw = episode.episode_id.encode(), mark(episode)
        with self._marks_lock:
            batch = self._state.batch()
            for cf, done in ((UNINDEXED_CF, indexed), (PENDING_CF, consolidated)):
                if done:
                    batch.delete(cf, key)
                else:
                    batch.put(cf, key, raw)
            if indexed and consolidated:
                delete_mark_owner(batch, episode.episode_id, raw)
            else:
                put_mark_owner(batch, episode.episode_id, raw)
            self._state.write(batch)

    def mark_indexed(self, episode_id: str, points: int = 0, *, expired: bool = False) -> None:
        """The episode is indexed (``points`` written), or ``expired`` before it could be:
        its ``episode.indexed`` or ``episode.expired`` change goes with the mark."""
        what = "episode.expired" if expired else "episode.indexed"
        self._unmark(UNINDEXED_CF, episode_id, what, {} if expired else {"count": points})

    def mark_consolidated(
        self, episode_id: str, attrs: Mapping[str, object] | None = None, *, expired: bool = False
    ) -> None:
        """The episode is consolidated (``attrs``: what it added), or ``expired`` before it
        could be: its ``episode.consolidated`` or ``episode.expired`` change goes with the
        mark."""
        what = "episode.expired" if expired else "episode.consolidated"
        self._unmark(PENDING_CF, episode_id, what, attrs or {})

    def _unmark(self, cf: str, episode_id: str, what: str, attrs: Mapping[str, object]) -> None:
        """Delete the mark of ``cf``, and the owner's entry with the episode's last mark (under
        the lock, so that two stages unmarking one episode at once do not both keep it)."""
        key = episode_id.encode()
        with self._marks_lock:
            batch = self._state.batch()
            batch.delete(cf, key)
            raw = self._state.get(cf, key)
            changes = []
            if raw is not None:  # still marked: this is the change
                other = PENDING_CF if cf == UNINDEXED_CF else UNINDEXED_CF
                if self._state.get(other, key) is None:
                    delete_mark_owner(batch, episode_id, raw)
                if self._changes is not None:
                    _flushed, user_id, agent_id, session_id = unpack(raw)
                    named = {"episode_id": episode_id, "session_id": session_id, **attrs}
                    changes.append(Change(Scope(user_id, agent_id), what, named))
            changelog.write(self._state, batch, self._changes, changes)

    def marked(self, user_id: str) -> list[tuple[str, Scope]]:
        """The ids and owners of ``user_id``'s episodes (every agent's) still marked
        unindexed or pending, read from their owners' entries
        (:func:`~tiers.journal.consolidation.marked_of`)."""
        return marked_of(self._state, user_id, self._marks_lock)

    def unindexed(self) -> list[PendingEpisode]:
        return self._marked(UNINDEXED_CF)

    def pending(self) -> list[PendingEpisode]:
        """Episodes awaiting consolidation, oldest flush first."""
        return self._marked(PENDING_CF)

    def near_expiry(
        self, pending: list[PendingEpisode] | None = None, fraction: float = 0.10
    ) -> list[PendingEpisode]:
        """Pending episodes with less than ``fraction`` of the TTL left (or expired)."""
        now = int(self._clock() * 1_000_000)
        return [
            p
            for p in (self.pending() if pending is None else pending)
            if p.flushed_at_us + self.ttl_us - now < self.ttl_us * fraction
        ]

    def _marked(self, cf: str) -> list[PendingEpisode]:
        out = []
        for key, value in self._state.scan(cf, b""):
            flushed_at, user_id, agent_id, session_id = unpack(value)
            out.append(PendingEpisode(key.decode(), flushed_at, user_id, agent_id, session_id))
        out.sort(key=lambda p: p.flushed_at_us)
        return out

    # -- reading ---------------------------------------------------------------------------
    def _expired(self, flushed_at_us: int) -> bool:
        return flushed_at_us + self.ttl_us <= int(self._clock() * 1_000_000)

    def expires_at_us(self, episode: Episode) -> int:
        return episode.flushed_at_us + self.ttl_us

    def find(self, episode_id: str) -> Episode | None:
        """The episode if it was written, expired or not (for crash recovery)."""
        raw = self._store.get(EPISODES_CF, episode_id.encode())
        return Episode.decode(raw) if raw is not None else None

    def get(self, episode_id: str) -> Episode:
        raw = self._store.get(EPISODES_CF, episode_id.encode())
        if raw is None:
            raise EpisodeNotFound(f"episode {episode_id!r} not found")
        episode = Episode.decode(raw)
        if self._expired(episode.flushed_at_us):
            raise EpisodeNotFound(
                f"episode {episode_id!r} has expired (journal.ttl_seconds="
                f"{self.ttl_us // 1_000_000})"
            )
        return episode

    def messages(
        self, episode_id: str, after_seq: int = 0, limit: int = 1000
    ) -> list[StoredMessage]:
        eid = episode_id.encode()
        out: list[StoredMessage] = []
        for _key, value in self._store.scan(MESSAGES_CF, eid + u64(after_seq + 1), prefix_end(eid)):
            out.append(StoredMessage.decode(value))
            if len(out) >= limit:
                break
        return out

    def is_pending(self, episode_id: str) -> bool:
        return self._state.get(PENDING_CF, episode_id.encode()) is not None

    def pending_count(self) -> int:
        """Episodes awaiting consolidation (the marks counted, not read)."""
        return self._state.count_keys(PENDING_CF)

    def unindexed_count(self) -> int:
        """Episodes awaiting indexing (the marks counted, not read: a metrics scrape's)."""
        return self._state.count_keys(UNINDEXED_CF)

    def list(
        self,
        *,
        user_id: str = "",
        agent_id: str = "",
        start_us: int | None = None,
        end_us: int | None = None,
        newest_first: bool = False,
        page_size: int = 50,
        page_token: str = "",
    ) -> EpisodePage:
        """Episodes whose ``started_at`` is in ``[start_us, end_us)``, in time order."""
        cf = BY_USER_CF if user_id else BY_TIME_CF
        prefix = user_id.encode() + b"\x00" if user_id else b""
        low = prefix + (time_key(start_us) if start_us is not None else b"")
        high = prefix + time_key(end_us) if end_us is not None else None
        if high is None and prefix:
            high = prefix_end(prefix)
        if page_token:
            last = page_key(page_token)
            if not (low <= last and (high is None or last < high)):
                raise InvalidPageToken("page_token does not belong to this listing")
            if newest_first:
                high = last
            else:
                low = last + b"\x00"
        episodes: list[Episode] = []
        last_key = b""
        more = False
        for key, value in self._store.scan(cf, low, high, reverse=newest_first):
            flushed_at, _user, agent = unpack(value)
            if self._expired(flushed_at) or (agent_id and agent != agent_id):
                continue
            if len(episodes) == page_size:
                more = True
                break
            raw = self._store.get(EPISODES_CF, key[-_ID_LEN:])
            if raw is None:  # header compacted away before its index entry
                continue
            episodes.append(Episode.decode(raw))
            last_key = key
        return EpisodePage(episodes, page_token_of(last_key) if more else "")

    def count(self) -> int:
        """Episodes not yet expired (:class:`~tiers.journal.tally.EpisodeTally`: every
        episode's flush time is read at the first call, and kept in memory from then on)."""
        return self._tally.count(int(self._clock() * 1_000_000) - self.ttl_us)

    # -- maintenance -----------------------------------------------------------------------
    def announce_expired(self) -> int:
        """Record an ``episode.expired`` change for each episode whose time to live ended
        since the last call (before compaction drops it). Returns how many."""
        if self._changes is None:
            return 0
        now = int(self._clock() * 1_000_000)
        since = self._changes.expired_through()
        changes = []
        # Only an episode that began before the cutoff can have expired (it was flushed after
        # it began): the entries of those alone, not the journal's whole index.
        for key, value in self._store.scan(BY_TIME_CF, b"", time_key(now - self.ttl_us)):
            flushed_at, user_id, agent_id = unpack(value)
            if since <= flushed_at + self.ttl_us < now:
                eid = key[-_ID_LEN:]
                header = self._store.get(EPISODES_CF, eid)
                session = Episode.decode(header).session_id if header is not None else ""
                named = {"episode_id": eid.decode(), "session_id": session}
                changes.append(Change(Scope(user_id, agent_id), "episode.expired", named))
        batch = self._state.batch()
        self._changes.expired_until(batch, now)
        self._changes.write(batch, changes)
        return len(changes)

    def compact(self) -> None:
        """Run RocksDB compaction, which drops entries older than the TTL."""
        self._store.compact()

    def size_bytes(self) -> int:
        return self._store.size_on_disk()
