"""What the scale benchmark (:mod:`tests.bench.scale.run`) reads off a daemon beside its
requests: its resident memory, its data dir's size, and figures from its log (the collector's
pauses, the builds, a Forget's stages)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any


def rss(pid: int) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            found[key] = round(int(value.split()[0]) / 1024, 1)
    return found


def disk(path: Path) -> dict[str, float]:
    apparent = allocated = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            st = os.stat(os.path.join(root, f))
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return {"apparent_gb": round(apparent / 1e9, 2), "allocated_gb": round(allocated / 1e9, 2)}


def forget_stages(text: str) -> dict[str, float]:
    """The stages of the last ``forget.done`` line (``*_ms`` fields), and the RocksDB
    compaction behind it (the first ``forget.compacted`` after it: ``compacted_after_ms``)."""
    _before, found, after = text.rpartition("event=forget.done")
    line, _, rest = after.partition("\n")
    stages = {k: float(v) for k, v in re.findall(r"(\w+_ms)=([\d.]+)", line if found else "")}
    if found and (compacted := re.search(r"event=forget\.compacted .*?\bms=([\d.]+)", rest)):
        stages["compacted_after_ms"] = float(compacted[1])
    return stages


def log_figures(text: str) -> dict[str, Any]:
    pauses = [float(m) for m in re.findall(r"event=gc\.pause .*?ms=([\d.]+)", text)]
    frozen = re.findall(r"event=gc\.frozen .*?ms=([\d.]+)", text)
    objects = re.findall(r"event=gc\.frozen .*?objects=(\d+)", text)
    return {
        "gc_frozen_ms": [float(m) for m in frozen],
        "gc_frozen_objects": [int(n) for n in objects],
        "gc_pauses_over_50ms": len(pauses),
        "gc_pause_max_ms": max(pauses, default=0.0),
        "shards_built": len(re.findall(r"event=vectors\.built\b", text)),
        "graph_builds_ms": [
            float(m) for m in re.findall(r"event=recall\.graph_built .*?ms=([\d.]+)", text)
        ],
    }
