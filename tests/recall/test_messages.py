"""One hit per message (recall.messages) on the embedded vector store: RRF over messages, turn
points in place of the chunks that found them, and the fallbacks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from recall import Candidate
from recall.messages import answers_first, flatten, fuse_messages, message_hits
from tiers.core.records import Scope
from tiers.semantic.vectors import (
    MemoryPoint,
    PointFilter,
    Source,
    message_line,
    point_id,
    turn_point_id,
)
from tiers.semantic.vectors.edge.store import EdgeVectorStore

A = Scope("alice")
TURNS = {1: ("Alice", "I booked the ferry."), 2: ("Bob", "To where?"), 3: ("Alice", "Gotland!")}


def source(seq: int) -> Source:
    speaker, text = TURNS[seq]
    return Source("s1", seq, f"m{seq}", {}, speaker, 100 + seq, text, "user")


def turn(seq: int) -> MemoryPoint:
    s = source(seq)
    text = message_line(s.speaker, s.text)
    return MemoryPoint(
        point_id(A, "episode_turn", text, [s]),
        "episode_turn",
        text,
        A,
        "e1",
        "s1",
        [s],
        100 + seq,
        "index",
    )


def chunk(*seqs: int) -> MemoryPoint:
    sources = [source(q) for q in seqs]
    text = "\n".join(message_line(s.speaker, s.text) for s in sources)
    pid = point_id(A, "episode_chunk", text, sources)
    return MemoryPoint(pid, "episode_chunk", text, A, "e1", "s1", sources, 103, "index")


def fact(seq: int, text: str) -> MemoryPoint:
    s = replace(source(seq), text="", role="")
    pid = point_id(A, "fact", text, [s])
    return MemoryPoint(pid, "fact", text, A, "e1", "s1", [s], 100 + seq, "local")


@pytest.fixture
def vectors(tmp_path: Path) -> Iterator[EdgeVectorStore]:
    store = EdgeVectorStore(tmp_path / "vectors")
    store.ensure("fake", 4)
    store.upsert([replace(turn(q), dense=[1.0, 0.0, 0.0, float(q)]) for q in TURNS])
    yield store
    store.close()


def candidates(*points: MemoryPoint) -> list[Candidate]:
    return [Candidate(p, 1 / (i + 1), 1 / (i + 1), {"vector": i + 1}) for i, p in enumerate(points)]


def test_turn_point_id_matches_the_indexed_point():
    assert turn_point_id(A, source(2)) == turn(2).id


def test_fuse_messages_adds_up_a_message_found_twice():
    ranked = candidates(chunk(1, 2), fact(3, "Alice goes to Gotland."))
    graph = [(fact(3, "Alice goes to Gotland."), 0.9), (turn(2), 0.5)]
    assert flatten([c.point for c in ranked]) == [("s1", 1), ("s1", 2), ("s1", 3)]
    order = fuse_messages(ranked, graph, 1.0, 0)
    # s1:3 is 3rd in the fused order (1/3) and 1st in the graph's (1/1); s1:2 gets 1/2 + 1/2
    # and ties with s1:1 (1/1), which has the better single rank
    assert [m for m, _ in order] == [("s1", 3), ("s1", 1), ("s1", 2)]
    assert [score for _, score in order] == pytest.approx([4 / 3, 1.0, 1.0])
    assert next(m for m, _ in fuse_messages(ranked, graph, 0.1, 0)) == ("s1", 1)
    assert [m for m, _ in fuse_messages(ranked, [], 1.0, 0)] == [("s1", 1), ("s1", 2), ("s1", 3)]


def test_each_message_becomes_its_own_point(vectors):
    the_chunk = chunk(1, 2, 3)
    the_fact = fact(2, "Bob asks where to.")
    ranked = candidates(the_chunk, the_fact)
    order = fuse_messages(ranked, [], 1.0, 20)
    hits = message_hits(order, ranked, vectors, PointFilter(user_id="alice"), 10)
    # message 2 has a candidate of its own (the fact); 1 and 3 come as their turn points,
    # found through the chunk
    assert [h.point.id for h in hits] == [turn(1).id, the_fact.id, turn(3).id]
    assert [h.found_via for h in hits] == [the_chunk.id, "", the_chunk.id]
    assert [h.score for h in hits] == [score for _, score in order]
    assert hits[0].ranks == {"vector": 1}  # the explanation of the hit that found it
    assert len(message_hits(order, ranked, vectors, PointFilter(user_id="alice"), 2)) == 2


def test_without_turn_points_a_chunk_stands_for_its_messages_once(vectors):
    the_chunk = chunk(1, 2, 3)
    ranked = candidates(the_chunk)
    order = fuse_messages(ranked, [], 1.0, 20)
    only_chunks = PointFilter(user_id="alice", kinds=("episode_chunk",))
    hits = message_hits(order, ranked, vectors, only_chunks, 10)
    assert [h.point.id for h in hits] == [the_chunk.id] and hits[0].found_via == ""
    vectors.delete(PointFilter(user_id="alice", ids=(turn(1).id,)))  # turn 1 not indexed
    hits = message_hits(order, ranked, vectors, PointFilter(user_id="alice"), 10)
    assert [h.point.id for h in hits] == [the_chunk.id]  # covers 2 and 3 too
    # another user's filter never lets the turn points through
    hits = message_hits(order, ranked, vectors, PointFilter(user_id="mallory"), 10)
    assert [h.point.id for h in hits] == [the_chunk.id]


def test_a_reply_ranks_just_above_the_question_it_answers():
    hits = candidates(turn(2), turn(1), turn(3))  # "To where?" first, its reply "Gotland!" last
    moved = answers_first(hits)
    assert [h.point.id for h in moved] == [turn(3).id, turn(2).id, turn(1).id]
    assert [h.score for h in moved] == [h.score for h in hits]  # the scores stay in order
    assert [h.ranks for h in moved] == [{"vector": 3}, {"vector": 1}, {"vector": 2}]
    # already above its question, or no question: as it was
    for order in ((turn(3), turn(2), turn(1)), (turn(1), turn(3)), (turn(3), turn(1))):
        same = candidates(*order)
        assert answers_first(same) == same
    # a chunk holding the question is no question turn
    assert answers_first(candidates(chunk(1, 2), turn(3))) == candidates(chunk(1, 2), turn(3))
    # the reply must be the next message of the question's own session
    elsewhere = replace(turn(3), sources=[replace(source(3), session_id="s2")])
    assert answers_first(candidates(turn(2), elsewhere)) == candidates(turn(2), elsewhere)
    assert answers_first([]) == []
