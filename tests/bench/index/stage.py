"""The index stage on a quiet daemon beside the model's own throughput on the same cores.

Run as ``python -m tests.bench.index.stage [--sessions 300]``:

1. **The model alone**, in this process, on the texts the stage embeds for LoCoMo sessions of
   20 turns (every turn, and the 3-turn chunks): the worker's runtime (the ONNX export in
   onnxruntime alone, ``workers.threads`` threads, batches of similar length), and the
   daemon's in-process model as before (one thread, slices of 16 in the texts' order).
2. **The stage through a fresh ``stratad``** (defaults, consolidation out of the way):
   ``--sessions`` sessions of 20 turns ended at once, timed until none is unindexed, with
   ``weaver.chunk_vectors`` = ``embedded`` and ``derived`` (a chunk's vector from its turns':
   only the turns are embedded). Reported as sessions/s and the texts/s they mean.

The target (issue 27): at least 2.5 sessions/s of 20 turns.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Any

from stratad_client import MemoryClient, message
from tests.bench.locomo.data import load
from tests.bench.support.daemon import command_line, format_machine, machine_info, write_json
from tests.support import ProcessDaemon, wait_until
from tiers.core.records import Scope
from tiers.semantic.embedding import SentenceTransformerEmbedder
from tiers.semantic.embedding.onnx import OnnxModel
from tiers.settings import EmbeddingSettings, WorkersSettings
from weaver.episodes import chunk, chunk_text
from weaver.extractors import EpisodeInput, Turn
from weaver.settings import WeaverSettings

TURNS = 20


def sessions_of(texts: list[tuple[str, str]], n: int) -> list[list[tuple[str, str]]]:
    return [[texts[(i * TURNS + j) % len(texts)] for j in range(TURNS)] for i in range(n)]


def stage_texts(sessions: list[list[tuple[str, str]]]) -> tuple[list[str], list[str]]:
    """The turn texts and the chunk texts the index stage embeds for these sessions."""
    w = WeaverSettings()
    turns_out: list[str] = []
    chunks_out: list[str] = []
    for s in sessions:
        turns = [Turn(i + 1, sp, "user", t, 0) for i, (sp, t) in enumerate(s)]
        episode = EpisodeInput("e", "s", Scope("u"), turns)
        turns_out += [chunk_text([t]) for t in turns]
        windows = chunk(episode, w.chunk_turns, w.chunk_overlap, w.chunk_max_tokens)
        chunks_out += [chunk_text(win) for win in windows]
    return turns_out, chunks_out


def model_alone(texts: list[str], cache: Path) -> dict[str, float]:
    e, workers = EmbeddingSettings(), WorkersSettings()
    local = SentenceTransformerEmbedder(
        e.model, backend=e.backend, threads=e.threads, cache_dir=cache
    )
    spec = local.worker_spec(workers.threads)
    runtime = OnnxModel(
        Path(spec["dir"]), spec["file"], spec["model_name"], threads=workers.threads
    )
    runtime.encode_documents(texts[:32])  # warm-up
    t0 = time.perf_counter()
    runtime.encode_documents(texts)
    worker = len(texts) / (time.perf_counter() - t0)
    local.encode_documents(texts[:32])
    t0 = time.perf_counter()
    for i in range(0, len(texts), 16):
        local.encode_documents(texts[i : i + 16])
    in_process = len(texts) / (time.perf_counter() - t0)
    return {
        "worker_runtime_texts_per_s": round(worker, 1),
        "worker_threads": workers.threads,
        "in_process_slices_texts_per_s": round(in_process, 1),
    }


def quiet_stage(
    sessions: list[list[tuple[str, str]]], cache: Path, **settings: str
) -> tuple[float, int]:
    """Seconds from the first append until none of ``sessions`` is unindexed (ended or
    live), and the points the weaver wrote meanwhile (its log's ``weaver.indexed`` and
    ``weaver.live_indexed``: a point written twice counts twice)."""
    with tempfile.TemporaryDirectory(prefix="strata-index-") as tmp:
        proc = ProcessDaemon(
            Path(tmp) / "data",
            log_level="info",
            log_format="json",
            embedding__cache_dir=str(cache),
            weaver__interval_seconds="86400",
            vectors__optimize_interval_seconds="86400",
            **settings,
        )
        try:
            with MemoryClient(proc.address, timeout=60) as c:
                wait_until(lambda: c.admin.weaver_status().embedding_ready, 600, "for the model")
                t0 = time.perf_counter()
                for i, turns in enumerate(sessions):
                    c.append_batch(
                        f"quiet-{i}",
                        [message(t, name=sp) for sp, t in turns],
                        user_id=f"user-{i % 50:02d}",
                    )
                    c.end_session(f"quiet-{i}", user_id=f"user-{i % 50:02d}")
                wait_until(lambda: _caught_up(c), 3600, "for the backlog")
                seconds = time.perf_counter() - t0
        finally:
            proc.terminate()
        text = proc.log_path.read_text(errors="replace")
        written = sum(
            int(m.group(1))
            for line in text.splitlines()
            if "weaver.indexed" in line or "weaver.live_indexed" in line
            for m in [re.search(r'"points": (\d+)', line)]
            if m
        )
        return seconds, written


def _caught_up(c: MemoryClient) -> bool:
    status = c.admin.weaver_status()
    return not status.unindexed and not status.live_unindexed


def run(n: int) -> dict[str, Any]:
    data = load()
    pairs = [
        (t.speaker, t.text) for conv in data.conversations for s in conv.sessions for t in s.turns
    ]
    sessions = sessions_of(pairs, n)
    turns, chunks = stage_texts(sessions)
    with tempfile.TemporaryDirectory(prefix="strata-models-") as tmp:
        cache = Path(tmp)
        alone = model_alone(turns + chunks, cache)
        out: dict[str, Any] = {"sessions": n, "turn_texts": len(turns), "chunk_texts": len(chunks)}
        out["model_alone"] = alone
        for mode in ("embedded", "derived"):
            seconds, written = quiet_stage(sessions, cache, weaver__chunk_vectors=mode)
            texts = len(turns) + (len(chunks) if mode == "embedded" else 0)
            out[mode] = {
                "seconds": round(seconds, 1),
                "sessions_per_s": round(n / seconds, 2),
                "texts_embedded": texts,
                "texts_per_s": round(texts / seconds, 1),
                "points_expected": len(turns) + len(chunks),
                "points_written": written,
            }
    return out


def report(machine: dict[str, Any], r: dict[str, Any]) -> str:
    a = r["model_alone"]
    lines = [
        f"Strata index stage: {r['sessions']} sessions of {TURNS} LoCoMo turns ended at once on "
        f"a quiet daemon (defaults), {r['turn_texts']} turn texts and {r['chunk_texts']} chunk "
        "texts",
        format_machine(machine),
        "",
        f"  the model alone: worker runtime ({a['worker_threads']} threads, batches of similar "
        f"length) {a['worker_runtime_texts_per_s']} texts/s; in process (1 thread, slices of 16"
        f" in order) {a['in_process_slices_texts_per_s']} texts/s",
    ]
    for mode in ("embedded", "derived"):
        m = r[mode]
        lines.append(
            f"  chunk_vectors = {mode:<8}: {m['seconds']} s, {m['sessions_per_s']} sessions/s, "
            f"{m['texts_embedded']} texts embedded ({m['texts_per_s']} texts/s); points "
            f"written {m['points_written']} of {m['points_expected']} (none twice: equal)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.index.stage", __doc__)
    parser.add_argument("--sessions", type=int, default=300)
    args = parser.parse_args(argv)
    machine = machine_info()
    result = run(args.sessions)
    print(report(machine, result))
    write_json(args.json, {"machine": machine, "result": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
