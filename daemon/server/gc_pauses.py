"""Garbage-collection passes that pause the daemon, in the log.

A full collection walks every tracked object with the GIL held, so every thread of the daemon
(appends, recalls, health checks) waits for it. :func:`watch` logs each pass that took at least
``threshold_ms`` (``gc.pause``, with the generation, the objects it freed and ``cpu_ms``, the
CPU time of the collecting thread), so a stall seen from outside can be told apart from the
engine's or the model's, and a pass that waited for a core (``cpu_ms`` far below ``ms``: the
thread was descheduled, with the GIL held) from one that walked many objects. :func:`freeze`
takes what the daemon loaded at start-up out of every later full collection (their cost grows
with the objects they walk: passes of 370-515 ms were measured at 100k points,
docs/benchmarks.md).
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

log = logging.getLogger("strata.gc")
_state: dict[str, float] = {"threshold_ms": 0.0, "began": 0.0, "cpu": 0.0}


def _callback(phase: str, info: dict[str, Any]) -> None:
    if _state.get("freezing"):  # freeze's own collection: logged by freeze, as gc.frozen
        return
    if phase == "start":
        _state["began"] = time.perf_counter()
        _state["cpu"] = time.thread_time()
        return
    ms = (time.perf_counter() - _state["began"]) * 1000
    if ms >= _state["threshold_ms"]:
        cpu_ms = (time.thread_time() - _state["cpu"]) * 1000
        log.warning(
            "gc.pause",
            extra={
                "fields": {
                    "generation": info.get("generation"),
                    "ms": round(ms, 1),
                    "cpu_ms": round(cpu_ms, 1),
                    "collected": info.get("collected"),
                }
            },
        )


def freeze() -> int:
    """Move every object alive now out of the collector's reach (``gc.freeze``): what the
    daemon loaded at start-up (modules, the model) is never walked again by
    a full collection. Returns how many objects are frozen.

    The collection before the freeze (so that little garbage is frozen) is of the young
    generations alone: a full pass walks everything loaded (836 ms at a million points, with
    the GIL held, while the daemon serves), the young ones only what was made since the last
    automatic collections. Garbage already in the old generation stays frozen: it was there
    to stay anyway until the next full pass. Its time is logged in ``gc.frozen`` (``ms``),
    not as a ``gc.pause``: those are the automatic collections."""
    began = time.perf_counter()
    _state["freezing"] = 1.0
    try:
        gc.collect(1)
    finally:
        _state["freezing"] = 0.0
    ms = round((time.perf_counter() - began) * 1000, 1)
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("gc.frozen", extra={"fields": {"objects": frozen, "ms": ms}})
    return frozen


def watch(threshold_ms: float = 50.0) -> None:
    """Log collections of at least ``threshold_ms`` (idempotent)."""
    _state["threshold_ms"] = threshold_ms
    if _callback not in gc.callbacks:
        gc.callbacks.append(_callback)
