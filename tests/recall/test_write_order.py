"""The same memories written in another order give the same answer: a store's engine keeps
points in the order they were written and breaks its ties by it, and a weaver writes in
batches whose sizes vary from run to run (tiers.semantic.vectors.ranking). Real model, RocksDB
and embedded engine."""

from __future__ import annotations

from pathlib import Path

from recall import Query
from recall.engine import RecallEngine
from recall.recipe import Recipe
from tests.contracts.corpus import A, Tier3, channels, corpus, turn
from tiers.semantic.vectors import MemoryPoint

REPEATED = "Biscuit barked at the mailman again this morning."
QUESTIONS = (REPEATED, "Why does Biscuit bark?", "Where does Caroline live?")


def memories() -> list[MemoryPoint]:
    """The corpus, and one message said in 70 sessions: more ties than a channel's depth."""
    points, _edges = corpus()
    said = [turn(A, f"r{i:02d}", 1, "Melanie", REPEATED, 1_000 + i) for i in range(70)]
    return [*points, *said]


def answers(root: Path, written: list[MemoryPoint]) -> list[list[str]]:
    tier3 = Tier3(root)
    try:
        with tier3.semantic.write_lock:
            tier3.semantic.write(written)
        recall = RecallEngine(tier3.semantic, channels(tier3.semantic), {})
        try:
            return [
                [h.point.id for h in recall.recall(Query(q, A, 10, Recipe())).hits]
                for q in QUESTIONS
            ]
        finally:
            recall.close()
    finally:
        tier3.close()


def test_memories_written_in_another_order_give_the_same_answers(tmp_path: Path) -> None:
    points = sorted(memories(), key=lambda p: p.id)
    first = answers(tmp_path / "ascending", points)
    again = answers(tmp_path / "descending", points[::-1])
    assert all(first) and first == again
    said = {p.id for p in points if p.text.endswith(REPEATED)}
    assert len(said & set(first[0])) >= 5  # the repeated message fills most of its answer
