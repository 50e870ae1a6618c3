from __future__ import annotations

import pytest

from recall.fusion import mmr, rrf


def test_rrf_sums_weighted_reciprocal_ranks():
    fused = rrf({"vector": ["a", "b", "c"], "keyword": ["c", "a"]}, {"vector": 1.0, "keyword": 2.0})
    scores = {f.id: f.score for f in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 2 / 62)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 2 / 61)
    assert [f.id for f in fused] == ["c", "a", "b"]
    assert fused[0].ranks == {"vector": 3, "keyword": 1}


def test_rrf_k_weights_and_missing_channels():
    assert [f.id for f in rrf({"x": ["a", "b"]}, k=0)] == ["a", "b"]
    assert rrf({}) == []
    assert rrf({"x": []}) == []
    # a weight of 0 silences a channel but keeps its ranks for the explanation
    fused = rrf({"x": ["a"], "y": ["b"]}, {"y": 0.0})
    assert [f.id for f in fused] == ["a", "b"] and fused[1].score == 0.0
    with pytest.raises(ValueError):
        rrf({"x": ["a"]}, k=-1)


def test_rrf_repeated_ids_keep_their_best_rank():
    fused = rrf({"x": ["a", "a", "b"]})
    assert {f.id: f.ranks["x"] for f in fused} == {"a": 1, "b": 2}


def test_rrf_ties_are_deterministic():
    # a and b both score 1/61 + 1/62; then best single rank, then channel count, then id
    one = rrf({"x": ["a", "b"], "y": ["b", "a"]})
    two = rrf({"y": ["b", "a"], "x": ["a", "b"]})
    assert [f.id for f in one] == [f.id for f in two] == ["a", "b"]
    tie = rrf({"x": ["z"], "y": ["m"]})
    assert [f.id for f in tie] == ["m", "z"]


def test_mmr_prefers_diverse_items():
    relevance = {"a": 1.0, "a2": 0.95, "b": 0.8}
    groups = {"a": 0, "a2": 0, "b": 1}

    def same_group(x: str, y: str) -> float:
        return 1.0 if groups[x] == groups[y] else 0.0

    assert mmr(["a", "a2", "b"], relevance, same_group, k=2, lambda_=0.5) == ["a", "b"]
    assert mmr(["a", "a2", "b"], relevance, same_group, k=2, lambda_=1.0) == ["a", "a2"]
    assert mmr(["a", "a2", "b"], relevance, same_group, k=10) == ["a", "b", "a2"]
    assert mmr([], relevance, same_group, k=3) == []
    with pytest.raises(ValueError):
        mmr(["a"], relevance, same_group, k=1, lambda_=1.5)
