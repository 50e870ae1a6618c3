"""Fakes of the model seams for the fast tier: no model is loaded.

:func:`hash_embed` is a deterministic hashed bag of words (texts that share words are near),
:class:`HashEmbedder` the same as an :class:`~tiers.semantic.embedding.Embedder` (it records the
documents it was asked to embed); tests of every package share them. The extractor needs no
fake: the local extractor is the real one and runs in milliseconds without a model
(``tests/support/local_extraction.py``); the LLM extractor's tests talk to a loopback OpenAI-
compatible server (``tests/support/llm_server.py``)."""

from __future__ import annotations

import hashlib
import re

import numpy as np

DIM = 64


def hash_embed(texts: list[str], dim: int = DIM, words: str = r"\w+") -> np.ndarray:
    """One L2-normalised row per text: each word (``words``, lower-cased) adds 1 to a column
    chosen by its hash; a text without words is a zero row."""
    rows = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(words, text.lower()):
            rows[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
        norm = np.linalg.norm(rows[i])
        if norm:
            rows[i] /= norm
    return rows


class HashEmbedder:
    """:func:`hash_embed` as an embedder; :attr:`documents` lists what it embedded as
    documents, in order."""

    model_name = "fake"

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.documents: list[str] = []

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.documents.extend(texts)
        return hash_embed(texts, self.dim)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return hash_embed(texts, self.dim)
