"""The daemon's start and stop as one stack: each part, as it starts, registers the stage that
stops it (APScheduler 4's ``start(exit_stack)``), so the stop runs in reverse order of the
start by construction.

:class:`Stages` is an :class:`~contextlib.AsyncExitStack` of named, guarded stages: a stage that
fails is logged (``server.stop_failed`` with the stage and the error) and the stages after it
still run; :attr:`Stages.failed` names those that failed (the daemon's exit code says so). A
part that fails to start (:meth:`Stages.starting`) is logged as ``server.start_failed``, its
error is noted with the part's name, and what had started before it is stopped.

A stop that hangs says where: a stage that took a second or more is logged
(``server.stop_slow``), and :meth:`Stages.close` can have every thread's stack written to stderr
if the stages are not done after a while (:mod:`faulthandler`, which needs no GIL: a thread
stuck in native code holding it cannot stop the dump).
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import inspect
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TextIO

log = logging.getLogger("strata.daemon")

# A stage's teardown: a plain call (quick, on the event loop) or a coroutine function.
Teardown = Callable[[], Awaitable[object] | object]
SLOW_STAGE_SECONDS = 1.0  # a stage that took this long is logged (server.stop_slow)


class Stages:
    """The stages that stop what has started, most recent first; closing twice is safe (the
    second close finds nothing to run)."""

    def __init__(self) -> None:
        self._stack = contextlib.AsyncExitStack()
        # Registered, in start order (the stop runs them backwards).
        self.names: list[str] = []
        # The stages that failed when they ran (each logged as server.stop_failed).
        self.failed: list[str] = []

    def push(self, name: str, teardown: Teardown) -> None:
        """Register the stage that stops a part that has just started. A blocking teardown
        wraps itself in :func:`asyncio.to_thread`."""

        async def stage() -> None:
            began = time.perf_counter()
            try:
                result = teardown()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self.failed.append(name)
                log.error(
                    "server.stop_failed", extra={"fields": {"stage": name, "error": repr(exc)}}
                )
            seconds = time.perf_counter() - began
            if seconds >= SLOW_STAGE_SECONDS:
                log.info(
                    "server.stop_slow",
                    extra={"fields": {"stage": name, "seconds": round(seconds, 1)}},
                )

        self.names.append(name)
        self._stack.push_async_callback(stage)

    @contextlib.asynccontextmanager
    async def starting(self, part: str) -> AsyncIterator[None]:
        """Around a part's start: if it fails, the error names the part
        (``server.start_failed``); the caller then closes the stages (:meth:`close`)."""
        try:
            yield
        except BaseException as exc:
            exc.add_note(f"while starting the daemon's {part}; what had started was stopped")
            log.error("server.start_failed", extra={"fields": {"part": part, "error": repr(exc)}})
            raise

    async def close(self, dump_after: float | None = None, file: TextIO | None = None) -> None:
        """Run every stage registered, in reverse order; none raises (see :attr:`failed`).
        With ``dump_after``: if they are not done after that many seconds, every thread's
        stack is written to ``file`` (stderr by default), once."""
        stack, self._stack = self._stack, contextlib.AsyncExitStack()
        watching = dump_after is not None and _watch(dump_after, file)
        try:
            await stack.aclose()
        finally:
            if watching:
                faulthandler.cancel_dump_traceback_later()


def _watch(seconds: float, file: TextIO | None) -> bool:
    """Arm the stack dump; False (and the stop goes on without it) when there is no file to
    write to (no stderr, or one without a file descriptor)."""
    try:
        faulthandler.dump_traceback_later(seconds, file=file or sys.stderr)
    except (RuntimeError, ValueError, OSError) as exc:
        log.warning("server.stop_watch_off", extra={"fields": {"error": repr(exc)}})
        return False
    return True


async def in_thread(call: Callable[..., object], *args: object) -> None:
    """A blocking teardown (a thread to join, a socket to close) off the event loop."""
    await asyncio.to_thread(call, *args)
