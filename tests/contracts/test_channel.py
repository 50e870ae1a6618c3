"""The :class:`recall.Channel` contract, run against every channel (vector, keyword, graph) on
one corpus: a few points of two users (one of them with two agents) and their facts' graph
edges, in a real qdrant-edge store and a NetworkXGraph on RocksDB, embedded by the real model.
Queries come embedded, as :class:`recall.engine.RecallEngine` hands them to the channels."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from recall import Channel, QueryContext, Textual
from recall.channels import KeywordChannel, VectorChannel
from recall.graph.channel import GraphChannel
from tests.contracts.corpus import A2, QUESTION, TWIN, A, B, Tier3, corpus, ctx, filled
from tiers.core.records import Scope
from tiers.semantic.embedding import EmbeddingUnavailable
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint, VectorStoreUnavailable

CHANNELS: dict[str, Callable[[SemanticStore], Channel]] = {
    "vector": VectorChannel,
    "keyword": KeywordChannel,
    "graph": GraphChannel,
}


@pytest.fixture(scope="module")
def tier3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SemanticStore]:
    t = filled(tmp_path_factory.mktemp("corpus"))
    yield t.semantic
    t.close()


@pytest.fixture(scope="module", params=list(CHANNELS))
def channel(request: pytest.FixtureRequest, tier3: SemanticStore) -> Channel:
    return CHANNELS[request.param](tier3)


def ids(hits: list[tuple[MemoryPoint, float]]) -> list[str]:
    return [p.id for p, _ in hits]


def test_hits_are_points_with_scores_best_first(channel: Channel) -> None:
    hits = channel.search(ctx(), 20)
    assert hits, f"{channel.name} found nothing"
    for point, score in hits:
        assert isinstance(point, MemoryPoint) and isinstance(score, float)
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(set(ids(hits))) == len(hits)


def test_never_a_point_of_another_scope(channel: Channel) -> None:
    for scope, question in [
        (A, QUESTION),
        (A, "Did Biscuit chew Caroline's shoes?"),
        (B, QUESTION),
        (B, "Where does Caroline work as a nurse?"),
    ]:
        hits = channel.search(ctx(question, scope), 50)
        assert hits and all(p.scope == scope for p, _ in hits)
    # no agent: every agent of the user, and never another user
    hits = channel.search(ctx("Did Biscuit chew Caroline's shoes?", Scope("alice")), 50)
    assert {p.scope for p, _ in hits} == {A, A2}


def test_the_limit_caps_the_hits_and_keeps_the_order(channel: Channel) -> None:
    everything = channel.search(ctx(), 50)
    assert len(everything) >= 3
    for limit in (1, 2, 3, 4):
        hits = channel.search(ctx(), limit)
        top = everything[:limit]
        assert [s for _, s in hits] == pytest.approx([s for _, s in top])
        # the same points, but for a tie at the cut: which of equal points a limit cuts is
        # the engine's storage order, not the id order the hits are sorted in
        cut = hits[-1][1]
        assert ids([h for h in hits if h[1] > cut]) == ids([h for h in top if h[1] > cut])
    assert channel.search(ctx(), 0) == []


def test_the_query_filter_applies(channel: Channel) -> None:
    facts = channel.search(ctx(kinds=("fact",)), 50)
    assert facts and all(p.kind == "fact" for p, _ in facts)
    late = channel.search(ctx(start_us=300), 50)
    assert late and all(p.created_at_us >= 300 for p, _ in late)
    early = channel.search(ctx(end_us=300), 50)
    assert early and all(p.created_at_us < 300 for p, _ in early)


def test_a_scope_with_nothing_stored_finds_nothing(channel: Channel) -> None:
    assert channel.search(ctx(scope=Scope("nobody")), 10) == []
    assert channel.search(ctx(scope=Scope("alice", "no-such-agent")), 10) == []


@pytest.mark.parametrize("name", ["vector", "keyword"])
def test_equal_scores_are_ordered_by_id(name: str, tier3: SemanticStore) -> None:
    """Documented for these two (recall.channels): the same memory ranks the same in every
    daemon that holds it, whatever order it was written in."""
    hits = CHANNELS[name](tier3).search(ctx(TWIN), 50)
    twins = [(i, p.id, s) for i, (p, s) in enumerate(hits) if p.text == TWIN]
    assert len(twins) == 2
    (i, first, s1), (j, second, s2) = twins
    assert s1 == s2 and j == i + 1 and first < second


def test_a_textual_channel_answers_by_the_text_as_by_the_context(channel: Channel) -> None:
    """:class:`recall.Textual`: the engine runs ``search_text`` before the query is embedded,
    and its hits must be those ``search`` gives for any embedding of the query."""
    if not isinstance(channel, Textual):
        assert channel.name != "keyword"  # the one that is, so the case below is run
        return
    for c in (ctx(), ctx("Did Biscuit chew Caroline's shoes?", Scope("alice")), ctx(end_us=300)):
        assert channel.search_text(c.query, 50) == channel.search(c, 50)
        other = QueryContext(c.query, np.zeros_like(c.vector))  # the embedding plays no part
        assert channel.search(other, 50) == channel.search(c, 50)
    assert channel.search_text(ctx().query, 0) == []
    with pytest.raises(ValueError, match="user_id"):
        channel.search_text(ctx(scope=Scope("")).query, 10)


# -- errors ----------------------------------------------------------------------------------


def test_a_query_without_a_user_is_refused(channel: Channel) -> None:
    with pytest.raises(ValueError, match="user_id"):
        channel.search(ctx(scope=Scope("")), 10)


@pytest.mark.parametrize("name", list(CHANNELS))
def test_tier3_not_ready_raises_embedding_unavailable(name: str, tmp_path: Path) -> None:
    t = Tier3(tmp_path, start=False)  # the model and the vector store are still loading
    try:
        with pytest.raises(EmbeddingUnavailable, match=r"still starting \(loading gt-all-mini"):
            CHANNELS[name](t.semantic).search(ctx(), 10)
        t.semantic.embeddings.start()  # the model loaded, the store not opened yet
        t.semantic.embeddings.wait(120)
        with pytest.raises(EmbeddingUnavailable, match=r"still starting \(opening the vector"):
            CHANNELS[name](t.semantic).search(ctx(), 10)
    finally:
        t.close()


@pytest.mark.parametrize("name", list(CHANNELS))
def test_a_failing_vector_store_raises_vector_store_unavailable(name: str, tmp_path: Path) -> None:
    t = Tier3(tmp_path)
    try:
        points, _edges = corpus()
        with t.semantic.write_lock:
            t.semantic.write(points[:2])
        _embedder, vectors = t.semantic.wait_ready(0)
        vectors.close()  # a read now fails: the engine reports the channel as degraded
        with pytest.raises(VectorStoreUnavailable):
            CHANNELS[name](t.semantic).search(ctx(), 10)
    finally:
        t.close()
