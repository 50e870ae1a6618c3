"""Sparse files: the parts of a file its disk holds, and copies that keep the holes.

The vector engine maps its storage in large sparse chunks and preallocates its write-ahead
log: a fresh shard's files add up to about 200 MiB, of which its disk holds about one. A copy
that reads every byte writes every zero (a backup, a restore or a build's generation many
times the store's real size), and a reader that reads every byte reads those zeros. The
ranges that hold data come from the file system (``SEEK_DATA`` / ``SEEK_HOLE``); where it
cannot tell, the whole file is one range.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

_BLOCK = 1 << 16  # the granularity of the holes a copy leaves
_ZEROS = bytes(_BLOCK)


def data_ranges(fd: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` ranges of an open file that hold data; the whole file where the
    system or file system cannot tell."""
    size = os.fstat(fd).st_size
    if not hasattr(os, "SEEK_DATA"):
        return [(0, size)]
    ranges: list[tuple[int, int]] = []
    at = 0
    try:
        while at < size:
            try:
                start = os.lseek(fd, at, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data past ``at``: a hole to the end
                    break
                raise
            end = os.lseek(fd, start, os.SEEK_HOLE)
            ranges.append((start, min(end, size)))
            at = end
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise
        return [(0, size)]
    return ranges


def data_size(path: str | Path) -> int:
    """How many bytes of ``path`` its data ranges hold (:func:`data_ranges`)."""
    with open(path, "rb") as f:
        return sum(end - start for start, end in data_ranges(f.fileno()))


def held(path: str | Path) -> Iterator[bytes]:
    """The bytes of ``path`` that its disk holds, one data range at a time (a hole reads as
    zeros, so no run of other bytes spans two ranges)."""
    with open(path, "rb") as f:
        for start, end in data_ranges(f.fileno()):
            f.seek(start)
            yield f.read(end - start)


def copy_file(src: str | Path, dst: str | Path) -> None:
    """Copy a file as ``shutil.copy2`` does, but leave a hole where a block of the source
    reads as zeros (the engine's preallocated write-ahead log: two files of 32 MiB, mostly
    empty). The source's own holes are skipped without being read, so a copy costs what the
    disk holds, not the file's apparent size. The copy reads back byte for byte the same."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        for start, end in data_ranges(fin.fileno()):
            fin.seek(start)
            fout.seek(start)
            left = end - start
            while left > 0 and (block := fin.read(min(_BLOCK, left))):
                left -= len(block)
                if block == _ZEROS[: len(block)]:
                    fout.seek(len(block), os.SEEK_CUR)
                else:
                    fout.write(block)
        fout.truncate(os.fstat(fin.fileno()).st_size)  # a file ending in a hole keeps its size
    shutil.copystat(src, dst)


def copy_tree(src: str | Path, dst: str | Path) -> None:
    """``shutil.copytree`` with :func:`copy_file`: the copy keeps the holes."""
    shutil.copytree(src, dst, copy_function=copy_file)


def allocated(path: Path) -> int:
    """The bytes the files under ``path`` take on disk (their blocks, holes left out): what a
    copy writes, and what a store's load grows with. Files deleted meanwhile are passed over."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total
