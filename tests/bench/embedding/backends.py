"""The local embedding back-ends side by side: torch, onnx (the default) and onnx-int8.

Run as ``python -m tests.bench.embedding.backends``. In this process, with the daemon's
settings (``embedding.threads`` = 1), on LoCoMo text from the shared data: the time to load
(with the ONNX export, into a fresh cache directory), one query at a time (200 questions after
20 warm-up: p50/p95), documents in the weaver's slices of 16 (800 turns: texts/s), and how
close each back-end's document vectors are to torch's (cosine, min and mean). A store holds
vectors of one kind: torch and onnx share one, int8 is recorded as another model.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.bench.locomo.data import load, turn_texts
from tests.bench.support.daemon import (
    command_line,
    format_machine,
    machine_info,
    percentile,
    write_json,
)
from tiers.semantic.embedding import SentenceTransformerEmbedder
from tiers.semantic.embedding.priority import DOCUMENT_SLICE
from tiers.settings import EmbeddingSettings

BACKENDS = ("torch", "onnx", "onnx-int8")


def measure(backend: str, turns: list[str], questions: list[str], cache: Path) -> dict[str, Any]:
    e = EmbeddingSettings()
    t0 = time.perf_counter()
    embedder = SentenceTransformerEmbedder(
        e.model, backend=backend, threads=e.threads, cache_dir=cache
    )
    load_s = time.perf_counter() - t0
    for q in questions[:20]:
        embedder.encode_queries([q])
    samples = []
    for q in questions[20:220]:
        t = time.perf_counter()
        embedder.encode_queries([q])
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    t = time.perf_counter()
    parts = [
        embedder.encode_documents(turns[i : i + DOCUMENT_SLICE])
        for i in range(0, len(turns), DOCUMENT_SLICE)
    ]
    docs_s = len(turns) / (time.perf_counter() - t)
    return {
        "backend": backend,
        "model_name": embedder.model_name,
        "load_s": round(load_s, 2),
        "query_p50_ms": round(percentile(samples, 50), 2),
        "query_p95_ms": round(percentile(samples, 95), 2),
        "docs_per_s": round(docs_s, 1),
        "vectors": np.concatenate(parts),
    }


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.embedding.backends", __doc__)
    args = parser.parse_args(argv)
    machine = machine_info()
    data = load()
    turns = turn_texts(s for _, s in data.conversation_sessions())[:800]
    questions = data.question_texts
    with tempfile.TemporaryDirectory(prefix="strata-models-") as tmp:
        results = [measure(b, turns, questions, Path(tmp)) for b in BACKENDS]
    torch_vectors = results[0]["vectors"]
    for r in results:
        cosines = np.sum(r.pop("vectors") * torch_vectors, axis=1)
        r["cosine_to_torch_min"] = round(float(cosines.min()), 6)
        r["cosine_to_torch_mean"] = round(float(cosines.mean()), 6)
    print()
    print("Embedding back-ends (one thread, in process)")
    print(format_machine(machine))
    print(
        f"  {'backend':>10} {'load s':>7} {'query p50':>10} {'p95 ms':>7} {'docs/s':>7} "
        f"{'cos min':>9} {'cos mean':>9}  recorded as"
    )
    for r in results:
        print(
            f"  {r['backend']:>10} {r['load_s']:>7} {r['query_p50_ms']:>10} "
            f"{r['query_p95_ms']:>7} {r['docs_per_s']:>7} {r['cosine_to_torch_min']:>9} "
            f"{r['cosine_to_torch_mean']:>9}  {r['model_name']}"
        )
    write_json(args.json, {"machine": machine, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
