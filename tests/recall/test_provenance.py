"""Precise provenance (sources ordered by how much they match the query), hits merged into a
better one that cites all their messages, and the recipe's weight per kind: the pure
functions, then end to end over gRPC."""

from __future__ import annotations

import random

import pytest

from recall import Candidate
from recall.expansion import PARENTS
from recall.provenance import merge_by_sources, order_sources, source_scores
from recall.recipe import Recipe
from tests.support import MAY, QUIET, consolidate, talk, wait_indexed
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, Source, source_key


def point(kind: str, *turns: tuple[int, str], with_text: bool = True) -> MemoryPoint:
    sources = [Source("s1", seq, text=text if with_text else "") for seq, text in turns]
    return MemoryPoint(
        id=f"{kind}-{turns[0][0]}",
        kind=kind,
        text="\n".join(t for _, t in turns),
        scope=Scope("u"),
        episode_id="e1",
        session_id="s1",
        sources=sources,
        created_at_us=1,
        extractor="index",
    )


def seqs(c: Candidate) -> list[int]:
    return [s.seq for s in c.point.sources]


def test_the_turn_that_matches_comes_first_and_rare_words_weigh_more() -> None:
    chunk = point(
        "episode_chunk",
        (1, "Melanie: how was your week?"),
        (2, "Caroline: busy, I went to the beach"),
        (3, "Caroline: and I signed up for a pottery class on Friday"),
    )
    [c] = order_sources([Candidate(chunk)], "When did Caroline sign up for pottery?")
    assert seqs(c) == [3, 2, 1]  # 3: "pottery", "sign", "caroline"; 2: only "caroline"
    assert chunk.sources[0].seq == 1  # the stored point is not changed
    scores = source_scores("Caroline pottery", {("s", 1): "Caroline", ("s", 2): "pottery"})
    assert scores[("s", 1)] == scores[("s", 2)]  # each word once among two turns
    scores = source_scores(
        "Caroline pottery",
        {("s", 1): "Caroline pottery", ("s", 2): "Caroline", ("s", 3): "Caroline"},
    )
    assert scores[("s", 1)] > scores[("s", 2)] > 0


def test_sources_without_text_borrow_it_and_unmatched_ones_keep_their_order() -> None:
    chunk = point("episode_chunk", (4, "Alice: I adopted a beagle"), (5, "Bob: cute!"))
    summary = point(
        "summary", (1, ""), (2, ""), (4, ""), (5, ""), with_text=False
    )  # a summary's sources carry no text
    out = order_sources([Candidate(summary), Candidate(chunk)], "Which dog did Alice adopt?")
    assert seqs(out[0]) == [4, 1, 2, 5] and seqs(out[1]) == [4, 5]
    # no content word in the query: nothing moves
    assert [seqs(c) for c in order_sources([Candidate(chunk)], "what is it?")] == [[4, 5]]


def cited(pid: str, kind: str, *keys: tuple[str, int]) -> Candidate:
    sources = [Source(session, seq) for session, seq in keys]
    return Candidate(MemoryPoint(pid, kind, pid, Scope("u"), "e1", "s1", sources, 1, "index"))


def merged(candidates: list[Candidate]) -> list[tuple[str, list[str]]]:
    return [(c.point.id, c.merged_ids) for c in merge_by_sources(candidates)]


def test_a_hit_merges_into_the_best_hit_that_cites_all_its_messages() -> None:
    hits = [
        cited("chunk-a", "episode_chunk", ("s1", 1), ("s1", 2)),
        cited("digest", "digest", ("s1", 2), ("s1", 3)),  # neither merges nor takes in
        cited("chunk-b", "episode_chunk", ("s1", 3), ("s1", 2), ("s1", 4)),
        cited("fact", "fact", ("s1", 2), ("s1", 3)),  # in chunk-b's alone
        cited("turn", "episode_turn", ("s1", 2)),  # in both chunks: the better one
        cited("bare", "fact"),  # no source: kept
        cited("other", "fact", ("s2", 2)),  # another session's message
        cited("thread", "thread", ("s1", 1)),
    ]
    assert merged(hits) == [
        ("chunk-a", ["turn"]),
        ("digest", []),
        ("chunk-b", ["fact"]),
        ("bare", []),
        ("other", []),
        ("thread", []),
    ]


def _compared_with_every_better_hit(candidates: list[Candidate]) -> list[tuple[str, list[str]]]:
    """The definition, as :func:`merge_by_sources` computed it before its index: each hit
    compared with every hit kept before it."""
    kept: list[tuple[str, list[str], set[tuple[str, int]]]] = []
    for c in candidates:
        keys = (
            set() if c.point.kind in PARENTS else {source_key(c.point, s) for s in c.point.sources}
        )
        better = next((k for k in kept if keys and keys <= k[2]), None)
        if better is None:
            kept.append((c.point.id, [], keys))
        else:
            better[1].append(c.point.id)
    return [(pid, ids) for pid, ids, _ in kept]


def test_the_merge_is_the_same_as_comparing_each_hit_with_every_better_one() -> None:
    rng = random.Random(7)
    kinds = ["episode_chunk", "episode_turn", "fact", "summary", "digest", "thread", "document"]
    messages = [(session, seq) for session in ("s1", "s2") for seq in range(6)]
    for trial in range(300):
        hits = [
            cited(f"p{trial}-{i}", rng.choice(kinds), *rng.sample(messages, rng.randint(0, 4)))
            for i in range(rng.randint(1, 40))
        ]
        assert merged(hits) == _compared_with_every_better_hit(hits)


def test_kind_weights_are_validated() -> None:
    assert Recipe().kind_weights == {
        "summary": 0.5,
        "profile": 0.25,
        "digest": 0.25,
        "thread": 0.25,
    }
    with pytest.raises(ValueError, match=">= 0"):
        Recipe(kind_weights={"fact": -1})
    with pytest.raises(ValueError):
        Recipe(kind_weights={"nonsense": 1})  # type: ignore[dict-item]


@pytest.mark.slow
def test_recall_orders_sources_and_explains_the_kind_factor(start_daemon) -> None:
    points = {"per_message": False}  # hits are points (chunks), each citing its messages
    daemon = start_daemon(
        weaver=QUIET,
        recall={
            "recipes": {
                "points": points,
                "plain": {**points, "order_sources": False, "kind_weights": {}},
            }
        },
    )
    daemon.daemon.parts.semantic.wait_ready(120)
    with daemon.client() as c:
        talk(
            c,
            "alice",
            "s1",
            MAY,
            "How was the weekend?",
            "Quiet. I read a lot.",
            "I finally booked the ferry to Gotland for August.",
        )
        wait_indexed(c)
        consolidate(c)
        question = "When is the ferry to Gotland?"
        hits = c.recall(question, user_id="alice", k=10, explain=True, recipe="points").hits
        chunk = next(h for h in hits if h.kind == "episode_chunk" and "Gotland" in h.text)
        assert next(s.seq for s in chunk.sources) == 3
        # by default, one hit per message: the Gotland turn (or a fact drawn from it) first
        top = c.recall(question, user_id="alice", k=10, explain=True).hits[0]
        assert top.kind in ("episode_turn", "fact") and [s.seq for s in top.sources] == [3]
        [summary] = c.recall(
            question, user_id="alice", kinds=["summary"], explain=True, recipe="points"
        ).hits
        assert summary.explanation.kind_factor == 0.5
        assert summary.score == pytest.approx(summary.explanation.fused * 0.5)
        plain = c.recall(question, user_id="alice", k=10, explain=True, recipe="plain").hits
        chunk = next(h for h in plain if h.id == chunk.id)
        assert [s.seq for s in chunk.sources] == sorted(s.seq for s in chunk.sources)
        assert all(h.explanation.kind_factor == 1.0 for h in plain)
        got = c.get_node(chunk.id, user_id="alice").node  # the stored order is unchanged
        assert [s.seq for s in got.sources] == sorted(s.seq for s in got.sources)
