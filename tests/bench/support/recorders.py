"""What the daemon benchmarks record while a daemon works (``index_build``, ``forget_cost``):
request latencies in a loop, inside and outside a window; the build windows of the vector
store's shards; the fields of the daemon's log lines."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from stratad_client import StrataClientError
from tests.bench.support.daemon import percentile
from tests.support import ProcessDaemon, wait_until
from tiers.semantic.vectors.edge import generations


class Recorder(threading.Thread):
    """Calls ``fn`` in a loop (pausing ``pause`` between calls) and records (start, ms)."""

    def __init__(self, name: str, fn: Any, pause: float) -> None:
        super().__init__(name=name, daemon=True)
        self.fn = fn
        self.pause = pause
        self.samples: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            t0 = time.perf_counter()
            try:
                self.fn(i)
            except StrataClientError as exc:
                self.errors.append(f"{exc.code.name}: {exc.message}")
            self.samples.append((t0, (time.perf_counter() - t0) * 1000))
            i += 1
            if self.pause:
                self.stop.wait(self.pause)


def stop(recorders: list[Recorder]) -> None:
    for r in recorders:
        r.stop.set()
    for r in recorders:
        r.join(60)


class BuildWatcher(threading.Thread):
    """Records each shard's build windows: from its next generation's directory appearing to
    its ``CURRENT`` naming it (a copy that goes away unswapped, a build with nothing to index,
    leaves none)."""

    def __init__(self, vectors: Path) -> None:
        super().__init__(name="builds", daemon=True)
        self.vectors = vectors
        self.windows: list[tuple[str, float, float]] = []  # (shard, start, end)
        self.stop = threading.Event()

    def run(self) -> None:
        seen: dict[Path, tuple[Path, float | None]] = {}
        while not self.stop.wait(0.01):
            for shard in sorted(self.vectors.glob("shard-*")):
                if not (shard / generations.CURRENT).exists():
                    continue
                current, began = seen.get(shard, (generations.current(shard), None))
                ahead = generations.following(shard, current).exists()
                now = generations.current(shard)
                if now != current:
                    self.windows.append(
                        (shard.name, began or time.perf_counter(), time.perf_counter())
                    )
                    current, began = now, None
                elif began is None and ahead:
                    began = time.perf_counter()
                elif began is not None and not ahead:
                    began = None  # the copy went away unswapped: nothing was built
                seen[shard] = (current, began)


def first_round(proc: ProcessDaemon, deadline: float) -> tuple[float, float]:
    """The window of the first build over the shards: (start, end) in this process's clock,
    from the weaver's ``vectors.optimized`` line (noticed within 50 ms) and its ``ms``."""
    found: list[dict[str, str]] = []

    def done() -> bool:
        found[:] = events(proc.log_path.read_text(errors="replace"), "vectors.optimized")
        return bool(found)

    wait_until(done, deadline, "for the first build", interval=0.05)
    end = time.perf_counter()
    return end - float(found[0]["ms"]) / 1000, end


def summary(samples: list[tuple[float, float]], start: float, end: float) -> dict[str, Any]:
    inside = sorted(ms for t, ms in samples if start <= t <= end)
    outside = sorted(ms for t, ms in samples if not start <= t <= end)

    def figures(values: list[float]) -> dict[str, Any]:
        if not values:
            return {"n": 0}
        return {
            "n": len(values),
            "p50": round(percentile(values, 50), 1),
            "p99": round(percentile(values, 99), 1),
            "max": round(values[-1], 1),
        }

    return {"during_build": figures(inside), "otherwise": figures(outside)}


def events(log: str, name: str) -> list[dict[str, str]]:
    """The fields of the daemon's ``name`` log lines (key=value format)."""
    return [
        dict(re.findall(r"(\w+)=(\S+)", line))
        for line in log.splitlines()
        if f"event={name} " in line or line.endswith(f"event={name}")
    ]


def gc_pauses(log: str) -> list[float]:
    """The automatic collections of 50 ms or more (``gc.pause``)."""
    return [float(e["ms"]) for e in events(log, "gc.pause")]


def gc_summary(log: str) -> dict[str, float]:
    """The automatic collections of 50 ms or more: how many, how many of 100 ms or more, the
    longest, and their wall and CPU milliseconds summed (``cpu_ms``: the collecting thread's;
    far below the wall time, the thread waited for a core)."""
    found = events(log, "gc.pause")
    wall = [float(e["ms"]) for e in found]
    return {
        "over_50ms": len(wall),
        "over_100ms": sum(1 for ms in wall if ms >= 100.0),
        "max_ms": max(wall, default=0.0),
        "wall_ms": round(sum(wall), 1),
        "cpu_ms": round(sum(float(e.get("cpu_ms", "nan")) for e in found), 1),
    }


def gc_freeze_ms(log: str) -> float | None:
    """The one full collection at start-up, before the freeze (``gc.frozen``)."""
    frozen = events(log, "gc.frozen")
    return float(frozen[0]["ms"]) if frozen and "ms" in frozen[0] else None
