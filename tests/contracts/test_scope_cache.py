"""The :class:`tiers.rights.forget.plan.ScopeCache` contract (what a Forget empties), run against
every cache that holds a user's recall data: the semantic cache, the query vectors and the graph
channel's per-scope graphs. Filled for two users through their own use (a put, a search), each must
drop exactly one user's entries on ``forget_scope``, count them, and count nothing the
second time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from recall.cache import QueryVectors, SemanticCache
from recall.graph.channel import GraphChannel
from recall.result import RecallResult
from tests.contracts.corpus import A, B, ctx, filled
from tests.contracts.models_kit import minilm
from tiers.rights.forget.plan import ScopeCache
from tiers.semantic.store import SemanticStore

Filler = Callable[[str], None]  # fills the cache with a user's entries


@pytest.fixture(scope="module")
def tier3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SemanticStore]:
    t = filled(tmp_path_factory.mktemp("corpus"))
    yield t.semantic
    t.close()


def semantic_cache(_tier3: SemanticStore) -> tuple[ScopeCache, Filler]:
    cache = SemanticCache(ttl_seconds=600, size=100, similarity=0.99)
    vector = np.ones(4, dtype=np.float32) / 2.0

    def fill(user: str) -> None:
        for params in ("k=5", "k=10"):
            cache.put(user, params, vector, RecallResult(hits=[]), cache.stamp(user))

    return cache, fill


def graph_channel(tier3: SemanticStore) -> tuple[ScopeCache, Filler]:
    channel = GraphChannel(tier3)
    scopes = {"alice": A, "bob": B}

    def fill(user: str) -> None:
        assert channel.search(ctx(scope=scopes[user]), 10)

    return channel, fill


def query_vectors(_tier3: SemanticStore) -> tuple[ScopeCache, Filler]:
    cache = QueryVectors(size=10)

    def fill(user: str) -> None:
        for text in ("where is the park", "who is Biscuit"):
            cache.vector(minilm(), user, text)

    return cache, fill


IMPLEMENTATIONS = {
    "semantic cache": semantic_cache,
    "query vectors": query_vectors,
    "graph channel": graph_channel,
}


@pytest.fixture(params=list(IMPLEMENTATIONS))
def cache(request: pytest.FixtureRequest, tier3: SemanticStore) -> tuple[ScopeCache, Filler]:
    made: tuple[ScopeCache, Filler] = IMPLEMENTATIONS[request.param](tier3)
    return made


def test_it_is_a_scope_cache(cache: tuple[ScopeCache, Filler]) -> None:
    assert isinstance(cache[0], ScopeCache)


def test_forget_scope_drops_one_users_entries_and_counts_them(
    cache: tuple[ScopeCache, Filler],
) -> None:
    scopes, fill = cache
    assert scopes.forget_scope("alice") == 0  # nothing held yet
    fill("alice")
    fill("bob")
    assert scopes.forget_scope("alice") >= 1
    assert scopes.forget_scope("alice") == 0  # gone: nothing left to count
    assert scopes.forget_scope("carol") == 0  # an unknown user is no error
    assert scopes.forget_scope("bob") >= 1  # the other user's entries stayed


def test_a_forgotten_user_is_cached_again_by_new_use(cache: tuple[ScopeCache, Filler]) -> None:
    scopes, fill = cache
    fill("alice")
    assert scopes.forget_scope("alice") >= 1
    fill("alice")
    assert scopes.forget_scope("alice") >= 1
