"""The engine's point ids as text (tiers.semantic.vectors.edge.ids): the same text as
``str()`` gives, one id at a time or many in one pass, and the ids a real shard lists."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

from tests.contracts.vectors import DIM, MODEL, mem
from tiers.semantic.vectors import PointFilter
from tiers.semantic.vectors.edge.ids import texts
from tiers.semantic.vectors.edge.store import EdgeVectorStore


def test_many_uuids_are_their_canonical_text_in_order() -> None:
    rng = random.Random(7)
    ids = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(1000)]
    ids += [uuid.UUID(int=0), uuid.UUID(int=(1 << 128) - 1)]  # every digit 0, then f
    assert texts(ids) == [str(i) for i in ids]
    assert all(type(t) is str and len(t) == 36 for t in texts(ids))


def test_few_and_none_and_ids_of_other_types() -> None:
    few = [uuid.uuid4() for _ in range(3)]
    assert texts(few) == [str(i) for i in few] and texts([]) == []
    upper = str(few[0]).upper()
    assert texts([*few, upper, 12]) == [*map(str, few), str(few[0]), "12"]


def test_a_shards_listing_is_the_ids_written(tmp_path: Path) -> None:
    store = EdgeVectorStore(tmp_path / "vectors")
    try:
        store.ensure(MODEL, DIM)
        points = [mem(f"alice note {i}", seq=i, seed=i) for i in range(300)]
        store.upsert(points)
        listed = store.ids(PointFilter(user_id="alice"), limit=1000)
        assert sorted(listed) == sorted(p.id for p in points) and len(set(listed)) == 300
    finally:
        store.close()
