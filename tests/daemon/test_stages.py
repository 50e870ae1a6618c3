"""The stack of stages a daemon starts and stops through (:mod:`daemon.stages`), with stages
that record what they stop: the reverse order of the start, a failing stage that stops no
other, a failing start, a stop that hangs."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from daemon.stages import Stages, in_thread


def test_stages_stop_in_reverse_order_and_a_failing_one_stops_no_other(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stopped: list[str] = []

    async def async_stage(name: str) -> None:
        await asyncio.sleep(0)
        stopped.append(name)

    def failing() -> None:
        stopped.append("server")
        raise OSError("injected: the server's stop failed")

    async def run() -> Stages:
        stages = Stages()
        stages.push("stores", lambda: stopped.append("stores"))
        stages.push("weaver", lambda: in_thread(stopped.append, "weaver"))
        stages.push("server", failing)
        stages.push("health", lambda: async_stage("health"))
        assert stopped == []  # registering stops nothing
        await stages.close()
        await stages.close()  # a second close finds nothing to run
        return stages

    with caplog.at_level(logging.ERROR, logger="strata.daemon"):
        stages = asyncio.run(run())
    assert stopped == ["health", "server", "weaver", "stores"]
    assert stages.names == ["stores", "weaver", "server", "health"]
    assert stages.failed == ["server"]
    [record] = [r for r in caplog.records if r.getMessage() == "server.stop_failed"]
    assert record.__dict__["fields"]["stage"] == "server"
    assert "injected" in record.__dict__["fields"]["error"]


def test_a_part_that_fails_to_start_is_named_and_what_started_is_stopped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stopped: list[str] = []

    async def start(stages: Stages) -> None:
        for part in ("stores", "metrics", "server"):
            async with stages.starting(part):
                if part == "server":
                    raise OSError("cannot listen on 127.0.0.1:1: in use")
                stages.push(part, lambda part=part: stopped.append(part))

    async def run() -> None:
        stages = Stages()
        try:
            await start(stages)
        finally:
            await stages.close()

    with caplog.at_level(logging.ERROR, logger="strata.daemon"), pytest.raises(OSError) as failed:
        asyncio.run(run())
    assert "cannot listen" in str(failed.value)  # the part's own error, its type kept
    assert any("starting the daemon's server" in note for note in failed.value.__notes__)
    assert stopped == ["metrics", "stores"]
    [record] = [r for r in caplog.records if r.getMessage() == "server.start_failed"]
    assert record.__dict__["fields"]["part"] == "server"


def test_a_slow_stage_is_logged_and_a_stop_not_done_in_time_writes_every_threads_stack(
    caplog: pytest.LogCaptureFixture, tmp_path
) -> None:
    """A stop that hangs says where: the stage that took long is named, and past the
    watchdog's seconds every thread's stack is written (here to a file: stderr by default)."""

    def stuck_close() -> None:  # a teardown that blocks, as a join on a stuck thread would
        threading.Event().wait(1.5)

    async def run(stages: Stages, dump_after: float, file) -> None:
        await stages.close(dump_after=dump_after, file=file)

    stacks = tmp_path / "stacks.txt"
    with caplog.at_level(logging.INFO, logger="strata.daemon"), stacks.open("w") as file:
        stages = Stages()
        stages.push("quick", lambda: None)
        stages.push("tier 3", lambda: in_thread(stuck_close))
        asyncio.run(run(stages, 0.5, file))
    slow = [r for r in caplog.records if r.msg == "server.stop_slow"]
    assert [r.fields["stage"] for r in slow] == ["tier 3"]  # type: ignore[attr-defined]
    dumped = stacks.read_text()
    assert "stuck_close" in dumped and "Thread" in dumped

    with stacks.open("w") as file:  # done in time: nothing is written, the watchdog is off
        quick = Stages()
        quick.push("quick", lambda: None)
        asyncio.run(run(quick, 0.5, file))
        time.sleep(1.0)  # past the watchdog's seconds
    assert stacks.read_text() == ""


def test_a_stop_without_a_stderr_to_write_to_runs_its_stages_all_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A daemon whose stderr is closed (or None) stops as before, without the watchdog."""
    stopped: list[str] = []
    monkeypatch.setattr("sys.stderr", None)
    stages = Stages()
    stages.push("stores", lambda: stopped.append("stores"))
    asyncio.run(stages.close(dump_after=0.5))
    assert stopped == ["stores"]
