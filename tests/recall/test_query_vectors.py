"""Query vectors (recall.cache.QueryVectors): a text of a user is embedded once while it is recent,
by the real model; the cache is bounded, per embedder and per user, returns read-only arrays,
and caches no failure. Forget's side is in tests/contracts/test_scope_cache.py."""

from __future__ import annotations

import numpy as np
import pytest

from recall.cache import QueryVectors
from tests.contracts.models_kit import minilm, minilm_endpoint
from tests.support.llm_server import Reply
from tiers.core.errors import ModelUnavailable
from tiers.core.models import ModelClient
from tiers.semantic.embedding.remote import LiteLLMEmbedder


def test_a_text_is_embedded_once_per_user_while_recent():
    cache = QueryVectors(size=2)
    model = minilm()
    first = cache.vector(model, "alice", "where did we go hiking")
    assert cache.vector(model, "alice", "where did we go hiking") is first
    assert (cache.hits, cache.computed) == (1, 1)
    np.testing.assert_allclose(
        first, model.encode_queries(["where did we go hiking"])[0], atol=1e-6
    )
    assert not first.flags.writeable  # shared between requests: nobody may change it

    cache.vector(model, "bob", "where did we go hiking")  # another user's entry
    cache.vector(model, "alice", "what is my dog called")  # the oldest entry ages out
    assert cache.vector(model, "alice", "where did we go hiking") is not first
    assert cache.computed == 4


def test_another_embedder_empties_the_cache_and_a_failure_is_not_cached():
    cache = QueryVectors()
    cache.vector(minilm(), "alice", "hello")
    with minilm_endpoint() as server:
        client = ModelClient(
            model="openai/test", api_base=server.base_url, max_retries=0, timeout_seconds=5.0
        )
        remote = LiteLLMEmbedder(client, dim=384)
        server.outage = Reply.error(503)
        with pytest.raises(ModelUnavailable):
            cache.vector(remote, "alice", "hello")
        server.outage = None
        cache.vector(remote, "alice", "hello")
        assert (cache.hits, cache.computed) == (0, 2)
        cache.vector(remote, "alice", "hello")
    assert (cache.hits, cache.computed) == (1, 2)


def test_a_size_of_zero_caches_nothing_and_a_negative_one_is_refused():
    cache = QueryVectors(size=0)
    cache.vector(minilm(), "alice", "hello")
    cache.vector(minilm(), "alice", "hello")
    assert (cache.hits, cache.computed) == (0, 2)
    with pytest.raises(ValueError, match="0 or more"):
        QueryVectors(size=-1)
