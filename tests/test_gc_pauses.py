"""Garbage-collection pauses in the daemon's log, and freezing what start-up loaded."""

from __future__ import annotations

import gc
import logging

import pytest

from daemon import gc_pauses


def test_a_collection_over_the_threshold_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    gc_pauses.watch(threshold_ms=0.0)
    try:
        with caplog.at_level(logging.WARNING, logger="strata.gc"):
            gc.collect(2)
        [record] = [r for r in caplog.records if r.getMessage() == "gc.pause"][-1:]
        fields = record.fields  # type: ignore[attr-defined]
        assert fields["generation"] == 2 and fields["ms"] >= 0.0
        gc_pauses.watch(threshold_ms=60_000.0)  # idempotent: one callback, a new threshold
        assert gc.callbacks.count(gc_pauses._callback) == 1
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="strata.gc"):
            gc.collect(2)
        assert not [r for r in caplog.records if r.getMessage() == "gc.pause"]
    finally:
        gc.callbacks.remove(gc_pauses._callback)


def test_freeze_takes_the_live_objects_out_of_later_collections() -> None:
    kept = [{"n": i} for i in range(10_000)]
    try:
        frozen = gc_pauses.freeze()
        assert frozen == gc.get_freeze_count() >= len(kept)
        assert not any(obj is kept for obj in gc.get_objects(generation=2))
    finally:
        gc.unfreeze()
