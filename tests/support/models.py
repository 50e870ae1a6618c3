"""One loaded embedding model, with its worker process, for every in-process test daemon of
the default model: loading it costs about a second and a half per daemon, and well over a
hundred tests start one.

:func:`shared_factories` gives :class:`daemon.wiring.Factories` whose embedding service
hands out that model, built once by the daemon's own :func:`daemon.components.configured_embedder`
(queries in this process, documents in a worker at a lower priority, as ``stratad`` runs).
A daemon with other embedding or worker settings, or a test that passes its own factories
(a model load held back, a worker killed), makes its own. The shared one is never closed by
a daemon; its worker ends with the test process."""

from __future__ import annotations

import atexit
import threading

import numpy as np

from daemon.components import configured_embedder, configured_embeddings, embedding_description
from daemon.settings import Settings
from daemon.wiring import Factories
from tests.support.settings import MODEL_CACHE
from tiers.core.models import ModelClient
from tiers.semantic.embedding import Embedder, EmbeddingService, SupportsClose
from tiers.settings import EmbeddingSettings, WorkersSettings
from tiers.workers.embedder import BackgroundEmbedder

_lock = threading.Lock()
_shared: Embedder | None = None


class _SharedWorkers(BackgroundEmbedder):
    """The shared model with its worker, as a daemon sees it: closing the daemon's embedding
    service leaves the worker running for the next daemon."""

    def close(self) -> None:
        pass


class _Unclosed:
    """The shared embedder as a daemon sees it: it has no ``close``, so closing the daemon's
    embedding service leaves it running for the next daemon."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self.inner.encode_documents(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.inner.encode_queries(texts)


def shared(settings: Settings) -> Embedder:
    """The shared embedder (built on first use, with these settings' model)."""
    global _shared
    with _lock:
        if _shared is None:
            inner = configured_embedder(settings, None)
            if isinstance(inner, SupportsClose):
                atexit.register(inner.close)
            if isinstance(inner, BackgroundEmbedder):
                _shared = _SharedWorkers(inner.queries, inner.pool, part=inner.part)
            else:
                _shared = _Unclosed(inner)
        return _shared


def eligible(settings: Settings) -> bool:
    """Whether a daemon with ``settings`` embeds with the shared model: the default model and
    workers, with the tests' model cache."""
    return (
        settings.embedding == EmbeddingSettings(cache_dir=MODEL_CACHE)
        and settings.workers == WorkersSettings()
    )


def _service(settings: Settings, client: ModelClient | None) -> EmbeddingService:
    if client is not None or not eligible(settings):
        return configured_embeddings(settings, client)
    return EmbeddingService(lambda: shared(settings), embedding_description(settings.embedding))


def shared_factories(factories: Factories | None = None) -> Factories:
    """``factories`` (default: the daemon's) with the shared embedding service, unless they
    make their own."""
    base = factories or Factories()
    if base.embedding_service is not Factories().embedding_service:
        return base
    return Factories(open_vectors=base.open_vectors, embedding_service=_service, clock=base.clock)
