"""Online backups and restore of every store: journal, state (with the fact graph) and vectors.

A backup is a directory with one RocksDB checkpoint per store (hard links where the file
system allows, so it is fast and small), a copy of the embedded vector store, and a
``manifest.json`` (stores, sizes, embedding model and dimension, time). Consistency:

- Tier 3 writers (the weaver's index and consolidation steps, rebuild, forget) are held off
  for the whole backup (``tier3`` context), so the vectors, the graph and the consolidation
  state are copied at one point between two steps;
- working-memory writes (appends, session flushes) are held off only while the RocksDB
  checkpoints are taken (``writes`` context), so no write lands between the state and
  journal checkpoints.

The fact graph lives in the state store (column family ``graph_edges``), so the state
checkpoint carries it. When the vectors are in an external Qdrant they are not captured: the
manifest says so and operators snapshot the collection themselves (or run a rebuild).

A checkpoint opens as a normal RocksDB database; the journal's values keep their TTL
timestamps, so a restored journal expires on the original schedule.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tiers.core.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from tiers.core.sparse import allocated, copy_tree
from tiers.rocks import RocksStore

MANIFEST = "manifest.json"
FORMAT = 2
READABLE_FORMATS = (1, 2)
VECTORS = "vectors"
EXTERNAL_VECTORS = "vectors:external"
# Not data: the embedding model cache may already be in a data directory being restored into.
RESTORE_IGNORES = ("models",)


@dataclass(frozen=True, slots=True)
class VectorsSource:
    """Tier 3's vector store as a backup sees it."""

    model: str
    dim: int
    # Copies the embedded store into a new directory; None when the vectors are external.
    copy_to: Callable[[Path], None] | None = None
    external: str = ""  # where the external store is (no credentials), when it is


@dataclass(frozen=True, slots=True)
class BackupInfo:
    path: Path
    stores: list[str]  # captured stores, plus "vectors:external" when not captured
    size_bytes: int
    taken_at: float


def take_backup(
    destination: Path,
    stores: dict[str, RocksStore],
    tier3: AbstractContextManager[object],
    writes: AbstractContextManager[object],
    vectors: VectorsSource | None,
    settle: Callable[[], None] = lambda: None,
) -> BackupInfo:
    """Back up every store into ``destination`` (absolute, not existing yet). ``settle``
    returns once the stores' files hold nothing that a Forget deleted (its compactions are
    done: :meth:`tiers.rights.forget.purge.Purger.settle`), under ``tier3``."""
    if not destination.is_absolute():
        raise InvalidArgument(f"destination must be an absolute path, got {str(destination)!r}")
    if destination.exists():
        raise AlreadyExists(f"destination {str(destination)!r} exists already")
    if not destination.parent.is_dir():
        raise InvalidArgument(f"the parent of {str(destination)!r} is not a directory")
    destination.mkdir()
    captured = list(stores)
    try:
        with tier3:
            settle()
            with writes:
                taken_at = time.time()
                for name, store in stores.items():
                    store.checkpoint(destination / name)
            if vectors is not None and vectors.copy_to is not None:
                vectors.copy_to(destination / VECTORS)
                captured.append(VECTORS)
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "taken_at": taken_at,
            "taken_at_utc": datetime.fromtimestamp(taken_at, UTC).isoformat(),
            "stores": captured,
            "sizes": {name: allocated(destination / name) for name in captured},
            "graph": "in the state store (column family graph_edges)",
        }
        if vectors is not None:
            manifest["embedding"] = {"model": vectors.model, "dim": vectors.dim}
            if vectors.copy_to is None:
                manifest["vectors"] = {
                    "captured": False,
                    "external": vectors.external,
                    "note": "the vectors are in an external Qdrant: snapshot the collection "
                    "there, or run `weaverctl rebuild` after restoring",
                }
            else:
                manifest["vectors"] = {"captured": True}
        else:
            manifest["vectors"] = {
                "captured": False,
                "note": "Tier 3 was not open; run `weaverctl rebuild` after restoring",
            }
        (destination / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(destination, ignore_errors=True)
        raise
    external = vectors is not None and vectors.copy_to is None
    return BackupInfo(
        destination,
        captured + ([EXTERNAL_VECTORS] if external else []),
        allocated(destination),
        taken_at,
    )


def read_manifest(source: Path) -> dict[str, Any]:
    manifest_path = source / MANIFEST
    if not manifest_path.is_file():
        raise NotFound(f"{str(source)!r} is not a Strata backup (no {MANIFEST})")
    manifest: dict[str, Any] = json.loads(manifest_path.read_text())
    if manifest.get("format") not in READABLE_FORMATS:
        raise FailedPrecondition(f"backup format {manifest.get('format')} is not supported")
    return manifest


def restore_backup(source: Path, data_dir: Path) -> list[str]:
    """Copy a backup's stores into ``data_dir``, which must be missing or empty (a model
    cache, ``models/``, is allowed). Returns the stores restored."""
    manifest = read_manifest(source)
    stores: list[str] = manifest["stores"]
    missing = [name for name in stores if not (source / name).is_dir()]
    if missing:
        raise NotFound(f"the backup {str(source)!r} lacks {', '.join(missing)}")
    if data_dir.exists():
        if not data_dir.is_dir():
            raise FailedPrecondition(f"data directory {str(data_dir)!r} is not a directory")
        present = sorted(p.name for p in data_dir.iterdir() if p.name not in RESTORE_IGNORES)
        if present:
            raise FailedPrecondition(
                f"data directory {str(data_dir)!r} is not empty ({', '.join(present)}): "
                "restore into a fresh data directory, or move its contents away first"
            )
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        for name in stores:
            copy_tree(source / name, data_dir / name)  # the vector store's holes kept
    except BaseException:
        for name in stores:
            shutil.rmtree(data_dir / name, ignore_errors=True)
        raise
    return stores
