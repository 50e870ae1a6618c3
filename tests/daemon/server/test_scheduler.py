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
