"""Queries before background work in front of the model (tiers.semantic.embedding.priority)."""

from __future__ import annotations

import threading

import numpy as np

from tiers.semantic.embedding.priority import PriorityEmbedder

DEADLINE = 30.0


class Recording:
    """An embedder that records its calls; a query can be held inside the model."""

    model_name = "recording"
    dim = 2

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.in_query = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        self.calls.append(("query", texts))
        self.in_query.set()
        assert self.release.wait(DEADLINE)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.calls.append(("documents", texts))
        return np.array([[len(t), 0.0] for t in texts], dtype=np.float32).reshape(-1, 2)


def test_documents_go_in_slices_and_come_back_in_order():
    inner = Recording()
    embedder = PriorityEmbedder(inner, document_slice=3)
    texts = [f"text {'x' * i}" for i in range(8)]
    vectors = embedder.encode_documents(texts)
    assert vectors[:, 0].tolist() == [float(len(t)) for t in texts]
    assert [len(t) for kind, t in inner.calls] == [3, 3, 2]
    assert embedder.encode_documents([]).shape == (0, 2)
    assert (embedder.model_name, embedder.dim) == ("recording", 2)


def test_a_document_slice_waits_for_the_query_in_progress():
    inner = Recording()
    inner.release.clear()
    embedder = PriorityEmbedder(inner, document_slice=2, max_defer_seconds=DEADLINE)
    query = threading.Thread(target=embedder.encode_queries, args=(["where is Bob?"],))
    query.start()
    assert inner.in_query.wait(DEADLINE)
    done = threading.Event()
    documents = threading.Thread(
        target=lambda: (embedder.encode_documents(["a", "b", "c"]), done.set())
    )
    documents.start()
    assert not done.wait(0.3)  # held back while the query is in the model
    assert [kind for kind, _ in inner.calls] == ["query"]
    inner.release.set()
    query.join(DEADLINE)
    assert done.wait(DEADLINE)
    documents.join(DEADLINE)
    assert [kind for kind, _ in inner.calls] == ["query", "documents", "documents"]
    assert embedder.deferred == 1 and embedder.slices == 2


def test_documents_are_not_starved_by_a_query_that_never_ends():
    inner = Recording()
    inner.release.clear()
    embedder = PriorityEmbedder(inner, document_slice=1, max_defer_seconds=0.01)
    query = threading.Thread(target=embedder.encode_queries, args=(["still thinking"],))
    query.start()
    try:
        assert inner.in_query.wait(DEADLINE)
        vectors = embedder.encode_documents(["one", "three"])
        assert vectors[:, 0].tolist() == [3.0, 5.0]
        assert embedder.deferred == 2
    finally:
        inner.release.set()
        query.join(DEADLINE)


def test_errors_of_the_model_reach_the_caller_and_free_the_queue():
    class Failing(Recording):
        def encode_queries(self, texts: list[str]) -> np.ndarray:
            raise RuntimeError("the model is gone")

    inner = Failing()
    embedder = PriorityEmbedder(inner, max_defer_seconds=DEADLINE)
    for _ in range(2):
        try:
            embedder.encode_queries(["q"])
        except RuntimeError as exc:
            assert "the model is gone" in str(exc)
        else:  # pragma: no cover
            raise AssertionError("no error")
    # No query is counted as in progress: documents go at once.
    embedder.encode_documents(["d"])
    assert embedder.deferred == 0
