"""What an export holds: one tenant (one agent when asked), and nothing forgotten, also when an
older export is imported again (round trips and refusals: ``tests/tiers/rights/test_export.py``)."""

from __future__ import annotations

import grpc
import pytest

from stratad_client import MemoryClient, StrataClientError
from tests.support import QUIET, code
from tests.support.exporting import ALICE_ONLY, BOB_ONLY, exported, fill, records, user_points
from tiers.core.records import pack
from tiers.journal.consolidation import put_extraction

pytestmark = pytest.mark.slow


def test_an_export_holds_one_tenant_and_nothing_forgotten(start_daemon):
    d = start_daemon(weaver=QUIET)
    with d.client(timeout=120) as c:
        episodes = fill(c)
        before = exported(c, "alice")
        fact = next(
            r
            for r in records(before)
            if r["type"] == "point" and r["kind"] == "fact" and r["episode_id"] == episodes["s1"]
        )
        assert c.forget(episode_ids=[episodes["s2"]]).episodes == 1
        assert c.forget(memory_ids=[fact["id"]]).vector_points >= 1  # and a profile citing it
        data = exported(c, "alice")
        text = data.decode()
        assert BOB_ONLY in source_text(c, "bob") and BOB_ONLY not in text
        assert ALICE_ONLY in before.decode() and ALICE_ONLY not in text  # s2 was forgotten
        for r in records(data)[1:-1]:
            assert r.get("user_id", "alice") == "alice", r  # messages: their parent's
        assert episodes["s2"] not in text and fact["id"] not in text
        assert episodes["bob"] not in text
        # One agent: only its data.
        coach = records(exported(c, "alice", "coach"))
        assert coach[0]["scope"] == {"user_id": "alice", "agent_id": "coach"}
        assert {r.get("agent_id", "coach") for r in coach[1:-1]} == {"coach"}
        assert any(r["type"] == "episode" for r in coach)
        # Importing the older export here: what was forgotten stays forgotten.
        response = c.admin.import_([before])
        forgotten = [
            r["id"]
            for r in records(before)
            if r["type"] == "point" and r["episode_id"] == episodes["s2"]
        ]
        # the episode, its extraction, its points, the fact
        assert response.skipped_forgotten >= 2 + len(forgotten) + 1
        assert code(lambda: c.get_episode(episodes["s2"]))[0] == grpc.StatusCode.NOT_FOUND
        points = user_points(d, "alice")
        assert forgotten and fact["id"] not in points
        assert not set(forgotten) & set(points)
        # Alice's export reads no stored record of another user's (their owners' entries find
        # hers): one of bob's that cannot be read fails bob's export, not hers.
        state = d.daemon.parts.state
        batch = state.batch()
        put_extraction(batch, "f" * 32, pack({"ep": {"u": "bob", "a": ""}, "x": "unreadable"}))
        state.write(batch)
        assert any(r["type"] == "extraction" for r in records(exported(c, "alice")))
        with pytest.raises(StrataClientError):
            exported(c, "bob")


def source_text(c: MemoryClient, user: str) -> str:
    return exported(c, user).decode()
