"""A user's sessions are found by their owner (``session_owners``,
``tiers.working.session.sessions_of``) on real RocksDB stores: a new session's entry written
with its first meta, and every entry written once at the start of a store written before
them."""

from __future__ import annotations

from pathlib import Path

from tests.contracts.stores import Clock, Tiers
from tiers.core.records import Message, Scope
from tiers.working.migration import migrate
from tiers.working.session import (
    OWNERS_BUILT,
    SESSION_OWNERS_CF,
    SESSIONS_CF,
    Session,
    SessionKey,
    WindowLimits,
    sessions_of,
)


def test_a_sessions_entry_comes_with_its_first_append_and_outlives_its_end(tmp_path: Path):
    tiers = Tiers(tmp_path, WindowLimits(), Clock())
    try:
        for sid, user in (("s2", "ann"), ("s1", "ann"), ("s1", "anne"), ("s3", "bob")):
            tiers.wm.append(sid, Scope(user, "bot"), [Message("user", f"{sid} of {user}")])
        tiers.wm.end_session("s2", user_id="ann")
        tiers.wm.append("s2", Scope("ann", "bot"), [Message("user", "again")])  # reopened
        tiers.reopen()
        assert sessions_of(tiers.state, "ann") == [SessionKey("ann", "s1"), SessionKey("ann", "s2")]
        assert sessions_of(tiers.state, "anne") == [SessionKey("anne", "s1")]
        assert sessions_of(tiers.state, "nobody") == []
    finally:
        tiers.close()


def test_a_store_written_before_the_entries_gets_them_once_at_its_start(tmp_path: Path):
    tiers = Tiers(tmp_path, WindowLimits(), Clock())
    try:
        batch = tiers.state.batch()  # as an earlier release wrote them: the metas alone
        for i in range(20_000):
            session = Session(f"s{i:05d}", Scope(f"user-{i % 7}", "bot"), 1, 3, 0, 1)
            batch.put(SESSIONS_CF, session.ref.key(), session.meta(False))
        batch.delete(SESSION_OWNERS_CF, OWNERS_BUILT)  # (written by the start of this one)
        tiers.state.write(batch)
        assert sessions_of(tiers.state, "user-3") == []
        migrate(tiers.state)
        found = sessions_of(tiers.state, "user-3")
        assert found == [SessionKey("user-3", f"s{i:05d}") for i in range(3, 20_000, 7)]
        entries = sum(1 for _ in tiers.state.scan(SESSION_OWNERS_CF, b""))
        assert entries == 20_000 + 1  # an entry a session, and the key that says all are there
        assert tiers.state.get(SESSION_OWNERS_CF, OWNERS_BUILT) is not None
    finally:
        tiers.close()
