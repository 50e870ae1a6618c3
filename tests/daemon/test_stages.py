"""The stack of stages a daemon starts and stops through (:mod:`daemon.stages`), with stages
that record what they stop: the reverse order of the start, a failing stage that stops no
other, a failing start."""

from __future__ import annotations

import asyncio
import logging

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
