"""Tier 1 on real RocksDB stores in tmp_path, without the gRPC layer: a flush that a crash
cut short. The working memory's contract is the suite ``tests/contracts/test_working_memory.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.contracts.stores import Tiers, tiers_maker
from tiers.core.errors import SessionEnded
from tiers.core.records import Episode, Message, Scope, episode_id_for

ALICE = Scope("alice", "agent-1")


@pytest.fixture
def make_tiers(tmp_path: Path) -> Iterator[Callable[..., Tiers]]:
    with tiers_maker(tmp_path) as make:
        yield make


def msg(text: str, **kw: object) -> Message:
    return Message(role="user", content=text, **kw)  # type: ignore[arg-type]


def test_a_flush_interrupted_after_the_journal_write_is_finished_at_recovery(make_tiers):
    t = make_tiers()
    t.wm.append("s", ALICE, [msg("a"), msg("b")])
    # Simulate a crash between the journal write and the state commit of end_session.
    messages = [m for m in t.wm.window("s").messages]
    eid = episode_id_for("s", 1, "alice")
    t.journal.write_episode(
        Episode(
            eid,
            "s",
            ALICE,
            messages[0].created_at_us,
            messages[-1].created_at_us,
            int(t.clock() * 1e6),
            2,
            1,
            2,
            "client",
        ),
        messages,
    )
    t.reopen()
    assert [r.episode_id for r in t.recovered] == [eid]
    assert t.wm.stats().live_sessions == 0
    assert t.journal.is_pending(eid)
    assert [e.episode_id for e in t.journal.list().episodes] == [eid]
    with pytest.raises(SessionEnded):
        t.wm.end_session("s")
