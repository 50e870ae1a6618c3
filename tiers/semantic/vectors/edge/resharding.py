"""Moving an embedded store into the sharded layout with the configured shard count, at
start-up (:meth:`tiers.semantic.vectors.shards.store.ShardedVectorStore.ensure`, on the
Tier 3 loader thread: appends are served meanwhile).

The store to move is an earlier release's single shard (flat, or in generations) or a sharded store
with another shard count (:func:`tiers.semantic.vectors.edge.layout.inspect`). Every live point,
with its vectors and payload, is read page by page from the old shards and written to the shard of
its user (:func:`tiers.semantic.vectors.shard_of`) in a new layout under ``reshard/``; the new
shards are flushed and closed, and the move is committed and finished
(:func:`tiers.semantic.vectors.edge.layout.commit`): the old files are deleted, the new ones take
their place. Only live points are copied, so the new files hold no byte of a deleted (forgotten)
point, and the old ones, which may, are gone when the move is done. A crash at any step leaves the
old store whole (``reshard/`` is deleted at the next start and the move starts over) or the new one
committed (the next start finishes the move).

Logged: ``vectors.resharding`` when it starts and every :data:`PROGRESS_EVERY` points,
``vectors.resharded`` with the counts and the time.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from qdrant_edge import EdgeShard, Point

from tiers.semantic.vectors import shard_of
from tiers.semantic.vectors.edge import generations, layout
from tiers.semantic.vectors.edge.shard import (
    create_shard,
    engine_errors,
    live_points,
    load_shard,
    upserts,
    write_sidecar,
)
from tiers.semantic.vectors.storage import FLOAT32, DenseStorage

log = logging.getLogger("strata.vectors")
PROGRESS_EVERY = 50_000
# Points gathered for a new shard before they are written (in writes of
# :data:`~tiers.semantic.vectors.edge.shard.WRITE_POINTS`: the engine holds the GIL for a whole
# write, and the move runs in the daemon's process while appends are served).
WRITE_BATCH = 512


def move(
    root: Path,
    found: layout.Found,
    model: str,
    dim: int,
    shards: int,
    storage: DenseStorage = FLOAT32,
) -> dict[str, int]:
    """Move the store at ``root`` (``found`` there: ``single``, or ``sharded`` with another
    shard count; its model and dim checked already) into a layout of ``shards`` shards, made
    with ``storage``'s originals (the originals alone: no quantization).
    Returns the counts logged. Raises VectorStoreUnavailable (nothing committed: the old
    store stays, and the next start tries again)."""
    began = time.perf_counter()
    made = (model, dim, DenseStorage(originals=storage.originals))
    source = "single" if found.kind == "single" else f"{found.shards} shards"
    new = layout.staging(root)
    log.info("vectors.resharding", extra={"fields": {"from": source, "to": shards}})
    targets: dict[int, EdgeShard] = {}
    copied = 0
    with engine_errors(root, "move into shards"):
        try:
            shutil.rmtree(new, ignore_errors=True)
            new.mkdir()
            layout.reached("staging")
            pending: dict[int, list[Point]] = {}
            for gen in _sources(root, found):
                for page in _points(root, gen, dim):
                    for point in page:
                        index = shard_of(str((point.payload or {}).get("user_id", "")), shards)
                        batch = pending.setdefault(index, [])
                        batch.append(point)
                        if len(batch) >= WRITE_BATCH:
                            _write(targets, new, made, index, batch)
                    before, copied = copied, copied + len(page)
                    if copied // PROGRESS_EVERY != before // PROGRESS_EVERY:
                        _progress(source, shards, copied, began)
            for index, batch in pending.items():
                _write(targets, new, made, index, batch)
            for shard in targets.values():
                shard.flush()
            written = len(targets)
            layout.reached("copied")
        except BaseException:
            _close(targets)
            shutil.rmtree(new, ignore_errors=True)
            raise
        _close(targets)
        layout.commit(root, model, dim, shards)
    counts = {"points": copied, "shards_written": written, "to": shards}
    ms = round((time.perf_counter() - began) * 1000)
    log.info("vectors.resharded", extra={"fields": {"from": source, **counts, "ms": ms}})
    return counts


def _sources(root: Path, found: layout.Found) -> list[Path]:
    """The live generation of every old shard."""
    if found.kind == "single":
        return [generations.current(root)]
    stores = [root / layout.shard_name(i) for i in layout.shards_present(root, found.shards)]
    return [generations.current(store) for store in stores]


def _points(root: Path, gen: Path, dim: int) -> Iterator[list[Point]]:
    """The live points of the old shard at ``gen``, a page at a time."""
    shard = load_shard(root, gen, dim)
    try:
        yield from live_points(shard)
    finally:
        shard.close()


def _write(
    targets: dict[int, EdgeShard],
    new: Path,
    made: tuple[str, int, DenseStorage],
    index: int,
    batch: list[Point],
) -> None:
    """Upsert ``batch`` into new shard ``index`` (made on its first batch) and empty it."""
    shard = targets.get(index)
    if shard is None:
        model, dim, storage = made
        store = new / layout.shard_name(index)
        write_sidecar(store, model, dim)
        gen = generations.first(store)
        generations.switch(store, gen)
        shard = targets[index] = create_shard(gen, dim, storage)
    for op in upserts(batch):
        shard.update(op)
    batch.clear()
    layout.reached("batch-written")


def _close(targets: dict[int, EdgeShard]) -> None:
    for shard in targets.values():
        with contextlib.suppress(Exception):
            shard.close()
    targets.clear()


def _progress(source: str, shards: int, copied: int, began: float) -> None:
    ms = round((time.perf_counter() - began) * 1000)
    log.info(
        "vectors.resharding",
        extra={"fields": {"from": source, "to": shards, "points": copied, "ms": ms}},
    )
