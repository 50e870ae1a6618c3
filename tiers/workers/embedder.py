"""Queries in the daemon, documents in the workers: the embedder of a local model when
``workers.count`` > 0.

A query is embedded in the daemon's process at the daemon's priority, on the caller's thread,
so it never waits behind the weaver's documents; documents (the index stage's chunks, turns
and keyed documents, the consolidation's summaries and facts, an import's points) go to the
worker processes (:mod:`tiers.workers.pool`), which the kernel runs below the daemon's
threads. :func:`start_background` checks that the workers compute the daemon's own vectors
before anything is stored with them.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from tiers.core.wire import unpack_rows
from tiers.semantic.embedding import Embedder, parts_by_length
from tiers.workers.pool import WorkerPool, WorkerStatus, WorkerUnavailable

log = logging.getLogger("strata.workers")
PART = 128  # texts per request: a worker's share of a call, and how often it can be rescheduled
# Checked at start: a short text and one longer than the model's 256-token window.
PROBES = ("Alice moved to Berlin last week.", " ".join(["the quick brown fox"] * 120))
TOLERANCE = 1e-4


class BackgroundEmbedder:
    """An :class:`~tiers.semantic.embedding.Embedder`: queries from ``queries`` (in this process),
    documents from the workers. ``encode_documents`` raises :class:`WorkerUnavailable` when
    no worker can serve (the weaver backs off and retries)."""

    def __init__(self, queries: Embedder, pool: WorkerPool, *, part: int = PART) -> None:
        if part < 1:
            raise ValueError("part must be at least 1")
        self.queries = queries
        self.pool = pool
        self.part = part
        self.model_name = queries.model_name
        self.dim = queries.dim
        self._calls = ThreadPoolExecutor(max_workers=pool.count, thread_name_prefix="workers-call")

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.queries.encode_queries(texts)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Parts of similar length (a worker pads a batch to its longest text), spread over
        # the workers; the vectors come back in the texts' order.
        parts = parts_by_length([len(t) for t in texts], self.part)

        def embed(part: list[int]) -> np.ndarray:
            reply = self.pool.call({"op": "documents", "texts": [texts[i] for i in part]})
            rows = unpack_rows(reply)
            if rows.shape != (len(part), self.dim):
                raise WorkerUnavailable(f"a worker returned {rows.shape} for {len(part)} texts")
            return rows

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if len(parts) == 1 or self.pool.count == 1:
            results = [embed(p) for p in parts]
        else:
            results = list(self._calls.map(embed, parts))
        for part, rows in zip(parts, results, strict=True):
            out[part] = rows
        return out

    def close(self) -> None:
        self.pool.close()
        self._calls.shutdown(wait=False, cancel_futures=True)


def describe(embedder: Embedder) -> tuple[list[WorkerStatus], str]:
    """The workers behind ``embedder`` and a note: where documents are embedded when there
    are none (an embedder's ``note``), or the last failed start of a worker."""
    if isinstance(embedder, BackgroundEmbedder):
        return embedder.pool.status(), embedder.pool.error
    return [], str(getattr(embedder, "note", ""))


def start_background(
    queries: Embedder, spec: dict[str, Any], *, count: int, nice: int
) -> BackgroundEmbedder:
    """Start ``count`` workers serving ``spec`` (the model ``queries`` runs, as
    :meth:`tiers.semantic.embedding.SentenceTransformerEmbedder.worker_spec` gives it) and check
    that they compute its document vectors. Raises :class:`WorkerUnavailable` when they cannot
    start or compute other vectors (nothing is started then)."""
    pool = WorkerPool(spec, count=count, nice=nice)
    pool.start()
    embedder = BackgroundEmbedder(queries, pool)
    try:
        mine = queries.encode_documents(list(PROBES))
        theirs = embedder.encode_documents(list(PROBES))
        gap = float(np.abs(mine - theirs).max())
        if gap > TOLERANCE:
            raise WorkerUnavailable(
                f"the workers' vectors differ from the daemon's by {gap:.2g} (model "
                f"{queries.model_name}, worker {pool.ready.get('model_name')})"
            )
    except BaseException:
        embedder.close()
        raise
    log.info(
        "workers.ready",
        extra={"fields": {"pool": pool.name, "count": count, "nice": nice, "max_gap": gap}},
    )
    return embedder
