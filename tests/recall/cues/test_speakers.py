"""The speaker-neutral query (recall.cues.speakers) and the engine's second search with it: the
names of the scope's speakers come out of the query (possessives too, whole words only, roles
never), the vector and keyword channels search both, and the answer said by another speaker
than the one the question names is found. Sentences written for this test."""

from __future__ import annotations

from typing import Any

import pytest

from recall import Channel, Query, QueryContext
from recall.channels import KeywordChannel, VectorChannel
from recall.cues.speakers import without_speakers
from recall.engine import RecallEngine
from recall.graph.channel import GraphChannel
from recall.recipe import Recipe
from tests.recall.world import A, World
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint

SPEAKERS = frozenset({"ines", "tobias", "tob"})  # "tob": a short form of one speaker's name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Where did Ines store the kayak?", "Where did store the kayak?"),
        ("Which of Tobias's uncles sails?", "Which of uncles sails?"),
        ("Did Tob\u2019s sister call INES back?", "Did sister call back?"),
        ("Where did Tobias and Ines meet?", "Where did and meet?"),
        ("Which uncle sails?", None),  # no speaker named
        ("Inesa and Tobiasz went rowing.", None),  # whole words only
        ("Ines?", None),  # nothing but the name
        ("", None),
    ],
)
def test_without_speakers(text: str, expected: str | None) -> None:
    assert without_speakers(text, SPEAKERS) == expected


def test_longer_names_go_first_and_roles_stay() -> None:
    names = {"ana", "ana sofia", "user", "assistant"}
    assert without_speakers("Did Ana Sofia fix the user login?", names) == "Did fix the user login?"
    assert without_speakers("Ask the assistant about the user settings", names) is None


class Recording:
    """A channel that records the query texts it searched, then searches as ``inner``."""

    def __init__(self, inner: Channel) -> None:
        self.inner = inner
        self.name = inner.name
        self.texts: list[str] = []

    def search(self, ctx: QueryContext, limit: int) -> list[tuple[MemoryPoint, float]]:
        self.texts.append(ctx.query.text)
        return self.inner.search(ctx, limit)


def engine(world: World) -> tuple[RecallEngine, dict[str, Any]]:
    graph = GraphChannel(world.semantic)
    channels: dict[str, Any] = {
        "vector": Recording(VectorChannel(world.semantic)),
        "keyword": Recording(KeywordChannel(world.semantic)),
        "graph": graph,
    }
    return RecallEngine(world.semantic, channels, {}, speakers=graph.speakers), channels


def test_a_question_naming_the_wrong_speaker_finds_what_the_other_said(world: World) -> None:
    answer = world.turn(A, "Ines", "The kayak stays in the boathouse by the pier.", seq=1)
    for seq, text in enumerate(
        [
            "Tobias here, back from the trip.",
            "Tobias again: the weather was fine.",
            "I, Tobias, will store the tent.",
            "Where did I leave my keys, Tobias wonders.",
        ],
        start=2,
    ):
        world.turn(A, "Tobias", text, seq=seq)
    recall, channels = engine(world)
    question = "Where does Tobias store the kayak?"
    try:
        on = recall.recall(Query(question, A, 5, Recipe(graph_weight=0)))
        off = recall.recall(Query(question, A, 5, Recipe(graph_weight=0, speaker_neutral=False)))
        plain = recall.recall(Query("Where is the kayak stored?", A, 5, Recipe(graph_weight=0)))
    finally:
        recall.close()
    # both texts searched by both channels, the neutral one without the name
    assert channels["keyword"].texts[:2] == [question, "Where does store the kayak?"]
    assert channels["vector"].texts[:2] == [question, "Where does store the kayak?"]
    assert {"keyword:neutral", "vector:neutral"} <= set(on.hits[0].ranks)
    assert on.weights["keyword:neutral"] == on.weights["keyword"] == 2.0
    assert "keyword:neutral" not in off.weights and "keyword:neutral" not in plain.weights
    assert "neutral" in on.timings and "neutral" not in off.timings
    # a query naming no speaker has no neutral twin: one embedding, no second search
    assert "neutral" not in plain.timings and not any(
        ":neutral" in r for h in plain.hits for r in h.ranks
    )
    # the name as asked pulls the named speaker's turns up; the neutral search holds the answer
    rank_on = [h.point.id for h in on.hits].index(answer)
    rank_off = [h.point.id for h in off.hits].index(answer)
    assert rank_on < rank_off, (rank_on, rank_off)


def test_a_query_asks_for_its_speakers_once(world: World) -> None:
    # the neutral search and the learned fusion both read the scope's speakers
    world.turn(A, "Ines", "The kayak stays in the boathouse by the pier.", seq=1)
    world.turn(A, "Tobias", "Tobias here, back from the trip.", seq=2)
    graph = GraphChannel(world.semantic)
    asked: list[Scope] = []

    def speakers(scope: Scope) -> frozenset[str]:
        asked.append(scope)
        return graph.speakers(scope)

    channels: dict[str, Any] = {
        "vector": VectorChannel(world.semantic),
        "keyword": KeywordChannel(world.semantic),
    }
    recall = RecallEngine(world.semantic, channels, {}, speakers=speakers)
    try:
        recipe = Recipe(graph_weight=0)  # the learned fusion on, as by default
        assert recipe.learned_fusion and recipe.speaker_neutral
        result = recall.recall(Query("Where does Tobias store the kayak?", A, 5, recipe))
    finally:
        recall.close()
    assert "learned" in result.timings and "neutral" in result.timings
    assert asked == [A]


def test_a_query_and_its_neutral_twin_are_embedded_in_one_model_call(world: World) -> None:
    world.turn(A, "Ines", "The kayak stays in the boathouse by the pier.", seq=1)
    world.turn(A, "Tobias", "Tobias here, back from the trip.", seq=2)
    calls: list[list[str]] = []
    encode = world.embedder.encode_queries

    def recorded(texts: list[str]) -> Any:
        calls.append(list(texts))
        return encode(texts)

    world.embedder.encode_queries = recorded  # type: ignore[method-assign]
    recall, _channels = engine(world)
    try:
        named = recall.recall(Query("Where does Tobias store the kayak?", A, 5, Recipe()))
        plain = recall.recall(Query("Where is the kayak stored?", A, 5, Recipe()))
    finally:
        recall.close()
    assert calls == [
        ["Where does Tobias store the kayak?", "Where does store the kayak?"],
        ["Where is the kayak stored?"],
    ]
    assert {"vector:neutral", "keyword:neutral"} <= set(named.weights)
    assert not any(":neutral" in w for w in plain.weights)


class Failing(Recording):
    """A channel that raises for one query text and searches the others."""

    def __init__(self, inner: Channel, text: str) -> None:
        super().__init__(inner)
        self.text = text

    def search(self, ctx: QueryContext, limit: int) -> list[tuple[MemoryPoint, float]]:
        if ctx.query.text == self.text:
            raise RuntimeError("this text fails")
        return super().search(ctx, limit)


def _asked_with(world: World, keyword: Failing, question: str) -> tuple[Any, Recording]:
    world.turn(A, "Ines", "The kayak stays in the boathouse by the pier.", seq=1)
    world.turn(A, "Tobias", "Tobias here, back from the trip.", seq=2)
    vector = Recording(VectorChannel(world.semantic))
    graph = GraphChannel(world.semantic)
    channels: dict[str, Any] = {"vector": vector, "keyword": keyword}
    recall = RecallEngine(world.semantic, channels, {}, speakers=graph.speakers)
    try:
        return recall.recall(Query(question, A, 5, Recipe(graph_weight=0))), vector
    finally:
        recall.close()


def test_a_cue_whose_search_fails_is_left_out_whole(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    question, neutral = "Where does Tobias store the kayak?", "Where does store the kayak?"
    keyword = Failing(KeywordChannel(world.semantic), neutral)
    result, vector = _asked_with(world, keyword, question)
    # the vector channel's neutral list was searched, then the keyword's failed: neither fused
    assert vector.texts == [question, neutral]
    assert not any(":neutral" in name for name in result.weights)
    assert not any(":neutral" in r for h in result.hits for r in h.ranks)
    assert result.hits and not result.degraded and "neutral" in result.timings
    assert any(r.message == "recall.neutral_failed" for r in caplog.records)


def test_a_channel_that_failed_for_the_query_has_no_cue_list(world: World) -> None:
    question = "Where does Tobias store the kayak?"
    keyword = Failing(KeywordChannel(world.semantic), question)
    result, _vector = _asked_with(world, keyword, question)
    assert result.degraded == ["keyword"]
    assert "vector:neutral" in result.weights and "keyword:neutral" not in result.weights
    assert not any("keyword" in r for h in result.hits for r in h.ranks)
