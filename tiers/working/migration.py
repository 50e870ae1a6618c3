"""Moving working-memory sessions from global session ids to per-user ones.

Stores written before sessions were per user keyed a session's meta and open mark by the session id
alone, and its log and idempotency keys by ``<session_id> 0x00 ...``. Session ids contain no control
character, so every such key sorts at or after ``0x02``, and every key of the current layout
(:class:`tiers.working.session.SessionKey`) starts with ``0x01``: the old keys are exactly those
from ``0x02`` on, which makes the move safe to repeat after a crash.

Each session moves in one write batch (meta, open mark, log, idempotency keys), and is
marked ``legacy_ids`` so its episodes keep the ids the old derivation gives: a flush that a
crash interrupted before the upgrade is finished under the same episode id.
"""

from __future__ import annotations

import logging

from tiers.rocks import RocksStore
from tiers.working.session import (
    LOG_CF,
    MSGIDS_CF,
    OPEN_CF,
    OWNERS_BUILT,
    SESSION_OWNERS_CF,
    SESSIONS_CF,
    Session,
    SessionKey,
    owner_key,
)

log = logging.getLogger("strata.working")
_OLD = b"\x02"  # the first key of the old layout


def migrate(state: RocksStore) -> int:
    """Move every session of the old layout; returns how many moved."""
    moved = 0
    for old_key, raw in list(state.scan(SESSIONS_CF, _OLD)):
        session, is_open = Session.from_meta(old_key.decode(), raw)
        session.legacy_ids = True
        new = SessionKey(session.scope.user_id, session.session_id)
        old_prefix, new_prefix = old_key + b"\x00", new.prefix()
        batch = state.batch()
        batch.put(SESSIONS_CF, new.key(), session.meta(is_open))
        batch.delete(SESSIONS_CF, old_key)
        if state.get(OPEN_CF, old_key) is not None:
            batch.put(OPEN_CF, new.key(), b"")
            batch.delete(OPEN_CF, old_key)
        for cf in (LOG_CF, MSGIDS_CF):
            for key, value in state.scan_prefix(cf, old_prefix):
                batch.put(cf, new_prefix + key[len(old_prefix) :], value)
            batch.delete_prefix(cf, old_prefix)
        state.write(batch)
        moved += 1
    if moved:
        log.info("working.sessions_migrated", extra={"fields": {"sessions": moved}})
    if state.get(SESSION_OWNERS_CF, OWNERS_BUILT) is None:
        owned = index_owners(state)
        log.info("working.session_owners_built", extra={"fields": {"sessions": owned}})
    return moved


def index_owners(state: RocksStore) -> int:
    """Write every session's entry by owner (``session_owners``), for a store written before
    them, then the key that says they are all there; returns how many. Once, at start-up,
    before any session is written: a read of every session's key."""
    keys = (
        owner_key(SessionKey.parse(key)) for key, _ in state.scan(SESSIONS_CF, b"\x01", b"\x02")
    )
    return state.put_keys(SESSION_OWNERS_CF, keys, OWNERS_BUILT)
