"""The vector store's process as its parent holds it (:mod:`tiers.semantic.vectors.child`):
the process serving and its idle connections, a connection's call at a time, and how the
process is ended."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from typing import Any

from tiers.core.wire import receive, send
from tiers.semantic.vectors import VectorStoreUnavailable


class Connection:
    """One connection to the process: a call at a time, run there ``nice`` steps below the
    process's main thread."""

    def __init__(self, address: str, token: str, nice: int) -> None:
        self.nice = nice
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(address)
            self.stream = self.sock.makefile("rwb")
            send(self.stream, {"token": token, "nice": nice})
        except BaseException:
            self.sock.close()
            raise

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one frame and read the answer. Raises ``OSError``, ``ValueError`` or
        :class:`~tiers.core.wire.WireClosed` when the process is gone."""
        send(self.stream, message)
        return receive(self.stream)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.stream.close()
        self.sock.close()


class Serving:
    """A process that serves, and its idle connections by nice value."""

    def __init__(self, proc: subprocess.Popen[bytes], address: str, token: str) -> None:
        self.proc = proc
        self._address = "\0" + address  # Linux's abstract namespace: no file
        self._token = token
        self._lock = threading.Lock()
        self._idle: dict[int, list[Connection]] = {}
        self._closed = False

    def borrow(self, nice: int) -> Connection:
        with self._lock:
            idle = self._idle.get(nice)
            if idle:
                return idle.pop()
        try:
            return Connection(self._address, self._token, nice)
        except OSError as exc:
            raise VectorStoreUnavailable(
                f"the vector store's process refused a connection ({self.how()}): {exc}"
            ) from exc

    def give_back(self, conn: Connection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.setdefault(conn.nice, []).append(conn)
                return
        conn.close()

    def how(self) -> str:
        return exit_of(self.proc)

    def ended(self) -> str:
        """How the process ended, given a second to end after its connection broke."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(1)
        return self.how()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()


def end(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Close the process's input (it exits once its calls are done, having closed the
    store); kill it after ``timeout`` seconds (0: at once, unless it has exited)."""
    with contextlib.suppress(OSError, ValueError):
        assert proc.stdin is not None
        proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def exit_of(proc: subprocess.Popen[bytes]) -> str:
    code = proc.poll()
    if code is None:
        return "running"
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"
