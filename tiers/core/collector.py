"""The garbage collector held off while a burst of short-lived objects is built.

A full collection walks every tracked object with the GIL held, so every thread of the daemon
waits for it. Most of the daemon's allocations are short-lived and acyclic (a scroll's decoded
points, a scope's memory graph being built), and reference counting frees them; but a burst of
tens of thousands of them outlives several young collections, is promoted, and triggers full
collections that walk it while it is alive: passes of 150-480 ms were measured that way
(docs/benchmarks.md). :func:`quiet` turns automatic collection off for the length of such a
burst (for every thread: the collector is process-wide), and on again when the last of the
nested or concurrent bursts ends; what became garbage meanwhile is collected later, as usual.
:func:`tune` sets the daemon's young-generation thresholds (``stratad`` calls it at start).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

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
