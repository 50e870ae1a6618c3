"""Backing off after consecutive failures: the weaver's pause before it tries the LLM (or the
vector store) again.

The pause doubles with each consecutive failure, from ``first_seconds`` up to ``max_seconds``;
a success resets it. When the pause is over, ``retry`` is called (from a timer thread), so the
work resumes without waiting for the next scheduled run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Backoff:
    def __init__(
        self,
        first_seconds: float,
        max_seconds: float,
        retry: Callable[[], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        if first_seconds <= 0 or max_seconds < first_seconds:
            raise ValueError("need 0 < first_seconds <= max_seconds")
        self.first_seconds = first_seconds
        self.max_seconds = max_seconds
        self._retry = retry
        self._clock = clock
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False
        self.failures = 0  # consecutive
        self.until = 0.0  # clock() time the pause ends; 0 when not backing off

    def failed(self) -> float:
        """Count a failure; returns the pause, after which ``retry`` is called."""
        with self._lock:
            self.failures += 1
            delay = min(self.max_seconds, self.first_seconds * 2 ** (self.failures - 1))
            self.until = self._clock() + delay
            self._cancel()
            if not self._closed:
                self._timer = threading.Timer(delay, self._fire)
                self._timer.daemon = True
                self._timer.start()
            return delay

    def succeeded(self) -> None:
        with self._lock:
            self.failures = 0
            self.until = 0.0
            self._cancel()

    @property
    def waiting(self) -> bool:
        """Whether a pause is under way."""
        return self._clock() < self.until

    def close(self) -> None:
        """No retry after this (idempotent)."""
        with self._lock:
            self._closed = True
            self._cancel()

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed:
                return
        self._retry()

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
