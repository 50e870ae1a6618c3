"""weaverctl backup against a live daemon, then stratad restore into a fresh data dir."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from daemon.client import message
from tests.support import ROOT, daemon_env

pytestmark = pytest.mark.slow


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_backup_while_running_and_restore(spawn, tmp_path):
    proc = spawn(tmp_path / "live")
    with proc.client() as c:
        c.append_batch("done", [message(f"old {i}") for i in range(5)], user_id="alice")
        eid = c.end_session("done").episode_id
        c.append_batch("open", [message(f"new {i}") for i in range(3)], user_id="bob")
    env = daemon_env(tmp_path / "unused") | {"STRATA_ADDRESS": proc.address}
    out = run(["weaver.ctl", "--json", "backup", str(tmp_path / "bk")], env)
    assert out.returncode == 0, out.stderr
    assert set(json.loads(out.stdout)["stores"]) == {"state", "journal"}
    again = run(["weaver.ctl", "backup", str(tmp_path / "bk")], env)
    assert again.returncode == 1 and "ALREADY_EXISTS" in again.stderr
    with proc.client() as c:  # writes after the backup are not in it
        c.append("open", "after the backup", user_id="bob")
    proc.terminate()

    restored = run(["daemon", "restore", str(tmp_path / "bk")], daemon_env(tmp_path / "fresh"))
    assert restored.returncode == 0, restored.stderr
    refused = run(["daemon", "restore", str(tmp_path / "bk")], daemon_env(tmp_path / "fresh"))
    assert refused.returncode == 1 and "not empty" in refused.stderr

    proc = spawn(tmp_path / "fresh")
    with proc.client() as c:
        got = c.get_episode(eid)
        assert [m.message.content for m in got.messages] == [f"old {i}" for i in range(5)]
        assert c.list_episodes(user_id="alice").episodes[0].episode_id == eid
        wm = c.get_working_memory("open")
        assert [m.message.content for m in wm.messages] == [f"new {i}" for i in range(3)]
        assert c.stats().journal.pending_consolidation == 1
    proc.terminate()


def test_weaverctl_reports_an_unreachable_daemon(tmp_path):
    env = daemon_env(tmp_path / "x") | {"STRATA_ADDRESS": "127.0.0.1:1"}
    out = run(["weaver.ctl", "--timeout", "2", "stats"], env)
    assert out.returncode == 3 and "UNAVAILABLE" in out.stderr
