"""The directory of the sharded embedded store (:mod:`tiers.semantic.vectors.shards.store`): what a
directory holds, and how a new layout written beside the old one replaces it.

Under the store's directory (``<data_dir>/vectors``):

- ``strata_vectors.json``: ``{"model", "dim", "format": 2, "shards"}``, the embedding model,
  the vector size and the shard count;
- ``shard-NNN/`` (``000`` up to ``shards - 1``): one shard, an
  :class:`~tiers.semantic.vectors.edge.store.EdgeVectorStore` directory (its own format-1 sidecar,
  ``CURRENT``, ``gen-NNNNNN/``), made when the first point of one of its users is written;
- ``shard-NNN.purge``: the shard was deleted from since its last purge, and
  ``shard-NNN.build``: written since its last index build (``build-marks``: the store keeps
  build marks), and ``build-counts.json``: the points each marked shard held unindexed at a
  clean close (:mod:`tiers.semantic.vectors.shards.ledger`);
- ``reshard/``: a layout being written by a move (:mod:`tiers.semantic.vectors.edge.resharding`),
with
  its own ``shard-NNN/`` and, written last, its sidecar.

Earlier releases kept one shard with a format-1 sidecar, the engine's files either directly
in the directory (``edge_config.json``, ``segments/``, ``wal/``) or in generations
(``CURRENT``, ``gen-NNNNNN/``): :func:`inspect` calls both *single*.

A move is committed by the sidecar of ``reshard/`` (replaced atomically, written once every
shard in it is flushed and closed). Until then the old layout is the store and a crash leaves
``reshard/`` to be deleted; after it, :func:`finish` removes the old layout's entries (its
sidecar last), moves the new shards in and then the new sidecar, and deletes ``reshard/``. At
every step, :func:`recover` (called before the directory is read) tells which side the store
is on and finishes what a crash left: the old layout whole, or the new one complete, and never
files of the old one left behind (they may hold the bytes of forgotten points).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from tiers.core.sparse import allocated
from tiers.semantic.vectors import MAX_SHARDS, VectorStoreMismatch
from tiers.semantic.vectors.edge import generations
from tiers.semantic.vectors.edge.shard import (
    FORMAT,
    SHARDED_FORMAT,
    SIDECAR,
    fsync_dir,
    load_sidecar,
    write_sidecar,
)

STAGING = "reshard"
BUILD_MARKS = "build-marks"
_SHARD = re.compile(r"shard-(\d{3})")
# What marks a directory as holding a store (any layout), besides a sidecar.
_ENGINE = re.compile(r"edge_config\.json|segments|wal|CURRENT|gen-\d{6}|shard-\d{3}")


@dataclass(frozen=True, slots=True)
class Found:
    """What a store's directory holds: ``"none"`` (missing or empty), ``"single"`` (one
    shard, an earlier release's layout) or ``"sharded"``, with its model, dim and shards."""

    kind: str
    model: str = ""
    dim: int = 0
    shards: int = 0


def shard_name(index: int) -> str:
    return f"shard-{index:03d}"


def shard_index(name: str) -> int | None:
    """The index a ``shard-NNN`` directory name stands for (None: not a shard's)."""
    match = _SHARD.fullmatch(name)
    return int(match.group(1)) if match else None


def purge_mark(root: Path, index: int) -> Path:
    return root / f"{shard_name(index)}.purge"


def build_mark(root: Path, index: int) -> Path:
    return root / f"{shard_name(index)}.build"


def term_counts(root: Path) -> Path:
    """The keyword counts a clean close left (:mod:`tiers.semantic.vectors.term_frequencies`)."""
    return root / "term-frequencies"


def term_checkpoint(root: Path) -> Path:
    """The keyword counts as of the last build round or purge, read after a crash
    (:mod:`tiers.semantic.vectors.term_frequencies`)."""
    return root / "term-frequencies.checkpoint"


def build_counts(root: Path) -> Path:
    """The points each marked shard held unindexed at a clean close
    (:meth:`tiers.semantic.vectors.shards.ledger.ShardLedger.keep`)."""
    return root / "build-counts.json"


def build_checkpoint(root: Path) -> Path:
    """The points each marked shard held unindexed as of the last build round or purge, read
    after a crash (:meth:`tiers.semantic.vectors.shards.ledger.ShardLedger.checkpoint`)."""
    return root / "build-counts.checkpoint"


def build_marks_kept(root: Path) -> Path:
    """The file saying the store keeps its build marks (a store from before them has none)."""
    return root / BUILD_MARKS


def staging(root: Path) -> Path:
    return root / STAGING


def inspect(root: Path) -> Found:
    """What ``root`` holds (call :func:`recover` first). Raises :class:`VectorStoreMismatch`
    for a store without a sidecar (its model is unknown) or with one this daemon cannot
    read."""
    if not root.is_dir():
        return Found("none")
    doc = load_sidecar(root, (FORMAT, SHARDED_FORMAT))
    if doc is None:
        engine = sorted(p.name for p in root.iterdir() if _ENGINE.fullmatch(p.name))
        if engine:
            raise VectorStoreMismatch(
                f"the vector store at {root} has no {SIDECAR} (it holds {', '.join(engine)}),"
                " so the embedding model of its vectors is unknown: restore the file or"
                " rebuild"
            )
        return Found("none")
    if doc.get("format") == FORMAT:
        return Found("single", doc["model"], doc["dim"], 1)
    shards = doc.get("shards")
    if not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise VectorStoreMismatch(f"{root / SIDECAR} names {shards} shards (1 to {MAX_SHARDS})")
    return Found("sharded", doc["model"], doc["dim"], shards)


def shards_present(root: Path, shards: int) -> list[int]:
    """The shards of a sharded layout that have been made, by index. Raises
    :class:`VectorStoreMismatch` for a shard directory beyond ``shards``."""
    found = []
    for entry in sorted(root.iterdir()):
        index = shard_index(entry.name)
        if index is None or not entry.is_dir():
            continue
        if index >= shards:
            raise VectorStoreMismatch(
                f"{entry} is beyond the {shards} shards that {root / SIDECAR} names"
            )
        found.append(index)
    return found


def last_written(root: Path, index: int) -> float:
    """When shard ``index`` was last written: the time of its current generation's
    write-ahead log (every write goes there first, and reaches the file's time when the
    shard is flushed: at the latest when it closes); 0 where it cannot be read. A segment
    that a flush deletes meanwhile is passed over."""
    try:
        wal = generations.current(root / shard_name(index)) / "wal"
        times = []
        for segment in wal.iterdir():
            with contextlib.suppress(FileNotFoundError):
                times.append(segment.stat().st_mtime)
        return max(times, default=0.0)
    except (OSError, ValueError):
        return 0.0


def disk_bytes(root: Path, index: int) -> int:
    """The bytes shard ``index``'s current generation takes on disk (its files' blocks: the
    engine's files are sparse, preallocated), what its load grows with; 0 where it cannot be
    read. Files that a flush deletes meanwhile are passed over."""
    try:
        return allocated(generations.current(root / shard_name(index)))
    except (OSError, ValueError):
        return 0


def create(root: Path, model: str, dim: int, shards: int) -> None:
    """A new, empty sharded store: the directory and its sidecar (shards come with points)."""
    write_sidecar(root, model, dim, shards)


def recover(root: Path) -> str:
    """Finish or undo a move that a crash interrupted: ``""`` (there was none),
    ``"discarded"`` (it was not committed: the old layout stays) or ``"finished"``."""
    new = staging(root)
    if not new.is_dir():
        return ""
    if not (new / SIDECAR).is_file():
        shutil.rmtree(new)
        fsync_dir(root)
        return "discarded"
    finish(root)
    return "finished"


def commit(root: Path, model: str, dim: int, shards: int) -> None:
    """Commit the layout written in ``reshard/`` (every shard in it flushed and closed), then
    :func:`finish` the move."""
    new = staging(root)
    for entry in new.iterdir():
        if entry.is_dir():
            fsync_dir(entry)
    write_sidecar(new, model, dim, shards)
    reached("committed")
    finish(root)


def finish(root: Path) -> None:
    """Replace the old layout by the committed one in ``reshard/``; may be run again after a
    crash at any point of it."""
    new = staging(root)
    if (root / SIDECAR).exists():  # the old layout is there: every entry goes, the sidecar last
        for entry in sorted(root.iterdir()):
            if entry.name not in (STAGING, SIDECAR):
                _remove(entry)
        fsync_dir(root)
        reached("old-removed")
        (root / SIDECAR).unlink()
        fsync_dir(root)
    for entry in sorted(new.iterdir()):
        if entry.name == SIDECAR:
            continue
        if (root / entry.name).exists():  # cannot happen: every old entry went first
            raise VectorStoreMismatch(f"{root / entry.name} is in the way of {entry}")
        entry.rename(root / entry.name)
        reached("shard-moved")
    fsync_dir(root)
    os.replace(new / SIDECAR, root / SIDECAR)
    fsync_dir(root)
    reached("sidecar-moved")
    shutil.rmtree(new)
    fsync_dir(root)


def reached(step: str) -> None:
    """A named step of a move (``committed``, ``old-removed``, ...; the copy's are in
    :mod:`tiers.semantic.vectors.edge.resharding`). Does nothing: the crash tests stop the process
    here."""


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink(missing_ok=True)
