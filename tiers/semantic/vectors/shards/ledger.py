"""Which shards of a sharded store need an index build or a purge.

A shard needs a **build** when it was written since its last build began (or purged since:
a purge's copy has no index), and a **purge** when points were deleted from it since its last
purge began. Each is kept as a counter per shard that every change moves on, and a token
taken when the work begins: the work clears its need only when the counter has not moved
since, so what was written or deleted during a build or a purge is covered by a next one.

The purge needs are also on disk, as an empty file per shard (``shard-NNN.purge`` in the store's
directory, :func:`tiers.semantic.vectors.edge.layout.purge_mark`), made durable *before* the first
delete since the shard's last purge reaches the engine and removed after a purge that covered every
delete: a restart after a crash purges exactly the shards whose files may still hold deleted points
(:meth:`tiers.rights.forget.purge.Purger.resume`). The build needs are on disk the same way
(``shard-NNN.build``, made durable before the first write since the shard's last build, removed
after a build that covered every write): a restart builds only the shards written since their
last build, not every shard that holds points. A store from before build marks (no
``build-marks`` file) marks every shard holding points once.

A build is **due** only once enough points were written since the last one for the engine to
index them (:meth:`ShardLedger.to_build`'s ``enough``; about 6,700 points of 384 dims): below
its threshold the engine searches the new points exactly and its build finds nothing to do,
but only after the whole shard was copied (hundreds of MB at ten million points), so a fleet
writing a few points into every shard would copy the whole store at every round. The points
written since a shard's last build began are counted in memory, kept at a clean close
(``build-counts.json``, :func:`tiers.semantic.vectors.edge.layout.build_counts`) and taken at
the next open. After a crash they are read from a checkpoint (``build-counts.checkpoint``,
:meth:`ShardLedger.checkpoint`: written at each open, at the start of each build round, after
each build and at each purge), so that a crash does not make every marked shard's build due
(at ten million points: 58 copies of shards in which the engine found nothing to build, one
round of 342 s with every load holding the GIL). The writes since the checkpoint are not in
it, so after a crash a shard may hold up to that many points more unindexed (searched
exactly) until its next build. After a purge (whose copy has no index) a shard's count is
unknown, in the checkpoint too before the purge's mark goes, and its build is due. A build
whose child found nothing to build counts its points as indexed, so the engine may hold up to
about twice its threshold unindexed before the next.

Thread-safe: one lock guards the counters and the files.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from tiers.semantic.vectors import IndexBuildCancelled, VectorStoreUnavailable
from tiers.semantic.vectors.edge.layout import (
    build_checkpoint,
    build_counts,
    build_mark,
    build_marks_kept,
    purge_mark,
    shard_index,
    shard_name,
)
from tiers.semantic.vectors.edge.shard import fsync_dir, replace_durably

log = logging.getLogger("strata.vectors")

_NEVER = -1  # a token no counter equals


class ShardLedger:
    """The build and purge needs of ``shards`` shards of the store at ``root``: those with a
    build mark on disk need a build (in a store from before build marks, those holding
    points, ``with_points``), those with a purge mark a purge."""

    def __init__(self, root: Path, shards: int, with_points: Iterable[int]) -> None:
        self._root = root
        self._lock = threading.Lock()
        self._writes = [0] * shards
        self._built = [0] * shards
        if not build_marks_kept(root).exists():  # a store from before build marks
            for index in with_points:
                build_mark(root, index).touch()
            build_marks_kept(root).touch()
            fsync_dir(root)
        self._unbuilt = {i for i in range(shards) if build_mark(root, i).exists()}
        for index in self._unbuilt:
            self._built[index] = _NEVER
        # Points written to each shard (this process), and their number when its last build
        # began (None: unknown, a build is due): their difference is what no build covers.
        kept = _take_counts(root)
        self._points = [kept.get(i, 0) if i in self._unbuilt else 0 for i in range(shards)]
        self._indexed: list[int | None] = [
            None if i in self._unbuilt and i not in kept else 0 for i in range(shards)
        ]
        self._write(build_checkpoint(root))  # what a crash starts from
        self._began = [0] * shards
        self._deletes = [0] * shards
        marks = {i: purge_mark(root, i) for i in range(shards)}
        self._dirty = {i for i, mark in marks.items() if mark.exists()}
        # The order of the latest deletes (on disk: of the marks), so a purge takes the shard
        # of the Forget that asked for it before older marks (a rebuild's, say).
        self._latest = {i: marks[i].stat().st_mtime_ns for i in self._dirty}

    # -- builds --------------------------------------------------------------------------

    def writing(self, index: int) -> None:
        """Points are about to be written to shard ``index``: its build mark is durable when
        this returns (a build that began before covers the write only if it began after
        :meth:`wrote`). Call :meth:`wrote` after the write."""
        with self._lock:
            self._writes[index] += 1
            if index not in self._unbuilt:
                build_mark(self._root, index).touch()
                fsync_dir(self._root)
                self._unbuilt.add(index)

    def wrote(self, index: int, points: int = 0) -> None:
        """A write of ``points`` points (added, or changed: the engine moves a changed point
        out of its indexed segment) to shard ``index`` returned; a delete writes none."""
        with self._lock:
            self._writes[index] += 1
            self._points[index] += points

    def to_build(self, enough: Callable[[int], bool] = lambda points: True) -> list[int]:
        """The shards whose build is due: written (or purged) since their last build began,
        with ``enough(points)`` of the points written since, or an unknown number (module
        text)."""
        with self._lock:
            return [
                i
                for i, n in enumerate(self._writes)
                if n != self._built[i] and self._due(i, enough)
            ]

    def unindexed(self, index: int) -> int | None:
        """The points written to shard ``index`` since its last build began (None: unknown)."""
        with self._lock:
            indexed = self._indexed[index]
            return None if indexed is None else self._points[index] - indexed

    def build_began(self, index: int) -> int:
        """The token a build of shard ``index`` hands to :meth:`built`."""
        with self._lock:
            self._began[index] = self._points[index]
            return self._writes[index]

    def built(self, index: int, token: int) -> None:
        """A build of shard ``index`` that began at ``token`` is done (swapped in, or found
        nothing to build): its build mark goes unless a write came since."""
        with self._lock:
            self._built[index] = token
            self._indexed[index] = self._began[index]
            if self._writes[index] == token and index in self._unbuilt:
                build_mark(self._root, index).unlink(missing_ok=True)
                fsync_dir(self._root)
                self._unbuilt.discard(index)
            self._write(build_checkpoint(self._root))

    # -- purges --------------------------------------------------------------------------

    def deleting(self, index: int) -> None:
        """Points of shard ``index`` are about to be deleted: its purge mark is durable when
        this returns. Call :meth:`deleted` after the delete."""
        with self._lock:
            self._deletes[index] += 1
            self._latest[index] = max(self._latest.values(), default=0) + 1
            if index not in self._dirty:
                purge_mark(self._root, index).touch()
                fsync_dir(self._root)
                self._dirty.add(index)

    def deleted(self, index: int) -> None:
        """The delete announced by :meth:`deleting` returned (or failed): a write of no
        points too (as :meth:`wrote`)."""
        with self._lock:
            self._deletes[index] += 1
            self._writes[index] += 1

    def to_purge(self) -> list[int]:
        """The shards deleted from since their last purge (marked on disk), the latest
        deleted from first."""
        with self._lock:
            return sorted(self._dirty, key=lambda i: (-self._latest.get(i, 0), i))

    def purge_began(self, index: int) -> int:
        """The token a purge of shard ``index`` hands to :meth:`purged`."""
        with self._lock:
            return self._deletes[index]

    def purged(self, index: int, token: int) -> None:
        """A purge of shard ``index`` that began at ``token`` is done: its mark goes unless a
        delete came since; the shard has no index until its next build."""
        with self._lock:
            self._built[index] = _NEVER
            self._indexed[index] = None  # every point of the copy is unindexed
            if index not in self._unbuilt:  # the purge's copy has no index: durable need
                build_mark(self._root, index).touch()
                fsync_dir(self._root)
                self._unbuilt.add(index)
            if self._deletes[index] == token and index in self._dirty:
                # Not in the checkpoint first: a crash after the mark goes would build the
                # copy only once enough points were written to it.
                self._write(build_checkpoint(self._root))
                purge_mark(self._root, index).unlink(missing_ok=True)
                fsync_dir(self._root)
                self._dirty.discard(index)
                self._latest.pop(index, None)

    # -- a clean close -------------------------------------------------------------------

    def keep(self) -> None:
        """Write the points each marked shard holds unindexed to ``build-counts.json``, for
        the next open (after the last write: at a clean close). A failure is logged: the
        next open then starts from the checkpoint."""
        with self._lock:
            self._write(build_counts(self._root))

    def checkpoint(self) -> None:
        """Write the same counts to ``build-counts.checkpoint``, which an open after a crash
        reads (module text). A failure is logged: that open then builds every marked shard
        once. Under the lock, as every write of that file (:meth:`built`, :meth:`purged`):
        two at once would share its temporary file."""
        with self._lock:
            self._write(build_checkpoint(self._root))

    def _write(self, path: Path) -> None:
        """Under the lock (or in the constructor): write the points each marked shard holds
        unindexed, when known, to ``path``, durably; a failure is logged."""
        counts = {
            shard_name(i): self._points[i] - indexed
            for i in sorted(self._unbuilt)
            if (indexed := self._indexed[i]) is not None
        }
        try:
            replace_durably(path, json.dumps(counts).encode())
        except OSError as exc:
            log.warning(
                "vectors.build_counts_unsaved",
                extra={"fields": {"file": str(path), "error": str(exc)}},
            )

    def _due(self, index: int, enough: Callable[[int], bool]) -> bool:
        indexed = self._indexed[index]
        return indexed is None or enough(self._points[index] - indexed)


def _take_counts(root: Path) -> dict[int, int]:
    """The counts :meth:`ShardLedger.keep` left, by shard, and the file deleted durably (a
    crash after any later write must leave none); after a crash (no such file), those of the
    checkpoint. Empty when there is neither or the one read cannot be (logged)."""
    path = build_counts(root)
    for stale in (path, build_checkpoint(root)):
        stale.with_name(stale.name + ".tmp").unlink(missing_ok=True)
    if not path.exists():
        path = build_checkpoint(root)
    try:
        doc = json.loads(path.read_text())
        counts = {
            index: n
            for name, n in doc.items()
            if (index := shard_index(name)) is not None and isinstance(n, int) and n >= 0
        }
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, AttributeError) as exc:
        log.warning(
            "vectors.build_counts_unreadable",
            extra={"fields": {"file": str(path), "error": str(exc)}},
        )
        counts = {}
    if path == build_counts(root):
        path.unlink(missing_ok=True)
        fsync_dir(root)
    return counts


def reported(
    first: VectorStoreUnavailable | None, new: VectorStoreUnavailable
) -> VectorStoreUnavailable:
    """The error a round of builds raises: the first outright failure, else the first build
    that gave way to a purge."""
    if first is None or (
        isinstance(first, IndexBuildCancelled) and not isinstance(new, IndexBuildCancelled)
    ):
        return new
    return first
