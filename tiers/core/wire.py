"""Frames between the daemon and its child processes (the embedding workers,
:mod:`tiers.workers`; the vector store's process, :mod:`tiers.semantic.vectors.child`): a
4-byte big-endian length, then one msgpack map (never pickle: a frame is data, not code).
Vectors travel as raw float32 bytes. :func:`run_child` runs such a child."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, Protocol

import msgpack
import numpy as np

_HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 30
PARENT_CHECK_SECONDS = 1.0
_PR_SET_PDEATHSIG = 1


class Writer(Protocol):
    def write(self, data: bytes, /) -> int: ...
    def flush(self) -> None: ...


class Reader(Protocol):
    def read(self, n: int, /) -> bytes: ...


class WireClosed(EOFError):
    """The other side closed the pipe (it exited, or is exiting)."""


def send(stream: Writer, message: dict[str, Any]) -> None:
    """Write one frame and flush. Raises ``BrokenPipeError``/``OSError`` when the reader is
    gone."""
    body = msgpack.packb(message, use_bin_type=True)
    stream.write(_HEADER.pack(len(body)) + body)
    stream.flush()


def receive(stream: Reader) -> dict[str, Any]:
    """Read one frame. Raises :class:`WireClosed` at the end of the stream (also one cut
    short), ``ValueError`` for a frame that is not a map."""
    header = _read(stream, _HEADER.size)
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes (at most {MAX_FRAME})")
    message = msgpack.unpackb(_read(stream, size), raw=False)
    if not isinstance(message, dict):
        raise ValueError(f"a frame holds {type(message).__name__}, not a map")
    return message


def _read(stream: Reader, n: int) -> bytes:
    parts = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise WireClosed("the pipe was closed")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def pack_rows(rows: np.ndarray) -> dict[str, Any]:
    """A float32 matrix as a frame's fields."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    return {"rows": int(rows.shape[0]), "dim": int(rows.shape[1]), "data": rows.tobytes()}


def unpack_rows(message: dict[str, Any]) -> np.ndarray:
    """The float32 matrix of :func:`pack_rows` (a copy the caller owns)."""
    rows, dim = int(message["rows"]), int(message["dim"])
    matrix = np.frombuffer(message["data"], dtype=np.float32)
    if matrix.size != rows * dim:
        raise ValueError(f"{matrix.size} floats for {rows} x {dim}")
    return matrix.reshape(rows, dim).copy()


def run_child(
    serve: Callable[[IO[bytes], IO[bytes]], int], *, die_with_thread: bool = False
) -> int:
    """A child's main, which speaks frames on stdin and stdout: ``serve(stdin, out)``'s exit
    code, 0 when the daemon closed a pipe. ``out`` is what was stdout: whatever a library
    prints goes to stderr, never into a frame. The child ignores SIGINT and SIGTERM (the daemon
    ends it by closing its input, after its staged shutdown) and exits when the daemon is gone
    (checked every :data:`PARENT_CHECK_SECONDS`: its pipe may stay open in a grandchild).
    ``die_with_thread``: besides, SIGKILL at once when the daemon's thread that started it
    ends (Linux's ``PR_SET_PDEATHSIG``), for a child that must not outlive a crash."""
    if die_with_thread:
        with contextlib.suppress(OSError, AttributeError):  # not Linux: the watch alone
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    parent = os.getppid()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_SECONDS)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    try:
        return serve(sys.stdin.buffer, out)
    except (WireClosed, BrokenPipeError):
        return 0
