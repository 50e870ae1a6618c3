"""The weaver benchmark through a fresh ``stratad``: the index stage and consolidation (parts 3
and 4 of :mod:`tests.bench.weaver`)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from stratad_client import MemoryClient
from tests.bench.support.daemon import cpu_seconds, running_daemon
from tests.bench.weaver.inputs import LocomoSession, pb_messages
from tests.support import wait_until
from tiers.settings import EmbeddingSettings

POLL_SECONDS = 0.05
READY_TIMEOUT = 600.0
INDEX_TIMEOUT = 1800.0
WARMUP_USER = "bench-warmup"


def _wait_for(
    client: MemoryClient, done: Callable[[Any], bool], timeout: float, what: str
) -> float:
    """Poll WeaverStatus every 50 ms until ``done(status)``; returns when it was seen."""
    seen: list[float] = []

    def check() -> bool:
        status = client.admin.weaver_status()
        now = time.perf_counter()
        if done(status):
            seen.append(now)
            return True
        if status.last_error:
            raise RuntimeError(f"the weaver failed while waiting for {what}: {status.last_error}")
        return False

    wait_until(check, timeout, f"for {what}", interval=POLL_SECONDS)
    return seen[0]


def _ingest(client: MemoryClient, session_id: str, user_id: str, msgs: list[Any]) -> str:
    client.append_batch(session_id, msgs, user_id=user_id)
    return client.end_session(session_id).episode_id


def through_daemon(
    sessions: list[LocomoSession], embedding: EmbeddingSettings, threads: int
) -> dict[str, Any]:
    settings = {
        "STRATA_WEAVER__INTERVAL_SECONDS": "3600",
        "STRATA_VECTORS__OPTIMIZE_INTERVAL_SECONDS": "3600",
        "STRATA_EMBEDDING__MODEL": embedding.model,
        "STRATA_EMBEDDING__BACKEND": embedding.backend,
        "STRATA_EMBEDDING__THREADS": str(threads),
        "STRATA_EMBEDDING__BATCH_SIZE": str(embedding.batch_size),
    }
    payloads = [(c.session_id(s), c.user_id, pb_messages(s)) for c, s in sessions]
    n_turns = sum(len(s.turns) for _, s in sessions)
    with running_daemon(settings) as daemon, MemoryClient(daemon.address, timeout=60) as client:
        print("  waiting for the embedding model ...", flush=True)
        t0 = time.perf_counter()
        _wait_for(client, lambda s: s.embedding_ready, READY_TIMEOUT, "embedding_ready")
        ready_seconds = time.perf_counter() - t0
        # Warm-up: the model's first batches are slower; this episode is not consolidated.
        _ingest(client, "bench-warmup", WARMUP_USER, payloads[0][2])
        _wait_for(client, lambda s: s.unindexed == 0, INDEX_TIMEOUT, "the warm-up episode")
        index_started = dt.datetime.now(dt.UTC).strftime("%H:%M:%S")

        print(f"  ingesting {len(sessions)} sessions, {n_turns} turns ...", flush=True)
        episode_ids: list[str] = []
        first_end = 0.0
        cpu_at_first_end = 0.0
        t_ingest = time.perf_counter()
        for i, (session_id, user_id, msgs) in enumerate(payloads):
            client.append_batch(session_id, msgs, user_id=user_id)
            if i == 0:
                cpu_at_first_end = cpu_seconds(daemon.pid)
                first_end = time.perf_counter()
            episode_ids.append(client.end_session(session_id).episode_id)
        ingest_done = time.perf_counter()
        indexed = _wait_for(client, lambda s: s.unindexed == 0, INDEX_TIMEOUT, "the index stage")
        cpu_indexed = cpu_seconds(daemon.pid)
        interval = indexed - first_end

        print(f"  consolidating {len(episode_ids)} episodes (local) ...", flush=True)
        run_started = dt.datetime.now(dt.UTC).strftime("%H:%M:%S")
        report: Any = None
        t0 = time.perf_counter()
        for event in client.admin.run_weaver(episode_ids=episode_ids, timeout=INDEX_TIMEOUT):
            if event.WhichOneof("event") == "report":
                report = event.report
        run_wall = time.perf_counter() - t0
        status = client.admin.weaver_status()
    if report is None:
        raise RuntimeError("RunNow ended without a report")
    index = {
        "started_utc": index_started,
        "threads": threads,
        "model_ready_seconds": round(ready_seconds, 2),
        "episodes": len(episode_ids),
        "turns": n_turns,
        "ingest_seconds": round(ingest_done - t_ingest, 3),
        "interval_seconds": round(interval, 3),
        "after_ingest_seconds": round(indexed - ingest_done, 3),
        "turns_per_s": round(n_turns / interval, 1),
        "daemon_cpu_percent": round(100.0 * (cpu_indexed - cpu_at_first_end) / interval, 1),
    }
    consolidation = {
        "started_utc": run_started,
        "ok": report.ok,
        "episodes": report.episodes,
        "chunks": report.chunks,
        "summaries": report.summaries,
        "facts": report.facts,
        "triplets": report.triplets,
        "superseded": report.superseded,
        "failures": report.failures,
        "seconds": round(report.seconds, 3),
        "wall_seconds": round(run_wall, 3),
        "episodes_per_min": round(60.0 * report.episodes / report.seconds, 1),
        "facts_per_s": round(report.facts / report.seconds, 1),
        "pending_after": status.pending,
        "error": report.error,
    }
    return {"index": index, "consolidation": consolidation}
