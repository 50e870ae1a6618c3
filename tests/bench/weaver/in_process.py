"""The weaver benchmark's measurements in this process: raw embedding (part 1 of
:mod:`tests.bench.weaver`) and the index stage alone (part 2)."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from tests.bench.locomo.data import turn_texts
from tests.bench.weaver.inputs import LocomoSession, chunk_texts, journal_messages
from tiers.core.records import Scope
from tiers.journal.store import JOURNAL_CFS, Journal
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.embedding import EmbeddingService, SentenceTransformerEmbedder
from tiers.semantic.store import SemanticStore, edge_store_path
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.settings import EmbeddingSettings, JournalSettings, VectorsSettings
from tiers.working.memory import WorkingMemory
from tiers.working.session import WindowLimits
from weaver.index import Indexer
from weaver.settings import WeaverSettings

T = TypeVar("T")


# -- 1. raw embedding --------------------------------------------------------------------------
def make_embedder(
    embedding: EmbeddingSettings, threads: int, cache_dir: Path
) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(
        embedding.model,
        backend=embedding.backend,
        threads=threads,
        batch_size=embedding.batch_size,
        cache_dir=cache_dir,
    )


def time_encode(
    embedder: SentenceTransformerEmbedder, texts: list[str], repeats: int
) -> dict[str, Any]:
    """``encode_documents(texts)`` (batches of the embedder's batch size) ``repeats`` times
    after a warm-up batch; rates from the median run."""
    embedder.encode_documents(texts[: embedder.batch_size])
    runs: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        vectors = embedder.encode_documents(texts)
        runs.append(time.perf_counter() - t0)
        assert vectors.shape == (len(texts), embedder.dim)
    median = statistics.median(runs)
    return {
        "texts": len(texts),
        "runs_seconds": [round(r, 3) for r in runs],
        "seconds": round(median, 3),
        "texts_per_s": round(len(texts) / median, 1),
        "best_texts_per_s": round(len(texts) / min(runs), 1),
        "worst_texts_per_s": round(len(texts) / max(runs), 1),
    }


def raw_embedding(
    sessions: list[LocomoSession],
    embedding: EmbeddingSettings,
    weaver: WeaverSettings,
    thread_settings: list[int],
    repeats: int,
    cache_dir: Path,
) -> list[dict[str, Any]]:
    turns = turn_texts(s for _, s in sessions)
    chunks = chunk_texts(sessions, weaver)
    rows: list[dict[str, Any]] = []
    for threads in thread_settings:
        embedder = make_embedder(embedding, threads, cache_dir)
        for kind, texts in (("turns", turns), ("chunks", chunks)):
            print(f"  raw embedding: {len(texts)} {kind}, threads={threads} ...", flush=True)
            row = time_encode(embedder, texts, repeats)
            row.update(kind=kind, threads=threads, turns=len(turns))
            row["turns_per_s"] = round(len(turns) / row["seconds"], 1)
            rows.append(row)
        del embedder
    return rows


# -- 2. index stage in process -----------------------------------------------------------------
class TimedEmbedder:
    """An embedder that adds up the time spent in ``encode_documents``."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self._inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.batch_size = inner.batch_size
        self.seconds = 0.0
        self.texts = 0

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return self._inner.encode_documents(texts)
        finally:
            self.seconds += time.perf_counter() - t0
            self.texts += len(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._inner.encode_queries(texts)


def _torch() -> int:
    import torch

    return int(torch.get_num_threads())


def in_new_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a new thread, as the daemon's weaver worker runs the index stage: torch's
    thread count is per thread, and a new thread takes the one the model was loaded with."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-weaver") as worker:
        return worker.submit(fn).result()


@contextmanager
def open_stores(
    root: Path, ttl_seconds: int
) -> Iterator[tuple[RocksStore, Journal, WorkingMemory]]:
    """The state store, journal and working memory as ``daemon.wiring.open_parts`` wires them."""
    state = RocksStore(root / "state", STATE_CFS)
    journal_store = RocksStore(root / "journal", JOURNAL_CFS, ttl_seconds=ttl_seconds)
    try:
        journal = Journal(journal_store, state, ttl_seconds)
        yield state, journal, WorkingMemory(state, journal, WindowLimits())
    finally:
        for store in (journal_store, state):
            store.flush()
            store.close()


def index_in_process(
    sessions: list[LocomoSession],
    embedding: EmbeddingSettings,
    weaver: WeaverSettings,
    threads: int,
    cache_dir: Path,
) -> dict[str, Any]:
    """Load the journal with every session, then time ``Indexer.index`` over all of them."""
    with (
        tempfile.TemporaryDirectory(prefix="strata-bench-") as tmp,
        open_stores(Path(tmp), JournalSettings().ttl_seconds) as (state, journal, working),
    ):
        root = Path(tmp)
        t0 = time.perf_counter()
        episode_ids = []
        for conv, s in sessions:
            working.append(conv.session_id(s), Scope(conv.user_id), journal_messages(s))
            episode_ids.append(working.end_session(conv.session_id(s)).episode_id)
        load_seconds = time.perf_counter() - t0

        timed: list[TimedEmbedder] = []

        def factory() -> TimedEmbedder:
            timed.append(TimedEmbedder(make_embedder(embedding, threads, cache_dir)))
            return timed[-1]

        semantic = SemanticStore(
            state,
            EmbeddingService(factory, f"{embedding.model} ({embedding.backend})"),
            lambda: ShardedVectorStore(edge_store_path(root), VectorsSettings().shards),
        )
        try:
            semantic.start()
            embedder, _vectors = semantic.wait_ready(None)
            turns = turn_texts(s for _, s in sessions)
            embedder.encode_documents(turns[: embedding.batch_size])  # warm-up
            timed[0].seconds, timed[0].texts = 0.0, 0
            indexer = Indexer(journal, semantic, weaver)
            cpu0 = time.process_time()
            t0 = time.perf_counter()
            result, torch_threads = in_new_thread(lambda: (indexer.index(episode_ids), _torch()))
            seconds = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            assert not journal.unindexed(), "episodes left unindexed"
            assert not result.missing, result.missing
        finally:
            semantic.close()
    n_turns = sum(len(s.turns) for _, s in sessions)
    return {
        "threads": threads,
        "torch_threads_seen": torch_threads,
        "episodes": result.episodes,
        "turns": n_turns,
        "points": result.points,
        "journal_load_seconds": round(load_seconds, 3),
        "seconds": round(seconds, 3),
        "embed_seconds": round(timed[0].seconds, 3),
        "other_seconds": round(seconds - timed[0].seconds, 3),
        "turns_per_s": round(n_turns / seconds, 1),
        "points_per_s": round(result.points / seconds, 1),
        "process_cpu_percent": round(100.0 * cpu / seconds, 1),
    }
