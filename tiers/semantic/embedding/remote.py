"""Embeddings from a model served elsewhere, through litellm (``embedding.provider =
"litellm"``): any provider litellm supports, an OpenAI-compatible embeddings endpoint or a
self-hosted server (``api_base``). The daemon's cores no longer compute the vectors.

Requests go through :class:`tiers.core.models.ModelClient` (batches of ``batch_size`` texts, a
timeout per request, retries with backoff). When the endpoint is down the encode methods
raise :class:`tiers.core.errors.ModelUnavailable`: the weaver's index job backs off and retries
with the episodes left unindexed, and a Recall answers UNAVAILABLE.

The vector size is ``dim`` when given; otherwise one probe request at start-up asks the
endpoint (:class:`tiers.semantic.embedding.EmbeddingService` retries the probe while the endpoint is
down). The vector store records the model as ``litellm:<model>``, so a data directory made
with the local model (or another remote one) refuses to open with this one.
"""

from __future__ import annotations

import numpy as np

from tiers.core.errors import ModelRequestFailed
from tiers.core.models import ModelClient
from tiers.semantic.embedding import PromptedEmbedder

PREFIX = "litellm:"
PROBE_TEXT = "dimension probe"


class LiteLLMEmbedder(PromptedEmbedder):
    """:class:`tiers.semantic.embedding.Embedder` over a :class:`ModelClient`."""

    def __init__(
        self,
        client: ModelClient,
        *,
        dim: int = 0,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        if dim < 0:
            raise ValueError("dim must be >= 0 (0: ask the endpoint)")
        self.client = client
        self.model_name = PREFIX + client.model
        self.query_prompt = query_prefix
        self.document_prompt = document_prefix
        self.dim = dim or self._probe()

    def __repr__(self) -> str:
        return f"LiteLLMEmbedder({self.client!r}, dim={self.dim})"

    def _probe(self) -> int:
        """The endpoint's vector size, from one request."""
        return int(np.asarray(self.client.embed([PROBE_TEXT])).shape[1])

    def _run(self, texts: list[str]) -> np.ndarray:
        # OpenAI rejects an empty input string; a blank one embeds as "nothing" all the same.
        rows = np.asarray(self.client.embed([t if t.strip() else " " for t in texts]))
        if rows.shape != (len(texts), self.dim):
            detail = (
                f"returned vectors of size {rows.shape[1]}, expected {self.dim} "
                "(embedding.dim, or the size the endpoint reported at start-up)"
            )
            raise ModelRequestFailed(f"{self.client.name}: {detail}", detail=detail)
        vectors = rows.astype(np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)
