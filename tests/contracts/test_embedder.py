"""The :class:`tiers.semantic.embedding.Embedder` contract, run against every implementation: the
local sentence-transformers model, :class:`tiers.semantic.embedding.remote.LiteLLMEmbedder` on a
loopback OpenAI-compatible endpoint that serves the same model's vectors, the model's ONNX export in
onnxruntime alone (:class:`tiers.semantic.embedding.onnx.OnnxModel`) and the embedder that sends
documents to a worker process (:class:`tiers.workers.embedder.BackgroundEmbedder`). Each is
built with batches (or requests) of two texts, so that encoding five texts crosses them."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.contracts.models_kit import DIM, MODEL, minilm, minilm_endpoint
from tests.support import MODEL_CACHE
from tests.support.llm_server import FakeOpenAI, Reply
from tiers.core.errors import FailedPrecondition, ModelRequestFailed, ModelUnavailable, Unavailable
from tiers.core.models import ModelClient
from tiers.semantic.embedding import (
    Embedder,
    EmbeddingService,
    EmbeddingUnavailable,
    SentenceTransformerEmbedder,
)
from tiers.semantic.embedding.onnx import OnnxModel
from tiers.semantic.embedding.remote import LiteLLMEmbedder
from tiers.workers.embedder import BackgroundEmbedder
from tiers.workers.pool import WorkerPool

IMPLEMENTATIONS = ["sentence-transformers", "litellm", "onnxruntime", "workers"]
LOADERS = ["sentence-transformers", "litellm"]  # the kinds EmbeddingService loads here
REMOTE = "openai/test"
TEXTS = [
    "Caroline went to an LGBTQ support group on 7 May 2023.",
    "Melanie painted a sunrise over the lake last year.",
    "What does Alice drink in the morning?",
    "Bob adopted a beagle called Biscuit.",
    "The office moved to Lyon in March.",
]


@dataclass
class Impl:
    kind: str
    embedder: Embedder
    model_name: str


@pytest.fixture(scope="module")
def endpoint() -> Iterator[FakeOpenAI]:
    with minilm_endpoint() as fake:
        yield fake


def remote_client(base_url: str, **overrides: object) -> ModelClient:
    kwargs: dict[str, object] = {
        "model": REMOTE,
        "api_base": base_url,
        "max_retries": 0,
        "timeout_seconds": 5.0,
        "name": f"embedding litellm:{REMOTE}",
        "batch_size": 2,
    }
    return ModelClient(**kwargs | overrides)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def exported() -> SentenceTransformerEmbedder:
    """The model's ONNX export (in the tests' cache), as the daemon loads it by default."""
    return SentenceTransformerEmbedder(MODEL, backend="onnx", cache_dir=MODEL_CACHE)


@pytest.fixture(scope="module", params=IMPLEMENTATIONS)
def impl(request: pytest.FixtureRequest, endpoint: FakeOpenAI) -> Iterator[Impl]:
    if request.param == "sentence-transformers":
        local = copy.copy(minilm())  # the shared model, in batches of two
        local.batch_size = 2
        yield Impl(request.param, local, MODEL)
    elif request.param == "litellm":
        remote = LiteLLMEmbedder(remote_client(endpoint.base_url))
        yield Impl(request.param, remote, "litellm:" + REMOTE)
    elif request.param == "onnxruntime":
        spec = request.getfixturevalue("exported").worker_spec(1)
        model = OnnxModel(Path(spec["dir"]), spec["file"], spec["model_name"], batch_size=2)
        yield Impl(request.param, model, MODEL)
    else:
        queries = request.getfixturevalue("exported")
        pool = WorkerPool(queries.worker_spec(1), count=1)
        pool.start()
        try:
            yield Impl(request.param, BackgroundEmbedder(queries, pool, part=2), MODEL)
        finally:
            pool.close()


@pytest.fixture
def served(endpoint: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The module's endpoint, healthy again after the test (which may take it down)."""
    yield endpoint
    endpoint.outage = None


def encoders(embedder: Embedder) -> list[Callable[[list[str]], np.ndarray]]:
    return [embedder.encode_documents, embedder.encode_queries]


def test_it_names_its_model_and_vector_size(impl: Impl) -> None:
    assert impl.embedder.model_name == impl.model_name
    assert isinstance(impl.embedder.dim, int) and impl.embedder.dim == DIM


def test_rows_are_unit_float32_vectors_of_dim_columns(impl: Impl) -> None:
    for encode in encoders(impl.embedder):
        rows = encode(TEXTS)
        assert isinstance(rows, np.ndarray)
        assert rows.shape == (len(TEXTS), DIM) and rows.dtype == np.float32
        assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)


def test_no_texts_give_no_rows_without_asking_the_model(impl: Impl, endpoint: FakeOpenAI) -> None:
    sent = len(endpoint.requests)
    for encode in encoders(impl.embedder):
        rows = encode([])
        assert rows.shape == (0, DIM) and rows.dtype == np.float32
    assert len(endpoint.requests) == sent


def test_a_blank_text_still_gets_a_unit_row(impl: Impl) -> None:
    rows = impl.embedder.encode_documents(["", "   ", "hello"])
    assert rows.shape == (3, DIM)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)


def test_the_same_texts_give_the_same_vectors(impl: Impl) -> None:
    for encode in encoders(impl.embedder):
        assert np.allclose(encode(TEXTS), encode(TEXTS), atol=1e-6)


def test_batches_keep_the_order_and_the_vectors(impl: Impl) -> None:
    together = impl.embedder.encode_documents(TEXTS)  # three batches of at most two
    alone = np.vstack([impl.embedder.encode_documents([t]) for t in TEXTS])
    assert np.allclose(together, alone, atol=1e-5)
    backwards = impl.embedder.encode_documents(TEXTS[::-1])
    assert np.allclose(backwards[::-1], together, atol=1e-5)


def test_a_query_is_nearest_to_the_document_that_answers_it(impl: Impl) -> None:
    docs = impl.embedder.encode_documents(TEXTS)
    queries = impl.embedder.encode_queries(
        ["Where did Caroline go in May 2023?", "What is the name of Bob's dog?"]
    )
    assert np.argmax(queries @ docs.T, axis=1).tolist() == [0, 3]


# -- errors ----------------------------------------------------------------------------------


def test_endpoint_down_raises_unavailable_naming_the_endpoint(served: FakeOpenAI) -> None:
    embedder = LiteLLMEmbedder(remote_client(served.base_url), dim=DIM)
    served.outage = Reply.error(503)
    with pytest.raises(ModelUnavailable) as err:
        embedder.encode_queries(["where?"])
    assert str(err.value).startswith("embedding litellm:openai/test: embedding 1 text failed")
    assert "ServiceUnavailableError 503" in str(err.value)
    assert isinstance(err.value, Unavailable)  # the kind: the request may succeed later
    served.outage = None  # back: the same embedder serves again
    assert embedder.encode_queries(["where?"]).shape == (1, DIM)


def test_a_refused_request_fails_it(served: FakeOpenAI) -> None:
    """(A reply of another vector size fails the same way:
    tests/tiers/semantic/embedding/test_embedding_litellm.py.)"""
    embedder = LiteLLMEmbedder(remote_client(served.base_url), dim=DIM)
    served.outage = Reply.error(401)
    with pytest.raises(ModelRequestFailed, match="401") as err:
        embedder.encode_documents(["hello"])
    assert isinstance(err.value, FailedPrecondition)  # a configuration problem, not a pause


@pytest.mark.parametrize("kind", LOADERS)
def test_a_model_that_cannot_load_is_unavailable_through_the_service(
    kind: str, served: FakeOpenAI, tmp_path: Path
) -> None:
    """No embedder is handed out before it has loaded: :class:`EmbeddingService` says why."""
    factory: Callable[[], Embedder]
    if kind == "sentence-transformers":
        missing = str(tmp_path / "no-such-model")
        factory = lambda: type(minilm())(missing)  # noqa: E731
    else:
        served.outage = Reply.error(401)
        factory = lambda: LiteLLMEmbedder(remote_client(served.base_url))  # noqa: E731
    sent = len(served.requests)
    service = EmbeddingService(factory, kind, retry=(0.05, 0.1))
    service.start()
    with pytest.raises(EmbeddingUnavailable, match="cannot load embedding model") as err:
        service.wait(30)
    assert isinstance(err.value, Unavailable)
    assert service.attempts == 1 and not service.ready  # a refusal is final: no retry
    if kind == "litellm":
        assert "401" in str(err.value) and len(served.requests) == sent + 1
    else:
        assert "no-such-model" in str(err.value)
