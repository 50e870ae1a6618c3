"""Tier 3's embedded vector store in a process of its own (``vectors.process``).

The embedded engine holds the interpreter's lock through its own work: a shard's load (0.1 to
0.6 s at ten million points), a built copy swapped in, a flush, a cold page read. In the
daemon's process every request waits meanwhile, an Append too. :class:`ChildVectorStore` runs
the store (:class:`~tiers.semantic.vectors.shards.store.ShardedVectorStore`) in a child
process (:mod:`tiers.semantic.vectors.child.main`) and forwards the seam's calls to it over a
pipe, several at once: the engine then holds only the child's lock, and the daemon's threads
wait for it only when they call the store.

It is the same store on the same files, so the seam's contract holds as it is
(``tests/contracts/test_vector_store.py`` runs against it), and so does durability: a call
returns once the child's store returned. What a call costs more is the trip: its arguments and
result as msgpack (:mod:`tiers.semantic.vectors.child.codec`).

The process is supervised. When it ends while serving (killed, or a crash of the engine), the
calls under way raise :class:`VectorStoreUnavailable`; it is started again after a pause
(:data:`RESTART_DELAYS`), the store made ready again (the last :meth:`ensure`), and a call made
meanwhile waits up to ``wait_timeout`` for it. The child dies with the thread that started it,
this store's supervisor, so after a crash of the daemon no child holds the shards' locks.

Errors: as the seam's (:class:`~tiers.semantic.vectors.VectorStore`); besides, every call
raises :class:`VectorStoreUnavailable` when the process cannot start or ended during it, and
the constructor when the first start fails (what the child said is in the message).
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tiers.core.wire import WireClosed, receive, send
from tiers.semantic.vectors import (
    Hit,
    MemoryPoint,
    PointFilter,
    SparseVector,
    Validity,
    VectorStoreUnavailable,
)
from tiers.semantic.vectors.child.codec import decode, decode_error, encode

log = logging.getLogger(__name__)

COMMAND = (sys.executable, "-m", "tiers.semantic.vectors.child.main")
START_TIMEOUT = 300.0  # the first start: a store of an earlier layout is resharded in it
WAIT_TIMEOUT = 60.0  # how long a call waits for a process that is starting again
CLOSE_TIMEOUT = 300.0  # the child's close: the calls under way, then the store's own close
RESTART_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # between starts, growing; reset by a
STEADY_SECONDS = 60.0  # process that served this long


class ChildVectorStore:
    """The store ``store`` (a name of :data:`tiers.semantic.vectors.child.main.STORES`) made
    with ``args`` and ``kwargs`` in a child process (module doc)."""

    def __init__(
        self,
        store: str,
        *args: Any,
        command: Sequence[str] = COMMAND,
        start_timeout: float = START_TIMEOUT,
        wait_timeout: float = WAIT_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        self._spec = {"store": store, "args": encode(args), "kwargs": encode(kwargs)}
        self._command = list(command)
        self._start_timeout = start_timeout
        self._wait_timeout = wait_timeout
        self._cond = threading.Condition()
        self._sending = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None  # the process serving, ready
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._next_id = 0
        self._closed = False
        self._ensured: tuple[str, int] | None = None
        self.starts = 0  # processes started and ready (tests, figures)
        self.last_exit = ""  # how the last process ended
        first: Future[None] = Future()
        # The supervisor starts every process: a child dies with the thread that started it.
        self._supervisor = threading.Thread(
            target=self._supervise, args=(first,), name="vectors-child", daemon=True
        )
        self._supervisor.start()
        try:
            first.result()
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        """The serving process's id (0 while there is none)."""
        proc = self._proc
        return proc.pid if proc is not None else 0

    # -- the seam ------------------------------------------------------------------------------

    def ensure(self, model: str, dim: int) -> None:
        self._call("ensure", model, dim)
        self._ensured = (model, dim)

    def upsert(self, points: Sequence[MemoryPoint]) -> None:
        self._call("upsert", list(points))

    def search_dense(self, vector: Sequence[float], flt: PointFilter, limit: int) -> list[Hit]:
        return self._call("search_dense", [float(x) for x in vector], flt, limit)

    def search_sparse(self, vector: SparseVector, flt: PointFilter, limit: int) -> list[Hit]:
        return self._call("search_sparse", vector, flt, limit)

    def weigh(self, vector: SparseVector) -> SparseVector:
        return self._call("weigh", vector)

    def get(self, ids: Sequence[str], user_id: str = "") -> list[MemoryPoint]:
        return self._call("get", list(ids), user_id)

    def dense(self, ids: Sequence[str], user_id: str = "") -> dict[str, list[float]]:
        return self._call("dense", list(ids), user_id)

    def scroll(self, flt: PointFilter, limit: int = 1000) -> list[MemoryPoint]:
        return self._call("scroll", flt, limit)

    def ids(self, flt: PointFilter, limit: int = 1000) -> list[str]:
        return self._call("ids", flt, limit)

    def episode_ids(self, flt: PointFilter, limit: int = 1000) -> set[str]:
        return self._call("episode_ids", flt, limit)

    def set_valid_to(self, ids: Sequence[str], validity: Validity, user_id: str = "") -> None:
        self._call("set_valid_to", list(ids), validity, user_id)

    def delete(self, flt: PointFilter) -> int:
        return self._call("delete", flt)

    def count(self, flt: PointFilter) -> int:
        return self._call("count", flt)

    def optimize(self) -> None:
        self._call("optimize")

    def purge(self) -> None:
        self._call("purge")

    def flush(self) -> None:
        self._call("flush")

    def interrupt(self) -> None:
        if self._proc is not None:  # a process starting again has nothing under way
            with contextlib.suppress(VectorStoreUnavailable):
                self._call("interrupt")

    def copy_to(self, dest: Path) -> None:
        """A backup's copy of the store's files (the child's store copies them)."""
        self._call("copy_to", dest)

    def close(self) -> None:
        """End the process: it finishes the calls under way, closes the store and exits
        (killed after :data:`CLOSE_TIMEOUT`). Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            proc = self._proc
            self._cond.notify_all()
        if proc is not None:
            _end(proc, CLOSE_TIMEOUT)
        if self._supervisor is not threading.current_thread():
            self._supervisor.join()

    # -- calls ---------------------------------------------------------------------------------

    def _call(self, op: str, *args: Any) -> Any:
        message: dict[str, Any] = {"op": op, "args": encode(args), "kwargs": {}}
        answer: Future[dict[str, Any]] = Future()
        deadline = time.monotonic() + self._wait_timeout
        with self._cond:
            while self._proc is None and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    how = self.last_exit or "starting"
                    raise VectorStoreUnavailable(
                        f"the vector store's process is not running ({how})"
                    )
                self._cond.wait(left)
            if self._closed or self._proc is None:
                raise VectorStoreUnavailable("the vector store is closed")
            proc = self._proc
            self._next_id += 1
            message["id"] = self._next_id
            self._pending[self._next_id] = answer
        try:
            with self._sending:
                assert proc.stdin is not None
                send(proc.stdin, message)
        except (OSError, ValueError) as exc:
            with self._cond:
                self._pending.pop(message["id"], None)
            raise VectorStoreUnavailable(f"the vector store's process is gone: {exc}") from exc
        reply = answer.result()  # VectorStoreUnavailable when the process ends meanwhile
        if "error" in reply:
            raise decode_error(reply["error"])
        return decode(reply["result"])

    # -- the process ---------------------------------------------------------------------------

    def _supervise(self, first: Future[None]) -> None:
        failures = 0
        while not self._closed:
            try:
                proc = self._start()
            except Exception as exc:  # what the process said (ValueError, a mismatch, ...)
                if not first.done():
                    first.set_exception(exc)
                    return
                log.error("vectors.child.start_failed", extra={"fields": {"error": str(exc)}})
                failures += 1
                self._pause(failures)
                continue
            began = time.monotonic()
            if not first.done():
                first.set_result(None)
            self._serve(proc)
            if self._closed:
                return
            failures = 0 if time.monotonic() - began > STEADY_SECONDS else failures + 1
            log.error(
                "vectors.child.exited",
                extra={"fields": {"pid": proc.pid, "exit": self.last_exit, "restarts": True}},
            )
            self._pause(failures)

    def _pause(self, failures: int) -> None:
        delay = RESTART_DELAYS[min(failures, len(RESTART_DELAYS)) - 1] if failures else 0.0
        with self._cond:
            self._cond.wait_for(lambda: self._closed, delay)

    def _start(self) -> subprocess.Popen[bytes]:
        """A process ready to serve (made ready again: the last ensure). Raises
        VectorStoreUnavailable when it ends as it starts, else the error it answered."""
        try:
            proc = subprocess.Popen(self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as exc:
            raise VectorStoreUnavailable(f"the vector store's process cannot start: {exc}") from exc
        timer = threading.Timer(self._start_timeout, proc.kill)
        timer.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            send(proc.stdin, self._spec)
            ready = receive(proc.stdout)
            if "error" not in ready and self._ensured is not None:
                send(
                    proc.stdin, {"id": 0, "op": "ensure", "args": list(self._ensured), "kwargs": {}}
                )
                ready = receive(proc.stdout)
        except (OSError, ValueError, WireClosed) as exc:
            _end(proc, 0, output=True)
            raise VectorStoreUnavailable(
                f"the vector store's process ended as it started ({_exit(proc)}): {exc}"
            ) from exc
        finally:
            timer.cancel()
        if "error" in ready:
            _end(proc, 0, output=True)
            raise decode_error(ready["error"])
        with self._cond:
            if self._closed:
                _end(proc, CLOSE_TIMEOUT, output=True)
                raise VectorStoreUnavailable("the vector store is closed")
            self._proc = proc
            self.starts += 1
            self._cond.notify_all()
        return proc

    def _serve(self, proc: subprocess.Popen[bytes]) -> None:
        """Hand each answer to its call until the process ends; then fail the calls left."""
        assert proc.stdout is not None
        try:
            while True:
                reply = receive(proc.stdout)
                with self._cond:
                    answer = self._pending.pop(reply.get("id", -1), None)
                if answer is not None:
                    answer.set_result(reply)
        except (OSError, ValueError, WireClosed):
            pass
        _end(proc, 0 if not self._closed else CLOSE_TIMEOUT, output=True)
        with self._cond:
            self._proc = None
            self.last_exit = _exit(proc)
            left, self._pending = self._pending, {}
            self._cond.notify_all()
        for answer in left.values():
            answer.set_exception(
                VectorStoreUnavailable(
                    f"the vector store's process ended during the call ({self.last_exit})"
                )
            )


def _end(proc: subprocess.Popen[bytes], timeout: float, *, output: bool = False) -> None:
    """Close the process's input (it exits once its calls are done); kill it after
    ``timeout`` seconds (0: at once, unless it has exited). ``output``: close its output too
    (only the thread that reads it may)."""
    with contextlib.suppress(OSError, ValueError):
        assert proc.stdin is not None
        proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            proc.kill()
        proc.wait()
    if output and proc.stdout is not None:
        proc.stdout.close()


def _exit(proc: subprocess.Popen[bytes]) -> str:
    code = proc.poll()
    if code is None:
        return "running"
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"
