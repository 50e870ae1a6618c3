"""The garbage collector: pauses in the log, what start-up loaded frozen, bursts without
automatic collections, the daemon's thresholds."""

from __future__ import annotations

import gc
import logging
import threading
import time

import pytest

from tiers.core import collector


def test_a_collection_over_the_threshold_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    collector.watch(threshold_ms=0.0)
    try:
        with caplog.at_level(logging.WARNING, logger="strata.gc"):
            gc.collect(2)
        [record] = [r for r in caplog.records if r.getMessage() == "gc.pause"][-1:]
        fields = record.fields  # type: ignore[attr-defined]
        assert fields["generation"] == 2 and fields["ms"] >= 0.0
        assert 0.0 <= fields["cpu_ms"] <= fields["ms"] + 1.0  # one thread's CPU: within its time
        collector.watch(threshold_ms=60_000.0)  # idempotent: one callback, a new threshold
        assert gc.callbacks.count(collector._callback) == 1
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="strata.gc"):
            gc.collect(2)
        assert not [r for r in caplog.records if r.getMessage() == "gc.pause"]
    finally:
        gc.callbacks.remove(collector._callback)


def test_a_pass_that_waits_is_told_from_one_that_works(caplog: pytest.LogCaptureFixture) -> None:
    """A young pass held 60 ms by something other than the collector's own work (here a
    callback that sleeps at its start, as a thread descheduled on busy cores would wait) is
    logged with its wall time, and with the little CPU time the thread spent."""

    def sleep_at_start(phase: str, info: dict[str, object]) -> None:
        if phase == "start":
            time.sleep(0.06)

    collector.watch(threshold_ms=50.0)
    gc.callbacks.append(sleep_at_start)  # after the watcher's: inside the timed pass
    try:
        with caplog.at_level(logging.WARNING, logger="strata.gc"):
            gc.collect(0)
    finally:
        gc.callbacks.remove(sleep_at_start)
        gc.callbacks.remove(collector._callback)
    [record] = [r for r in caplog.records if r.getMessage() == "gc.pause"][-1:]
    fields = record.fields  # type: ignore[attr-defined]
    assert fields["generation"] == 0 and fields["ms"] >= 60.0
    assert fields["cpu_ms"] < 30.0, fields  # a sleep spends no CPU; a young pass, a few ms


def test_freeze_takes_the_live_objects_out_of_later_collections() -> None:
    kept = [{"n": i} for i in range(10_000)]
    try:
        frozen = collector.freeze()
        # Frozen objects that die leave the count (other threads of the test process run).
        assert frozen >= gc.get_freeze_count() >= len(kept)
        assert not any(obj is kept for obj in gc.get_objects(generation=2))
    finally:
        gc.unfreeze()


def test_the_collection_before_the_freeze_is_logged_as_the_freeze_not_as_a_pause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    collector.watch(threshold_ms=0.0)  # every automatic pass would be logged
    try:
        with caplog.at_level(logging.INFO, logger="strata.gc"):
            collector.freeze()
        messages = [r.getMessage() for r in caplog.records]
        assert "gc.pause" not in messages
        [record] = [r for r in caplog.records if r.getMessage() == "gc.frozen"]
        fields = record.fields  # type: ignore[attr-defined]
        assert fields["ms"] >= 0.0 and fields["objects"] > 0
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="strata.gc"):
            gc.collect(2)  # after the freeze, collections are logged again
        assert [r for r in caplog.records if r.getMessage() == "gc.pause"]
    finally:
        gc.unfreeze()
        gc.callbacks.remove(collector._callback)


def test_a_burst_runs_without_automatic_collections_and_they_come_back_after() -> None:
    passes: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.callbacks.append(count)
    try:
        with collector.quiet():
            with collector.quiet():  # nested: still off after the inner block
                pass
            assert not gc.isenabled()
            burst = [[i] for i in range(200_000)]  # far more allocations than any threshold
            assert passes == []
        assert gc.isenabled()
        del burst
        more = [[i] for i in range(10 * gc.get_threshold()[0])]
        assert passes  # automatic collections again
        del more
        gc.disable()  # a collector turned off by the program stays off after a burst
        try:
            with collector.quiet():
                pass
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        gc.callbacks.remove(count)


def test_concurrent_bursts_turn_the_collector_on_when_the_last_ends() -> None:
    inside, release = threading.Barrier(2), threading.Event()

    def burst() -> None:
        with collector.quiet():
            inside.wait(10)
            release.wait(10)

    other = threading.Thread(target=burst)
    other.start()
    with collector.quiet():
        inside.wait(10)
    assert not gc.isenabled()  # the other burst still runs
    release.set()
    other.join(10)
    assert gc.isenabled()


def test_tune_sets_the_daemon_thresholds_and_returns_the_old_ones() -> None:
    before = gc.get_threshold()
    try:
        assert collector.tune() == before
        assert gc.get_threshold() == collector.THRESHOLDS
    finally:
        gc.set_threshold(*before)
