"""Online backups and restore of the RocksDB stores.

A backup is a directory with one RocksDB checkpoint per store (hard links where the file
system allows, so it is fast and small) and a ``manifest.json``. The daemon takes every
checkpoint while holding the working-memory lock, so no write lands between them and the set
is consistent across stores. A checkpoint opens as a normal RocksDB database; the journal's
values keep their TTL timestamps, so a restored journal expires on the original schedule.
"""

from __future__ import annotations

import json
import shutil
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from daemon.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from tiers.rocks import RocksStore

MANIFEST = "manifest.json"
FORMAT = 1


@dataclass(frozen=True, slots=True)
class BackupInfo:
    path: Path
    stores: list[str]
    size_bytes: int
    taken_at: float


def take_backup(
    destination: Path, stores: dict[str, RocksStore], quiesce: AbstractContextManager[object]
) -> BackupInfo:
    """Checkpoint every store into ``destination`` (absolute, not existing yet)."""
    if not destination.is_absolute():
        raise InvalidArgument(f"destination must be an absolute path, got {str(destination)!r}")
    if destination.exists():
        raise AlreadyExists(f"destination {str(destination)!r} exists already")
    if not destination.parent.is_dir():
        raise InvalidArgument(f"the parent of {str(destination)!r} is not a directory")
    destination.mkdir()
    try:
        with quiesce:
            taken_at = time.time()
            for name, store in stores.items():
                store.checkpoint(destination / name)
        manifest = {"format": FORMAT, "taken_at": taken_at, "stores": list(stores)}
        (destination / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(destination, ignore_errors=True)
        raise
    size = sum(f.stat().st_size for f in destination.rglob("*") if f.is_file())
    return BackupInfo(destination, list(stores), size, taken_at)


def restore_backup(source: Path, data_dir: Path) -> list[str]:
    """Copy a backup's stores into ``data_dir``, which must not hold those stores yet."""
    manifest_path = source / MANIFEST
    if not manifest_path.is_file():
        raise NotFound(f"{str(source)!r} is not a Strata backup (no {MANIFEST})")
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("format") != FORMAT:
        raise FailedPrecondition(f"backup format {manifest.get('format')} is not supported")
    stores: list[str] = manifest["stores"]
    for name in stores:
        target = data_dir / name
        if target.exists() and any(target.iterdir()):
            raise FailedPrecondition(
                f"{str(target)!r} exists and is not empty; move it away before restoring"
            )
    data_dir.mkdir(parents=True, exist_ok=True)
    for name in stores:
        shutil.copytree(source / name, data_dir / name, dirs_exist_ok=True)
    return stores
