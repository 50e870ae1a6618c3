"""The scope graph's assembly in arrays (recall.graph.scope.assemble) against its definition
written out in plain Python, one memory and one key at a time (``reference`` below, the
assembly as it was before it became arrays): on seeded random scopes, with speakers and
their short forms, names inside and at the start of sentences, blank names, triplets of
absent memories, questions, replies and repeated turns, they give the same nodes, edges and
weights. The feature table's row operations (take, append, compact) and its file keep every
row's features."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from recall.graph.features import Features, FeatureTable
from recall.graph.files import FeatureFiles
from recall.graph.scope import REPLY_WEIGHT, assemble, short_names
from tiers.core.records import Scope
from tiers.semantic.graph import normalize

Edges = tuple[list[str], dict[str, int], list[int], list[int], list[float]]

SPEAKERS = ("melanie", "caroline", "jon", "mel anderson", "")
NAMES = ("lisbon", "clay corner", "biscuit", "mel", "caro", "dave", "street fighter", "")
SESSIONS = ("s1", "s2", "s3")


def reference(
    memories: list[tuple[str, Features]],
    triplets: list[tuple[str, str, str]],
    reply_weight: float = REPLY_WEIGHT,
) -> Edges:
    """The graph by its definition (see recall.graph.scope's module text)."""
    triplets = sorted((pid, normalize(s), normalize(o)) for pid, s, o in triplets)
    speakers = {k for _id, f in memories for k in f.speakers if k}
    known = speakers | {k for _id, f in memories for k in f.inside}
    known |= {x for _id, s, o in triplets for x in (s, o)}
    alias = short_names(speakers, known)
    links = [{k for k in f.speakers if k} | f.inside | (f.initial & known) for _i, f in memories]
    ids = [pid for pid, _f in memories]
    index = {m: i for i, m in enumerate(ids)}
    for point_id, subject, obj in triplets:
        if point_id in index:
            links[index[point_id]] |= {subject, obj}
    links = [{alias.get(k, k) for k in keys if k} for keys in links]
    entities: dict[str, int] = {}
    src: list[int] = []
    dst: list[int] = []
    for i, keys in enumerate(links):
        for key in sorted(keys):
            src.append(i)
            dst.append(len(ids) + entities.setdefault(key, len(entities)))
    degree = {d: dst.count(d) for d in set(dst)}
    weight = [1.0 / math.log1p(float(degree[d])) for d in dst]
    for _id, subject, obj in triplets:
        u, v = entities.get(alias.get(subject, subject)), entities.get(alias.get(obj, obj))
        if u is not None and v is not None and u != v:
            src.append(len(ids) + u)
            dst.append(len(ids) + v)
            weight.append(1.0)
    if reply_weight > 0:
        turns = {f.turn: i for i, (_id, f) in enumerate(memories) if f.turn is not None}
        for i, (_id, f) in enumerate(memories):
            reply = turns.get((f.turn[0], f.turn[1] + 1)) if f.asks and f.turn else None
            if reply is not None:
                src.append(i)
                dst.append(reply)
                weight.append(reply_weight)
    nodes = {key: len(ids) + n for key, n in entities.items()}
    nodes.update({short: nodes[full] for short, full in alias.items() if full in nodes})
    return ids, nodes, src, dst, weight


def random_scope(
    rng: random.Random, size: int
) -> tuple[list[tuple[str, Features]], list[tuple[str, str, str]]]:
    memories: list[tuple[str, Features]] = []
    for n in range(size):
        kind = rng.choice(("episode_turn", "episode_turn", "fact", "episode_chunk"))
        turn = None
        if kind == "episode_turn":
            turn = (rng.choice(SESSIONS), rng.randrange(0, 12))  # repeats happen
        features = Features(
            kind,
            frozenset(rng.sample(SPEAKERS, rng.randrange(0, 3))),
            frozenset(rng.sample(NAMES, rng.randrange(0, 3))),
            frozenset(rng.sample((*NAMES, "hey", "hey dave", "so"), rng.randrange(0, 3))),
            turn,
            turn is not None and rng.random() < 0.4,
        )
        memories.append((f"{n:08d}-0000-0000-0000-{rng.randrange(10**12):012d}", features))
    rng.shuffle(memories)
    ends = ("Melanie", "Dave", "LISBON", "Biscuit ", "Chess", "Mel")
    triplets = [
        (
            rng.choice(memories)[0] if memories and rng.random() < 0.8 else "absent",
            rng.choice(ends),
            rng.choice(ends),
        )
        for _ in range(rng.randrange(0, size // 2 + 2))
    ]
    return memories, triplets


@pytest.mark.parametrize("seed", range(40))
def test_the_arrays_give_the_graph_of_the_definition(seed: int):
    rng = random.Random(seed)
    memories, triplets = random_scope(rng, rng.choice((0, 1, 5, 30, 120)))
    reply = rng.choice((0.0, REPLY_WEIGHT, 2.0))
    ids, nodes, src, dst, weight = reference(memories, triplets, reply)

    graph = assemble(FeatureTable.of(memories), triplets, reply)
    assert graph.memory_ids() == ids
    assert graph.entities == nodes
    assert graph.size == len(ids) + len(set(nodes.values()))
    assert graph.src.tolist() == src and graph.dst.tolist() == dst
    np.testing.assert_allclose(graph.weight, weight, rtol=1e-12)
    for i, pid in enumerate(ids):
        assert graph.node(pid) == i
    assert graph.node("not-a-memory") is None


def table_rows(table: FeatureTable) -> list[tuple[str, Features]]:
    return [(bytes(table.ids[i]).decode(), table.features(i)) for i in range(len(table))]


@pytest.mark.parametrize("seed", range(10))
def test_take_append_and_the_file_keep_each_rows_features(seed: int, tmp_path: Path):
    rng = random.Random(seed)
    memories, _triplets = random_scope(rng, 60)
    first, second = memories[:35], memories[35:]
    table = FeatureTable.of(first).append(FeatureTable.of(second))
    assert table_rows(table) == memories
    rows = rng.sample(range(len(memories)), 25)
    part = table.take(np.array(rows))
    assert table_rows(part) == [memories[r] for r in rows]
    used = {
        w
        for _id, f in table_rows(part)
        for w in (f.kind, *f.speakers, *f.inside, *f.initial, *(f.turn[:1] if f.turn else ()))
    }
    assert set(part.words) == used  # no word of a row left out

    files = FeatureFiles(tmp_path, min_memories=1)
    scope = Scope("alice", "bot")
    assert files.save(scope, part, files.generation("alice"))
    assert table_rows(files.load(scope)) == table_rows(part)
    ids = np.array([pid for pid, _f in memories], dtype="S")
    expected = [rows.index(i) if i in rows else -1 for i in range(len(memories))]
    assert part.positions(ids).tolist() == expected


def test_a_file_whose_codes_point_outside_its_words_is_refused(tmp_path: Path):
    memories, _triplets = random_scope(random.Random(3), 20)
    files = FeatureFiles(tmp_path, min_memories=1)
    scope = Scope("alice", "bot")
    assert files.save(scope, FeatureTable.of(memories), 0)
    (file,) = tmp_path.rglob("*.npz")
    with np.load(file) as archive:
        arrays = {name: archive[name] for name in archive.files}
    arrays["inside_codes"] = arrays["inside_codes"] + 10_000
    with file.open("wb") as out:
        np.savez(out, **arrays)  # type: ignore[arg-type]
    assert len(files.load(scope)) == 0 and files.loads == 0  # ignored, logged
