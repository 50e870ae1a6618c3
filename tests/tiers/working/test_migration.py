"""A data dir written by the previous release (``tests/data/datadir-5d133c6.tar.xz``, made by
``tests/data/write_datadir.py`` at commit 5d133c6, when session ids were global) opens with
this daemon: its open sessions, idempotency keys, episodes and Tier 3 are all there, and
sessions move to per-user keys once, safely, with their episode ids kept."""

from __future__ import annotations

import tarfile
from pathlib import Path

import grpc
import pytest

from stratad_client import MemoryClient, StrataClientError
from tests.support import QUIET_ENV, wait_until
from tiers.core.records import episode_id_for
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS

pytestmark = pytest.mark.slow
ARCHIVE = Path(__file__).parents[2] / "data" / "datadir-5d133c6.tar.xz"
# The archive's open sessions were last active when it was written, long before this run: the
# idle sweep (every 15 s) would end them while Tier 3 opens, on a loaded machine before the
# reads below. They stay open here; the sweep has tests of its own.
KEEP_OPEN = {"working_memory__idle_timeout_seconds": str(10 * 365 * 86400)}


def unpack(tmp_path: Path) -> Path:
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "data"


def contents(c: MemoryClient, sid: str, user: str) -> list[str]:
    return [m.message.content for m in c.get_working_memory(sid, user_id=user).messages]


def tier3_up(c: MemoryClient) -> bool:
    try:
        c.recall("x", user_id="alice")
    except StrataClientError as exc:
        if exc.code == grpc.StatusCode.UNAVAILABLE:
            return False
        raise
    return True


def test_a_data_dir_of_the_previous_release_opens_and_migrates(spawn, tmp_path):
    data = unpack(tmp_path)
    # The old layout: sessions keyed by their id alone.
    old = RocksStore(data / "state", STATE_CFS)
    try:
        assert sorted(k for k, _v in old.scan("open", b"")) == [b"open-a", b"open-b"]
    finally:
        old.close()
    trip1, work, trip2 = (
        episode_id_for("trip", 1),
        episode_id_for("work", 1),
        episode_id_for("trip", 2),
    )

    d = spawn(data, **KEEP_OPEN, **QUIET_ENV)
    with d.client(60) as c:
        wait_until(lambda: tier3_up(c), 120, "Tier 3 open")
        # Open sessions with their scope and window, and their idempotency keys.
        assert contents(c, "open-a", "alice") == [
            "My sister Ana lives in Faro.",
            "She teaches piano.",
        ]
        assert c.get_working_memory("open-a").scope.agent_id == "coach"  # one user: no name needed
        assert contents(c, "open-b", "bob") == ["I adopted a dog named Rex."]
        assert c.append(
            "open-a", "dup", user_id="alice", agent_id="coach", message_id="open-a-0"
        ).duplicate
        # Episodes (their ids as the old release derived them), and what the weaver made of them.
        episodes = {e.episode_id: e for e in c.iter_episodes(user_id="alice")}
        assert set(episodes) == {trip1, trip2}
        assert c.get_episode(work).episode.scope.user_id == "bob"
        hits = c.recall("Where did Alice move?", user_id="alice").hits
        assert any("Lisbon" in h.text for h in hits)
        # A migrated session keeps the old derivation for its next generations: a flush that a
        # crash interrupted before the upgrade ends under the id it began with.
        c.append("trip", "Back from Porto.", user_id="alice")
        assert c.end_session("trip", user_id="alice").episode_id == episode_id_for("trip", 3)
        # Sessions are per user now: bob's "open-a" is another session.
        c.append("open-a", "Bob's own open-a.", user_id="bob")
        assert contents(c, "open-b", "bob") == ["I adopted a dog named Rex."]
        ended = c.end_session("open-a", user_id="bob")
        assert ended.episode_id == episode_id_for("open-a", 1, "bob")
        assert contents(c, "open-a", "alice")[0] == "My sister Ana lives in Faro."
    assert d.terminate() == 0

    # The move happens once: a second start finds the new layout and changes nothing.
    state = RocksStore(data / "state", STATE_CFS)
    try:
        assert all(
            k.startswith(b"\x01")
            for cf in ("sessions", "open", "log", "msgids")
            for k, _ in state.scan(cf, b"")
        )
    finally:
        state.close()
    d = spawn(data, **KEEP_OPEN, **QUIET_ENV)
    with d.client(60) as c:
        assert contents(c, "open-a", "alice")[-1] == "She teaches piano."
        assert c.end_session("open-b").message_count == 1
    assert d.terminate() == 0
