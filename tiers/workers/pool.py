"""Worker processes for background model work, started, watched and restarted by the daemon.

The weaver's model work (the document embeddings of the index stage, the local extractor's)
runs in ``count`` child processes (:mod:`tiers.workers.process`) at a lower CPU priority
(``nice``): the kernel's scheduler, not ours, gives the daemon's serving threads (appends,
queries and their embeddings) the cores first, and the workers the rest.

- :meth:`WorkerPool.start` starts them and waits until each has loaded its model.
- :meth:`WorkerPool.call` hands a request to an idle worker and waits for its answer. When the
  worker dies meanwhile (killed, crashed, out of memory), the request goes to a restarted one,
  up to :data:`ATTEMPTS` times: requests are pure (the same texts give the same vectors), and
  what they serve stays marked in the state store until its results are written, so nothing
  acknowledged is lost whatever happens to a worker.
- A supervisor thread restarts a worker that exited while idle, with a pause that doubles
  after each failed start (:data:`RESTART_BACKOFF`), and kills one whose request has run for
  :data:`CALL_TIMEOUT` (a hung model), which then counts as a death.
- :meth:`WorkerPool.close` ends them (idempotent): each gets end-of-input, then SIGKILL.

Each event is logged (``workers.started``, ``workers.exited``, ``workers.timeout``,
``workers.start_failed``) with the worker's pid; :meth:`WorkerPool.status` lists them.
"""

from __future__ import annotations

import contextlib
import logging
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from tiers.core import children
from tiers.core.errors import TierError, Unavailable, one_line
from tiers.core.wire import WireClosed, receive, relay_stderr, send

log = logging.getLogger("strata.workers")
ATTEMPTS = 3  # workers a request may outlive before it fails
CALL_TIMEOUT = 600.0  # a request running longer is a hung worker: it is killed
WAIT_TIMEOUT = 60.0  # the longest a request waits for a live worker before it fails
RESTART_BACKOFF = (0.5, 30.0)  # first and longest pause before restarting a failed worker
START_TIMEOUT = 180.0  # loading the model (sentence-transformers imports take seconds)
SUPERVISE_SECONDS = 0.5
COMMAND = (sys.executable, "-m", "tiers.workers.process")


class WorkerUnavailable(TierError, Unavailable):
    """No worker could serve the request: none started, they kept dying, or the pool is
    closed. What it served is retried later (the weaver backs off)."""


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    index: int
    pid: int  # 0 while not running
    alive: bool
    busy: bool
    restarts: int  # starts after the first
    calls: int
    last_exit: str  # how the last process ended ("" if none did)


class _Worker:
    def __init__(self, index: int) -> None:
        self.index = index
        self.proc: subprocess.Popen[bytes] | None = None
        self.busy = False
        self.call_began = 0.0
        self.starts = 0
        self.calls = 0
        self.failures = 0  # consecutive failed starts
        self.next_start = 0.0
        self.last_exit = ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class WorkerPool:
    """``count`` workers serving one model spec (:mod:`tiers.workers.process`)."""

    def __init__(
        self,
        spec: dict[str, Any],
        *,
        count: int = 1,
        nice: int = 10,
        name: str = "embedding",
        command: tuple[str, ...] = COMMAND,
        start_timeout: float = START_TIMEOUT,
        call_timeout: float = CALL_TIMEOUT,
        wait_timeout: float = WAIT_TIMEOUT,
    ) -> None:
        if count < 1:
            raise ValueError("a worker pool needs at least one worker")
        self._spec = {"nice": nice, "model": spec}
        self.name = name
        self._command = command
        self._start_timeout = start_timeout
        self._call_timeout = call_timeout
        self._wait_timeout = wait_timeout
        self._workers = [_Worker(i) for i in range(count)]
        self._cond = threading.Condition()
        self._closed = False
        self._next_id = 0
        self._supervisor: threading.Thread | None = None
        self.ready: dict[str, Any] = {}  # the first worker's ready frame: dim, model_name
        self.error = ""  # why the last start failed

    @property
    def count(self) -> int:
        return len(self._workers)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start every worker and wait until each is ready. Raises :class:`WorkerUnavailable`
        when one cannot start (the others are stopped)."""
        for worker in self._workers:
            try:
                self._start(worker)
            except WorkerUnavailable:
                self.close()
                raise
        with self._cond:
            if self._supervisor is None and not self._closed:
                self._supervisor = threading.Thread(
                    target=self._supervise, name=f"workers-{self.name}", daemon=True
                )
                self._supervisor.start()

    def close(self) -> None:
        """End every worker (idempotent); waiting and later calls raise WorkerUnavailable."""
        with self._cond:
            self._closed = True
            procs = [w.proc for w in self._workers if w.proc is not None]
            self._cond.notify_all()
        for proc in procs:
            with contextlib.suppress(OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.close()
            with contextlib.suppress(OSError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        supervisor = self._supervisor
        if supervisor is not None and supervisor is not threading.current_thread():
            supervisor.join(5)

    def status(self) -> list[WorkerStatus]:
        with self._cond:
            return [
                WorkerStatus(
                    w.index,
                    w.proc.pid if w.alive and w.proc is not None else 0,
                    w.alive,
                    w.busy,
                    max(0, w.starts - 1),
                    w.calls,
                    w.last_exit,
                )
                for w in self._workers
            ]

    # -- requests ----------------------------------------------------------------------------

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """The answer of a worker to ``request`` (a map; an ``id`` is added). Raises
        :class:`WorkerUnavailable` when no worker can answer (module doc), and when the
        worker answers with an error."""
        lost = ""
        for _attempt in range(ATTEMPTS):
            worker, proc = self._acquire()
            with self._cond:
                self._next_id += 1
                message = {**request, "id": self._next_id}
            try:
                assert proc.stdin is not None and proc.stdout is not None
                send(proc.stdin, message)
                reply = receive(proc.stdout)
            except (OSError, WireClosed, ValueError) as exc:
                lost = self._lost(worker, proc, exc)
                continue
            finally:
                self._release(worker)
            if "error" in reply:
                raise WorkerUnavailable(f"the {self.name} worker failed: {reply['error']}")
            return reply
        raise WorkerUnavailable(
            f"the {self.name} worker died {ATTEMPTS} times during one request ({lost})"
        )

    def _acquire(self) -> tuple[_Worker, subprocess.Popen[bytes]]:
        deadline = time.monotonic() + self._wait_timeout
        with self._cond:
            while True:
                if self._closed:
                    raise WorkerUnavailable(f"the {self.name} workers are stopped")
                for worker in self._workers:
                    if not worker.busy and worker.alive and worker.proc is not None:
                        worker.busy, worker.call_began = True, time.monotonic()
                        worker.calls += 1
                        return worker, worker.proc
                left = deadline - time.monotonic()
                if left <= 0:
                    why = f": {self.error}" if self.error else ""
                    raise WorkerUnavailable(f"no {self.name} worker is running{why}")
                self._cond.wait(left)

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            worker.busy = False
            self._cond.notify_all()

    def _lost(self, worker: _Worker, proc: subprocess.Popen[bytes], exc: BaseException) -> str:
        """The worker died (or spoke nonsense) during a request: make sure it is gone and
        let the supervisor restart it. Returns how it ended."""
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        how = _exit_text(proc.returncode)
        self._log_exit(worker, proc, how, "a request", one_line(exc) or type(exc).__name__)
        with self._cond:
            if worker.proc is proc:
                worker.proc, worker.last_exit = None, how
            self._cond.notify_all()
        return how

    def _log_exit(
        self,
        worker: _Worker,
        proc: subprocess.Popen[bytes],
        how: str,
        during: str,
        error: str | None = None,
    ) -> None:
        fields = {"pool": self.name, "worker": worker.index, "pid": proc.pid, "exit": how}
        fields["during"] = during
        if error is not None:
            fields["error"] = error
        log.warning("workers.exited", extra={"fields": fields})

    # -- starting and watching ---------------------------------------------------------------

    def _start(self, worker: _Worker) -> None:
        """Start ``worker``'s process and wait for its ready frame (outside the lock)."""
        began = time.monotonic()
        proc = subprocess.Popen(
            list(self._command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **children.spawn_options(),  # its own group, bound to the daemon (run_child)
        )
        threading.Thread(
            target=self._relay_stderr, args=(worker.index, proc), name="workers-stderr", daemon=True
        ).start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            level = logging.getLogger("strata").getEffectiveLevel()
            send(proc.stdin, {**self._spec, "log_level": level})
            readable, _, _ = select.select([proc.stdout], [], [], self._start_timeout)
            if not readable:
                raise WorkerUnavailable(f"not ready after {self._start_timeout:g} s")
            ready = receive(proc.stdout)
            if not ready.get("ready"):
                raise WorkerUnavailable(str(ready.get("error", "no ready frame")))
        except (OSError, WireClosed, ValueError, WorkerUnavailable) as exc:
            with contextlib.suppress(OSError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
            detail = one_line(exc) or f"exited ({_exit_text(proc.returncode)})"
            with self._cond:
                worker.failures += 1
                pause = min(RESTART_BACKOFF[0] * 2 ** (worker.failures - 1), RESTART_BACKOFF[1])
                worker.next_start = time.monotonic() + pause
                self.error = f"worker {worker.index} could not start: {detail}"
            log.error(
                "workers.start_failed",
                extra={"fields": {"pool": self.name, "worker": worker.index, "error": detail}},
            )
            raise WorkerUnavailable(f"the {self.name} worker could not start: {detail}") from exc
        with self._cond:
            if self._closed:
                proc.kill()
                raise WorkerUnavailable(f"the {self.name} workers are stopped")
            worker.proc = proc
            worker.starts += 1
            worker.failures = 0
            self.ready = self.ready or ready
            self._cond.notify_all()
        log.info(
            "workers.started",
            extra={
                "fields": {
                    "pool": self.name,
                    "worker": worker.index,
                    "pid": proc.pid,
                    "restart": worker.starts > 1,
                    "ms": round((time.monotonic() - began) * 1000, 1),
                }
            },
        )

    def _relay_stderr(self, index: int, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None

        def printed(line: str) -> None:
            fields = {"pool": self.name, "worker": index, "line": line[:500]}
            log.info("workers.stderr", extra={"fields": fields})

        relay_stderr(proc.stderr, printed)

    def _supervise(self) -> None:
        while True:
            starting: list[_Worker] = []
            with self._cond:
                self._cond.wait(SUPERVISE_SECONDS)
                if self._closed:
                    return
                now = time.monotonic()
                for worker in self._workers:
                    proc = worker.proc
                    if worker.busy:
                        if proc is not None and now - worker.call_began > self._call_timeout:
                            log.error(
                                "workers.timeout",
                                extra={"fields": {"pool": self.name, "pid": proc.pid}},
                            )
                            with contextlib.suppress(OSError):
                                proc.kill()  # the caller sees the pipe close: a death
                        continue
                    if proc is not None and proc.poll() is not None:
                        worker.proc, worker.last_exit = None, _exit_text(proc.returncode)
                        self._log_exit(worker, proc, worker.last_exit, "idle")
                    if worker.proc is None and now >= worker.next_start:
                        worker.busy = True  # nobody takes it while it starts
                        starting.append(worker)
            for worker in starting:
                with contextlib.suppress(WorkerUnavailable):
                    self._start(worker)
                self._release(worker)


def _exit_text(code: int | None) -> str:
    if code is None:
        return "running"
    return f"signal {-code}" if code < 0 else f"exit code {code}"
