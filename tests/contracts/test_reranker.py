"""The :class:`recall.Reranker` contract, run against every reranker: the local feature blend
(with the real model) and the LLM reranker on a loopback OpenAI-compatible server, whose
"model" ranks the candidates it is sent by the query words they contain and leaves out those
with none."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from recall import Candidate, Query, QueryContext, Reranker, RerankFailed
from recall.recipe import Recipe
from recall.rerank import DATA_CLOSE, DATA_OPEN, LLMReranker, LocalReranker
from tests.contracts.models_kit import DOWN_CAUSES, down, loopback_client, minilm
from tests.support.candidates import T0, cand
from tests.support.llm_server import FakeOpenAI, Reply
from tiers.core.records import Scope

IMPLEMENTATIONS = ["local", "llm"]
DAY_US = 86_400 * 1_000_000


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]{3,}", text.lower()))


def judge(request: Any) -> Reply:
    """The fake model: candidates by how many query words they hold (ties by number), the
    ones without any left out (unless none has any)."""
    user = request["messages"][1]["content"]
    data = json.loads(user[user.index(DATA_OPEN) + len(DATA_OPEN) : user.index(DATA_CLOSE)])
    query = words(data["query"])
    hits = {c["n"]: len(query & words(c["text"])) for c in data["candidates"]}
    order = sorted((n for n, hit in hits.items() if hit), key=lambda n: (-hits[n], n))
    return Reply.json({"order": order or [1]})


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=judge) as fake:
        yield fake


@pytest.fixture(scope="module", params=IMPLEMENTATIONS)
def reranker(request: pytest.FixtureRequest, server: FakeOpenAI) -> Reranker:
    if request.param == "local":
        return LocalReranker(minilm().encode_documents)
    return LLMReranker(loopback_client(server))


def ctx(text: str) -> QueryContext:
    query = Query(text=text, scope=Scope("u1"), k=5, recipe=Recipe())
    return QueryContext(query=query, vector=minilm().encode_queries([text])[0])


def ids(candidates: list[Candidate]) -> list[str]:
    return [c.point.id for c in candidates]


def six() -> list[Candidate]:
    return [
        cand("office", "The office moved to Lyon in March.", {"vector": 1}),
        cand("tea", "Alice drinks green tea every morning.", {"vector": 2, "keyword": 3}),
        cand("coffee", "Bob only drinks coffee, never tea.", {"keyword": 1}),
        cand("dog", "Alice adopted a beagle called Biscuit.", {"vector": 3}),
        cand("job", "Bob started a new job as a nurse.", {"keyword": 2}),
        cand("trip", "Alice went hiking in the Alps.", {"vector": 4}),
    ]


def test_it_keeps_every_candidate_once_and_puts_the_answer_first(reranker: Reranker) -> None:
    candidates = six()
    before = ids(candidates)
    out = reranker.rerank(ctx("What does Alice drink every morning?"), candidates)
    assert sorted(map(id, out)) == sorted(map(id, candidates))  # the same objects, each once
    assert ids(out)[0] == "tea"
    assert ids(candidates) == before  # the caller's list keeps its order
    for c in out:
        assert c.rerank_note.startswith(f"{reranker.name}: ")
    scores = [c.rerank_score for c in out]
    assert scores == sorted(scores, reverse=True)


def test_it_is_deterministic_and_ties_keep_input_order(
    reranker: Reranker, server: FakeOpenAI
) -> None:
    def make() -> list[Candidate]:
        return [
            cand("a", "same text", {"vector": 3}),
            cand("b", "same text", {"vector": 3}),
            cand("c", "Bob moved to Lisbon in 2023.", {"keyword": 1}, created_at_us=T0 + DAY_US),
            cand("d", "same text", {"vector": 3}),
        ]

    q = ctx("When did Bob move to Lisbon?")
    first = ids(reranker.rerank(q, make()))
    assert first == ids(reranker.rerank(q, make()))
    assert first == ["c", "a", "b", "d"]
    sent = len(server.requests)
    assert reranker.rerank(q, []) == []
    assert len(server.requests) == sent  # nothing to order: no request


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", IMPLEMENTATIONS)
def test_a_model_that_cannot_answer_raises_rerank_failed(kind: str, server: FakeOpenAI) -> None:
    """The engine then keeps the fused order and says so (recall.engine)."""
    candidates = six()
    with down(server) as (embed, client):
        reranker = LocalReranker(embed) if kind == "local" else LLMReranker(client)
        with pytest.raises(RerankFailed) as err:
            reranker.rerank(ctx("What does Alice drink?"), candidates)
    assert ids(candidates) == ids(six())
    assert isinstance(err.value.__cause__, DOWN_CAUSES[kind])
