"""Generations of the embedded shard, so its index is built in another process.

The engine builds its HNSW index only in ``optimize()``, which holds the GIL for its whole run
(about 15 s at 100k points here, 48 s measured from outside): every RPC of the daemon waited
behind it. So the build never runs in the daemon's process. A build takes a *generation*:

1. the live shard is flushed and its directory copied to the next generation's directory
   (writes wait for the copy, reads go on; the copy is I/O and releases the GIL);
2. a child process (``python -m tiers.semantic.vectors.edge.generations DIR``, at a lower CPU
   priority) loads the copy, makes again the payload indexes an earlier release kept
   elsewhere (:func:`~tiers.semantic.vectors.edge.shard.ensure_payload_indexes`), optimizes it
   and closes it; meanwhile the live shard serves everything, and every write is also
   recorded. When the engine finds nothing to optimize and no index was made, the child exits
   with :data:`UNCHANGED`: the copy is deleted and the live shard stays;
3. the daemon loads the built copy, replays the recorded writes into it, and makes it
   current (``CURRENT`` names it, replaced atomically); the old generation is closed once its
   last reader is done, and deleted.

Layout under the store's directory: ``strata_vectors.json`` (the sidecar), ``CURRENT`` and
``gen-NNNNNN/`` (one shard each). A store written before generations has its shard directly
in the directory (``edge_config.json``, ``segments/``, ``wal/``): that is generation 0 and is
read as it is, until the first build moves the store to ``gen-000001``.

Crash safety: until ``CURRENT`` is replaced the old generation is the store, and it has every
acknowledged write (the recorded writes were applied to it first); after, the new one has them
too. Whatever a crash leaves behind (a half-built generation, an old one not yet deleted) is
removed by :func:`sweep` when the store opens. The child dies with the daemon
(:func:`tiers.core.children.bind`): left running, it would go on writing into the directory of
the generation the next daemon's build makes again (the same name), and delete files there.
"""

from __future__ import annotations

import logging
import re
import shutil
import sys
import time
from pathlib import Path
from typing import cast

from tiers.core import children
from tiers.core.priority import below_parent
from tiers.core.sparse import copy_file, copy_tree
from tiers.semantic.vectors.edge.shard import replace_durably
from tiers.semantic.vectors.storage import FLOAT32, DenseStorage, Originals, Quantization

log = logging.getLogger("strata.vectors")

CURRENT = "CURRENT"
UNCHANGED = 3  # the build child's exit code when the engine found nothing to optimize
_GEN = re.compile(r"gen-(\d{6})")
# Entries of the store's directory that are not the engine's (the legacy layout keeps the
# engine's files beside them).
_OURS = {"strata_vectors.json", CURRENT, CURRENT + ".tmp"}


def current(path: Path) -> Path:
    """The directory of the current generation: ``CURRENT``'s, else ``path`` itself."""
    try:
        name = (path / CURRENT).read_text().strip()
    except FileNotFoundError:
        return path
    if not _GEN.fullmatch(name):
        raise ValueError(f"{path / CURRENT} names {name!r}, not a generation (gen-NNNNNN)")
    return path / name


def first(path: Path) -> Path:
    """The generation a new store starts in."""
    return path / "gen-000001"


def following(path: Path, gen: Path) -> Path:
    match = _GEN.fullmatch(gen.name) if gen != path else None
    return path / f"gen-{(int(match.group(1)) if match else 0) + 1:06d}"


def switch(path: Path, gen: Path) -> None:
    """Make ``gen`` current, atomically and durably."""
    replace_durably(path / CURRENT, (gen.name + "\n").encode())


def engine_entries(gen: Path, root: Path) -> list[Path]:
    """The engine's files of a generation (in the legacy layout, not ours beside them)."""
    if gen != root:
        return sorted(gen.iterdir())
    return sorted(p for p in root.iterdir() if p.name not in _OURS and not _GEN.fullmatch(p.name))


def copy(gen: Path, root: Path, dest: Path) -> None:
    """Copy a (flushed) generation's files to ``dest`` (which must not exist), keeping
    them sparse (:func:`tiers.core.sparse.copy_file`)."""
    dest.mkdir()
    for entry in engine_entries(gen, root):
        if entry.is_dir():
            copy_tree(entry, dest / entry.name)
        else:
            copy_file(entry, dest / entry.name)


def remove(gen: Path, root: Path) -> None:
    """Delete a generation's files (in the legacy layout, only the engine's)."""
    if gen != root:
        shutil.rmtree(gen, ignore_errors=True)
        return
    for entry in engine_entries(gen, root):
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def sweep(root: Path) -> list[str]:
    """Remove what is not the current generation (left by a crash); returns what it removed."""
    if not root.is_dir():
        return []
    keep = current(root)
    removed = []
    for entry in sorted(root.iterdir()):
        if _GEN.fullmatch(entry.name) and entry != keep:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    (root / (CURRENT + ".tmp")).unlink(missing_ok=True)
    if keep != root:
        leftovers = engine_entries(root, root)
        if leftovers:
            remove(root, root)
            removed += [p.name for p in leftovers]
    return removed


def without_engine_idf(path: Path, gen: Path, dim: int) -> Path:
    """Rewrite the shard at ``gen`` of the store at ``path``, made with the engine's IDF
    modifier (an earlier release), into the next generation without it, make that current
    and return it (once per shard, at open). A crash before the switch leaves the old
    generation current (the new one is swept), after it the new one."""
    from tiers.semantic.vectors.edge.shard import copy_points, load_shard

    began = time.perf_counter()
    new = following(path, gen)
    old = load_shard(path, gen, dim)
    try:
        copy_points(old, new, dim)
    finally:
        old.close()
    switch(path, new)
    sweep(path)
    log.info(
        "vectors.keyword_idf_moved",
        extra={"fields": {"store": str(path), "ms": round((time.perf_counter() - began) * 1000)}},
    )
    return new


def child_command(
    gen: Path, compact_into: Path | None = None, storage: DenseStorage = FLOAT32
) -> list[str]:
    """The child that optimizes ``gen`` in place, or with ``compact_into`` writes the live
    points of ``gen`` into a new shard there, made with ``storage`` (a purge: no deleted point's
    bytes, no index)."""
    command = [sys.executable, "-m", "tiers.semantic.vectors.edge.generations", str(gen)]
    if compact_into is None:
        return command
    return [*command, str(compact_into), storage.quantization, storage.originals]


def _build(gen: str, compact_into: str | None = None, storage: DenseStorage = FLOAT32) -> int:
    """The child: optimize the shard at ``gen`` (a copy no other process has open), or copy
    its live points into a new shard at ``compact_into``, made with ``storage``."""
    from qdrant_edge import EdgeShard

    from tiers.semantic.vectors.edge.shard import (
        copy_points,
        ensure_payload_indexes,
        read_sidecar,
    )

    if compact_into is None:  # the daemon's queries and appends come first on shared cores
        below_parent(10)
    shard = EdgeShard.load(gen)
    try:
        if compact_into is None:
            # A payload index kept elsewhere than the config says (an earlier release's) is
            # made again here: the daemon's open leaves it, as that holds its GIL.
            moved = ensure_payload_indexes(shard)
            if not shard.optimize() and not moved:
                return UNCHANGED
            shard.flush()
        else:  # a purge waits on it: not niced
            sidecar = read_sidecar(Path(gen).parent)  # a generation's store
            if sidecar is None:
                raise SystemExit(f"no sidecar beside {gen}: its vectors' size is unknown")
            dim = int(sidecar["dim"])
            copy_points(shard, Path(compact_into), dim, storage)
    finally:
        shard.close()
    return 0


def main(args: list[str]) -> int:
    """The child's entry: :func:`child_command`'s arguments (``SHARD_DIR [COMPACT_INTO
    [QUANTIZATION ORIGINALS]]``), a purge's storage made again from its strings."""
    if len(args) not in (1, 2, 4):
        print(
            "usage: python -m tiers.semantic.vectors.edge.generations SHARD_DIR"
            " [COMPACT_INTO [QUANTIZATION ORIGINALS]]",
            file=sys.stderr,
        )
        return 2
    # A crash must not leave it writing: the next daemon's build makes the same generation.
    children.bind(at_once=True)
    gen, *rest = args
    made = FLOAT32
    if len(rest) == 3:
        made = DenseStorage(cast(Quantization, rest[1]), cast(Originals, rest[2]))
    return _build(gen, rest[0] if rest else None, made)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
