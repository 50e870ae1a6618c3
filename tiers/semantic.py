"""Tier 3 as one object: the embedding model, the vector store and the fact graph.

The graph opens at once (it lives in the state store). The vector store's size comes from the
model, so it opens when the model has loaded, in the loader's background thread; until then
:meth:`SemanticStore.wait_ready` raises :class:`EmbeddingUnavailable` after its timeout.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from tiers.embedding import Embedder, EmbeddingService, EmbeddingUnavailable
from tiers.errors import one_line
from tiers.graph.nxgraph import NetworkXGraph
from tiers.rocks import RocksStore
from tiers.tombstones import Tombstones
from tiers.vectors import VectorStore
from tiers.vectors.bm25 import KeywordEncoder

log = logging.getLogger("strata.semantic")


class SemanticStore:
    def __init__(
        self,
        state: RocksStore,
        embeddings: EmbeddingService,
        open_vectors: Callable[[], VectorStore],
    ) -> None:
        self.graph = NetworkXGraph(state)
        # Checked (under its lock) before every Tier 3 write: see tiers.tombstones.
        self.tombstones = Tombstones(state)
        self.embeddings = embeddings
        self.keywords = KeywordEncoder()
        self._open_vectors = open_vectors
        self._vectors: VectorStore | None = None
        self._ready = threading.Event()
        self.error: str | None = None
        self._lock = threading.Lock()
        self._closed = False
        # Called with a user_id after every write to Tier 3 in that scope (cache invalidation).
        self.on_write: list[Callable[[str], None]] = []
        # Called once from the loader thread when Tier 3 is open (True) or failed (False).
        self.on_ready: list[Callable[[bool], None]] = []
        # Held by every multi-step Tier 3 writer (the weaver's index and consolidation steps,
        # rebuild, forget) for the length of one consistent step, and by a backup while it
        # copies the vector store, so a backup never sees half a step.
        self.write_lock = threading.RLock()

    def notify_write(self, user_ids: set[str]) -> None:
        for user_id in user_ids:
            for listener in self.on_write:
                listener(user_id)

    def start(self) -> None:
        """Load the model and open the vector store in the background."""
        self.embeddings.start()
        threading.Thread(target=self._open, name="tier3-open", daemon=True).start()

    def _open(self) -> None:
        try:
            embedder = self.embeddings.wait()
            vectors = self._open_vectors()
            vectors.ensure(embedder.model_name, embedder.dim)
            with self._lock:
                if self._closed:
                    vectors.close()
                    return
                self._vectors = vectors
        except Exception as exc:
            # One line, for the log, `weaverctl status` and the health check's metadata.
            self.error = one_line(exc)
            log.error("tier3.unavailable", extra={"fields": {"error": self.error}})
        finally:
            self._ready.set()
            for listener in self.on_ready:
                listener(self._vectors is not None)

    @property
    def ready(self) -> bool:
        return self._vectors is not None

    def wait_ready(self, timeout: float | None = None) -> tuple[Embedder, VectorStore]:
        if not self._ready.wait(timeout):
            raise EmbeddingUnavailable(
                f"Tier 3 is still starting (loading {self.embeddings.description})"
            )
        if self._vectors is None:
            raise EmbeddingUnavailable(self.error or "Tier 3 failed to start")
        return self.embeddings.wait(0), self._vectors

    def close(self) -> None:
        """Flush and close the vector store (idempotent)."""
        with self._lock:
            self._closed = True
            vectors, self._vectors = self._vectors, None
        if vectors is not None:
            try:
                vectors.flush()
            finally:
                vectors.close()
        self.graph.close()


def edge_store_path(data_dir: Path) -> Path:
    return data_dir / "vectors"
