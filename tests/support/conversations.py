"""Conversations a test writes through a client and the weaver's consolidation of them."""

from __future__ import annotations

import datetime as dt

from stratad_client import MemoryClient, message

MAY = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC)


def talk(c: MemoryClient, user: str, sid: str, when: dt.datetime, *turns: str) -> str:
    """One ended session of ``user``: ``turns`` said by Alice and Bob in turn at ``when``;
    each message has an id and ``dia_id``/``user`` metadata. Returns the episode id."""
    c.append_batch(
        sid,
        [
            message(
                text,
                name=("Alice", "Bob")[i % 2],
                created_at=when,
                message_id=f"{sid}-{i}",
                metadata={"dia_id": f"{sid}:{i}", "user": user},
            )
            for i, text in enumerate(turns)
        ],
        user_id=user,
    )
    return c.end_session(sid).episode_id


def consolidate(c: MemoryClient) -> None:
    """A weaver run now (RunNow), which must succeed."""
    report = list(c.admin.run_weaver())[-1].report
    assert report.ok, report.error
