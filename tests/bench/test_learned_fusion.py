"""The learned fusion's training script (:mod:`tests.bench.learned_fusion`) on data written
for this test: the wire adapter gives the features the daemon computes, the script reorders
as the daemon does, and the fit learns what predicts relevance. No daemon, no shared data."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from daemon.codec.convert import hit_pb
from recall import Candidate
from recall.learned import FEATURES, HitView, LearnedFusion, features, query_words
from tests.bench import learned_fusion as lf
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, Source

SCOPE = Scope("u1", "")


def candidate(i: int, text: str, speaker: str, **ranks: int) -> Candidate:
    source = Source("s1", i, f"m{i}", {"dia_id": f"D1:{i}"}, speaker=speaker, text=text)
    point = MemoryPoint(f"p{i}", "episode_turn", text, SCOPE, "e1", "s1", [source], i, "test")
    channels = {name.replace("_", ":"): rank for name, rank in ranks.items()}
    scores = {name: 1.0 / rank for name, rank in channels.items()}
    return Candidate(point, 0.1 / (i + 1), 0.2 / (i + 1), channels, scores, found_via="")


def test_a_hit_on_the_wire_gives_the_features_of_the_candidate() -> None:
    c = candidate(
        3, "Marguerite: the kiln cools overnight?", "Marguerite", vector=2, keyword_neutral=5
    )
    c.found_via = "chunk-1"
    wire = hit_pb(c, True, {"vector": 1.0, "keyword:neutral": 2.0})
    assert lf.view(wire) == HitView.of(c)
    words = query_words("When does the kiln cool?")
    assert features(words, {"marguerite"}, lf.view(wire), 4) == features(
        words, {"marguerite"}, HitView.of(c), 4
    )


def test_the_script_reorders_as_the_daemon_does() -> None:
    rng = random.Random(7)
    texts = ["Is the kiln hot?", "The kiln is hot.", "Glaze dries fast?", "Glaze dries in a day."]
    hits = [candidate(i, t, "Marguerite", vector=i + 1) for i, t in enumerate(texts * 3)]
    n = len(FEATURES)
    model = LearnedFusion(tuple(rng.uniform(-1, 1) for _ in range(n)), 0.1, (0.0,) * n, (1.0,) * n)
    query = "kiln glaze"
    daemon = model.reorder(hits, query, set())
    x = np.array(
        [features(query_words(query), set(), HitView.of(h), i) for i, h in enumerate(hits)]
    )
    q = lf.Query("locomo", "locomo/c1", frozenset(), "", 1, x, tuple(() for _ in hits))
    script = lf.reordered(model, q)
    assert [hits[i].point.id for i in script] == [h.point.id for h in daemon]


def synthetic(path: Path, dataset: str, groups: int, seed: int) -> None:
    """Queries whose hand-set order is noise and whose relevant hit has ``asks`` 0 and high
    ``query_overlap``: a model can learn it; the hand-set order cannot."""
    rng = random.Random(seed)
    log = lf.FeatureLog(dataset)
    for g in range(groups):
        for qn in range(30):
            gold = f"g{g}q{qn}"
            rows = []
            where = rng.randrange(10)  # the one relevant hit's place in the hand-set order
            for i in range(10):
                relevant = i == where
                x = [rng.random() for _ in FEATURES]
                x[FEATURES.index("asks")] = 0.0 if relevant else 1.0
                x[FEATURES.index("query_overlap")] = 0.9 if relevant else rng.random() * 0.5
                rows.append({"x": x, "keys": [gold if relevant else f"other{i}"]})
            log.queries.append(
                {"group": f"{dataset}/c{g}", "qid": gold, "gold": [gold], "hits": rows}
                | ({"category": 1} if dataset == "locomo" else {"own": "own-session"})
            )
    log.write(path)


def test_the_fit_learns_what_predicts_relevance_leave_one_group_out(tmp_path: Path) -> None:
    synthetic(tmp_path / "l.json", "locomo", 3, 1)
    synthetic(tmp_path / "r.json", "realmem", 3, 2)
    out = tmp_path / "model.json"
    assert lf.main(["--locomo", str(tmp_path / "l.json"), "--realmem", str(tmp_path / "r.json"),
                    "--out", str(out), "--json", str(tmp_path / "res.json")]) == 0  # fmt: skip
    res = json.loads((tmp_path / "res.json").read_text())
    for name in ("locomo", "realmem", "locomo/c0", "realmem/c2", "locomo:multi-hop"):
        row = res["loco"]["rows"][name]
        assert row["after"]["r@5"] > row["before"]["r@5"] + 25, (name, row)
        assert row["after"]["r@1"] > row["before"]["r@1"], (name, row)
    model = LearnedFusion.from_json(json.loads(out.read_text()))
    assert model.coef[FEATURES.index("asks")] < 0 < model.coef[FEATURES.index("query_overlap")]
    assert set(model.trained["loco"]) == {"locomo", "realmem"}
