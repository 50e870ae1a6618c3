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

# Young collections after this many net allocations (700 by default): each walks at most this
# many young objects (a few ms), and short-lived objects mostly die before one happens.
THRESHOLDS = (20_000, 20, 20)

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
