"""The keyword channel's IDF is the whole embedded store's
(tiers.semantic.vectors.term_frequencies): its weights are the engine's own IDF modifier's, a user's
scores do not depend on who shares its shard, they are exact after deletes and replacements (the
engine's modifier keeps counting deleted points), the counts kept by writes equal the ones rebuilt
at open, and a shard made
with the engine's modifier by an earlier release is rewritten without it."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_edge import EdgeShard, Query, QueryRequest, UpdateOperation
from qdrant_edge import SparseVector as EdgeSparseVector

from tests.contracts.vectors import DIM, KEYWORDS, MODEL, mem
from tests.support import wait_until
from tiers.core.records import Scope
from tiers.semantic.vectors import (
    SPARSE,
    MemoryPoint,
    PointFilter,
    VectorStore,
    VectorStoreInterrupted,
    shard_of,
)
from tiers.semantic.vectors.edge import generations, layout
from tiers.semantic.vectors.edge import shard as edge_shard
from tiers.semantic.vectors.edge.config import config, made_with, payload_indexes
from tiers.semantic.vectors.edge.shard import to_point, write_sidecar
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.semantic.vectors.term_frequencies import DocumentFrequencies, Tally

SHARDS = 4
QUERY = "did the cat chase the dog to the pottery class"
TEXTS = {
    "alice": [
        "the cat sat on the mat",
        "a dog chased the cat around the garden",
        "pottery class on saturday morning",
        "the weather is nice today",
    ],
    # bob and carol share a shard (shard_of(..., 4) == 2), alice has her own (3)
    "bob": ["my cat hates the dog next door", "cat food is expensive", "cat cat cat"],
    "carol": ["the pottery class was cancelled", "dog walking at noon"],
}


def points(user: str, texts: list[str] | None = None) -> list[MemoryPoint]:
    scope = Scope(user, "assistant")
    return [
        mem(text, scope=scope, seq=i, seed=1000 * len(user) + i)
        for i, text in enumerate(texts if texts is not None else TEXTS[user])
    ]


def scores(store: VectorStore, user: str = "alice") -> dict[str, float]:
    hits = store.search_sparse(KEYWORDS.embed_query(QUERY), PointFilter(user_id=user), 20)
    return {h.point.text: round(h.score, 5) for h in hits}


def opened(path: Path, open_behind: bool = True) -> ShardedVectorStore:
    """The sharded store at ``path``, opened."""
    store = ShardedVectorStore(path, SHARDS, open_behind=open_behind)
    store.ensure(MODEL, DIM)
    return store


def with_a_secret(path: Path) -> ShardedVectorStore:
    """The store at ``path``, opened, holding alice's points and one of bob's with a word no
    other point has."""
    store = opened(path)
    store.upsert(points("alice") + points("bob", ["my quokkaword is secret"]))
    return store


@pytest.fixture
def sharded(tmp_path: Path) -> Iterator[ShardedVectorStore]:
    store = opened(tmp_path / "sharded")
    yield store
    store.close()


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[EdgeVectorStore]:
    """A store with one shard: the reference "one store" scores are computed in."""
    store = EdgeVectorStore(tmp_path / "fresh")
    store.ensure(MODEL, DIM)
    yield store
    store.close()


def engine_shard(path: Path, written: list[MemoryPoint]) -> EdgeShard:
    """A raw engine shard with the engine's IDF modifier, as releases before made them."""
    shard = EdgeShard.create(str(path), config(DIM, idf=True))
    for name, schema in payload_indexes().items():
        shard.update(UpdateOperation.create_field_index(name, schema))
    shard.update(UpdateOperation.upsert_points([to_point(p) for p in written]))
    return shard


def engine_scores(shard: EdgeShard) -> dict[str, float]:
    query = KEYWORDS.embed_query(QUERY)
    request = QueryRequest(
        limit=20,
        query=Query.Nearest(EdgeSparseVector(query.indices, query.values), using=SPARSE),
        with_payload=True,
    )
    return {str(s.payload["text"]): round(s.score, 5) for s in shard.query(request) if s.payload}


def test_the_users_share_the_shards_the_tests_assume():
    assert [shard_of(u, SHARDS) for u in ("alice", "bob", "carol")] == [3, 2, 2]


def test_query_weights_are_the_engines_idf_modifier(tmp_path, fresh):
    written = [p for user in TEXTS for p in points(user)]
    shard = engine_shard(tmp_path / "engine", written)
    try:
        expected = engine_scores(shard)
    finally:
        shard.close()
    fresh.upsert(written)
    assert scores(fresh) == {t: s for t, s in expected.items() if t in TEXTS["alice"]}
    assert len(scores(fresh)) == 3  # three of alice's texts hold a query term


def test_a_users_scores_do_not_depend_on_who_shares_its_shard(sharded, fresh):
    for user in TEXTS:
        sharded.upsert(points(user))
        fresh.upsert(points(user))
    assert scores(sharded) == scores(fresh)
    assert scores(sharded, "bob") == scores(fresh, "bob")
    # Alice's shard holds her points alone, yet the IDF counts bob's and carol's too (an IDF
    # over her shard would score otherwise).
    assert scores(sharded) != _scores_with_only(points("alice"))


def _scores_with_only(written: list[MemoryPoint]) -> dict[str, float]:
    frequencies = DocumentFrequencies()
    frequencies.add(p.sparse for p in written if p.sparse is not None)
    out: dict[str, float] = {}
    query = frequencies.weigh(KEYWORDS.embed_query(QUERY))
    for p in written:
        assert p.sparse is not None
        weights = dict(zip(p.sparse.indices, p.sparse.values, strict=True))
        score = sum(
            v * weights.get(i, 0.0) for i, v in zip(query.indices, query.values, strict=True)
        )
        if score:
            out[p.text] = round(score, 5)
    return out


def test_scores_after_deletes_and_replacements_are_a_store_that_never_held_them(sharded, tmp_path):
    for user in TEXTS:
        sharded.upsert(points(user))
    assert sharded.delete(PointFilter(user_id="bob")) == 3
    first = points("alice")[0]
    sharded.upsert(
        [
            dataclasses.replace(
                first, text="the cat slept", sparse=KEYWORDS.embed_document("the cat slept")
            )
        ]
    )
    sharded.delete(PointFilter(user_id="carol", episode_ids=["ep-1"]))

    reference = EdgeVectorStore(tmp_path / "reference")
    reference.ensure(MODEL, DIM)
    try:
        reference.upsert(points("alice", ["the cat slept", *TEXTS["alice"][1:]]))
        assert scores(sharded) == scores(reference)
    finally:
        reference.close()


def test_the_counts_kept_by_writes_equal_the_ones_rebuilt_at_open(tmp_path):
    path = tmp_path / "sharded"
    store = opened(path)
    for user in TEXTS:
        store.upsert(points(user))
    store.delete(PointFilter(user_id="carol"))
    store.upsert(points("alice", ["the cat sat on the mat", "another cat"]))  # one replaced
    kept = {user: scores(store, user) for user in ("alice", "bob")}
    store.close()
    assert layout.term_counts(path).exists()  # a clean close keeps them

    layout.term_counts(path).unlink()  # as after a crash: counted again as the shards open
    store = opened(path)
    try:
        store.count(PointFilter())  # every shard opened, so every shard counted
        assert {user: scores(store, user) for user in ("alice", "bob")} == kept
    finally:
        store.close()


def test_after_a_crash_the_shards_open_lazily_weighed_by_the_checkpoint_until_all_are_counted(
    tmp_path,
):
    path = tmp_path / "sharded"
    store = opened(path)
    for user in TEXTS:
        store.upsert(points(user))
    store.optimize()  # a build round writes the checkpoint
    at_checkpoint = {user: scores(store, user) for user in TEXTS}
    store.upsert(points("bob", ["the cat and the dog and the pottery"]))
    exact = {user: scores(store, user) for user in TEXTS}
    assert exact["alice"] != at_checkpoint["alice"]  # bob's new point moved alice's IDF
    store.close()
    layout.term_counts(path).unlink()  # as a crash leaves it

    store = opened(path, open_behind=False)
    try:
        assert store.opened == []  # serving at once: no shard scanned to start
        assert scores(store, "alice") == at_checkpoint["alice"]  # her shard alone opened
        assert store.opened == [shard_of("alice", SHARDS)]
        store.optimize()  # a build round while counting: the checkpoint stays as it was
        assert layout.term_checkpoint(path).exists()
        store.close()  # a close before every shard was counted keeps what it counted
        assert layout.term_counts(path).exists()

        store = opened(path, open_behind=False)  # and the next open goes on from there
        assert scores(store, "alice") == at_checkpoint["alice"]
        assert store.opened == [shard_of("alice", SHARDS)]
        store.count(PointFilter())  # the rest opened: the counts are exact again
        assert {user: scores(store, user) for user in TEXTS} == exact
    finally:
        store.close()
    assert layout.term_counts(path).exists()

    layout.term_counts(path).unlink()  # a crash again, then a close with one shard counted
    store = opened(path, open_behind=False)
    scores(store, "alice")
    store.close()
    moved = ShardedVectorStore(path, 2, open_behind=False)  # another shard count: moved
    moved.ensure(MODEL, DIM)  # what the close had counted names the old shards: not used
    try:
        moved.count(PointFilter())
        assert {user: scores(moved, user) for user in TEXTS} == exact
    finally:
        moved.close()


def test_a_stop_gives_a_shards_count_up_between_two_pages_and_the_next_open_counts_it(
    tmp_path, monkeypatch
):
    """After a crash a shard's terms are counted as it opens, by whoever opens it (a weaver's
    write, a query): at ten million points on a slow disk that took minutes, and a daemon's
    stop waited for it (2026-12-02). :meth:`interrupt` gives a count under way up between
    two pages with nothing of it counted, and refuses one asked for later; the close keeps
    the recount, and the next open counts those shards whole."""
    path = tmp_path / "sharded"
    store = opened(path)
    for user in TEXTS:
        store.upsert(points(user))
    exact = {user: scores(store, user) for user in TEXTS}
    store.close()
    layout.term_counts(path).unlink()  # a crash
    store = opened(path, open_behind=False)
    monkeypatch.setattr(edge_shard, "READ_PAGE", 1)  # a page a point: alice's four
    counting, release, pages = threading.Event(), threading.Event(), []
    tally = Tally.add

    def slow(self: Tally, vectors: Iterable[Any]) -> None:  # a cold page read
        pages.append(self)
        counting.set()
        assert release.wait(60)
        tally(self, vectors)

    monkeypatch.setattr(Tally, "add", slow)
    try:
        with ThreadPoolExecutor(1) as pool:
            asked = pool.submit(scores, store, "alice")
            assert counting.wait(60)
            store.interrupt()
            release.set()
            with pytest.raises(VectorStoreInterrupted, match="stopping"):
                asked.result(60)
        assert len(pages) == 1  # given up after its first page of four
        with pytest.raises(VectorStoreInterrupted):
            scores(store, "bob")  # asked after the interrupt: not counted
        assert len(pages) == 1 and store.opened == []
    finally:
        store.close()
    with np.load(layout.term_counts(path)) as doc:  # the recount, every shard still to count
        assert sorted(doc["uncounted"].tolist()) == [2, 3] and int(doc["points"][0]) == 0

    monkeypatch.undo()
    store = opened(path)
    try:
        store.count(PointFilter())  # every shard open, so counted
        assert {user: scores(store, user) for user in TEXTS} == exact
    finally:
        store.close()


def test_the_checkpoint_holds_no_term_of_points_purged_and_without_one_the_counts_start_empty(
    tmp_path,
):
    path = tmp_path / "sharded"
    store = with_a_secret(path)
    store.optimize()
    secret = set(KEYWORDS.embed_document("quokkaword").indices)
    with np.load(layout.term_checkpoint(path)) as doc:
        assert secret <= set(doc["terms"].tolist())
    store.delete(PointFilter(user_id="bob"))
    store.purge()  # Forget's: the checkpoint is written again without bob's terms
    with np.load(layout.term_checkpoint(path)) as doc:
        assert not secret & set(doc["terms"].tolist())
    store.close()

    layout.term_counts(path).unlink()  # a crash
    store = opened(path, open_behind=False)
    try:  # a purge while the counts are counted again cannot write them: the checkpoint goes
        store.delete(PointFilter(user_id="alice", ids=(points("alice")[0].id,)))
        store.purge()
        assert not layout.term_checkpoint(path).exists()
    finally:
        store.close()

    store = opened(path, open_behind=False)  # no counts kept, no checkpoint
    reference = EdgeVectorStore(tmp_path / "reference")
    reference.ensure(MODEL, DIM)
    try:
        # No counts until every shard is counted: every term weighs the same.
        query = KEYWORDS.embed_query(QUERY)
        weighed = store.weigh(query)
        ratios = {round(w / v, 9) for v, w in zip(query.values, weighed.values, strict=True)}
        assert len(ratios) == 1
        store.count(PointFilter())
        reference.upsert(points("alice")[1:])
        assert scores(store) == scores(reference)
    finally:
        store.close()
        reference.close()


def test_the_counts_a_clean_close_kept_are_read_at_open_and_no_shard_is_scanned(
    tmp_path, monkeypatch
):
    path = tmp_path / "sharded"
    store = opened(path)
    for user in TEXTS:
        store.upsert(points(user))
    store.delete(PointFilter(user_id="carol", ids=(points("carol")[0].id,)))
    kept = {user: scores(store, user) for user in TEXTS}
    store.close()

    def scanned(*_args: object, **_kw: object) -> None:
        raise AssertionError("a shard's terms were counted again")

    with monkeypatch.context() as patch:
        patch.setattr(Tally, "of_shard", scanned)
        store = opened(path)
    # Gone at once, before any write: a crash from now on leaves no file, and the next
    # open counts the shards again, weighed meanwhile by the same counts, moved aside.
    assert not layout.term_counts(path).exists()
    assert layout.term_checkpoint(path).exists()
    assert {user: scores(store, user) for user in TEXTS} == kept
    store.upsert(points("alice", ["a new cat arrives"]))
    kept = {user: scores(store, user) for user in TEXTS}
    store.close()
    store = opened(path)
    try:
        assert {user: scores(store, user) for user in TEXTS} == kept
    finally:
        store.close()


def test_the_kept_counts_hold_no_term_of_deleted_points_and_a_bad_file_is_counted_over(
    tmp_path,
):
    path = tmp_path / "sharded"
    store = with_a_secret(path)
    store.delete(PointFilter(user_id="bob"))
    kept = scores(store)
    store.close()
    with np.load(layout.term_counts(path)) as doc:
        terms = set(doc["terms"].tolist())
    assert not terms & set(KEYWORDS.embed_document("quokkaword").indices)
    assert set(KEYWORDS.embed_document("cat").indices) <= terms

    layout.term_counts(path).write_bytes(b"PK\x03\x04 cut short")
    store = opened(path)  # logged, and counted from the shards as they open
    try:
        # Until the last shard is counted the counts are the checkpoint's (none here).
        present = layout.shards_present(path, SHARDS)
        wait_until(lambda: store.opened == present, 60, "for every shard to be counted")
        assert scores(store) == kept
        assert not layout.term_counts(path).exists()
    finally:
        store.close()


def test_a_shard_made_with_the_engines_idf_is_rewritten_without_it(tmp_path):
    path = tmp_path / "old"
    written = [p for user in TEXTS for p in points(user)]
    write_sidecar(path, MODEL, DIM)
    gen = generations.first(path)
    generations.switch(path, gen)
    shard = engine_shard(gen, written)
    try:
        before = engine_scores(shard)
        shard.flush()
    finally:
        shard.close()
    assert made_with(gen).idf

    store = EdgeVectorStore(path)
    store.ensure(MODEL, DIM)
    try:
        now = generations.current(path)
        assert now != gen and not gen.exists() and not made_with(now).idf
        assert store.count(PointFilter()) == len(written)
        assert scores(store) == {t: s for t, s in before.items() if t in TEXTS["alice"]}
    finally:
        store.close()


def test_counts_follow_adds_and_removes_and_never_go_below_zero():
    frequencies = DocumentFrequencies()
    cat, dog = KEYWORDS.embed_document("cat"), KEYWORDS.embed_document("dog")
    frequencies.add([cat, cat, dog])
    assert (frequencies.points, frequencies.count(cat.indices[0])) == (3, 2)
    frequencies.remove([cat, dog])
    assert (frequencies.points, frequencies.count(cat.indices[0])) == (1, 1)
    assert frequencies.count(dog.indices[0]) == 0
    frequencies.remove([dog, dog])
    assert (frequencies.points, frequencies.count(dog.indices[0])) == (0, 0)


def test_counts_of_two_stores_add_up_to_one_store_holding_both():
    cat, dog = KEYWORDS.embed_document("cat"), KEYWORDS.embed_document("dog")
    left, right, both = DocumentFrequencies(), DocumentFrequencies(), DocumentFrequencies()
    left.add([cat, dog])
    right.add([cat, cat])
    both.add([cat, dog, cat, cat])
    left.add_counts(right)
    assert left.points == both.points == 4
    for term in (cat.indices[0], dog.indices[0]):
        assert left.count(term) == both.count(term)
    assert (right.points, right.count(cat.indices[0])) == (2, 2)  # the other is unchanged
