"""The Tier 3 benchmarks' data: LoCoMo turns and questions embedded once, and synthetic memory
points mixed from them (see :mod:`tests.bench.tier3.query` for how)."""

from __future__ import annotations

import time
import uuid

import numpy as np

from tests.bench.locomo.data import load, turn_texts
from tiers.core.records import Scope
from tiers.semantic.embedding import SentenceTransformerEmbedder
from tiers.semantic.vectors import MemoryPoint, Source
from tiers.semantic.vectors.bm25 import KeywordEncoder
from tiers.settings import EmbeddingSettings

USERS = 50
POINT_KINDS = ("episode_chunk", "summary", "fact")
KIND_WEIGHTS = (0.6, 0.1, 0.3)  # of POINT_KINDS
MIX_MAX = 0.5
NOISE_SIGMA = 0.005
BASE_TIME_US = 1_700_000_000_000_000


def embed_pool(threads: int) -> tuple[list[str], np.ndarray, list[str], np.ndarray, float]:
    """The LoCoMo turns and questions with their embeddings, and how long that took."""
    data = load()
    texts = turn_texts(s for _, s in data.conversation_sessions())
    questions = data.question_texts
    e = EmbeddingSettings()
    embedder = SentenceTransformerEmbedder(e.model, threads=threads, batch_size=e.batch_size)
    t0 = time.perf_counter()
    docs = embedder.encode_documents(texts)
    queries = embedder.encode_queries(questions)
    return texts, docs, questions, queries, time.perf_counter() - t0


class PointMaker:
    """Builds the synthetic memory points, batch by batch (deterministic for a seed). Each
    names the speaker of its (first) turn in its source, as the daemon's points do: a scope's
    graph knows its speakers, and a question that names one is also asked without the name
    (:mod:`recall.cues.speakers`)."""

    def __init__(self, texts: list[str], pool: np.ndarray, seed: int) -> None:
        self.texts = texts
        self.pool = pool
        self.rng = np.random.default_rng(seed)
        self.keywords = KeywordEncoder()
        self.made = 0

    def batch(self, n: int) -> list[MemoryPoint]:
        rng = self.rng
        first = rng.integers(len(self.texts), size=n)
        second = rng.integers(len(self.texts), size=n)
        w = rng.uniform(0.0, MIX_MAX, size=n)[:, None]
        vectors = (1.0 - w) * self.pool[first] + w * self.pool[second]
        vectors += rng.normal(0.0, NOISE_SIGMA, size=vectors.shape)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        kinds = rng.choice(len(POINT_KINDS), size=n, p=KIND_WEIGHTS)
        users = rng.integers(USERS, size=n)
        points = []
        for j in range(n):
            i = self.made + j
            kind = POINT_KINDS[int(kinds[j])]
            a, b = self.texts[int(first[j])], self.texts[int(second[j])]
            text = a if kind == "fact" else f"{a}\n{b}"
            user = f"user-{int(users[j]):02d}"
            session = f"{user}-s{i // 40}"
            points.append(
                MemoryPoint(
                    id=str(uuid.UUID(bytes=rng.bytes(16), version=4)),
                    kind=kind,
                    text=text,
                    scope=Scope(user),
                    episode_id=f"ep-{session}",
                    session_id=session,
                    sources=[
                        Source(
                            session,
                            i % 40 + 1,
                            f"m-{i}",
                            {"dia_id": f"D{i % 40 + 1}"},
                            speaker=_speaker(a),
                        )
                    ],
                    created_at_us=BASE_TIME_US + i * 1_000_000,
                    extractor="index" if kind == "episode_chunk" else "local",
                    valid_from_us=BASE_TIME_US + i * 1_000_000 if kind == "fact" else None,
                    dense=vectors[j].tolist(),
                    sparse=self.keywords.embed_document(text),
                )
            )
        self.made += n
        return points


def _speaker(turn: str) -> str:
    """The speaker of a ``"Speaker: text"`` turn (:func:`tests.bench.locomo.data.turn_texts`),
    or none."""
    name, sep, _text = turn.partition(": ")
    return name if sep else ""
