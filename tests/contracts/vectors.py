"""Shared parts of the vector store contract suite (``tests/contracts/test_vector_store.py``):
the storages a store opens on, and the points the tests write. Vectors are seeded random unit
vectors: no embedding model is loaded. ``tests/tiers/semantic/vectors/test_edge_generations.py``
uses the data helpers, and it and ``test_sharded_store.py`` open stores with :func:`ready`.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import numpy as np
from qdrant_client import QdrantClient

from tiers.core.records import Scope
from tiers.semantic.vectors import Hit, MemoryPoint, PointFilter, Source, VectorStore, point_id
from tiers.semantic.vectors.bm25 import KeywordEncoder
from tiers.semantic.vectors.child import ChildVectorStore
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.semantic.vectors.qdrant.store import QdrantVectorStore
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.semantic.vectors.storage import FLOAT32, DenseStorage

DIM = 16
MODEL = "test-model-a"
T0 = 1_700_000_000 * 1_000_000  # microseconds
MIN_US = 60 * 1_000_000
ALICE = Scope("alice", "assistant")
BOB = Scope("bob", "assistant")
KEYWORDS = KeywordEncoder()


# -- backends ----------------------------------------------------------------------------------


class Backend:
    """Opens stores over one storage: ``reopen`` gives a new store object on the same data."""

    name = ""
    storage: DenseStorage = FLOAT32  # how the stores it opens keep their dense vectors
    indexes = True  # the engine indexes a segment once it holds :data:`INDEXED_POINTS`

    def open(self) -> VectorStore:
        raise NotImplementedError

    def reopen(self, store: VectorStore) -> VectorStore:
        store.close()  # the storage is locked while a store has it open
        return self.open()

    def cleanup(self) -> None:
        pass


class EdgeBackend(Backend):
    name = "edge"

    def __init__(self, path: Path) -> None:
        self.path = path

    def open(self) -> VectorStore:
        return EdgeVectorStore(self.path, storage=self.storage)


class ShardedBackend(Backend):
    """The default store, in :data:`SHARDS` shards: alice and bob live in different ones, so
    reads without a user fan out over several shards."""

    name = "sharded"

    def __init__(self, path: Path, shards: int = 0) -> None:
        self.path = path
        self.shards = shards or SHARDS

    def open(self) -> VectorStore:
        return ShardedVectorStore(self.path, self.shards, storage=self.storage)


class ChildBackend(ShardedBackend):
    """The default store in a process of its own (``vectors.process``)."""

    name = "child"

    def open(self) -> VectorStore:
        return ChildVectorStore("sharded", self.path, self.shards, storage=self.storage)


class MemoryBackend(Backend):
    """qdrant-client's ``:memory:`` mode; the collection records :data:`SHARDS` shard keys and
    every request names its user's (local mode takes the selectors and ignores them)."""

    name = "memory"
    indexes = False  # local mode searches every point: it has no segment to index

    def __init__(self) -> None:
        self.client = QdrantClient(":memory:")

    def open(self) -> VectorStore:
        return QdrantVectorStore(self.client, shards=SHARDS, storage=self.storage)

    def reopen(self, store: VectorStore) -> VectorStore:
        return self.open()  # another store on the same client and collection

    def cleanup(self) -> None:
        self.client.close()


class ServerBackend(Backend):
    name = "server"

    def __init__(self, url: str) -> None:
        self.url = url
        self.api_key = os.environ.get("QDRANT_API_KEY")
        self.collection = f"strata_test_{uuid.uuid4().hex[:12]}"

    def open(self) -> VectorStore:
        return QdrantVectorStore.from_url(
            self.url,
            self.api_key,
            collection=self.collection,
            shards=SHARDS,
            storage=self.storage,
        )

    def cleanup(self) -> None:
        client = QdrantClient(url=self.url, api_key=self.api_key)
        try:
            client.delete_collection(self.collection)
        finally:
            client.close()


# A real server joins the suite only where one is configured (none can run on CI here).
BACKENDS = ["edge", "sharded", "child", "memory"] + (
    ["server"] if os.environ.get("QDRANT_URL") else []
)
SHARDS = 4  # alice's shard is 3, bob's and carol's 2 (tiers.semantic.vectors.shard_of)


class Opened:
    """Every store a test opened, closed at teardown (close is idempotent)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.stores: list[VectorStore] = []

    def open(self) -> VectorStore:
        store = self.backend.open()
        self.stores.append(store)
        return store

    def reopen(self, store: VectorStore) -> VectorStore:
        new = self.backend.reopen(store)
        self.stores.append(new)
        return new


P = ParamSpec("P")
S = TypeVar("S", bound=VectorStore)


@contextmanager
def ready(open_store: Callable[P, S], *args: P.args, **kwargs: P.kwargs) -> Iterator[S]:
    """The store ``open_store(*args, **kwargs)`` opens, made ready for the tests' model, and
    closed when the block ends."""
    store = open_store(*args, **kwargs)
    store.ensure(MODEL, DIM)
    try:
        yield store
    finally:
        store.close()


# -- data --------------------------------------------------------------------------------------


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM)
    return v / np.linalg.norm(v)


def near(base: np.ndarray, angle: float, seed: int) -> list[float]:
    """A unit vector at ``angle`` (radians) from the unit vector ``base``: its cosine
    similarity to ``base`` is exactly ``cos(angle)``, so ranks are known in advance."""
    other = unit(seed)
    other = other - (other @ base) * base
    other /= np.linalg.norm(other)
    v = np.cos(angle) * base + np.sin(angle) * other
    return [float(x) for x in v]


def mem(
    text: str,
    *,
    scope: Scope = ALICE,
    kind: str = "fact",
    episode: str = "ep-1",
    session: str = "chat-1",
    seq: int = 1,
    created: int = T0,
    dense: list[float] | None = None,
    seed: int = 0,
    **extra: Any,
) -> MemoryPoint:
    sources = [Source(session, seq, f"m-{seq}")]
    return MemoryPoint(
        id=point_id(scope, kind, text, sources),
        kind=kind,
        text=text,
        scope=scope,
        episode_id=episode,
        session_id=session,
        sources=sources,
        created_at_us=created,
        extractor="index",
        dense=dense if dense is not None else [float(x) for x in unit(seed)],
        sparse=KEYWORDS.embed_document(text),
        **extra,
    )


def bare(p: MemoryPoint) -> MemoryPoint:
    """The point as reads return it: without vectors."""
    return dataclasses.replace(p, dense=None, sparse=None)


def ids(hits: list[Hit] | list[MemoryPoint]) -> list[str]:
    return [h.point.id if isinstance(h, Hit) else h.id for h in hits]


def alice(**kw: Any) -> PointFilter:
    return PointFilter(user_id="alice", **kw)


INDEXED_DIM = 384  # the model's size: a segment of INDEXED_POINTS of it is indexed
INDEXED_POINTS = 7_000  # over the engine's indexing threshold (6,700 points of 384 dims)


def points_for(backend: Backend) -> int:
    """As many points as a store of ``backend`` needs to index a segment (a tenth of that
    where it never indexes one)."""
    return INDEXED_POINTS if backend.indexes else INDEXED_POINTS // 10


def indexable_points(
    queries: int, seed: int = 5, count: int = INDEXED_POINTS
) -> tuple[list[MemoryPoint], np.ndarray]:
    """``count`` of alice's points of :data:`INDEXED_DIM` dims in clusters (as embeddings
    are), and ``queries`` query vectors, each with a point planted near it."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, INDEXED_DIM))
    vectors = centres[rng.integers(40, size=count)] + 0.6 * rng.standard_normal(
        (count, INDEXED_DIM)
    )
    asked = centres[rng.integers(40, size=queries)] + 0.6 * rng.standard_normal(
        (queries, INDEXED_DIM)
    )
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    noise = rng.standard_normal((queries, INDEXED_DIM)) / np.sqrt(INDEXED_DIM)
    vectors[:queries] = asked + 0.1 * noise  # cosine about 0.995
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    points = []
    for i, row in enumerate(vectors):
        sources = [Source("chat-q", i, f"m-{i}")]
        points.append(
            MemoryPoint(
                id=point_id(ALICE, "fact", f"point {i}", sources),
                kind="fact",
                text=f"point {i}",
                scope=ALICE,
                episode_id="ep-q",
                session_id="chat-q",
                sources=sources,
                created_at_us=T0 + i,
                extractor="index",
                dense=row.tolist(),
                sparse=KEYWORDS.embed_document(f"point {i}"),
            )
        )
    return points, asked
