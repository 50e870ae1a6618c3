"""A query's tokenization beside busy threads: the batch tokenizer against one text at a time.

Run as ``python -m tests.bench.embedding.tokens``. The daemon's model's tokenizer (its ONNX
export in the tests' model cache), two questions of LoCoMo at a time (a query and its
speaker-neutral wording, as a Recall embeds them), with stratad's switch interval, beside 0, 1
and 2 threads running Python: p50 and p99 of ``encode_batch`` and of ``encode`` text by text.
The batch tokenizer lets go of the interpreter and waits to take it back when other threads
hold it, so the daemon tokenizes a query's few texts one by one
(:data:`tiers.semantic.embedding.onnx.FEW_TEXTS`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bench.locomo.data import load
from tests.bench.support.daemon import (
    command_line,
    format_machine,
    machine_info,
    percentile,
    write_figures,
)
from tests.support import MODEL_CACHE
from tiers.core.priority import hand_over_sooner
from tiers.semantic.embedding import SentenceTransformerEmbedder
from tiers.settings import EmbeddingSettings

ROUNDS = 1000


def spin(stop: threading.Event) -> None:
    """Python work until ``stop``: a thread that holds the interpreter whenever it may."""
    x = 0
    while not stop.is_set():
        x += 1


def timed(call: Callable[[], object]) -> dict[str, float]:
    """p50 and p99 in µs of ``call``, :data:`ROUNDS` times."""
    samples = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t) * 1e6)
    samples.sort()
    return {
        "p50_us": round(percentile(samples, 50), 1),
        "p99_us": round(percentile(samples, 99), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = command_line("tests.bench.embedding.tokens", __doc__)
    args = parser.parse_args(argv)
    machine = machine_info()
    spec = SentenceTransformerEmbedder(
        EmbeddingSettings().model, backend="onnx", cache_dir=MODEL_CACHE
    ).worker_spec(1)
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(spec["dir"]) / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    questions = load().question_texts
    pairs = [questions[i : i + 2] for i in range(0, len(questions) - 1, 2)]
    turn = iter(range(10**9))

    def pair() -> list[str]:
        return pairs[next(turn) % len(pairs)]

    hand_over_sooner()
    results: list[dict[str, Any]] = []
    for busy in (0, 1, 2):
        stop = threading.Event()
        threads = [threading.Thread(target=spin, args=(stop,), daemon=True) for _ in range(busy)]
        for t in threads:
            t.start()
        try:
            batch = timed(lambda: tokenizer.encode_batch(pair()))
            single = timed(lambda: [tokenizer.encode(t) for t in pair()])
        finally:
            stop.set()
            for t in threads:
                t.join()
        results.append({"busy_threads": busy, "encode_batch": batch, "one_by_one": single})
    print()
    print("A query's two texts tokenized (stratad's switch interval)")
    print(format_machine(machine))
    print(
        f"  {'busy threads':>12} {'batch p50 µs':>13} {'p99':>8} {'one by one p50':>15} {'p99':>8}"
    )
    for r in results:
        b, s = r["encode_batch"], r["one_by_one"]
        row = (r["busy_threads"], b["p50_us"], b["p99_us"], s["p50_us"], s["p99_us"])
        print("  {:>12} {:>13} {:>8} {:>15} {:>8}".format(*row))
    params = {"rounds": ROUNDS, "texts": 2, "switch_interval_s": sys.getswitchinterval()}
    write_figures(args.json, "embedding.tokens", machine, params, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
