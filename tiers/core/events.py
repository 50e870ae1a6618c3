"""Typed events: what a part tells its observers (metrics, say), without knowing them.

An event is a small frozen dataclass (the weaver's are in :mod:`weaver.jobs.events`). An
observer subscribes a handler to one event type, and mypy checks that the handler takes that
type: ``events.subscribe(RunFinished, metrics.run_finished)``. :meth:`Events.publish` calls the
handlers of the event's exact type in the order they subscribed, on the publisher's thread; a
handler that raises is logged (``<name>.observer_failed``, with the event's type) and the
others still run: an observer never fails the work it observes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

E = TypeVar("E")


class Events:
    """Handlers by event type. ``name`` is the publisher's (``"weaver"``): its failures are
    logged on ``strata.<name>`` as ``<name>.observer_failed``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._log = logging.getLogger(f"strata.{name}")
        self._lock = threading.Lock()
        self._handlers: dict[type, tuple[Callable[[Any], None], ...]] = {}

    def subscribe(self, kind: type[E], handler: Callable[[E], None]) -> Callable[[], None]:
        """Call ``handler`` with each event of type ``kind`` published from now on; returns
        the function that unsubscribes it."""
        with self._lock:
            self._handlers[kind] = (*self._handlers.get(kind, ()), handler)

        def unsubscribe() -> None:
            with self._lock:
                rest = list(self._handlers.get(kind, ()))
                if handler in rest:
                    rest.remove(handler)
                self._handlers[kind] = tuple(rest)

        return unsubscribe

    def handlers(self, kind: type) -> int:
        """How many handlers events of type ``kind`` have."""
        return len(self._handlers.get(kind, ()))

    def publish(self, event: object) -> None:
        """Call the handlers of ``type(event)``, in order; a failing one is logged."""
        for handler in self._handlers.get(type(event), ()):
            try:
                handler(event)
            except Exception:
                self._log.exception(
                    f"{self.name}.observer_failed",
                    extra={"fields": {"event": type(event).__name__}},
                )
