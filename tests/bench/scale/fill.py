"""The scale benchmark's fill, in parallel: the shards are split between worker processes,
each of which makes the points of its own users, writes them into a sharded store of its own
and builds its shards' index; the parent writes the fact graph meanwhile, then moves the
workers' shards into one store and adds up their keyword counts. A worker writes and builds
one shard at a time and closes it (its users' points are ordered by shard), so a worker holds
one shard's points in memory, not all of its own (at 10M, 13 GB each).

Each worker uses the daemon's own store classes (:class:`ShardedVectorStore`), and a user's
shard is :func:`tiers.semantic.vectors.shard_of` of its name, so the result is the layout a
daemon writes. Both the upsert and the engine's index build use one core each, so on this
machine two workers fill about twice as fast as one process.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import random
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tests.bench.recall_latency import BATCH, MODEL, fact_edges, object_words
from tests.bench.tier3.points import PointMaker
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.graph.nxgraph import NetworkXGraph
from tiers.semantic.vectors import MemoryPoint, shard_of
from tiers.semantic.vectors.edge import layout
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.semantic.vectors.storage import DenseStorage
from tiers.semantic.vectors.term_frequencies import DocumentFrequencies
from tiers.settings import VectorsSettings


class Owners:
    """Gives each point of a worker's stream its user: the owners shuffled, then ordered by
    their shard, so that a batch writes one or two shards (one durable write each) rather
    than every shard (a write each: 60 times slower)."""

    def __init__(self, users: list[str], counts: list[int], seed: int) -> None:
        owners = np.repeat(np.arange(len(users)), counts)
        np.random.default_rng(seed).shuffle(owners)
        shards = VectorsSettings().shards
        shard = np.array([shard_of(u, shards) for u in users], dtype=np.int64)
        self.owners = owners[np.argsort(shard[owners], kind="stable")]
        self.users = users
        self.next = 0

    def __call__(self, points: list[MemoryPoint]) -> list[MemoryPoint]:
        out = []
        for p in points:
            user = self.users[int(self.owners[self.next])]
            self.next += 1
            out.append(replace(p, scope=replace(p.scope, user_id=user)))
        return out


def split(users: list[str], counts: list[int], workers: int) -> list[list[int]]:
    """The users (by index) of each worker: whole shards, the biggest first, each to the
    worker with the fewest points so far."""
    shards = VectorsSettings().shards
    by_shard: dict[int, list[int]] = {}
    for i, user in enumerate(users):
        by_shard.setdefault(shard_of(user, shards), []).append(i)
    load = [0] * workers
    parts: list[list[int]] = [[] for _ in range(workers)]
    for members in sorted(by_shard.values(), key=lambda m: -sum(counts[i] for i in m)):
        w = load.index(min(load))
        parts[w].extend(members)
        load[w] += sum(counts[i] for i in members)
    return parts


def _work(
    k: int,
    root: Path,
    users: list[str],
    counts: list[int],
    texts: list[str],
    pool: np.ndarray,
    optimize: bool,
    edges: Any,
    storage: DenseStorage,
) -> None:
    """Worker ``k``: fill ``root`` with ``users``' points (``counts`` each) a shard at a time
    (opened, written, built and closed, so that one shard's points are in memory at once),
    sending each batch's fact edges through ``edges``, then the worker's times."""
    settings = VectorsSettings()
    by_shard: dict[int, list[int]] = {}
    for i, user in enumerate(users):
        by_shard.setdefault(shard_of(user, settings.shards), []).append(i)
    maker = PointMaker(texts, pool, seed=7 + k)
    rng = random.Random(7 + k)
    words = object_words(texts)
    upsert = built = 0.0
    for shard, members in sorted(by_shard.items()):
        began = time.perf_counter()
        # The dense vectors kept as asked (the daemon's settings unless the fill was given
        # others); no shard opened but the one written.
        vectors = ShardedVectorStore(
            root,
            settings.shards,
            storage=storage,
            open_behind=False,
        )
        vectors.ensure(MODEL, pool.shape[1])
        owners = Owners([users[i] for i in members], [counts[i] for i in members], seed=shard)
        left = sum(counts[i] for i in members)
        while left:
            points = owners(maker.batch(min(BATCH, left)))
            left -= len(points)
            vectors.upsert(points)
            edges.put(fact_edges(points, rng, words))
        upsert += time.perf_counter() - began
        began = time.perf_counter()
        if optimize:
            vectors.optimize()
        vectors.flush()
        vectors.close()
        built += time.perf_counter() - began
    edges.put({"worker": k, "upsert_s": round(upsert, 1), "optimize_s": round(built, 1)})


def fill(
    data_dir: Path,
    users: list[str],
    counts: list[int],
    texts: list[str],
    pool: np.ndarray,
    workers: int = 2,
    optimize: bool = True,
    storage: DenseStorage | None = None,
) -> dict[str, Any]:
    """Fill ``data_dir`` with ``counts[i]`` points of ``users[i]`` and their fact graph, with
    the index built unless ``optimize`` is false, over ``workers`` processes (each building
    a shard as soon as it is written: the time is reported per worker), the shards' dense
    vectors kept as ``storage`` says (the daemon's ``vectors`` settings unless given)."""
    storage = storage or VectorsSettings().storage
    shards = VectorsSettings().shards
    root = data_dir / "vectors"
    parts = [data_dir / f"fill-{k}" for k in range(workers)]
    ctx = mp.get_context("spawn")
    edges = ctx.Queue(maxsize=64)
    procs = []
    for k, members in enumerate(split(users, counts, workers)):
        args = (k, parts[k], [users[i] for i in members], [counts[i] for i in members])
        work = (*args, texts, pool, optimize, edges, storage)
        procs.append(ctx.Process(target=_work, args=work))
    for p in procs:
        p.start()
    state = RocksStore(data_dir / "state", STATE_CFS)
    reports: list[dict[str, Any]] = []
    try:
        graph = NetworkXGraph(state)
        while len(reports) < workers:
            try:
                item = edges.get(timeout=5)
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in procs):
                    raise RuntimeError("a fill worker died") from None
                continue
            if isinstance(item, dict):
                reports.append(item)
            else:
                graph.add_edges(item)
    finally:
        state.close()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"a fill worker exited with {p.exitcode}")
    merge(root, parts, shards, pool.shape[1])
    return {
        "workers": workers,
        "quantization": storage.quantization,
        "originals": storage.originals,
        "per_worker": sorted(reports, key=lambda r: r["worker"]),
    }


def merge(root: Path, parts: list[Path], shards: int, dim: int) -> None:
    """One sharded store at ``root`` from the workers' stores at ``parts`` (disjoint shards):
    their shard directories and build marks moved in, their keyword counts added up."""
    store = ShardedVectorStore(root, shards, storage=VectorsSettings().storage)
    store.ensure(MODEL, dim)
    store.close()
    layout.build_marks_kept(root).touch()
    merged = DocumentFrequencies()
    for part in parts:
        for entry in sorted(part.iterdir()):
            index = layout.shard_index(entry.name.removesuffix(".build"))
            if index is not None:
                entry.rename(root / entry.name)
        counted = DocumentFrequencies()
        if not counted.take(layout.term_counts(part)):
            raise RuntimeError(f"{part} has no keyword counts: was it closed?")
        merged.add_counts(counted)
        shutil.rmtree(part)
    if not merged.keep(layout.term_counts(root)):
        raise RuntimeError(f"the keyword counts of {root} could not be written")
