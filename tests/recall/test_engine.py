"""The engine's order of work: for a scope the engine's ``ahead`` names (a large graph's), the
keyword channel (:class:`recall.Textual`) searches beside the query's embedding, on a thread
of its own, then searches the query without its speakers' names there too, and answers what
it answered after it; for any other, after it. Real model, RocksDB and embedded engine (the
contract corpus)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from recall import Channel, Query, QueryContext
from recall.cache import SemanticCache
from recall.channels import KeywordChannel
from recall.engine import RecallEngine
from recall.recipe import Recipe
from recall.result import RecallResult
from tests.contracts.corpus import QUESTION, A, Tier3, channels, filled
from tiers.semantic.vectors import MemoryPoint


@pytest.fixture(scope="module")
def tier3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tier3]:
    t = filled(tmp_path_factory.mktemp("corpus"))
    yield t
    t.close()


class Inline:
    """A channel that searches as ``inner`` does, known to the engine only by ``search``:
    run after the query's embedding, as every channel was."""

    def __init__(self, inner: Channel) -> None:
        self.inner = inner
        self.name = inner.name

    def search(self, ctx: QueryContext, limit: int) -> list[tuple[MemoryPoint, float]]:
        return self.inner.search(ctx, limit)


SPEAKERS = frozenset({"caroline", "melanie"})  # the corpus's conversation's, as normalized
NAMING = "Did Biscuit chew Caroline's shoes?"  # names one: its neutral form is searched too


def engine(
    tier3: Tier3, keyword: Channel, cache: SemanticCache | None = None, ahead: bool = True
) -> RecallEngine:
    return RecallEngine(
        tier3.semantic,
        channels(tier3.semantic, keyword=keyword),
        {},
        cache=cache,
        speakers=lambda _scope: SPEAKERS,
        ahead=lambda _scope: ahead,
    )


def asked(
    tier3: Tier3, monkeypatch: pytest.MonkeyPatch, text: str, ahead: bool = True
) -> tuple[list[bool], list[str], RecallResult]:
    """``text`` recalled by an engine that starts the scope's keyword searches ahead or not:
    :func:`watched`'s lists (the model waits up to a minute for a search ahead, a second
    otherwise), and the result."""
    embedded, searched_on = watched(tier3, monkeypatch, wait=60 if ahead else 1)
    recall = engine(tier3, KeywordChannel(tier3.semantic), ahead=ahead)
    try:
        return embedded, searched_on, recall.recall(Query(text, A, 5, Recipe()))
    finally:
        recall.close()


def test_the_keyword_search_runs_while_the_query_is_embedded(
    tier3: Tier3, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedded, searched_on, result = asked(tier3, monkeypatch, QUESTION)
    assert embedded == [True]
    assert searched_on and searched_on[0].startswith("recall-text")
    assert result.hits and not result.degraded
    assert {"embed", "keyword", "vector", "graph"} <= set(result.timings)


def test_the_neutral_keyword_search_follows_the_query_s_beside_the_embedding(
    tier3: Tier3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the query without its speakers' names was searched by its keywords after the
    channels, on the query's thread, while a large graph's walk waited for it."""
    embedded, searched_on, result = asked(tier3, monkeypatch, NAMING)
    assert embedded == [True]
    assert len(searched_on) == 2 and all(t.startswith("recall-text") for t in searched_on)
    assert {"keyword", "keyword:neutral", "neutral"} <= set(result.timings)
    assert {"keyword:neutral", "vector:neutral"} <= set(result.weights)
    assert result.hits and not result.degraded


def test_a_scope_not_named_ahead_searches_its_keywords_after_the_embedding(
    tier3: Tier3, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedded, searched_on, result = asked(tier3, monkeypatch, QUESTION, ahead=False)
    assert embedded == [False]  # nothing searched while the model ran
    assert searched_on and not searched_on[0].startswith("recall-text")  # the query's thread
    assert result.hits and "keyword" in result.timings and not result.degraded


def watched(
    tier3: Tier3, monkeypatch: pytest.MonkeyPatch, wait: float
) -> tuple[list[bool], list[str]]:
    """Per model call, whether the keyword search had begun within ``wait`` seconds (the call
    waits that long for it); the threads the sparse searches ran on."""
    embedder, vectors = tier3.semantic.wait_ready(0)
    began = threading.Event()
    searched_on: list[str] = []
    embedded: list[bool] = []  # per model call: whether the keyword search had begun
    real_sparse, real_encode = vectors.search_sparse, embedder.encode_queries

    def search_sparse(*args: Any, **kwargs: Any) -> Any:
        searched_on.append(threading.current_thread().name)
        began.set()
        return real_sparse(*args, **kwargs)

    def encode_queries(texts: list[str]) -> Any:
        embedded.append(began.wait(wait))  # never set before the model's answer: False
        return real_encode(texts)

    monkeypatch.setattr(vectors, "search_sparse", search_sparse)
    monkeypatch.setattr(embedder, "encode_queries", encode_queries)
    return embedded, searched_on


def test_the_answer_is_the_one_given_with_the_keyword_search_after_the_embedding(
    tier3: Tier3,
) -> None:
    questions = [QUESTION, NAMING, "beagle walks park", "What does Melanie paint?"]
    answers = {}
    for arm, keyword in [
        ("ahead", KeywordChannel(tier3.semantic)),
        ("inline", Inline(KeywordChannel(tier3.semantic))),
    ]:
        recall = engine(tier3, keyword)
        try:
            answers[arm] = [
                [(h.point.id, h.score) for h in recall.recall(Query(q, A, 8, Recipe())).hits]
                for q in questions
            ]
        finally:
            recall.close()
    assert all(answers["ahead"]) and answers["ahead"] == answers["inline"]


def test_a_cached_answer_carries_no_timing_of_a_search_it_did_not_use(tier3: Tier3) -> None:
    recall = engine(
        tier3,
        KeywordChannel(tier3.semantic),
        cache=SemanticCache(ttl_seconds=600, size=10, similarity=0.99),
    )
    try:
        first = recall.recall(Query(QUESTION, A, 5, Recipe()))
        again = recall.recall(Query(QUESTION, A, 5, Recipe()))
    finally:
        recall.close()
    assert not first.cached and "keyword" in first.timings
    assert again.cached and [h.point.id for h in again.hits] == [h.point.id for h in first.hits]
    assert "keyword" not in again.timings and "total" in again.timings


def test_the_read_of_the_scope_s_speakers_is_a_stage_of_its_own(tier3: Tier3) -> None:
    """A first visit reads the scope's graph for its speakers' names before the query is
    embedded (loading or building it, opening the user's vectors): 20-190 ms that no stage
    counted, at one million points (2026-12-07)."""

    def slow_speakers(_scope: object) -> frozenset[str]:
        time.sleep(0.05)
        return SPEAKERS

    timed = RecallEngine(
        tier3.semantic,
        channels(tier3.semantic, keyword=KeywordChannel(tier3.semantic)),
        {},
        speakers=slow_speakers,
    )
    plain = RecallEngine(
        tier3.semantic, channels(tier3.semantic, keyword=KeywordChannel(tier3.semantic)), {}
    )
    try:
        result = timed.recall(Query(NAMING, A, 5, Recipe()))
        without = plain.recall(Query(NAMING, A, 5, Recipe()))
    finally:
        timed.close()
        plain.close()
    assert result.timings["speakers"] >= 50
    stages = result.timings["speakers"] + result.timings["embed"]
    assert result.timings["total"] >= stages - 0.01  # in turn on one thread; each rounded
    assert "speakers" not in without.timings and without.hits
