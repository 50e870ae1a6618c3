"""The worker process: ``python -m tiers.workers.process``, started and supervised by
:class:`tiers.workers.pool.WorkerPool`.

It lowers its own CPU priority first (``nice``), so the kernel gives the daemon's serving
threads the cores before it; then it loads the model its spec names and answers requests
until its input ends. Frames (:mod:`tiers.core.wire`) come on stdin and go out on what was
stdout; anything else the process prints goes to stderr. It ignores SIGINT and SIGTERM (the
daemon stops it after its staged shutdown, by closing the pipe) and exits on its own when the
daemon is gone.

Spec (the first frame): ``{"nice": int, "log_level": int, "model": {...}}`` (its log records
go to the daemon's log: :func:`tiers.core.wire.log_to_parent`), where the model is
``{"kind": "onnx", "dir", "file", "model_name", "threads"}`` (:class:`OnnxModel`; a pipeline it
cannot run falls back to sentence-transformers on the same export) or
``{"kind": "sentence-transformers", "model", "backend", "model_name", "threads",
"batch_size", "cache_dir"}``. It answers ``{"ready": true, "pid", "dim", "model_name"}`` or
``{"error": "..."}`` and exits. Requests: ``{"id", "op": "documents"|"queries", "texts"}`` ->
``{"id", "rows", "dim", "data"}`` or ``{"id", "error"}``.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import IO, Any

from tiers.core.priority import below_parent
from tiers.core.wire import WireClosed, log_to_parent, pack_rows, receive, run_child, send


def load(spec: dict[str, Any]) -> Any:
    """The embedder a model spec names (module doc)."""
    threads = int(spec.get("threads", 1))
    if spec["kind"] == "onnx":
        from tiers.semantic.embedding.onnx import OnnxModel, UnsupportedModel

        try:
            return OnnxModel(
                Path(spec["dir"]),
                spec["file"],
                spec["model_name"],
                threads=threads,
                spinning=False,
            )
        except UnsupportedModel as exc:
            print(f"worker: {exc}; using sentence-transformers", file=sys.stderr)
    from tiers.semantic.embedding import SentenceTransformerEmbedder

    cache = spec.get("cache_dir")
    return SentenceTransformerEmbedder(
        spec["model"],
        backend=spec["backend"],
        threads=threads,
        batch_size=int(spec.get("batch_size", 64)),
        cache_dir=Path(cache) if cache else None,
    )


def serve(inp: IO[bytes], out: IO[bytes]) -> int:
    spec = receive(inp)
    log_to_parent(int(spec.get("log_level", logging.WARNING)))  # the daemon logs what it logs
    below_parent(int(spec.get("nice", 0)))  # whichever daemon thread started it
    try:
        model = load(spec["model"])
    except Exception as exc:
        send(out, {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        return 1
    send(out, {"ready": True, "pid": os.getpid(), "dim": model.dim, "model_name": model.model_name})
    while True:
        try:
            request = receive(inp)
        except WireClosed:
            return 0
        op = request.get("op")
        try:
            if op == "documents":
                rows = model.encode_documents(list(request["texts"]))
            elif op == "queries":
                rows = model.encode_queries(list(request["texts"]))
            else:
                raise ValueError(f"unknown op {op!r}")
            send(out, {"id": request.get("id"), **pack_rows(rows)})
        except (BrokenPipeError, ConnectionResetError):
            return 0
        except Exception as exc:
            send(out, {"id": request.get("id"), "error": f"{type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    sys.exit(run_child(serve))
