"""Frames between the daemon and its worker processes: a 4-byte big-endian length, then one
msgpack map (never pickle: a frame is data, not code). Vectors travel as raw float32 bytes."""

from __future__ import annotations

import struct
from typing import IO, Any

import msgpack
import numpy as np

_HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 30


class WireClosed(EOFError):
    """The other side closed the pipe (it exited, or is exiting)."""


def send(stream: IO[bytes], message: dict[str, Any]) -> None:
    """Write one frame and flush. Raises ``BrokenPipeError``/``OSError`` when the reader is
    gone."""
    body = msgpack.packb(message, use_bin_type=True)
    stream.write(_HEADER.pack(len(body)) + body)
    stream.flush()


def receive(stream: IO[bytes]) -> dict[str, Any]:
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


def _read(stream: IO[bytes], n: int) -> bytes:
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
