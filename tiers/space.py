"""Free space on the data dir's disk: writes stop before the disk is full, and go on by
themselves once there is room again.

A store that runs out of space mid-write is the worst moment to find out: RocksDB then
refuses every later write until it is reopened, and a memory-mapped file of the vector store
that cannot grow kills the process (SIGBUS). :class:`DiskSpace` keeps a reserve instead
(``storage.min_free_mb``): below it, every write of the stores (:class:`tiers.rocks.RocksStore`,
the Tier 3 door :class:`tiers.semantic.store.SemanticStore`, the vector store's builds) is
refused with :class:`DiskFull` (``RESOURCE_EXHAUSTED``) before it starts, nothing is half
written, and reads go on. The free space is read again at every write (one ``statvfs``), so
writes resume as soon as space is freed, with no restart.

What frees space is let through down to a quarter of the reserve: a Forget and its purge run
inside :meth:`DiskSpace.freeing`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from tiers.core.errors import ResourceExhausted, TierError, one_line

log = logging.getLogger("strata.storage")

MB = 1 << 20


class DiskFull(TierError, ResourceExhausted):
    """The data dir's disk has less free space than the reserve: nothing was written."""


def freeing(space: DiskSpace | None) -> contextlib.AbstractContextManager[None]:
    """:meth:`DiskSpace.freeing` of ``space``, or nothing without one."""
    return contextlib.nullcontext() if space is None else space.freeing()


def free_bytes(path: Path) -> int:
    """The bytes an unprivileged writer may still use on ``path``'s filesystem."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class DiskSpace:
    """The reserve of free space on ``path``'s disk (``reserve_bytes``; 0: no check).
    ``probe`` reads the free bytes (:func:`free_bytes`; a test may pass another)."""

    def __init__(
        self,
        path: Path,
        reserve_bytes: int,
        probe: Callable[[Path], int] = free_bytes,
    ) -> None:
        self.path = path
        self.reserve_bytes = reserve_bytes
        self.probe = probe
        self._local = threading.local()
        self._low = False  # as last seen, to log the change once
        self._lock = threading.Lock()

    def free(self) -> int:
        """The free bytes now (a disk that cannot be read counts as full)."""
        return self._read()[0]

    def _read(self) -> tuple[int, OSError | None]:
        """The free bytes, or 0 with the error when the disk cannot be read (a data dir
        deleted or unmounted under the daemon)."""
        try:
            return self.probe(self.path), None
        except OSError as exc:
            return 0, exc

    @property
    def low(self) -> bool:
        """Whether writes are refused now (below the reserve)."""
        return self.reserve_bytes > 0 and self.free() < self.reserve_bytes

    @contextlib.contextmanager
    def freeing(self) -> Iterator[None]:
        """Writes of this thread in the block free space (a Forget): they pass down to a
        quarter of the reserve."""
        depth = getattr(self._local, "freeing", 0)
        self._local.freeing = depth + 1
        try:
            yield
        finally:
            self._local.freeing = depth

    def check(self, what: str) -> None:
        """Raise :class:`DiskFull` when ``what`` (a write about to start) would eat into the
        reserve."""
        if self.reserve_bytes <= 0:
            return
        free, error = self._read()
        floor = self.reserve_bytes // 4 if getattr(self._local, "freeing", 0) else 0
        low = free < self.reserve_bytes
        self._noted(low, free, error)
        if free >= (floor or self.reserve_bytes):
            return
        if error is not None:
            raise DiskFull(
                f"{what} was refused: the data dir's disk cannot be read at {self.path} "
                f"({one_line(error)}); nothing was written. Writes go on by themselves once "
                "it can, reads go on meanwhile"
            )
        raise DiskFull(
            f"{what} was refused: the data dir's disk has {free / MB:.1f} MB free, below "
            f"storage.min_free_mb ({self.reserve_bytes / MB:.0f} MB); nothing was written. "
            "Free space on the disk: writes go on by themselves, reads go on meanwhile"
        )

    def _noted(self, low: bool, free: int, error: OSError | None = None) -> None:
        """Log when the disk goes below the reserve (or cannot be read), and when it is back
        above."""
        if low == self._low:
            return
        with self._lock:
            if low == self._low:
                return
            self._low = low
        fields: dict[str, object] = {
            "free_mb": round(free / MB),
            "reserve_mb": round(self.reserve_bytes / MB),
        }
        if low:
            fields["path"] = str(self.path)
            if error is not None:
                fields["error"] = one_line(error)
            log.error("storage.disk_low", extra={"fields": fields})
        else:
            log.warning("storage.disk_ok", extra={"fields": fields})
