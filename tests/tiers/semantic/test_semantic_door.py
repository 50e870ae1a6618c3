"""The semantic store's door into Tier 3 (:mod:`tiers.semantic.store`), on real stores: forgotten
points and edges are dropped at the door, the scopes' caches are told, a fact's validity ends
on its edge and its point together, and a delete must name what it deletes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.contracts.corpus import A, B, Tier3, corpus, filled
from tests.contracts.models_kit import minilm
from tiers.core.errors import Stopped
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.embedding import Embedder, EmbeddingService
from tiers.semantic.embedding.slices import FIRST_SLICE, MAX_SLICE, SLICE_SECONDS, next_slice
from tiers.semantic.events import Tier3Written
from tiers.semantic.store import SemanticStore
from tiers.semantic.tombstones import Tombstones
from tiers.semantic.vectors import PointFilter
from tiers.semantic.vectors.edge.store import EdgeVectorStore


@pytest.fixture
def tier3(tmp_path) -> Iterator[Tier3]:
    t = filled(tmp_path)
    yield t
    t.close()


def test_forgotten_points_and_edges_are_dropped_at_the_door(tmp_path) -> None:
    t = Tier3(tmp_path)
    try:
        semantic = t.semantic
        told: list[str] = []
        semantic.events.subscribe(Tier3Written, lambda event: told.append(event.user_id))
        points, edges = corpus()
        fact = next(p for p in points if p.kind == "fact" and p.scope == A)
        batch = t.state.batch()
        Tombstones.add(batch, ["ep-s2"], [fact.id])  # an episode of alice's, one of her facts
        t.state.write(batch)
        with semantic.write_lock:
            written = semantic.write(points)
            added = semantic.write_edges(edges)
        gone = {p.id for p in points if p.episode_id == "ep-s2"} | {fact.id}
        assert {p.id for p in written} == {p.id for p in points} - gone
        assert fact.id not in {e.id for e in added} and len(added) == len(edges) - 1
        _embedder, vectors = semantic.wait_ready(0)
        assert not vectors.get(sorted(gone)) and semantic.graph.get(fact.id) is None
        assert all(p.dense and p.sparse for p in written)  # embedded and keyword-encoded
        assert set(told) == {"alice", "bob"}
    finally:
        t.close()


def test_a_fact_closes_on_its_edge_and_its_point_together(tier3: Tier3) -> None:
    semantic = tier3.semantic
    _embedder, vectors = semantic.wait_ready(0)
    (fact,) = [
        e for e in semantic.graph.edges_where(lambda e: e.scope == B and e.object == "Lisbon")
    ]
    with semantic.write_lock:
        semantic.close_facts({fact.id: fact.valid_from_us + 1})
    assert semantic.graph.get(fact.id).valid_to_us == fact.valid_from_us + 1  # type: ignore[union-attr]
    assert vectors.get([fact.id])[0].valid_to_us == fact.valid_from_us + 1
    with semantic.write_lock:
        semantic.close_facts({fact.id: None})  # current again
    assert semantic.graph.get(fact.id).valid_to_us is None  # type: ignore[union-attr]
    assert vectors.get([fact.id])[0].valid_to_us is None


def test_a_delete_names_what_it_deletes(tier3: Tier3) -> None:
    semantic = tier3.semantic
    _embedder, vectors = semantic.wait_ready(0)
    before = vectors.count(PointFilter(user_id="alice")) + vectors.count(PointFilter(user_id="bob"))
    with semantic.write_lock, pytest.raises(ValueError, match="names a user"):
        semantic.delete(PointFilter(kinds=("fact",)), ())
    after = vectors.count(PointFilter(user_id="alice")) + vectors.count(PointFilter(user_id="bob"))
    assert after == before
    with semantic.write_lock:
        assert semantic.delete(replace(PointFilter(user_id="bob"), kinds=("fact",)), {"bob"}) == 2
    assert vectors.count(PointFilter(user_id="bob", kinds=("fact",))) == 0


def test_each_door_tells_the_ids_it_may_have_changed(tier3: Tier3) -> None:
    """Tier3Written.ids, which lets a kept graph read those points alone
    (recall.graph.writes): the points written, the facts closed, the points deleted by id; none
    for edges alone; None (unknown) for a delete by kind or episode."""
    semantic = tier3.semantic
    _embedder, vectors = semantic.wait_ready(0)
    told: list[Tier3Written] = []
    semantic.events.subscribe(Tier3Written, told.append)
    points, edges = corpus()
    facts = [p for p in points if p.kind == "fact" and p.scope == A]
    with semantic.write_lock:
        semantic.write(facts)
        semantic.write_edges([e for e in edges if e.scope == A])
        semantic.close_facts({facts[0].id: 1})
        semantic.delete(PointFilter(user_id="alice", ids=(facts[1].id,)), {"alice"})
        semantic.delete(PointFilter(user_id="alice", episode_ids=(facts[0].episode_id,)), {"alice"})
    assert [(e.user_id, e.ids) for e in told] == [
        ("alice", frozenset(p.id for p in facts)),
        ("alice", frozenset()),
        ("alice", frozenset({facts[0].id})),
        ("alice", frozenset({facts[1].id})),
        ("alice", None),
    ]
    assert not vectors.get([facts[1].id])


class Counting:
    """The real model, counting the texts it embeds (``texts``, and each call's count in
    ``calls``); ``during`` runs inside each call, with the calls so far."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.texts: list[str] = []
        self.calls: list[int] = []
        self.during: Callable[[list[int]], None] = lambda _calls: None

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        self.calls.append(len(texts))
        self.during(self.calls)
        return self.inner.encode_documents(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.inner.encode_queries(texts)


@contextmanager
def semantic_over(tmp_path: Path, embedder: Embedder) -> Iterator[SemanticStore]:
    """A started semantic store on real stores, embedding with ``embedder``."""
    state = RocksStore(tmp_path / "state", STATE_CFS)
    semantic = SemanticStore(
        state,
        EmbeddingService(lambda: embedder, "counting"),
        lambda: EdgeVectorStore(tmp_path / "vectors"),
    )
    try:
        semantic.start()
        semantic.wait_ready(60)
        yield semantic
    finally:
        semantic.close()
        state.close()


def test_a_text_two_points_share_is_embedded_once(tmp_path: Path) -> None:
    # a one-turn chunk and its turn point have the same text
    counting = Counting(minilm())
    with semantic_over(tmp_path, counting) as semantic:
        points, _edges = corpus()
        twin = replace(points[1], text=points[0].text, dense=None)  # embed does not read ids
        bare = [replace(p, dense=None) for p in points[:3]]
        done = semantic.embed([*bare, twin])
        assert counting.texts == list(dict.fromkeys(p.text for p in bare))
        assert done[-1].dense == done[0].dense
        expected = minilm().encode_documents([p.text for p in bare])
        for point, vec in zip(done, expected, strict=False):
            assert point.dense is not None and np.allclose(point.dense, vec, atol=1e-5)


def test_with_a_stop_event_texts_go_in_slices_and_a_set_event_ends_the_work(tmp_path: Path):
    counting = Counting(minilm())
    stopping = threading.Event()

    def during(calls: list[int]) -> None:
        if len(calls) == 2:
            stopping.set()  # the stop comes during the second slice: it is finished

    with semantic_over(tmp_path, counting) as semantic:
        points, _edges = corpus()
        bare = [replace(p, dense=None, text=f"{p.text} ({i})") for i, p in enumerate(points * 8)]
        done = semantic.embed(bare[:5], threading.Event())  # fewer than a slice: one call
        assert counting.calls == [5] and all(p.dense is not None for p in done)
        counting.calls.clear()
        counting.during = during
        with pytest.raises(Stopped, match="not embedded"):
            semantic.embed(bare, stopping)
        assert len(counting.calls) == 2 and counting.calls[0] == FIRST_SLICE
        assert len(bare) > sum(counting.calls)  # the rest was never embedded


def test_a_slice_takes_about_slice_seconds_at_the_pace_of_the_last() -> None:
    assert next_slice(8, SLICE_SECONDS / 8) == MAX_SLICE  # fast: the most in one call
    assert next_slice(8, 4 * SLICE_SECONDS) == 2  # two texts a second
    assert next_slice(8, 100 * SLICE_SECONDS) == 1  # never none
    assert next_slice(8, 0.0) == MAX_SLICE
    assert next_slice(10, SLICE_SECONDS / 2) == 20
