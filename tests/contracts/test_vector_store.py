"""Tier 3: one contract suite for every VectorStore implementation.

It runs against the embedded engine (qdrant-edge, in tmp_path), qdrant-client's ``:memory:``
mode and, when ``QDRANT_URL`` is set (``QDRANT_API_KEY`` optional), a real Qdrant server in a
throwaway collection. Vectors are seeded random unit vectors: no embedding model is loaded.
The storages and the data helpers are in :mod:`tests.contracts.vectors`; what only one
implementation does is in ``tests/tiers/semantic/vectors/test_vector_stores.py``.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.contracts.vectors import (
    ALICE,
    BACKENDS,
    BOB,
    DIM,
    INDEXED_DIM,
    KEYWORDS,
    MIN_US,
    MODEL,
    T0,
    Backend,
    ChildBackend,
    EdgeBackend,
    MemoryBackend,
    Opened,
    ServerBackend,
    ShardedBackend,
    alice,
    bare,
    ids,
    indexable_points,
    mem,
    near,
    points_for,
    unit,
)
from tiers.core.errors import FailedPrecondition, Unavailable
from tiers.core.records import Scope
from tiers.semantic.vectors import (
    MemoryPoint,
    PointFilter,
    Source,
    Validity,
    VectorStore,
    VectorStoreMismatch,
    VectorStoreUnavailable,
    admits,
    point_id,
)
from tiers.semantic.vectors.qdrant.collection import META_ID
from tiers.semantic.vectors.storage import DenseStorage

# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    kind = request.param
    if kind == "edge":
        b: Backend = EdgeBackend(tmp_path / "vectors")
    elif kind == "sharded":
        b = ShardedBackend(tmp_path / "vectors")
    elif kind == "child":
        b = ChildBackend(tmp_path / "vectors")
    elif kind == "memory":
        b = MemoryBackend()
    else:
        b = ServerBackend(os.environ["QDRANT_URL"])
    yield b
    b.cleanup()


@pytest.fixture
def opened(backend: Backend) -> Iterator[Opened]:
    o = Opened(backend)
    yield o
    for store in reversed(o.stores):
        store.close()


@pytest.fixture
def store(opened: Opened) -> VectorStore:
    s = opened.open()
    s.ensure(MODEL, DIM)
    return s


# -- the contract ------------------------------------------------------------------------------


def test_is_a_vector_store(store):
    assert isinstance(store, VectorStore)


def test_round_trip_of_every_field(store):
    full = MemoryPoint(
        id=point_id(
            ALICE, "fact", "Alice moved to Lyon", [Source("chat-1", 4), Source("chat-2", 9)]
        ),
        kind="fact",
        text="Alice moved to Lyon",
        scope=ALICE,
        episode_id="ep-7",
        session_id="chat-2",
        sources=[
            Source("chat-1", 4, "msg-4", {"channel": "sms", "lang": "en"}),
            Source("chat-2", 9, "", {}),
        ],
        created_at_us=T0 + 123_456,
        extractor="llm:small",
        valid_from_us=T0 - 5 * MIN_US,
        valid_to_us=T0 + 7 * MIN_US,
        attrs={
            "subject": "Alice",
            "predicate": "lives_in",
            "object": "Lyon",
            "confidence": 0.75,
            "tags": ["move", "city"],
            "nested": {"n": 3, "flag": True, "none": None},
        },
        dense=[float(x) for x in unit(1)],
        sparse=KEYWORDS.embed_document("Alice moved to Lyon"),
    )
    plain = mem("Alice likes green tea", kind="episode_chunk", seed=2)
    no_agent = mem("A memory without an agent", scope=Scope("alice"), seed=3)
    store.upsert([full, plain, no_agent])

    missing = str(uuid.uuid4())
    got = store.get([no_agent.id, missing, full.id, "not-a-uuid", plain.id, full.id])
    assert got == [bare(no_agent), bare(full), bare(plain)]
    assert got[1].valid_to_us == T0 + 7 * MIN_US and got[2].valid_from_us is None
    assert got[1].sources[0].metadata == {"channel": "sms", "lang": "en"}
    assert store.get([]) == [] and store.get([missing]) == []
    # uppercase ids name the same point
    assert store.get([full.id.upper()]) == [bare(full)]


def test_dense_returns_the_stored_vectors_by_id(store):
    a = mem("Alice likes green tea", seed=11)
    b = mem("Bob likes coffee", seed=12)
    store.upsert([a, b])
    missing = str(uuid.uuid4())
    got = store.dense([b.id.upper(), missing, "not-a-uuid", a.id])
    assert set(got) == {a.id, b.id}
    for point in (a, b):
        assert point.dense is not None
        assert np.allclose(got[point.id], point.dense, atol=1e-6)
    assert store.dense([]) == {} and store.dense([missing]) == {}


def test_get_and_dense_with_a_user_read_that_users_points_only(store):
    a = mem("Alice keeps bees", seed=21)
    b = mem("Bob keeps goats", scope=BOB, seed=22)
    store.upsert([a, b])
    both = [b.id, a.id.upper(), "not-a-uuid"]
    assert store.get(both) == [bare(b), bare(a)]  # no user: every user's, in order
    assert store.get(both, "alice") == [bare(a)]
    assert store.get(both, "bob") == [bare(b)]
    assert store.get(both, "carol") == [] and store.get([], "alice") == []
    assert set(store.dense(both)) == {a.id, b.id}
    assert set(store.dense(both, "alice")) == {a.id}
    assert b.dense is not None and np.allclose(store.dense(both, "bob")[b.id], b.dense, atol=1e-6)
    assert store.dense(both, "carol") == {} and store.dense([], "bob") == {}


def test_reads_and_writes_without_a_user_span_every_user(store):
    carol = Scope("carol", "assistant")
    pts = (
        [mem(f"alice shared {i}", seq=i, episode="ep-shared", seed=i) for i in range(3)]
        + [
            mem(f"bob shared {i}", scope=BOB, seq=i, episode="ep-shared", seed=9 + i)
            for i in range(2)
        ]
        + [mem("carol alone", scope=carol, episode="ep-carol", seed=20)]
    )
    store.upsert(pts)  # one upsert of three users
    assert store.count(PointFilter()) == 6
    assert store.count(PointFilter(episode_ids=("ep-shared",))) == 5
    assert sorted(ids(store.scroll(PointFilter()))) == sorted(p.id for p in pts)
    assert len(store.scroll(PointFilter(), limit=4)) == 4
    assert len(store.ids(PointFilter(), limit=4)) == 4 and store.ids(PointFilter(), limit=0) == []
    assert len(store.scroll(PointFilter(episode_ids=("ep-shared",)), limit=10)) == 5
    assert store.episode_ids(PointFilter()) == {"ep-shared", "ep-carol"}
    assert store.episode_ids(PointFilter(user_id="carol")) == {"ep-carol"}
    store.set_valid_to([pts[0].id, pts[3].id], Validity(T0 + 3))  # two users' facts, by id alone
    assert [p.valid_to_us for p in store.get([pts[0].id, pts[3].id, pts[5].id])] == [
        T0 + 3,
        T0 + 3,
        None,
    ]
    # Naming the user: only that user's points change (a sharded store asks its shard alone).
    store.set_valid_to([pts[3].id, pts[5].id], Validity(T0 + 4), user_id="carol")
    assert [p.valid_to_us for p in store.get([pts[3].id, pts[5].id])] == [T0 + 3, T0 + 4]
    assert store.delete(PointFilter(ids=(pts[1].id, pts[4].id))) == 2
    assert store.delete(PointFilter(episode_ids=("ep-shared",))) == 3
    assert ids(store.scroll(PointFilter())) == [pts[5].id]
    assert ids(store.search_dense(pts[5].dense or [], PointFilter(user_id="carol"), 5)) == [
        pts[5].id
    ]


def test_point_ids_are_deterministic_and_reupsert_overwrites(store):
    a = mem("Alice's sister is called Emma", seq=3)
    again = mem("Alice's sister is called Emma", seq=3)
    assert a.id == again.id
    assert str(uuid.UUID(a.id)) == a.id  # a canonical UUID string
    assert mem("Alice's sister is called Emma", seq=4).id != a.id
    assert mem("Alice's sister is called Emma", seq=3, scope=BOB).id != a.id

    store.upsert([a])
    store.upsert([again])
    assert store.count(PointFilter()) == 1
    changed = dataclasses.replace(again, attrs={"object": "Emma"}, created_at_us=T0 + 1)
    store.upsert([changed])
    assert store.count(PointFilter()) == 1
    assert store.get([a.id]) == [bare(changed)]


def test_dense_search_ranks_nearest_first_and_respects_limit(store):
    query = unit(100)
    angles = [0.05, 0.3, 0.6, 1.0, 1.6, 3.0]
    points = [
        mem(f"note {i}", seq=i, dense=near(query, d, seed=200 + i)) for i, d in enumerate(angles)
    ]
    store.upsert(list(reversed(points)))

    hits = store.search_dense(list(query), alice(), limit=3)
    assert ids(hits) == [p.id for p in points[:3]]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert 0.95 < scores[0] <= 1.0001  # cosine similarity
    assert hits[0].point == bare(points[0])

    everything = store.search_dense(list(query), alice(), limit=50)
    assert ids(everything) == [p.id for p in points]
    assert store.search_dense(list(query), alice(), limit=0) == []


def test_sparse_search_finds_a_rare_word_first(store):
    common = [mem(f"we drank coffee at the station number {i}", seq=i, seed=i) for i in range(8)]
    rare = mem(
        "last summer Alice spent two long weeks on a sailing trip around Zanzibar with friends",
        seq=50,
        seed=50,
    )
    store.upsert([*common, rare])

    hits = store.search_sparse(KEYWORDS.embed_query("coffee in Zanzibar"), alice(), limit=5)
    # Only IDF puts the rare word above the common one: "coffee" appears in 8 shorter docs.
    assert hits[0].point.id == rare.id
    assert hits[0].score > hits[1].score
    assert len(hits) == 5 and set(ids(hits[1:])) <= {p.id for p in common}

    only_rare = store.search_sparse(KEYWORDS.embed_query("zanzibar"), alice(), limit=5)
    assert ids(only_rare) == [rare.id]
    assert store.search_sparse(KEYWORDS.embed_query("tennis"), alice(), limit=5) == []
    assert store.search_sparse(KEYWORDS.embed_query("the of and"), alice(), limit=5) == []


def test_tied_hits_come_by_id_whatever_the_order_they_were_written_in(store):
    """Points that tie (one text, one vector) come by id, and a limit keeps the first by id:
    not the ones the engine happens to hold first (tiers.semantic.vectors.ranking)."""
    query = unit(300)
    same = near(query, 0.8, seed=301)
    tied = [mem("we talked about the weather again", seq=i, dense=same) for i in range(30)]
    better = mem("the rain stopped", seq=100, dense=near(query, 0.1, seed=302))
    for p in sorted(tied, key=lambda p: p.id, reverse=True):  # the largest id first
        store.upsert([p])
    store.upsert([better])
    by_id = sorted(p.id for p in tied)

    assert ids(store.search_dense(list(query), alice(), limit=4)) == [better.id, *by_id[:3]]
    keyword = store.search_sparse(KEYWORDS.embed_query("weather talk"), alice(), limit=4)
    assert ids(keyword) == by_id[:4]
    assert len({h.score for h in keyword}) == 1


def test_scope_is_a_hard_filter(store):
    text = "The door code is 4711"
    vec = [float(x) for x in unit(9)]
    mine = mem(text, dense=vec)
    theirs = mem(text, scope=BOB, dense=vec)
    assert mine.id != theirs.id
    store.upsert([theirs, mine])

    dense = store.search_dense(vec, alice(), limit=10)
    sparse = store.search_sparse(KEYWORDS.embed_query(text), alice(), limit=10)
    assert ids(dense) == [mine.id] and ids(sparse) == [mine.id]
    assert ids(store.search_dense(vec, PointFilter(user_id="bob"), limit=10)) == [theirs.id]
    assert ids(store.scroll(alice())) == [mine.id]
    assert store.count(alice()) == 1 and store.count(PointFilter(user_id="carol")) == 0
    assert store.search_dense(vec, PointFilter(user_id="carol"), limit=10) == []


def test_searches_require_a_user(store):
    store.upsert([mem("anything")])
    with pytest.raises(ValueError, match="user_id"):
        store.search_dense([float(x) for x in unit(0)], PointFilter(), limit=3)
    with pytest.raises(ValueError, match="user_id"):
        store.search_sparse(KEYWORDS.embed_query("anything"), PointFilter(agent_id="x"), limit=3)


def test_agent_kind_episode_and_time_filters(store):
    query = unit(300)
    pts = {
        "a1_fact": mem("fact one", created=T0, episode="ep-1", dense=near(query, 0.1, 1)),
        "a1_chunk": mem(
            "chunk one", kind="episode_chunk", created=T0 + MIN_US, dense=near(query, 0.2, 2)
        ),
        "a2_summary": mem(
            "summary two",
            scope=Scope("alice", "planner"),
            kind="summary",
            episode="ep-2",
            created=T0 + 2 * MIN_US,
            dense=near(query, 0.3, 3),
        ),
        "a2_fact": mem(
            "fact two",
            scope=Scope("alice", "planner"),
            episode="ep-3",
            created=T0 + 3 * MIN_US,
            dense=near(query, 0.4, 4),
        ),
    }
    store.upsert(list(pts.values()))
    q = list(query)

    def found(**kw: Any) -> set[str]:
        flt = alice(**kw)
        by_search = set(ids(store.search_dense(q, flt, limit=10)))
        by_scroll = set(ids(store.scroll(flt)))
        assert by_search == by_scroll
        assert sorted(store.ids(flt)) == sorted(by_scroll)  # the same points, ids alone
        episodes = {p.episode_id for p in store.scroll(flt)}
        assert store.episode_ids(flt) == episodes  # their episodes, one field read
        assert store.count(flt) == len(by_scroll)
        return {name for name, p in pts.items() if p.id in by_search}

    assert found() == set(pts)
    assert found(agent_id="assistant") == {"a1_fact", "a1_chunk"}
    assert found(agent_id="planner") == {"a2_summary", "a2_fact"}
    assert found(kinds=("fact",)) == {"a1_fact", "a2_fact"}
    assert found(kinds=("summary", "episode_chunk")) == {"a1_chunk", "a2_summary"}
    assert found(episode_ids=("ep-2", "ep-3")) == {"a2_summary", "a2_fact"}
    # created range: from inclusive, to exclusive
    assert found(created_from_us=T0 + MIN_US, created_to_us=T0 + 3 * MIN_US) == {
        "a1_chunk",
        "a2_summary",
    }
    assert found(created_from_us=T0 + 2 * MIN_US) == {"a2_summary", "a2_fact"}
    assert found(created_to_us=T0 + MIN_US) == {"a1_fact"}
    assert found(agent_id="planner", kinds=("fact",), created_from_us=T0) == {"a2_fact"}
    assert found(agent_id="nobody") == set()


def test_superseded_facts_are_hidden_on_request(store):
    vec = unit(400)
    old = mem("Alice lives in Paris", seq=1, dense=near(vec, 0.1, 1))
    new = mem("Alice lives in Lyon", seq=2, dense=near(vec, 0.2, 2))
    other = mem("Alice likes jazz", seq=3, dense=near(vec, 0.3, 3))
    store.upsert([old, new, other])
    current = alice(include_superseded=False)
    assert set(ids(store.search_dense(list(vec), current, limit=10))) == {old.id, new.id, other.id}

    store.set_valid_to([old.id, str(uuid.uuid4())], Validity(T0 + 9))  # a missing id is skipped
    (got,) = store.get([old.id])
    assert got.valid_to_us == T0 + 9
    assert got == dataclasses.replace(bare(old), valid_to_us=T0 + 9)  # the rest is untouched
    assert store.get([new.id])[0].valid_to_us is None

    assert ids(store.search_dense(list(vec), current, limit=10)) == [new.id, other.id]
    lives = KEYWORDS.embed_query("where Alice lives")
    assert ids(store.search_sparse(lives, current, limit=10)) == [new.id, other.id]
    assert set(ids(store.search_sparse(lives, alice(), limit=10))) == {old.id, new.id, other.id}
    assert set(ids(store.scroll(current))) == {new.id, other.id}
    assert store.count(current) == 2
    assert store.count(alice()) == 3
    assert ids(store.search_dense(list(vec), alice(), limit=10)) == [old.id, new.id, other.id]

    # superseding twice keeps the latest time; an empty call does nothing
    store.set_valid_to([old.id], Validity(T0 + 20))
    store.set_valid_to([], Validity(T0 + 30))
    assert store.get([old.id])[0].valid_to_us == T0 + 20
    # None makes it current again (Forget of the fact that superseded it)
    store.set_valid_to([old.id], Validity())
    assert store.get([old.id])[0] == bare(old)
    assert set(ids(store.search_dense(list(vec), current, limit=10))) == {old.id, new.id, other.id}

    # With what replaced it: stored, and found by it (Forget finds what a fact replaced).
    store.set_valid_to([old.id], Validity(T0 + 9, new.id))
    assert store.get([old.id])[0] == dataclasses.replace(
        bare(old), valid_to_us=T0 + 9, replaced_by=new.id
    )
    assert ids(store.scroll(PointFilter(replaced_by=(new.id, other.id)))) == [old.id]
    assert ids(store.scroll(alice(replaced_by=(new.id,)))) == [old.id]
    assert store.ids(PointFilter(replaced_by=(other.id,))) == []
    store.set_valid_to([old.id], Validity(None, new.id))  # current again: replaced by none
    assert store.get([old.id])[0] == bare(old)
    assert store.ids(PointFilter(replaced_by=(new.id,))) == []


def test_purge_keeps_every_live_point_and_serves_on(store):
    kept = [mem(f"alice keeps {i}", seq=i, seed=10 + i) for i in range(6)]
    gone = [mem(f"alice forgets {i}", seq=i, seed=50 + i) for i in range(4)]
    store.upsert(kept + gone)
    store.delete(PointFilter(ids=tuple(p.id for p in gone)))
    store.purge()
    assert store.count(PointFilter()) == 6
    assert store.get([p.id for p in kept + gone]) == [bare(p) for p in kept]
    vec = kept[2].dense
    assert vec is not None
    assert ids(store.search_dense(list(vec), alice(), limit=1)) == [kept[2].id]
    store.upsert(gone[:1])  # writes go on after a purge
    assert store.count(PointFilter()) == 7


def test_delete_by_filter_returns_how_many(store):
    store.upsert(
        [mem(f"alice chunk {i}", kind="episode_chunk", episode="ep-1", seq=i) for i in range(4)]
        + [mem(f"alice fact {i}", episode="ep-1", seq=i) for i in range(2)]
        + [mem(f"alice other episode {i}", episode="ep-2", seq=i) for i in range(3)]
        + [
            mem(f"bob chunk {i}", scope=BOB, kind="episode_chunk", episode="ep-1", seq=i)
            for i in range(2)
        ]
    )
    assert store.count(PointFilter()) == 11

    assert store.delete(alice(episode_ids=("ep-1",), kinds=("episode_chunk",))) == 4
    assert store.count(alice(kinds=("episode_chunk",))) == 0
    assert store.count(PointFilter(user_id="bob", kinds=("episode_chunk",))) == 2
    assert store.count(alice()) == 5
    assert store.delete(alice(episode_ids=("ep-1",), kinds=("episode_chunk",))) == 0

    assert store.delete(alice()) == 5
    assert store.count(PointFilter()) == 2
    assert store.search_sparse(KEYWORDS.embed_query("alice"), alice(), limit=10) == []


def test_an_empty_filter_sees_only_memories(store):
    """The qdrant implementation's metadata point never shows, even without a filter."""
    pts = [mem(f"memory {i}", seq=i, seed=i) for i in range(3)]
    store.upsert(pts)
    assert store.count(PointFilter()) == 3
    assert sorted(ids(store.scroll(PointFilter()))) == sorted(p.id for p in pts)
    assert store.get([META_ID]) == []
    # the metadata point's vector is the first unit vector: search right at it
    e0 = [1.0] + [0.0] * (DIM - 1)
    for flt in (alice(), PointFilter(user_id="alice", agent_id="assistant")):
        assert set(ids(store.search_dense(e0, flt, limit=10))) == {p.id for p in pts}
    assert store.delete(PointFilter()) == 3
    assert store.count(PointFilter()) == 0
    store.ensure(MODEL, DIM)  # still knows its model


def test_ensure_rejects_another_model_or_size(store, opened):
    store.upsert([mem("kept")])
    again = opened.reopen(store)
    with pytest.raises(VectorStoreMismatch) as info:
        again.ensure("test-model-b", DIM)
    message = str(info.value)
    assert MODEL in message and "test-model-b" in message and f"{DIM} dims" in message
    with pytest.raises(VectorStoreMismatch, match=f"{DIM} dims.*{2 * DIM} dims"):
        again.ensure(MODEL, 2 * DIM)
    again.ensure(MODEL, DIM)
    assert again.count(PointFilter()) == 1
    # once open, the same object refuses another model too
    with pytest.raises(VectorStoreMismatch):
        again.ensure("test-model-b", DIM)


def test_reopen_and_optimize_keep_points_and_results(store, opened):
    query = unit(500)
    pts = [
        mem(f"memory number {i} about topic {i % 5}", seq=i, dense=near(query, 0.1 + 0.05 * i, i))
        for i in range(40)
    ]
    store.upsert(pts[:30])
    store.upsert(pts[30:])
    store.set_valid_to([pts[0].id], Validity(T0 + 1))
    store.delete(alice(episode_ids=("nothing",)))

    def results(s: VectorStore) -> tuple[list[str], list[str], int, int]:
        return (
            ids(s.search_dense(list(query), alice(include_superseded=False), limit=10)),
            ids(s.search_sparse(KEYWORDS.embed_query("topic 3"), alice(), limit=10)),
            s.count(alice()),
            s.count(alice(include_superseded=False)),
        )

    before = results(store)
    assert before[0] == [p.id for p in pts[1:11]] and before[2:] == (40, 39)
    # every text has "topic": the 8 texts with the token "3" come first
    assert set(before[1][:8]) == {p.id for i, p in enumerate(pts) if i % 5 == 3}
    store.optimize()
    assert results(store) == before
    store.flush()
    again = opened.reopen(store)
    again.ensure(MODEL, DIM)
    assert results(again) == before
    assert again.get([pts[0].id])[0].valid_to_us == T0 + 1


def built(
    opened: Opened, count: int, seed: int
) -> tuple[VectorStore, list[MemoryPoint], np.ndarray]:
    """A store that ``opened`` opens, holding :func:`indexable_points` of ``seed``, built
    (``optimize``): the store, its points and the 8 queries."""
    store = opened.open()
    store.ensure(MODEL, INDEXED_DIM)
    points, asked = indexable_points(queries=8, seed=seed, count=count)
    for start in range(0, len(points), 1000):
        store.upsert(points[start : start + 1000])
    store.optimize()
    return store, points, asked


@pytest.mark.parametrize(
    "storage", [DenseStorage("int8"), DenseStorage("none")], ids=lambda s: s.quantization
)
def test_quantized_searches_score_on_the_original_vectors(backend, opened, storage):
    """``vectors.quantization``: over an indexed segment (its vectors quantized with "int8"),
    a dense search's scores are the exact cosines of the original vectors (rescored), and the
    point planted nearest each query ranks first; reopened with the other setting (an
    upgrade, or a change back), the same holds."""
    backend.storage = storage
    store, points, asked = built(opened, points_for(backend), seed=5)
    exact = np.array([p.dense for p in points]) @ np.array(asked).T
    row = {p.id: n for n, p in enumerate(points)}

    def check(s: VectorStore) -> None:
        for i, query in enumerate(asked):
            hits = s.search_dense(list(query), alice(), limit=10)
            assert hits[0].point.id == points[i].id
            for hit in hits:
                assert hit.score == pytest.approx(exact[row[hit.point.id], i], abs=2e-5)

    check(store)
    other = "none" if storage.quantization == "int8" else "int8"
    backend.storage = dataclasses.replace(storage, quantization=other)
    again = opened.reopen(store)
    again.ensure(MODEL, INDEXED_DIM)
    check(again)
    again.optimize()  # nothing new to index: the segments stay as they are
    check(again)


def test_int8_searches_without_rescoring_score_on_the_int8_vectors(backend, opened):
    """``vectors.rescore`` false: over a segment quantized with "int8", a dense search's hits
    and scores are the int8 vectors' (no original is read): each score is within int8's
    rounding of the exact cosine, and differs from it where the engine indexes the segment;
    the point planted nearest each query still ranks first. Reopened with rescoring, the
    scores are the exact cosines again."""
    backend.storage = DenseStorage("int8", rescore=False)
    store, points, asked = built(opened, points_for(backend), seed=7)
    exact = np.array([p.dense for p in points]) @ np.array(asked).T
    row = {p.id: n for n, p in enumerate(points)}

    def errors(s: VectorStore) -> list[float]:
        found = []
        for i, query in enumerate(asked):
            hits = s.search_dense(list(query), alice(), limit=10)
            assert hits[0].point.id == points[i].id
            found += [abs(hit.score - exact[row[hit.point.id], i]) for hit in hits]
        return found

    approximate = errors(store)
    assert max(approximate) < 0.02
    if backend.indexes:  # local mode has no segment to quantize: its scores are exact
        assert max(approximate) > 1e-4
    backend.storage = DenseStorage("int8", rescore=True)
    again = opened.reopen(store)
    again.ensure(MODEL, INDEXED_DIM)
    assert max(errors(again)) < 2e-5


@pytest.mark.parametrize(
    "storage",
    [DenseStorage("int8", "float16"), DenseStorage("int8", "float32")],
    ids=lambda s: s.originals,
)
def test_originals_keep_their_type_and_score_within_it(backend, opened, storage):
    """``vectors.originals``: a store made with float16 originals scores each hit within
    float16's rounding of the exact cosine (float32's: exactly), and the point planted nearest
    each query ranks first, over an indexed segment; reopened with the other setting (a
    change, or a change back), the store keeps the type it was made with and answers the
    same."""
    backend.storage = storage
    store, points, asked = built(opened, points_for(backend), seed=11)
    matrix = np.array([p.dense for p in points])
    exact = matrix @ np.array(asked).T
    within = 2e-5 if storage.originals == "float32" else 5e-4

    def check(s: VectorStore) -> list[list[str]]:
        found = []
        for i, query in enumerate(asked):
            hits = s.search_dense(list(query), alice(), limit=10)
            assert hits[0].point.id == points[i].id
            for hit in hits:
                row = int(hit.point.text.split()[-1])
                assert hit.score == pytest.approx(exact[row, i], abs=within)
            found.append(ids(hits))
        return found

    before = check(store)
    other = "float32" if storage.originals == "float16" else "float16"
    backend.storage = dataclasses.replace(storage, originals=other)
    again = opened.reopen(store)
    again.ensure(MODEL, INDEXED_DIM)
    assert check(again) == before
    again.upsert([dataclasses.replace(points[0], id=point_id(ALICE, "fact", "again", []))])
    assert again.count(alice()) == len(points) + 1


def test_closed_store_is_unavailable(store):
    store.upsert([mem("something")])
    store.close()
    store.close()  # idempotent
    with pytest.raises(VectorStoreUnavailable):
        store.count(PointFilter())
    with pytest.raises(VectorStoreUnavailable):
        store.upsert([mem("more")])
    with pytest.raises(VectorStoreUnavailable):
        store.search_dense([float(x) for x in unit(0)], alice(), limit=1)


def test_an_interrupt_stops_nothing_a_request_needs_and_a_reopen_finds_every_point(store, opened):
    """``interrupt`` (a daemon's stop, before its last jobs end) stops only work that can wait
    for the next start: the store still reads and writes, in a user it holds and in a new
    one, until it closes; then it opens as it was."""
    store.upsert([mem("Alice sings in a choir", seq=1)])
    store.interrupt()
    store.interrupt()  # idempotent
    store.upsert([mem("Alice sings on Sundays", seq=2), mem("Bob rows", scope=BOB, seq=3)])
    hits = store.search_sparse(KEYWORDS.embed_query("sings"), alice(), limit=5)
    assert len(hits) == 2 and store.count(PointFilter(user_id=BOB.user_id)) == 1
    store.flush()
    again = opened.reopen(store)
    again.ensure(MODEL, DIM)
    assert again.count(PointFilter()) == 3


def test_not_ensured_store_is_unavailable(opened):
    fresh = opened.open()
    with pytest.raises(VectorStoreUnavailable, match="ensure"):
        fresh.count(PointFilter())


WRITES = 40  # each while three readers search: enough interleavings, in seconds


def test_concurrent_writer_and_readers(store):
    query = list(unit(600))
    store.upsert([mem(f"seed {i}", seq=i, seed=i) for i in range(20)])
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(WRITES):
                store.upsert([mem(f"written {i}", seq=1000 + i, seed=1000 + i)])
                if i % 10 == 0:
                    store.set_valid_to([mem(f"seed {i}", seq=i).id], Validity(T0 + i))
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def reader() -> None:
        try:
            while not done.is_set():
                assert len(store.search_dense(query, alice(), limit=5)) == 5
                store.search_sparse(KEYWORDS.embed_query("written"), alice(), limit=5)
                assert store.count(alice()) >= 20
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert store.count(alice()) == 20 + WRITES


def test_errors_are_of_their_kinds_and_a_refused_write_writes_nothing(store, opened):
    good = mem("a point with vectors")
    no_dense = dataclasses.replace(mem("a point without a dense vector"), dense=None)
    with pytest.raises(ValueError, match="dense"):
        store.upsert([good, no_dense])
    assert store.count(PointFilter()) == 0 and store.get([good.id]) == []
    store.set_valid_to(["not-a-uuid", good.id], Validity(T0))  # ids that name no point are skipped
    assert store.dense(["not-a-uuid", good.id]) == {}
    with pytest.raises(ValueError, match="user_id"):
        store.search_dense(list(unit(1)), PointFilter(kinds=("fact",)), limit=1)
    with pytest.raises(VectorStoreMismatch) as mismatch:
        opened.reopen(store).ensure("test-model-b", DIM)
    assert isinstance(mismatch.value, FailedPrecondition)
    fresh = opened.reopen(opened.stores[-1])
    for call in (lambda: fresh.get([good.id]), lambda: fresh.upsert([good])):
        with pytest.raises(VectorStoreUnavailable) as unavailable:
            call()  # not ensured yet
        assert isinstance(unavailable.value, Unavailable)
    fresh.close()
    fresh.close()  # idempotent, and a closed store's close raises nothing


def test_searches_leave_out_excluded_sessions_and_a_window_of_one(store):
    """``exclude_sessions`` and ``exclude_from`` (GetContext's window) in every search, read
    and count, as :func:`~tiers.semantic.vectors.admits` says."""
    points = [
        mem("kayak in the red shed", session="a", seq=1, seed=1),
        mem("kayak in the blue shed", session="b", seq=1, seed=2),
        mem("kayak in the green shed", session="b", seq=5, seed=3),
        mem("kayak in the grey shed", session="b", seq=9, seed=4),
    ]
    store.upsert(points)
    query = KEYWORDS.embed_query("kayak shed")
    cases = [
        (PointFilter(user_id="alice", exclude_sessions=("a",)), {1, 2, 3}),
        (PointFilter(user_id="alice", exclude_from=(("b", 4, 6),)), {0, 1, 3}),
        (
            PointFilter(user_id="alice", exclude_sessions=("a",), exclude_from=(("b", 9, 9),)),
            {1, 2},
        ),
    ]
    for flt, kept in cases:
        want = {points[i].id for i in kept}
        assert {h.point.id for h in store.search_sparse(query, flt, 10)} == want
        assert {h.point.id for h in store.search_dense(unit(1), flt, 10)} == want
        assert {p.id for p in store.scroll(flt)} == want
        assert store.count(flt) == len(want)
        assert {p.id for p in points if admits(flt, p)} == want


def test_weigh_scores_a_text_as_the_keyword_search_does(store):
    """What the live stage's staged points are scored with: ``weigh`` then the dot product
    of the document's term weights gives the stored point's keyword score (or, where the
    engine weighs by IDF itself, the query unchanged)."""
    points = [mem(t, seed=i) for i, t in enumerate(["tea with lemon", "tea", "coffee beans"])]
    store.upsert(points)
    query = KEYWORDS.embed_query("lemon tea")
    weighed = store.weigh(query)
    assert weighed.indices == query.indices and all(v > 0 for v in weighed.values)
    hits = {h.point.id: h.score for h in store.search_sparse(query, alice(), 10)}
    for p in points[:2]:
        assert p.sparse is not None
        terms = dict(zip(p.sparse.indices, p.sparse.values, strict=True))
        mine = sum(
            w * terms.get(t, 0.0) for t, w in zip(weighed.indices, weighed.values, strict=True)
        )
        if weighed.values != query.values:  # weighed here: the same scale as the engine's
            assert mine == pytest.approx(hits[p.id], rel=1e-4)


def test_an_estimated_count_is_bounded_by_the_users_points(store):
    """``count(exact=False)``: the engine's estimate (a store without one counts exactly),
    0 for an empty store, the points for no filter, and for a user's filter between 0 and
    that user's points."""
    assert store.count(PointFilter(), exact=False) == 0
    store.upsert(
        [mem(f"alice chunk {i}", kind="episode_chunk", seq=i, seed=i) for i in range(5)]
        + [mem(f"alice fact {i}", seq=i, seed=20 + i) for i in range(3)]
        + [mem(f"bob fact {i}", scope=BOB, seq=i, seed=40 + i) for i in range(4)]
    )
    assert store.count(PointFilter(), exact=False) == 12
    for flt in (alice(), alice(kinds=("fact",)), alice(kinds=("fact", "episode_chunk"))):
        assert 0 <= store.count(flt, exact=False) <= store.count(alice()) == 8
    assert store.count(PointFilter(user_id="carol"), exact=False) == 0
