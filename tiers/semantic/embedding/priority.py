"""Queries before background work, in front of the embedding model.

Recall and Pack embed one short query each, and a client waits for it; the weaver embeds
documents by the hundred, and nobody waits for a given one. Served first come first served,
a query that arrives while the weaver embeds a batch of 64 texts waits for the whole batch
(about 0.2 s on one core), and under load the queries queue behind the weaver
(``docs/benchmarks.md``, load). :class:`PriorityEmbedder` puts the queries first:

- queries go to the model at once, on the caller's thread (concurrent ones are already
  combined into one call by :class:`tiers.core.batcher.Batcher` in the recall engine);
- documents go in slices of :data:`DOCUMENT_SLICE` texts, one slice at a time, and before each
  slice the document side waits while any query is being embedded or waits to be. So a query
  never waits behind more than the slice already running, and the weaver takes what the
  queries leave;
- a slice waits at most :data:`MAX_DEFER_SECONDS` for the queries to pause: under a constant
  stream of queries the weaver still makes progress (a slice every 0.25 s at worst) instead of
  starving, so what was acknowledged is indexed in the end.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from tiers.semantic.embedding import Embedder, SupportsClose, parts_by_length

DOCUMENT_SLICE = 16  # texts per model call for documents (about 50 ms for MiniLM on torch)
MAX_DEFER_SECONDS = 0.25  # the longest a document slice waits for queries to pause


class PriorityEmbedder:
    """An :class:`~tiers.semantic.embedding.Embedder` that serves queries before documents; raises
    what
    the wrapped one raises."""

    def __init__(
        self,
        inner: Embedder,
        *,
        document_slice: int = DOCUMENT_SLICE,
        max_defer_seconds: float = MAX_DEFER_SECONDS,
        note: str = "",
    ) -> None:
        """``note``: why documents are embedded here rather than in worker processes, for
        ``weaverctl status``."""
        if document_slice < 1:
            raise ValueError("document_slice must be at least 1")
        self.inner = inner
        self.note = note
        self.model_name = inner.model_name
        self.dim = inner.dim
        self._slice = document_slice
        self._max_defer = max_defer_seconds
        self._cond = threading.Condition()
        self._queries = 0  # query calls in progress
        self._documents = threading.Lock()  # one document slice at a time
        # Figures: document slices run, and how many of them waited for queries.
        self.slices = 0
        self.deferred = 0

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        with self._cond:
            self._queries += 1
        try:
            return self.inner.encode_queries(texts)
        finally:
            with self._cond:
                self._queries -= 1
                if not self._queries:
                    self._cond.notify_all()

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return self.inner.encode_documents(texts)
        out: np.ndarray | None = None
        for rows in parts_by_length([len(t) for t in texts], self._slice):
            with self._documents:
                self._yield_to_queries()
                vectors = self.inner.encode_documents([texts[j] for j in rows])
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=vectors.dtype)
            out[rows] = vectors
        assert out is not None
        return out

    def close(self) -> None:
        if isinstance(self.inner, SupportsClose):
            self.inner.close()

    def _yield_to_queries(self) -> None:
        with self._cond:
            self.slices += 1
            if not self._queries:
                return
            self.deferred += 1
            deadline = time.monotonic() + self._max_defer
            while self._queries:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)
