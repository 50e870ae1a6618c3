"""The garbage collector: held off while a burst of short-lived objects is built, its passes
that pause the process in the log, and what start-up loaded out of its walks.

A full collection walks every tracked object with the GIL held, so every thread of the daemon
(appends, recalls, health checks) waits for it. Most of the daemon's allocations are
short-lived and acyclic (a scroll's decoded points, a scope's memory graph being built), and
reference counting frees them; but a burst of tens of thousands of them outlives several young
collections, is promoted, and triggers full collections that walk it while it is alive: passes
of 150-480 ms were measured that way (docs/benchmarks.md).

- :func:`quiet` turns automatic collection off for the length of such a burst (for every
  thread: the collector is process-wide), and on again when the last of the nested or
  concurrent bursts ends; what became garbage meanwhile is collected later, as usual.
- :func:`tune` sets the daemon's young-generation thresholds (``stratad`` and the vector
  store's process call it at start).
- :func:`watch` logs each pass that took at least ``threshold_ms`` (``gc.pause``, with the
  generation, the objects it freed and ``cpu_ms``, the CPU time of the collecting thread), so
  a stall seen from outside can be told apart from the engine's or the model's, and a pass
  that waited for a core (``cpu_ms`` far below ``ms``: the thread was descheduled, with the
  GIL held) from one that walked many objects.
- :func:`freeze` takes what a process loaded at start-up out of every later full collection
  (their cost grows with the objects they walk: passes of 370-515 ms were measured at 100k
  points, docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

# Young collections after this many net allocations (700 by default). Most of the daemon's
# objects are freed by reference counting, so the count grows slowly and a young collection
# walks what survived since the last one, including the reference cycles every gRPC call
# leaves (grpc.aio's method lookup behind server interceptors: five objects a call). At 20,000
# a pass came every ~37 s under a fleet of 100 agents and took 55-145 ms to free 10,000-14,000
# such objects (2026-11-29); at 2,000 each pass has a tenth of that to walk and free. Bursts of
# short-lived objects hold collection off instead (:func:`quiet`).
THRESHOLDS = (2_000, 10, 20)

_lock = threading.Lock()
_bursts = 0
_was_enabled = True
log = logging.getLogger("strata.gc")
_state: dict[str, float] = {"threshold_ms": 0.0, "began": 0.0, "cpu": 0.0}


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No automatic garbage collection while the block runs (module doc); re-entrant and
    safe across threads. A collector already off stays off."""
    global _bursts, _was_enabled
    with _lock:
        if _bursts == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _bursts += 1
    try:
        yield
    finally:
        with _lock:
            _bursts -= 1
            if _bursts == 0 and _was_enabled:
                gc.enable()


def tune() -> tuple[int, int, int]:
    """Set :data:`THRESHOLDS` (for a daemon process, not for a program embedding the daemon);
    returns the thresholds before."""
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    return (int(before[0]), int(before[1]), int(before[2]))


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
    process loaded at start-up (modules, the model, a store's open) is never walked again by
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
