"""The learned fusion (recall.learned): the features of a hit, the reorder (RRF of the
hand-set order and the model's, scores left in place), the model file and its errors, the
recipe's validation, and the engine applying it. Sentences written for this test."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from recall import Candidate, Query
from recall.channels import KeywordChannel, VectorChannel
from recall.cues.speakers import mentioned
from recall.engine import RecallEngine
from recall.graph.channel import GraphChannel
from recall.learned import (
    BUILTIN,
    FEATURES,
    HitView,
    LearnedFusion,
    LearnedFusionError,
    features,
    load,
    query_words,
)
from recall.recipe import RecallSettings, Recipe
from recall.words import content_stems, content_words, tokens
from tests.recall.world import A, World
from tiers.semantic.vectors import MemoryPoint, Source


def value(values: list[float], name: str) -> float:
    return values[FEATURES.index(name)]


def hit(
    text: str,
    *,
    kind: str = "episode_turn",
    ranks: dict[str, int] | None = None,
    scores: dict[str, float] | None = None,
    speakers: frozenset[str] = frozenset(),
    found_via: bool = False,
) -> HitView:
    return HitView(kind, text, 0.05, 0.04, ranks or {}, scores or {}, found_via, speakers)


def test_features_of_a_hit() -> None:
    words = query_words("Which harbour does Odile sail from?")
    view = hit(
        "Odile: I sail out of the northern harbour every June.",
        ranks={"vector": 1, "keyword:neutral": 3},
        scores={"vector": 0.71, "keyword:neutral": 9.5},
        speakers=frozenset({"odile"}),
    )
    x = features(words, {"odile"}, view, position=2)
    assert len(x) == len(FEATURES)
    assert value(x, "inverse_position") == pytest.approx(1 / 3)
    assert value(x, "log_position") == pytest.approx(math.log(3))
    assert value(x, "vector.reciprocal_rank") == pytest.approx(1 / 21)
    assert value(x, "keyword:neutral.reciprocal_rank") == pytest.approx(1 / 23)
    assert value(x, "keyword.reciprocal_rank") == 0.0 and value(x, "keyword.found") == 0.0
    assert value(x, "vector.found") == 1.0 and value(x, "vector.cosine") == pytest.approx(0.71)
    assert value(x, "kind.episode_turn") == 1.0 and value(x, "kind.fact") == 0.0
    # "harbour", "odile", "sail" of the query's content words are all in the text
    assert value(x, "query_overlap") == pytest.approx(1.0)
    assert value(x, "asks") == 0.0
    assert value(x, "names_a_speaker") == 1.0
    assert value(x, "names_its_speaker") == 1.0 and value(x, "names_another_speaker") == 0.0

    other = hit("Did you see the regatta?", speakers=frozenset({"piet"}), found_via=True)
    y = features(words, {"odile"}, other, position=0)
    assert value(y, "asks") == 1.0 and value(y, "found_via") == 1.0
    assert value(y, "names_its_speaker") == 0.0 and value(y, "names_another_speaker") == 1.0
    assert value(y, "query_overlap") == 0.0
    z = features(words, set(), other, position=0)  # a query naming nobody
    assert value(z, "names_a_speaker") == value(z, "names_another_speaker") == 0.0


@given(st.text(alphabet=st.sampled_from("ab's-\u2019 .?\nIngedS"), max_size=60) | st.text())
def test_content_words_are_the_content_stems_of_the_tokens(text: str) -> None:
    assert content_words(text) == content_stems(tokens(text))


@given(
    st.text(alphabet=st.sampled_from("ab's-\u2019 .?\nIngedS"), max_size=60), st.text(max_size=20)
)
def test_content_words_among_a_query_are_the_intersection(text: str, query: str) -> None:
    among = content_words(query)
    assert content_words(text, among=among) == content_words(text) & among


def test_content_words_of_a_sentence() -> None:
    said = "Odile's ferries weren't sailing -- the harbour-master's  orders, she sighed."
    assert content_words(said) == content_stems(tokens(said))
    assert {"odile", "ferrie", "sail", "harbour-master", "order", "sigh"} <= content_words(said)
    among = content_words("Which ferries sail from Odile's harbour?")
    assert content_words(said, among=among) == {"ferrie", "sail", "odile"}


def test_mentioned_speakers() -> None:
    speakers = {"odile", "piet", "user", "assistant"}
    assert mentioned("Did Odile's brother call Piet?", speakers) == {"odile", "piet"}
    assert mentioned("Ask the assistant whether the user paid", speakers) == frozenset()
    assert mentioned("Odiles and Pieter came too", speakers) == frozenset()


def only(name: str, weight: float) -> LearnedFusion:
    """A model that scores by one feature (unit standardization)."""
    n = len(FEATURES)
    coef = tuple(weight if f == name else 0.0 for f in FEATURES)
    return LearnedFusion(coef, 0.0, (0.0,) * n, (1.0,) * n, mix_k=0)


def candidate(i: int, text: str, score: float) -> Candidate:
    source = Source("s1", i, f"m{i}", speaker="Odile")
    point = MemoryPoint(f"p{i}", "episode_turn", text, A, "e1", "s1", [source], i, "test")
    return Candidate(point, score, score)


def test_reorder_fuses_the_two_orders_and_keeps_the_scores_in_place() -> None:
    hits = [
        candidate(0, "Is the ferry late?", 0.9),
        candidate(1, "Where is the map?", 0.8),
        candidate(2, "The ferry leaves at nine.", 0.7),
        candidate(3, "The map is in the glovebox.", 0.6),
    ]
    model = only("asks", -1.0)  # the model puts answers above questions, else keeps order
    out = model.reorder(hits, "ferry map", set())
    # mix_k 0: RRF scores 1/fused_rank + 1/model_rank -> 0: 1+1/3, 1: 1/2+1/4, 2: 1/3+1, 3: 1/4+1/2
    assert [h.point.id for h in out] == ["p0", "p2", "p1", "p3"]
    assert [h.score for h in out] == [0.9, 0.8, 0.7, 0.6]
    assert hits[1].point.id == "p1"  # the input is left alone
    assert model.reorder(hits[:1], "ferry", set()) == hits[:1]
    assert only("asks", 0.0).reorder(hits, "ferry", set()) == hits  # ties: the fused order


def test_model_file_round_trip_and_errors(tmp_path: Path) -> None:
    model = only("query_overlap", 2.5)
    doc = model.to_json()
    assert LearnedFusion.from_json(doc) == model
    bad = [
        ({**doc, "format": "other/1"}, "format"),
        ({**doc, "features": doc["features"][:-1]}, "other features"),
        ({**doc, "coef": doc["coef"][:-1]}, "values each"),
        ({**doc, "scale": [0.0] * len(FEATURES)}, "scale must be > 0"),
        ({k: v for k, v in doc.items() if k != "intercept"}, "intercept"),
    ]
    for broken, says in bad:
        with pytest.raises(LearnedFusionError, match=says):
            LearnedFusion.from_json(broken)
    with pytest.raises(LearnedFusionError, match="cannot read"):
        load(str(tmp_path / "missing.json"))
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(LearnedFusionError, match="not JSON"):
        load(str(tmp_path / "junk.json"))


def test_the_builtin_model_loads_and_says_how_it_was_measured() -> None:
    assert Recipe().learned_fusion == "builtin"  # on by default
    model = load("builtin")
    assert len(model.coef) == len(FEATURES)
    assert {"locomo", "realmem"} <= set(model.trained["loco"])
    assert json.loads(BUILTIN.read_text())["features"] == list(FEATURES)


def test_a_recipe_naming_a_model_that_does_not_load_is_a_settings_error(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    with pytest.raises(ValidationError, match="cannot read"):
        RecallSettings(learned_fusion=str(path))
    path.write_text(json.dumps(only("asks", 1.0).to_json()))
    assert RecallSettings(learned_fusion=str(path)).learned_fusion == str(path)
    with pytest.raises(ValidationError, match="other features"):
        Recipe(learned_fusion=_other_features(tmp_path))


def _other_features(tmp_path: Path) -> str:
    path = tmp_path / "old.json"
    doc = only("asks", 1.0).to_json()
    path.write_text(json.dumps({**doc, "features": ["rank", *doc["features"][1:]]}))
    return str(path)


def test_the_engine_reorders_by_the_recipe_model(world: World, tmp_path: Path) -> None:
    for seq, (speaker, text) in enumerate(
        [
            ("Odile", "Which bakery sells the rye loaf?"),
            ("Piet", "The corner bakery sells the rye loaf on Fridays."),
            ("Odile", "Is the rye loaf from the bakery sourdough?"),
            ("Piet", "Yes, a sourdough rye loaf."),
        ],
        start=1,
    ):
        world.turn(A, speaker, text, seq=seq)
    path = tmp_path / "model.json"
    model = only("asks", -3.0)
    path.write_text(json.dumps(model.to_json()))
    graph = GraphChannel(world.semantic)
    channels = {
        "vector": VectorChannel(world.semantic),
        "keyword": KeywordChannel(world.semantic),
        "graph": graph,
    }
    engine = RecallEngine(world.semantic, channels, {}, speakers=graph.speakers)
    question = "rye loaf bakery"
    try:
        off = engine.recall(Query(question, A, 4, Recipe(answers_first=False, learned_fusion="")))
        on = engine.recall(
            Query(question, A, 4, Recipe(answers_first=False, learned_fusion=str(path)))
        )
    finally:
        engine.close()
    assert "learned" in on.timings and "learned" not in off.timings
    expected = model.reorder(off.hits, question, set())
    assert [h.point.id for h in on.hits] == [h.point.id for h in expected]
    assert [h.point.id for h in on.hits] != [h.point.id for h in off.hits]
    assert [h.score for h in on.hits] == [h.score for h in off.hits]
