"""Combine concurrent single-item calls into batch calls.

Embedding one short query costs about 16 ms on one CPU thread, eight at once about 33 ms:
most of the cost is per call, not per text. Under concurrent Recall load every request
thread would pay the full price and compete for the same cores. :class:`Batcher` lets the
threads share calls instead: a caller that finds no call in progress makes one at once with
everything waiting (so an idle daemon adds no latency), and callers arriving meanwhile wait
for it to end and then go out together in the next call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")


class Batcher(Generic[In, Out]):
    """Calls ``batch(items)`` for items submitted from many threads, one call at a time.

    ``batch`` must return one result per item, in order. An exception it raises is raised in
    every caller whose item was in that call.
    """

    def __init__(self, batch: Callable[[list[In]], Sequence[Out]], max_batch: int = 32) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._batch = batch
        self._max = max_batch
        self._cond = threading.Condition()
        self._waiting: list[tuple[In, Future[Out]]] = []
        self._busy = False
        self.calls = 0  # batch calls made (for tests and figures)

    def __call__(self, item: In) -> Out:
        return self.many([item])[0]

    def many(self, items: Sequence[In]) -> list[Out]:
        """The results of several items, in order, submitted together: they go out in one
        call when no more than ``max_batch`` wait (a Recall's query and its speaker-neutral
        twin share one model call instead of queueing twice)."""
        mine: list[Future[Out]] = [Future() for _ in items]
        with self._cond:
            self._waiting.extend(zip(items, mine, strict=True))
        while True:
            with self._cond:
                while self._busy and not all(f.done() for f in mine):
                    self._cond.wait()
                if all(f.done() for f in mine):
                    return [f.result() for f in mine]
                # No call in progress: this thread makes the next one, for everyone waiting
                # (oldest first; its own items are among them unless more than max_batch wait).
                self._busy = True
                taken, self._waiting = self._waiting[: self._max], self._waiting[self._max :]
                self.calls += 1
            try:
                self._run(taken)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _run(self, taken: list[tuple[In, Future[Out]]]) -> None:
        try:
            results = self._batch([item for item, _ in taken])
            if len(results) != len(taken):
                raise RuntimeError(f"batch returned {len(results)} results for {len(taken)}")
        except BaseException as exc:
            for _, future in taken:
                future.set_exception(exc)
            return
        for (_, future), result in zip(taken, results, strict=True):
            future.set_result(result)
