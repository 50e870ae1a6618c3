"""The scale benchmark's parallel fill (:mod:`tests.bench.scale.fill`) on a few thousand
made-up points: the workers' shards make one store that holds every user's points where the
daemon looks for them, with the keyword counts of one store that was written alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.bench.recall_latency import MODEL
from tests.bench.scale.fill import fill, split
from tests.bench.tier3.points import PointMaker
from tiers.semantic.vectors import PointFilter, shard_of
from tiers.semantic.vectors.bm25 import KeywordEncoder
from tiers.semantic.vectors.edge import layout
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.semantic.vectors.term_frequencies import DocumentFrequencies
from tiers.settings import VectorsSettings

DIM = 8
USERS = [f"user-{i}" for i in range(12)]
COUNTS = [300, 40, 75, 10, 120, 60, 5, 90, 33, 48, 250, 17]


def test_the_workers_get_whole_shards_and_about_the_same_points():
    parts = split(USERS, COUNTS, 2)
    assert sorted(i for part in parts for i in part) == list(range(len(USERS)))
    shards = VectorsSettings().shards
    owned = [{shard_of(USERS[i], shards) for i in part} for part in parts]
    assert not owned[0] & owned[1]  # a shard is one worker's
    loads = [sum(COUNTS[i] for i in part) for part in parts]
    assert abs(loads[0] - loads[1]) <= max(COUNTS)


def test_a_parallel_fill_is_one_store_with_every_users_points_and_their_counts(tmp_path: Path):
    rng = np.random.default_rng(3)
    texts = [f"Caroline went to {w} with Melanie" for w in ("Paris", "the lake", "a concert")]
    texts += [f"Nate has a {w} now" for w in ("dog", "turtle", "new job", "car")]
    pool = rng.normal(size=(len(texts), DIM)).astype(np.float32)
    data = tmp_path / "data"
    report = fill(data, USERS, COUNTS, texts, pool, workers=2, optimize=False)
    assert [w["worker"] for w in report["per_worker"]] == [0, 1]
    assert not [p for p in data.iterdir() if p.name.startswith("fill-")]  # merged, removed

    root = data / "vectors"
    kept = DocumentFrequencies()
    assert kept.take(layout.term_counts(root))
    store = ShardedVectorStore(root, VectorsSettings().shards, open_behind=False)
    store.ensure(MODEL, DIM)
    try:
        for user, count in zip(USERS, COUNTS, strict=True):
            assert store.count(PointFilter(user_id=user)) == count, user
        assert store.count(PointFilter()) == sum(COUNTS)
    finally:
        store.close()
    # The counts a store rebuilds from every shard's points (as each opens), without the file.
    layout.term_counts(root).unlink()
    recounted = ShardedVectorStore(root, VectorsSettings().shards, open_behind=False)
    recounted.ensure(MODEL, DIM)
    recounted.count(PointFilter())  # every shard opened
    recounted.close()
    rebuilt = DocumentFrequencies()
    assert rebuilt.take(layout.term_counts(root))
    assert kept.points == rebuilt.points == sum(COUNTS)
    terms = {t for text in texts for t in KeywordEncoder().embed_document(text).indices}
    assert terms and all(kept.count(t) == rebuilt.count(t) for t in terms)


def test_a_made_point_names_the_speaker_of_its_turn() -> None:
    """As the daemon's points do, so that a scope's graph knows its speakers and a question
    naming one is also asked without the name (recall.cues.speakers)."""
    texts = ["Caroline: I went to Paris.", "Melanie: Biscuit loves the park.", "no speaker here"]
    pool = np.eye(3, DIM, dtype=np.float32)
    points = PointMaker(texts, pool, seed=1).batch(60)
    speakers = {p.text.split("\n")[0]: p.sources[0].speaker for p in points}
    assert speakers["Caroline: I went to Paris."] == "Caroline"
    assert speakers["Melanie: Biscuit loves the park."] == "Melanie"
    assert speakers["no speaker here"] == ""
