"""Tier 3's embedded vector store in a process of its own (``vectors.process``).

The embedded engine holds the interpreter's lock through its own work: a shard's load (0.1 to
0.6 s at ten million points), a built copy swapped in, a flush, a cold page read. In the
daemon's process every request waits meanwhile, an Append too. :class:`ChildVectorStore` runs
the store (:class:`~tiers.semantic.vectors.shards.store.ShardedVectorStore`) in a child
process (:mod:`tiers.semantic.vectors.child.main`) and forwards the seam's calls to it, each
on a connection of its own to the child's local socket (kept for the next call), sent and
answered on the calling thread: the engine then holds only the child's lock, and the daemon's
threads wait for it only when they call the store. A call runs in the child as it would have
run here: at its caller's priority (a connection serves callers of one nice value) and within
its caller's rests (:func:`tiers.core.priority.resting`: a build round's flush, an erasure),
so that the child's serving calls get its interpreter between a long job's steps. The child's
input (a pipe) carries its spec; its end is the child's stop.

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
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tiers.core import children
from tiers.core.errors import VectorStoreUnavailable
from tiers.core.priority import in_background, lowered, rest_share
from tiers.core.wire import WireClosed, receive, relay_stderr, send
from tiers.semantic.vectors import Hit, MemoryPoint, PointFilter, SparseVector, Validity
from tiers.semantic.vectors.child.codec import POINT_COUNTS, decode, decode_error, encode
from tiers.semantic.vectors.child.serving import Connection, Serving, end, exit_of
from tiers.semantic.vectors.point_cache import CacheCounts

log = logging.getLogger("strata.vectors")


def _printed(line: str) -> None:
    """A line the store's process printed (a library's, or a panic's message), logged."""
    log.info("vectors.child.stderr", extra={"fields": {"line": line[:500]}})


COMMAND = (sys.executable, "-m", "tiers.semantic.vectors.child.main")
START_TIMEOUT = 300.0  # the first start: a store of an earlier layout is resharded in it
WAIT_TIMEOUT = 60.0  # how long a call waits for a process that is starting again
CLOSE_TIMEOUT = 90.0  # the child's close: the store's own, then the calls under way end
RESTART_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # between starts, growing; reset by a
STEADY_SECONDS = 60.0  # process that served this long


class ChildPoints:
    """The point cache of the child's store (:attr:`ChildVectorStore.points`), as the daemon's
    metrics read it: its counts, asked of the process. Raises
    :class:`~tiers.semantic.vectors.VectorStoreUnavailable` while the process is down."""

    def __init__(self, store: ChildVectorStore) -> None:
        self._store = store

    def counts(self) -> CacheCounts:
        return CacheCounts(*self._store._call(POINT_COUNTS))


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
        self._serving: Serving | None = None  # the process serving, ready
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
        serving = self._serving
        return serving.proc.pid if serving is not None else 0

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

    def count(self, flt: PointFilter, *, exact: bool = True) -> int:
        return self._call("count", flt, exact=exact)

    def optimize(self) -> None:
        self._call("optimize")

    def purge(self) -> None:
        self._call("purge")

    def flush(self) -> None:
        self._call("flush")

    def interrupt(self) -> None:
        if self._serving is not None:  # a process starting again has nothing under way
            with contextlib.suppress(VectorStoreUnavailable):
                self._call("interrupt")

    def copy_to(self, dest: Path) -> None:
        """A backup's copy of the store's files (the child's store copies them)."""
        self._call("copy_to", dest)

    @property
    def points(self) -> ChildPoints:
        """The point cache of the child's store, as the metrics read it."""
        return ChildPoints(self)

    def close(self) -> None:
        """End the process: it finishes the calls under way, closes the store and exits
        (killed after :data:`CLOSE_TIMEOUT`). Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            serving = self._serving
            self._cond.notify_all()
        if serving is not None:
            serving.close()
            end(serving.proc, CLOSE_TIMEOUT)
        if self._supervisor is not threading.current_thread():
            self._supervisor.join()

    # -- calls ---------------------------------------------------------------------------------

    def _call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        """Send the call on a connection of the serving process and read its answer, on the
        calling thread (at its priority: no thread of ours hands answers out). The connection
        is one of the caller's nice value, and the call carries the caller's rest share."""
        message: dict[str, Any] = {"op": op, "args": encode(args), "kwargs": encode(kwargs)}
        share = rest_share()
        if share:
            message["rest"] = share
        if in_background():
            message["background"] = True
        serving, conn = self._borrow()
        try:
            reply = conn.ask(message)
        except (OSError, ValueError, WireClosed) as exc:
            conn.close()
            raise VectorStoreUnavailable(
                f"the vector store's process ended during the call ({serving.ended()})"
            ) from exc
        serving.give_back(conn)
        if "error" in reply:
            raise decode_error(reply["error"])
        return decode(reply["result"])

    def _borrow(self) -> tuple[Serving, Connection]:
        """A free connection to the serving process (a new one when every one is busy),
        waiting up to ``wait_timeout`` for a process that is starting again."""
        deadline = time.monotonic() + self._wait_timeout
        with self._cond:
            while self._serving is None and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    how = self.last_exit or "starting"
                    raise VectorStoreUnavailable(
                        f"the vector store's process is not running ({how})"
                    )
                self._cond.wait(left)
            if self._closed or self._serving is None:
                raise VectorStoreUnavailable("the vector store is closed")
            serving = self._serving
        return serving, serving.borrow(lowered())

    # -- the process ---------------------------------------------------------------------------

    def _supervise(self, first: Future[None]) -> None:
        failures = 0
        while not self._closed:
            try:
                serving = self._start()
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
            serving.proc.wait()  # its input closes only at close(): it ends at a close or a crash
            with self._cond:
                self._serving = None
                self.last_exit = serving.how()
                self._cond.notify_all()
            serving.close()
            end(serving.proc, 0)
            if self._closed:
                return
            failures = 0 if time.monotonic() - began > STEADY_SECONDS else failures + 1
            log.error(
                "vectors.child.exited",
                extra={"fields": {"pid": serving.proc.pid, "exit": self.last_exit}},
            )
            self._pause(failures)

    def _pause(self, failures: int) -> None:
        delay = RESTART_DELAYS[min(failures, len(RESTART_DELAYS)) - 1] if failures else 0.0
        with self._cond:
            self._cond.wait_for(lambda: self._closed, delay)

    def _start(self) -> Serving:
        """A process ready to serve (made ready again: the last ensure). Raises
        VectorStoreUnavailable when it ends as it starts, else the error it answered."""
        token = secrets.token_hex(16)
        try:
            proc = subprocess.Popen(
                self._command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                **children.spawn_options(),  # its own group, bound to the daemon (run_child)
            )
        except OSError as exc:
            raise VectorStoreUnavailable(f"the vector store's process cannot start: {exc}") from exc
        assert proc.stderr is not None
        threading.Thread(  # its log records into the daemon's log, until it ends
            target=relay_stderr, args=(proc.stderr, _printed), name="vectors-child-log", daemon=True
        ).start()
        timer = threading.Timer(self._start_timeout, proc.kill)
        timer.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            level = logging.getLogger("strata").getEffectiveLevel()
            send(proc.stdin, {**self._spec, "token": token, "log_level": level})
            ready = receive(proc.stdout)
        except (OSError, ValueError, WireClosed) as exc:
            end(proc, 0)
            raise VectorStoreUnavailable(
                f"the vector store's process ended as it started ({exit_of(proc)}): {exc}"
            ) from exc
        finally:
            timer.cancel()
        if "error" in ready:
            end(proc, 0)
            raise decode_error(ready["error"])
        serving = Serving(proc, str(ready["address"]), token)
        try:
            if self._ensured is not None:
                conn = serving.borrow(lowered())
                again = conn.ask({"op": "ensure", "args": list(self._ensured), "kwargs": {}})
                if "error" in again:
                    raise decode_error(again["error"])
                serving.give_back(conn)
        except (OSError, ValueError, WireClosed) as exc:
            serving.close()
            end(proc, 0)
            raise VectorStoreUnavailable(f"the vector store's process ended ({exc})") from exc
        except Exception:
            serving.close()
            end(proc, 0)
            raise
        with self._cond:
            if self._closed:
                serving.close()
                end(proc, CLOSE_TIMEOUT)
                raise VectorStoreUnavailable("the vector store is closed")
            self._serving = serving
            self.starts += 1
            self._cond.notify_all()
        return serving
