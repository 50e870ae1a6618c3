"""Helpers for the benchmarks: a throwaway ``stratad serve`` process, RSS, machine details,
latency percentiles and the JSON file of the figures."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import psutil

from tests.support import ROOT as PROJECT_ROOT
from tests.support import ProcessDaemon

STOP_SECONDS = 120.0  # the longest a benchmark's daemon may take to stop on SIGTERM


class RunningDaemon(NamedTuple):
    address: str
    pid: int
    data_dir: Path | None = None
    log_path: Path | None = None  # the daemon's log (appended to by every run on a data dir)
    log_offset: int = 0  # where this run's lines begin in it

    def log_text(self) -> str:
        """This run's log lines so far."""
        if self.log_path is None:
            return ""
        with self.log_path.open("rb") as f:
            f.seek(self.log_offset)
            return f.read().decode(errors="replace")


@contextmanager
def running_daemon(
    settings: Mapping[str, str] | None = None, data_dir: Path | None = None
) -> Iterator[RunningDaemon]:
    """Run ``stratad serve`` in a fresh temporary data directory (or on ``data_dir``, kept)
    until the block exits.

    ``settings`` are extra ``STRATA_*`` variables (for example ``{"STRATA_SYNC": "true"}``).
    On exit the daemon gets SIGTERM; a non-zero exit code is printed with the log's tail, and
    a daemon still running after :data:`STOP_SECONDS` is said so and killed (the benchmark's
    figures are kept). With ``BENCH_DAEMON_LOG=PATH`` in the environment the daemon logs at
    info level and its whole log is copied to PATH at the end (to see what it did).
    """
    extra = {k.removeprefix("STRATA_").lower(): v for k, v in (settings or {}).items()}
    keep_log = os.environ.get("BENCH_DAEMON_LOG")
    extra.setdefault("log_level", "info" if keep_log else "warning")
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="strata-bench-"))
            )
            data_dir = data_dir / "data"
        log_path = data_dir.parent / f"{data_dir.name}.log"  # ProcessDaemon's
        offset = log_path.stat().st_size if log_path.exists() else 0
        proc = ProcessDaemon(data_dir, **extra)
        try:
            yield RunningDaemon(proc.address, proc.pid, proc.data_dir, proc.log_path, offset)
        finally:
            if proc.proc.poll() is None:
                try:
                    code = proc.terminate(STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    print(
                        f"stratad still ran {STOP_SECONDS:g} s after SIGTERM: killed\n{proc.log()}"
                    )
                else:
                    if code != 0:
                        print(f"stratad exited with code {code}:\n{proc.log()}")
            if keep_log:
                shutil.copyfile(proc.log_path, keep_log)


@contextmanager
def running_floor() -> Iterator[RunningDaemon]:
    """A gRPC server whose Append does nothing (``tests.bench.grpc_floor``): what the gRPC
    stack alone costs on this machine, measured the same way as the daemon."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.grpc_floor"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        yield RunningDaemon(address, proc.pid)
    finally:
        proc.terminate()
        proc.wait(15)


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid``."""
    return int(psutil.Process(pid).memory_info().rss)


def anon_rss_bytes(pid: int) -> int:
    """The anonymous part of process ``pid``'s resident set (``RssAnon``: what it allocated,
    without the pages of files it maps, such as the vector engine's write-ahead logs, which
    the kernel can drop at will); 0 where /proc does not say."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children_rss_bytes(pid: int) -> int:
    """Resident set size of the children of process ``pid`` (a daemon's workers and index
    builds), 0 when it has none."""
    total = 0
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += int(child.memory_info().rss)
    return total


def dir_bytes(path: Path) -> int:
    """What the files under ``path`` take on disk (allocated blocks: the vector engine
    preallocates its write-ahead logs as sparse files, whose apparent size is 64 MiB each), 0
    if it does not exist."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # removed meanwhile (compaction, index build)
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU time process ``pid`` has used so far."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def cpu_model() -> str:
    """The CPU model from /proc/cpuinfo, else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine_info() -> dict[str, Any]:
    """Where and when a benchmark ran."""
    load = os.getloadavg()
    return {
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "cpu": cpu_model(),
        "processor": platform.processor(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in load],
        "simd": simd_flags(),
    }


def simd_flags() -> str:
    """The CPU's vector instruction sets that matter to the model's kernels (from
    /proc/cpuinfo): machines differ, and figures depend on them."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags = set(line.split(":", 1)[1].split())
            break
    wanted = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "amx_tile", "neon", "asimd")
    present = [f for f in wanted if f in flags]
    absent = [f for f in ("avx512f", "avx512_vnni") if f not in flags and "avx2" in flags]
    return " ".join(present) + (" (no " + ", ".join(absent) + ")" if absent else "")


def format_machine(info: Mapping[str, Any]) -> str:
    load = ", ".join(f"{x:.2f}" for x in info["load_average"])
    return (
        f"date       {info['date_utc']}\n"
        f"cpu        {info['cpu']} ({info['cores']} cores; {info.get('simd', 'flags unknown')})\n"
        f"python     {info['python']} on {info['platform']}\n"
        f"load avg   {load} (at start)"
        + "".join(f"\nsetting    {k}={v}" for k, v in info.get("settings", {}).items())
    )


def command_line(module: str, doc: str | None, figures: bool = True) -> argparse.ArgumentParser:
    """A benchmark's parser: ``python -m <module>``, described by the first paragraph of the
    module's docstring ``doc``, with ``--json PATH`` for its figures unless ``figures`` is
    false."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {module}", description=(doc or "").split("\n\n")[0] or None
    )
    if figures:
        parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    return parser


def write_json(path: Path | None, payload: Any, indent: int | None = 2) -> None:
    """Write ``payload`` to ``path`` (a benchmark's ``--json``) as JSON with a final newline,
    making its folder if need be; nothing when ``path`` is None."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=indent) + "\n")


def write_figures(
    path: Path | None,
    benchmark: str,
    machine: Mapping[str, Any],
    params: Mapping[str, Any],
    results: Any,
    targets: Mapping[str, Any] | None = None,
) -> None:
    """Write a benchmark's figures to ``path`` (``--json``) as ``{benchmark, machine, params,
    targets (if any), results}`` and say so; nothing when ``path`` is None."""
    if path is None:
        return
    payload: dict[str, Any] = {"benchmark": benchmark, "machine": machine, "params": params}
    if targets is not None:
        payload["targets"] = targets
    payload["results"] = results
    write_json(path, payload)
    print(f"\nwrote {path}")


def summary(ms: Sequence[float]) -> dict[str, float]:
    """Count, p50, p99 and max of latencies in milliseconds (empty: nothing)."""
    if not ms:
        return {}
    return {"n": len(ms), **latency_ms(ms, (50, 99), digits=1)}


def latency_ms(
    values: Iterable[float], quantiles: Sequence[int] = (50, 99), digits: int = 2, prefix: str = ""
) -> dict[str, float]:
    """``<prefix>p<q>_ms`` for each of ``quantiles`` and ``<prefix>max_ms`` of latencies in
    milliseconds, rounded to ``digits`` (NaN when there are none)."""
    ordered = sorted(values)
    out = {f"{prefix}p{q}_ms": round(percentile(ordered, q), digits) for q in quantiles}
    out[f"{prefix}max_ms"] = round(ordered[-1], digits) if ordered else float("nan")
    return out


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of already sorted values, nearest-rank."""
    if not sorted_values:
        return float("nan")
    rank = min(len(sorted_values), max(1, math.ceil(q / 100 * len(sorted_values))))
    return sorted_values[rank - 1]
