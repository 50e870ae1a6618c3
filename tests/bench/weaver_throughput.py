"""Throughput of the Memory Weaver on LoCoMo: raw embedding, the index stage, consolidation.

Run as ``python -m tests.bench.weaver_throughput``. Needs the LoCoMo file of the shared data
beside the checkout (``../shared/data/locomo/locomo_dev.json``). Measures, in this order:

1. **Raw embedding**: every LoCoMo turn as ``"Speaker: text"`` (plus ``" [shares a photo of
   <caption>]"`` when the turn has one) through ``encode_documents`` of the daemon's model, in
   batches of the embedding batch size, at the daemon's thread setting and at 2 threads, after
   a warm-up batch; the median of ``--repeats`` runs. The same for the texts the index stage
   actually embeds (``weaver.chunk_turns``-turn windows with ``weaver.chunk_overlap`` turns of
   overlap), so the cost of chunking can be told from the cost of the pipeline.
2. **Index stage in process**: the stores of ``daemon/app.py`` in a temporary directory, the
   journal loaded with every LoCoMo session as an ended episode first, then
   ``Indexer.index(all episode ids)`` alone: one embedding batch, BM25 vectors, the upsert and
   the journal marks, with nothing else running.
3. **Index stage through the daemon**: a fresh ``stratad`` (scheduled consolidation and
   optimize pushed out to an hour), a warm-up session indexed first, then every LoCoMo session
   as one session (``AppendBatch`` of its turns, then ``EndSession``), one ``user_id`` per
   conversation. The interval runs from the first ``EndSession`` until
   ``WeaverStatus.unindexed`` is 0 (polled every 50 ms); ingest goes on during the first part
   of it, since the indexer starts with the first ended session.
4. **Consolidation** with the local back-end: ``RunNow`` over those episodes in the same daemon;
   the figures come from the run's report (``seconds``, ``episodes``, ``facts``).

Target (printed, not asserted): the index stage through the daemon at >= 80 % of the raw
embedding throughput of the turns at the daemon's thread setting.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from daemon.client import MemoryClient, message
from tests.bench._daemon import cpu_seconds, format_machine, machine_info, running_daemon
from tests.support import ROOT
from tiers.embedding import EmbeddingService, SentenceTransformerEmbedder
from tiers.journal import JOURNAL_CFS, Journal
from tiers.records import Message, Scope
from tiers.rocks import RocksStore
from tiers.semantic import SemanticStore, edge_store_path
from tiers.session import WindowLimits
from tiers.settings import EmbeddingSettings, JournalSettings
from tiers.vectors.edge import EdgeVectorStore
from tiers.working import STATE_CFS, WorkingMemory
from weaver.episodes import chunk, chunk_text
from weaver.extractors import EpisodeInput, Turn
from weaver.index import Indexer
from weaver.settings import WeaverSettings

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
DATE_FORMAT = "%I:%M %p on %d %B, %Y"
TARGET_RATIO = 0.8
POLL_SECONDS = 0.05
READY_TIMEOUT = 600.0
INDEX_TIMEOUT = 1800.0
WARMUP_USER = "bench-warmup"
T = TypeVar("T")


# -- LoCoMo ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LocomoTurn:
    speaker: str
    text: str  # the turn's text, with " [shares a photo of <caption>]" when it has one
    dia_id: str


@dataclass(frozen=True, slots=True)
class LocomoSession:
    sample_id: str
    number: int
    started_at: dt.datetime  # session_N_date_time, as UTC
    turns: list[LocomoTurn]

    @property
    def session_id(self) -> str:
        return f"locomo-{self.sample_id}-s{self.number}"

    @property
    def user_id(self) -> str:
        return f"locomo-{self.sample_id}"

    def turn_time_us(self, index: int) -> int:
        """Turns have no times of their own: the session's time plus one second per turn."""
        return int(self.started_at.timestamp()) * 1_000_000 + index * 1_000_000


def require_locomo(path: Path = LOCOMO) -> Path:
    if not path.exists():
        raise SystemExit(
            f"LoCoMo data not found at {path}: this benchmark needs the shared data beside the "
            "checkout (../shared/data/locomo/locomo_dev.json)"
        )
    return path


def load_locomo(path: Path = LOCOMO) -> list[LocomoSession]:
    """Every session of every conversation, in conversation and session order."""
    samples: list[dict[str, Any]] = json.loads(require_locomo(path).read_text())
    sessions: list[LocomoSession] = []
    for sample in samples:
        conv = sample["conversation"]
        numbers = sorted(
            int(k.split("_")[1])
            for k in conv
            if k.startswith("session_") and k.count("_") == 1 and k.split("_")[1].isdigit()
        )
        for n in numbers:
            started = dt.datetime.strptime(conv[f"session_{n}_date_time"], DATE_FORMAT)
            turns = []
            for t in conv[f"session_{n}"]:
                text = t["text"]
                if t.get("blip_caption"):
                    text += f" [shares a photo of {t['blip_caption']}]"
                turns.append(LocomoTurn(t["speaker"], text, t["dia_id"]))
            if turns:
                sessions.append(
                    LocomoSession(sample["sample_id"], n, started.replace(tzinfo=dt.UTC), turns)
                )
    return sessions


def turn_texts(sessions: list[LocomoSession]) -> list[str]:
    """One text per turn, as the index stage writes a turn into a chunk."""
    return [f"{t.speaker}: {t.text}" for s in sessions for t in s.turns]


def chunk_texts(sessions: list[LocomoSession], weaver: WeaverSettings) -> list[str]:
    """The texts the index stage embeds for these sessions (the same windows)."""
    texts: list[str] = []
    for s in sessions:
        episode = EpisodeInput(
            s.session_id,
            s.session_id,
            Scope(s.user_id),
            [
                Turn(i, t.speaker, "user", t.text, s.turn_time_us(i))
                for i, t in enumerate(s.turns, start=1)
            ],
        )
        windows = chunk(episode, weaver.chunk_turns, weaver.chunk_overlap, weaver.chunk_max_tokens)
        texts += [chunk_text(w) for w in windows]
    return texts


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
    turns = turn_texts(sessions)
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
    out: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run, name="bench-weaver")
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return out[0]


def locomo_messages(session: LocomoSession) -> list[Message]:
    return [
        Message(
            role="user",
            content=t.text,
            name=t.speaker,
            created_at_us=session.turn_time_us(i),
            metadata={"dia_id": t.dia_id},
        )
        for i, t in enumerate(session.turns, start=1)
    ]


@contextmanager
def open_stores(
    root: Path, ttl_seconds: int
) -> Iterator[tuple[RocksStore, Journal, WorkingMemory]]:
    """The state store, journal and working memory as ``Daemon.open_stores`` wires them."""
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
        for s in sessions:
            working.append(s.session_id, Scope(s.user_id), locomo_messages(s))
            episode_ids.append(working.end_session(s.session_id).episode_id)
        load_seconds = time.perf_counter() - t0

        timed: list[TimedEmbedder] = []

        def factory() -> TimedEmbedder:
            timed.append(TimedEmbedder(make_embedder(embedding, threads, cache_dir)))
            return timed[-1]

        semantic = SemanticStore(
            state,
            EmbeddingService(factory, f"{embedding.model} ({embedding.backend})"),
            lambda: EdgeVectorStore(edge_store_path(root)),
        )
        try:
            semantic.start()
            embedder, _vectors = semantic.wait_ready(None)
            turns = turn_texts(sessions)
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
    n_turns = sum(len(s.turns) for s in sessions)
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


# -- 3. and 4. through the daemon --------------------------------------------------------------
def _wait_for(
    client: MemoryClient, done: Callable[[Any], bool], timeout: float, what: str
) -> float:
    """Poll WeaverStatus every 50 ms until ``done(status)``; returns when it was seen."""
    deadline = time.perf_counter() + timeout
    while True:
        status = client.weaver_status()
        now = time.perf_counter()
        if done(status):
            return now
        if status.last_error:
            raise RuntimeError(f"the weaver failed while waiting for {what}: {status.last_error}")
        if now > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL_SECONDS)


def _ingest(client: MemoryClient, session_id: str, user_id: str, msgs: list[Any]) -> str:
    client.append_batch(session_id, msgs, user_id=user_id)
    return client.end_session(session_id).episode_id


def _pb_messages(session: LocomoSession) -> list[Any]:
    return [
        message(
            t.text,
            "user",
            name=t.speaker,
            created_at=dt.datetime.fromtimestamp(session.turn_time_us(i) / 1e6, dt.UTC),
            metadata={"dia_id": t.dia_id},
        )
        for i, t in enumerate(session.turns, start=1)
    ]


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
    payloads = [(s.session_id, s.user_id, _pb_messages(s)) for s in sessions]
    n_turns = sum(len(s.turns) for s in sessions)
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
        for event in client.run_weaver(episode_ids=episode_ids, timeout=INDEX_TIMEOUT):
            if event.WhichOneof("event") == "report":
                report = event.report
        run_wall = time.perf_counter() - t0
        status = client.weaver_status()
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


# -- report ------------------------------------------------------------------------------------
def _mark(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(machine: dict[str, Any], params: dict[str, Any], results: dict[str, Any]) -> str:
    raw = results["raw_embedding"]
    base = next(r for r in raw if r["kind"] == "turns" and r["threads"] == params["threads"])
    lines = [
        "Strata weaver throughput on LoCoMo (locomo_dev.json)",
        format_machine(machine),
        f"model      {params['model']} ({params['backend']}), batch size {params['batch_size']}, "
        f"daemon threads {params['threads']}",
        f"data       {params['sessions']} sessions, {params['turns']} turns; chunks of "
        f"{params['chunk_turns']} turns, overlap {params['chunk_overlap']}: "
        f"{params['chunks']} chunks",
        "",
        f"Raw embedding (encode_documents, median of {params['repeats']} runs after a warm-up)",
        f"  {'texts':<7} {'threads':>7} {'count':>6} {'seconds':>8} {'texts/s':>8} "
        f"{'range':>13} {'turns/s':>8}",
    ]
    for r in raw:
        rng = f"{r['worst_texts_per_s']:.0f}-{r['best_texts_per_s']:.0f}"
        lines.append(
            f"  {r['kind']:<7} {r['threads']:>7} {r['texts']:>6} {r['seconds']:>8.2f} "
            f"{r['texts_per_s']:>8.1f} {rng:>13} {r['turns_per_s']:>8.1f}"
        )
    lines.append("  (turns/s: LoCoMo turns covered per second; a chunk covers 3 turns, 1 shared)")
    target = TARGET_RATIO * base["turns_per_s"]
    lines += ["", "Index stage (turns of all episodes / seconds)"]
    ip = results.get("index_in_process")
    if ip is not None:
        lines.append(
            f"  in process, Indexer.index(all {ip['episodes']} episodes) alone: "
            f"{ip['seconds']:.2f} s = {ip['turns_per_s']:.1f} turns/s "
            f"({ip['points_per_s']:.1f} points/s), {ip['turns_per_s'] / base['turns_per_s']:.0%} "
            f"of raw; embedding {ip['embed_seconds']:.2f} s, the rest "
            f"{ip['other_seconds']:.2f} s; torch threads {ip['torch_threads_seen']}"
        )
    d = results.get("daemon")
    if d is not None:
        ix = d["index"]
        lines += [
            f"  through the daemon: first EndSession -> unindexed == 0: "
            f"{ix['interval_seconds']:.2f} s = {ix['turns_per_s']:.1f} turns/s, "
            f"{ix['turns_per_s'] / base['turns_per_s']:.0%} of raw   "
            f"target >= {target:.0f} turns/s: {_mark(ix['turns_per_s'] >= target)}",
            f"    ingest (AppendBatch + EndSession per session, during the interval): "
            f"{ix['ingest_seconds']:.2f} s; indexing went on {ix['after_ingest_seconds']:.2f} s "
            f"after the last EndSession; daemon CPU {ix['daemon_cpu_percent']:.0f}% of one core",
        ]
        c = d["consolidation"]
        lines += [
            "",
            "Consolidation, local back-end (RunNow over the LoCoMo episodes, from its report)",
            f"  {c['episodes']} episodes in {c['seconds']:.2f} s = "
            f"{c['episodes_per_min']:.1f} episodes/min; {c['facts']} facts = "
            f"{c['facts_per_s']:.1f} facts/s; {c['summaries']} summaries, {c['triplets']} "
            f"triplets, {c['superseded']} superseded, {c['failures']} failures",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.weaver_throughput", description=__doc__.split("\n\n")[0]
    )
    defaults = EmbeddingSettings()
    parser.add_argument("--backend", choices=("torch", "onnx-int8"), default=defaults.backend)
    parser.add_argument(
        "--threads",
        type=int,
        default=defaults.threads,
        help=f"the daemon's embedding.threads (default {defaults.threads})",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per raw embedding figure (default 3)"
    )
    parser.add_argument(
        "--sessions", type=int, default=0, help="only the first N LoCoMo sessions (default all)"
    )
    parser.add_argument("--no-daemon", action="store_true", help="skip the daemon measurement")
    parser.add_argument(
        "--no-in-process", action="store_true", help="skip the in-process index measurement"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    args = parser.parse_args(argv)

    sessions = load_locomo()
    if args.sessions:
        sessions = sessions[: args.sessions]
    embedding = defaults.model_copy(update={"backend": args.backend})
    weaver = WeaverSettings()
    machine = machine_info()
    thread_settings = sorted({args.threads, 2})
    params = {
        "model": embedding.model,
        "backend": embedding.backend,
        "batch_size": embedding.batch_size,
        "threads": args.threads,
        "repeats": args.repeats,
        "sessions": len(sessions),
        "turns": sum(len(s.turns) for s in sessions),
        "chunks": len(chunk_texts(sessions, weaver)),
        "chunk_turns": weaver.chunk_turns,
        "chunk_overlap": weaver.chunk_overlap,
        "chunk_max_tokens": weaver.chunk_max_tokens,
    }
    results: dict[str, Any] = {"phases": {}}

    def phase(name: str) -> None:
        """When each part started, and the load then: to match against other work."""
        results["phases"][name] = {
            "started_utc": dt.datetime.now(dt.UTC).strftime("%H:%M:%S"),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }

    with tempfile.TemporaryDirectory(prefix="strata-bench-models-") as models:
        print("raw embedding", flush=True)
        phase("raw_embedding")
        results["raw_embedding"] = raw_embedding(
            sessions, embedding, weaver, thread_settings, args.repeats, Path(models)
        )
        if not args.no_in_process:
            print("index stage in process", flush=True)
            phase("index_in_process")
            results["index_in_process"] = index_in_process(
                sessions, embedding, weaver, args.threads, Path(models)
            )
    if not args.no_daemon:
        print("index stage and consolidation through a fresh daemon", flush=True)
        phase("daemon")
        results["daemon"] = through_daemon(sessions, embedding, args.threads)

    print()
    print(report(machine, params, results))
    if args.json is not None:
        payload = {
            "benchmark": "weaver_throughput",
            "machine": machine,
            "params": params,
            "targets": {"index_vs_raw_turns_per_s": TARGET_RATIO},
            "results": results,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
