"""The batches of one embedding call, several requests in flight (``embedding.max_in_flight``).

:meth:`tiers.core.models.ModelClient.embed` cuts a call's texts into batches of ``batch_size`` and
hands them here as jobs. :func:`in_flight` runs them on the client's thread pool, at most
``workers`` at once: each worker takes the next batch not yet taken, so the requests go out
in the texts' order, and the results come back in that order whatever order the replies
arrive in. A job retries its request on its own (:mod:`tiers.core.models.retry`), a reply that
is not one vector per text of the batch too (:func:`vectors_of`).

When a job fails, the call fails: the batches not taken yet are never sent, and the jobs in
progress end at their next retry (:class:`Abandoned`, which the job raises when it sees the
call's ``stop`` event). The call waits for them, so no request of it is left running, and
raises the error of the failed batch that comes first in the texts' order: an error of the
kinds and wording a call sending its batches one after the other raises
(``ModelUnavailable``, ``ModelRequestFailed``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, ThreadPoolExecutor
from typing import Any, TypeVar

from tiers.core.models.retry import RetryReply

T = TypeVar("T")


class Abandoned(Exception):
    """Raised by a job that stops retrying because another batch of its call failed."""


class PoolClosed(Exception):
    """The pool was shut down before every batch of the call ran (the client closed)."""


def in_flight(
    jobs: Sequence[Callable[[threading.Event], T]],
    pool: Callable[[], ThreadPoolExecutor],
    workers: int,
) -> list[T]:
    """Each job's result, in the jobs' order; ``pool()`` gives the executor, ``workers``
    bounds the jobs running at once. Raises the first failing job's error, or PoolClosed."""
    stop = threading.Event()  # a job failed (or the pool closed): the others stop
    results: list[T | None] = [None] * len(jobs)
    errors: dict[int, BaseException] = {}
    todo = iter(range(len(jobs)))
    lock = threading.Lock()

    def work() -> None:
        while not stop.is_set():
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                results[i] = jobs[i](stop)
            except Abandoned:
                return
            except BaseException as exc:
                errors[i] = exc
                stop.set()

    executor = pool()
    futures = []
    for _ in range(min(workers, len(jobs))):
        try:
            futures.append(executor.submit(work))
        except RuntimeError:  # shut down meanwhile
            stop.set()
            break
    for future in futures:
        try:
            future.result()
        except CancelledError:  # the pool shut down before this worker ran
            stop.set()
    if errors:
        raise errors[min(errors)]
    if stop.is_set():
        raise PoolClosed
    return [r for r in results if r is not None]


def vectors_of(response: Any, count: int) -> list[list[float]]:
    """The vectors of an embedding reply, in input order; RetryReply unless there are
    ``count`` of them, all of the same non-zero size."""
    try:
        data = response.data
        rows = sorted(data, key=lambda d: int(_get(d, "index")))
        vectors = [[float(x) for x in _get(d, "embedding")] for d in rows]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise RetryReply(f"bad reply: not an embedding list ({type(exc).__name__})") from None
    if len(vectors) != count:
        raise RetryReply(f"bad reply: {len(vectors)} vectors for {count} texts")
    sizes = {len(v) for v in vectors}
    if len(sizes) != 1 or 0 in sizes:
        raise RetryReply(f"bad reply: vectors of sizes {sorted(sizes)}")
    return vectors


def _get(item: Any, key: str) -> Any:
    return item[key] if isinstance(item, dict) else getattr(item, key)
