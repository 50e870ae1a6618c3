"""Frames between the daemon and its child processes (the embedding workers,
:mod:`tiers.workers`; the vector store's process, :mod:`tiers.semantic.vectors.child`): a
4-byte big-endian length, then one msgpack map (never pickle: a frame is data, not code).
Vectors travel as raw float32 bytes. :func:`run_child` runs such a child.

A child's log records reach the daemon's log as the daemon's own (its format, level and
handlers, the child's logger names and times, and a field ``child_pid``): the child sends them
as marked lines of JSON on its stderr (:func:`log_to_parent`), and the daemon reads that pipe
on a thread (:func:`relay_stderr`), passing on anything else a child or its libraries print."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import sys
from collections.abc import Callable
from typing import IO, Any, Protocol, TextIO

import msgpack
import numpy as np

from tiers.core import children

_HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 30
# The start of a line of a child's stderr that holds a log record (JSON), not a print.
LOG_MARK = "\x1estrata-log "


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
    prints goes to stderr, never into a frame. The child is bound to the daemon
    (:func:`tiers.core.children.bind`: SIGINT and SIGTERM set aside, the daemon ends it by
    closing its input after its staged shutdown; it exits when the daemon is gone), which
    starts it with :func:`tiers.core.children.spawn_options`. ``die_with_thread``: besides,
    SIGKILL at once when the daemon's thread that started it ends, for a child that must not
    outlive a crash."""
    children.bind(at_once=die_with_thread)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        return serve(sys.stdin.buffer, out)
    except (WireClosed, BrokenPipeError):
        return 0


class _ToParent(logging.Handler):
    """A child's records, each a :data:`LOG_MARK` line of JSON on ``stream`` (its stderr)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # which process said it: a child's gc.frozen is not the daemon's
            fields = {**(getattr(record, "fields", None) or {}), "child_pid": os.getpid()}
            if record.exc_info:
                fields["error"] = logging.Formatter().formatException(record.exc_info)
            line = json.dumps(
                {
                    "name": record.name,
                    "level": record.levelno,
                    "event": record.getMessage(),
                    "created": record.created,
                    "fields": fields,
                },
                default=str,
                ensure_ascii=False,
            )
            self.stream.write(LOG_MARK + line + "\n")
            self.stream.flush()
        except Exception:
            self.handleError(record)


def log_to_parent(level: int, stream: TextIO | None = None) -> None:
    """In a child: the ``strata`` loggers' records of ``level`` or above go to the daemon,
    which logs them as its own (:func:`relay_stderr` on the child's stderr, the default
    ``stream``)."""
    root = logging.getLogger("strata")
    root.handlers[:] = [_ToParent(stream if stream is not None else sys.stderr)]
    root.setLevel(level)
    root.propagate = False


def relay_stderr(stream: IO[bytes], stray: Callable[[str], None]) -> None:
    """In the daemon, on a thread of its own: each line of a child's stderr until it closes
    (then closed). A record the child logged (:func:`log_to_parent`) is logged here, by its
    logger, level, time and fields, if this process logs that level; any other line (what
    the child or a library printed: a panic's message, say) goes to ``stray``. Read to the
    end, so the child never blocks on a full pipe."""
    with stream:
        for raw in stream:
            # Never stops reading (as logging never raises): a child would block on the pipe.
            with contextlib.suppress(Exception):
                _relay_line(raw.decode(errors="replace").rstrip("\r\n"), stray)


def _relay_line(line: str, stray: Callable[[str], None]) -> None:
    if line.startswith(LOG_MARK):
        try:
            _log_here(json.loads(line[len(LOG_MARK) :]))
            return
        except (ValueError, KeyError, TypeError):
            pass  # not a record after all: passed on as printed
    if line.strip():
        stray(line)


def _log_here(data: dict[str, Any]) -> None:
    logger = logging.getLogger(str(data["name"]))
    level = int(data["level"])
    if not logger.isEnabledFor(level):
        return
    created = float(data["created"])
    record = logging.makeLogRecord(
        {
            "name": logger.name,
            "levelno": level,
            "levelname": logging.getLevelName(level),
            "msg": str(data["event"]),
            "created": created,
            "msecs": (created - int(created)) * 1000,
            "fields": dict(data["fields"]),
        }
    )
    logger.handle(record)
