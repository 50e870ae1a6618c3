"""What the load benchmarks' agents (``tests.bench.load``, ``tests.bench.fleet``) record of their
own calls, in each client process: the latency of each call by RPC, and the calls that failed."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from stratad_client import StrataClientError


class Tally:
    """Times the calls of one process's agents: the milliseconds of each call by RPC, for the
    calls that began at ``measure_from`` or later and ended by ``measure_until``, and the failed
    calls (all of them) by RPC and status code."""

    def __init__(
        self, rpcs: Iterable[str], measure_from: float, measure_until: float = math.inf
    ) -> None:
        self.measure_from = measure_from
        self.measure_until = measure_until
        self.ms: dict[str, list[float]] = {r: [] for r in rpcs}
        self.errors: Counter[str] = Counter()

    async def timed(self, rpc: str, call: Any) -> Any:
        """Await ``call``; its result, or None when it failed (counted)."""
        began = time.monotonic()
        try:
            result = await call
        except StrataClientError as exc:
            self.errors[f"{rpc} {exc.code.name}"] += 1
            return None
        ended = time.monotonic()
        if self.measure_from <= began and ended <= self.measure_until:
            self.measured(rpc, began, (ended - began) * 1000)
        return result

    def measured(self, rpc: str, began: float, ms: float) -> None:
        """Record a call inside the window (``began``: its monotonic start)."""
        self.ms[rpc].append(ms)
