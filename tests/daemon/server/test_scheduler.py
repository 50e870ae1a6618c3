"""The daemon's scheduled jobs, on a real daemon with short intervals."""

from __future__ import annotations

import grpc
import pytest

from stratad_client import StrataClientError
from stratad_client.pb import memory_pb2 as pb
from tests.support import wait_until


@pytest.mark.slow
def test_idle_sessions_are_flushed_by_the_sweep(start_daemon):
    daemon = start_daemon(
        working_memory={"idle_timeout_seconds": 0.5, "sweep_interval_seconds": 0.2}
    )
    with daemon.client() as c:
        c.append("forgotten", "nobody ends me", user_id="u")
        wait_until(lambda: c.get_working_memory("forgotten").state == pb.SESSION_STATE_ENDED, 10)
        (episode,) = c.list_episodes(user_id="u").episodes
        assert episode.end_reason == pb.END_REASON_IDLE and episode.message_count == 1


@pytest.mark.slow
def test_scheduled_compaction_drops_expired_episodes(start_daemon):
    daemon = start_daemon(journal={"ttl_seconds": 1, "compaction_interval_seconds": 0.5})
    with daemon.client() as c:
        c.append("s", "short-lived", user_id="u")
        eid = c.end_session("s").episode_id
        assert c.get_episode(eid).episode.episode_id == eid
        store = daemon.daemon.parts.journal_store
        assert store is not None
        # RocksDB drops an entry once ts + ttl < now in whole seconds: within ~2.5 s here.
        wait_until(lambda: store.get("episodes", eid.encode()) is None, 8)
        with pytest.raises(StrataClientError) as err:
            c.get_episode(eid)
        assert err.value.code == grpc.StatusCode.NOT_FOUND
        assert c.admin.stats().journal.pending_consolidation == 1


@pytest.mark.slow
def test_a_restart_that_finds_episodes_pending_runs_the_weaver_soon_after(spawn) -> None:
    """Before, the first run after a start came at the schedule's next time: a daemon
    restarted more often than its interval (600 s by default) never consolidated."""
    hourly = {"weaver__interval_seconds": "3600"}
    first = spawn(**hourly, weaver__first_run_delay_seconds="0")
    with first.client(30) as c:
        c.append("s1", "I moved to Lisbon last spring.", user_id="alice", role="user")
        c.end_session("s1", user_id="alice")
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 60, "for the index stage")
        assert c.admin.weaver_status().pending == 1
    assert first.terminate() == 0
    assert "weaver.run_after_start" not in first.log()  # nothing was left at its start

    # On a crontab the runs keep to its times (once a year here): no run after the start
    yearly = spawn(weaver__cron="0 0 1 1 *", weaver__first_run_delay_seconds="0.5")
    with yearly.client(30) as c:
        assert c.admin.weaver_status().pending == 1
    assert yearly.terminate() == 0
    assert "weaver.run_after_start" not in yearly.log()

    second = spawn(**hourly, weaver__first_run_delay_seconds="0.5")
    with second.client(30) as c:
        # Its episode stops being pending before the run ends (the profiles and digests after)
        wait_until(lambda: c.admin.weaver_status().HasField("last_run"), 60, "the run after start")
        status = c.admin.weaver_status()
        assert status.pending == 0 and status.last_run.episodes == 1, status
    assert "event=weaver.run_after_start pending=1 stale_scopes=0 seconds=0.5" in second.log()
    assert second.terminate() == 0

    third = spawn(**hourly, weaver__first_run_delay_seconds="0.5")  # nothing left: no run
    with third.client(30) as c:
        assert not c.admin.weaver_status().HasField("last_run")
    assert third.terminate() == 0
    assert third.log().count("weaver.run_after_start") == 1  # the second's: one log file
