"""Writes the data dir in ``datadir-<commit>.tar.xz``: run it from a checkout of that commit.

    PYTHONPATH=<checkout> python tests/data/write_datadir.py /tmp/legacy
    cd /tmp/legacy && tar --sparse -cJf datadir-<commit>.tar.xz data

Two users, ended sessions (one session ended twice: two generations), a consolidation run,
and open sessions with message ids, stopped with SIGTERM. ``tests/tiers/test_migration.py`` opens
it with the current daemon.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
from pathlib import Path

from stratad_client import MemoryClient, message
from tests.support import QUIET_ENV, ProcessDaemon

MAY = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC)


def talk(
    c: MemoryClient, user: str, sid: str, turns: list[str], agent: str = "", end: bool = True
) -> str:
    c.append_batch(
        sid,
        [
            message(
                text,
                name=("Alice", "Bob")[i % 2],
                created_at=MAY + dt.timedelta(minutes=i),
                message_id="" if end else f"{sid}-{i}",
            )
            for i, text in enumerate(turns)
        ],
        user_id=user,
        agent_id=agent,
    )
    return c.end_session(sid).episode_id if end else ""


def main(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    d = ProcessDaemon(root / "data", **QUIET_ENV)
    with d.client(60) as c:
        talk(c, "alice", "trip", ["I moved to Lisbon in May.", "Lisbon is lovely in spring."])
        talk(c, "bob", "work", ["I work at Acme as a welder."])
        talk(c, "alice", "trip", ["Next I plan to visit Porto."])  # generation 2
        list(c.admin.run_weaver())
        talk(
            c,
            "alice",
            "open-a",
            ["My sister Ana lives in Faro.", "She teaches piano."],
            "coach",
            False,
        )
        talk(c, "bob", "open-b", ["I adopted a dog named Rex."], end=False)
    assert d.terminate() == 0


if __name__ == "__main__":
    main(Path(sys.argv[1]))
