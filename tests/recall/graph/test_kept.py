"""The graph channel's kept structure (recall.graph.memory.MemoryGraphs): a scope's graph is
built from its memories' ids and the features kept for each (only new points are read), and
after any write it equals the graph built from scratch from every point. A seeded sequence of
writes of each kind the weaver and Forget make: turns (names inside and at the start of a
sentence, a speaker's short name), facts with their triplets, supersession and its undoing,
deletes of points and of episodes, a scope of chunks that gets its first turn, a Forget.
Real RocksDB, NetworkXGraph and embedded engine (tests.recall.world's World)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from recall.graph.files import FeatureFiles
from recall.graph.memory import MEMORY_KINDS, MemoryGraphs
from recall.graph.reads import FALLBACK_KINDS
from recall.graph.scope import ScopeGraph, build
from tests.recall.world import A2, A, B, World
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, PointFilter, Source, Validity, point_id

NAMES = ("Melanie", "Caroline", "Dave", "Clay Corner", "Biscuit", "Lisbon")
SPEAKERS = ("Melanie", "Caroline", "Jon")
LINES = (
    "I signed up for a pottery class at {n}.",
    "{n} was there too.",
    "Hey {n}! How was the weekend?",
    "Mel said {n} loves the park.",
    "We talked about {n} and {m} for hours.",
    "Nothing new today.",
)


def scratch(world: World, scope: Scope) -> ScopeGraph:
    """The scope's graph built from every point, as a first build does."""
    flt = PointFilter(
        user_id=scope.user_id, agent_id=scope.agent_id, kinds=MEMORY_KINDS, include_superseded=False
    )
    points = world.vectors.scroll(flt, 100_000)
    if not any(p.kind == "episode_turn" for p in points):
        points = world.vectors.scroll(
            PointFilter(
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                kinds=FALLBACK_KINDS,
                include_superseded=False,
            ),
            100_000,
        )
    triplets = [
        (e.id, e.subject, e.object)
        for e in world.graph.edges_where(
            lambda e: (
                e.scope.user_id == scope.user_id
                and (not scope.agent_id or e.scope.agent_id == scope.agent_id)
                and e.current
            )
        )
    ]
    return build(points, triplets)


def assert_same(kept: ScopeGraph, fresh: ScopeGraph, after: str) -> None:
    assert kept.memory_ids() == fresh.memory_ids(), after
    assert kept.entities == fresh.entities, after
    assert kept.size == fresh.size, after
    for name in ("src", "dst", "weight"):
        np.testing.assert_array_equal(
            getattr(kept, name), getattr(fresh, name), err_msg=f"{name} after {after}"
        )


@pytest.mark.parametrize("told", [False, True], ids=["ids-untold", "ids-told"])
@pytest.mark.parametrize("on_disk", [False, True], ids=["in-memory", "features-on-disk"])
def test_after_every_write_the_kept_graph_equals_one_built_from_scratch(
    world: World, tmp_path: Path, on_disk: bool, told: bool
):
    """With ``on_disk``, the features also go to files, and every fifth step the graphs are
    dropped as a restart would (a new MemoryGraphs on the same files), or a scope is evicted
    (a budget of one byte keeps only the graph just built). With ``told``, the writes tell
    the ids they touched (as SemanticStore's doors do), so a kept graph reads only those
    (recall.graph.writes); a delete by episode and a Forget still tell none."""
    world.tell_ids = told
    rng = random.Random(27)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1) if on_disk else None
    graphs = MemoryGraphs(world.semantic, files=files, max_bytes=1 if on_disk else 256 * 2**20)
    facts: list[str] = []
    closed: list[str] = []
    seq = iter(range(1, 10_000))
    world.chunk(B, (1, 2), text="Caroline and Biscuit went to Lisbon.")  # chunks only, at first

    def turn(scope: Scope) -> None:  # an episode's turns: one to three, told as one write
        with world.together():
            for _ in range(rng.randint(1, 3)):
                line = rng.choice(LINES).format(n=rng.choice(NAMES), m=rng.choice(NAMES))
                speaker = rng.choice(SPEAKERS)
                world.turn(scope, speaker, line, seq=next(seq), episode=rng.choice("xyz"))

    def fact(scope: Scope) -> None:
        s, o = rng.sample(NAMES, 2)
        facts.append(world.fact(scope, s, rng.choice(("likes", "visited")), o, seqs=(next(seq),)))

    def supersede(_scope: Scope) -> None:
        if facts:
            pid = facts.pop(rng.randrange(len(facts)))
            world.supersede(pid, 500)
            world.told({"alice", "bob"}, [pid])
            closed.append(pid)

    def undo(_scope: Scope) -> None:
        if closed:
            pid = closed.pop()
            world.graph.close_edges([pid], None)
            world.vectors.set_valid_to([pid], Validity())
            world.told({"alice", "bob"}, [pid])
            facts.append(pid)

    def delete(scope: Scope) -> None:
        some = world.vectors.ids(PointFilter(user_id=scope.user_id, agent_id=scope.agent_id), 50)
        if some:
            gone = rng.choice(some)
            world.semantic.delete(PointFilter(user_id=scope.user_id, ids=(gone,)), {scope.user_id})
            if gone in facts:
                facts.remove(gone)
                world.graph.remove_edges([gone])

    def episode(scope: Scope) -> None:
        ep = rng.choice("xyz")
        world.semantic.delete(
            PointFilter(user_id=scope.user_id, episode_ids=(ep,)), {scope.user_id}
        )

    def forget(scope: Scope) -> None:
        graphs.forget_scope(scope.user_id)

    writes: list[Callable[[Scope], None]] = [turn] * 6 + [fact] * 3 + [supersede, undo, delete]
    writes += [episode, forget]
    for step in range(60):
        scope = rng.choice((A, A2, B))
        write = rng.choice(writes)
        write(scope)
        if files is not None and step % 5 == 4:
            graphs = MemoryGraphs(world.semantic, files=files, max_bytes=1)  # a restart
        for seen in (A, A2, B):
            kept = graphs.get(seen, world.vectors)
            assert_same(kept, scratch(world, seen), f"step {step}: {write.__name__} {scope}")
    assert graphs.get(B, world.vectors).count  # B got turns: no longer the chunk fallback
    if files is not None:
        assert files.loads > 10  # builds after a restart or an eviction read the files


def test_a_write_told_with_its_ids_is_read_alone_by_the_next_build(
    world: World, monkeypatch: pytest.MonkeyPatch
):
    """After a write through SemanticStore.write, which tells the ids it wrote, the kept graph's
    next build reads those points alone and lists none of the scope's ids (under a fleet, the
    listing of every memory of the scope at each of its queries was a fifth of the daemon's
    interpreter time at 10M points). A delete by episode tells none: the next build lists the
    scope again. Either way the graph equals one built from scratch."""
    for seq in (1, 2, 3):
        world.turn(A, "Caroline", f"Melanie and I talked about Lisbon, part {seq}.", seq=seq)
    graphs = MemoryGraphs(world.semantic)
    graphs.get(A, world.vectors)
    listings: list[int] = []
    reads: list[list[str]] = []
    ids, get = world.vectors.ids, world.vectors.get

    def listing(flt: PointFilter, limit: int = 1000) -> list[str]:
        listings.append(limit)
        return ids(flt, limit)

    def read(wanted: list[str], user_id: str = "") -> list[MemoryPoint]:
        reads.append(list(wanted))
        return get(wanted, user_id)

    monkeypatch.setattr(world.vectors, "ids", listing)
    monkeypatch.setattr(world.vectors, "get", read)
    text = "Caroline: Dave moved to Clay Corner."
    sources = [Source("sess-ep2", 9, "m9", speaker="Caroline", text="Dave moved to Clay Corner.")]
    turn = MemoryPoint(
        point_id(A, "episode_turn", text, sources),
        "episode_turn",
        text,
        A,
        "ep2",
        "sess-ep2",
        sources,
        200,
        "index",
    )
    with world.semantic.write_lock:
        world.semantic.write([turn])
    kept = graphs.get(A, world.vectors)
    assert (listings, reads) == ([], [[turn.id]])
    assert "clay corner" in kept.entities
    assert_same(kept, scratch(world, A), "a write told with its ids")

    with world.semantic.write_lock:
        world.semantic.delete(PointFilter(user_id="alice", episode_ids=("ep2",)), {"alice"})
    kept = graphs.get(A, world.vectors)
    assert len(listings) == 1  # the scope listed again
    assert "clay corner" not in kept.entities
    assert_same(kept, scratch(world, A), "a delete by episode")


def test_a_write_told_during_a_build_is_read_by_the_next(
    world: World, monkeypatch: pytest.MonkeyPatch
):
    """A write told with its ids while the scope's first build runs (after that build listed the
    scope's ids) is read by the next build: the ids written are kept for a graph from the moment
    its build takes the scope's write count, not from the moment it is kept."""
    world.tell_ids = True
    world.turn(A, "Caroline", "We went to Lisbon.", seq=1)
    graphs = MemoryGraphs(world.semantic)
    ids = world.vectors.ids
    entered, go = threading.Event(), threading.Event()

    def listing(flt: PointFilter, limit: int = 1000) -> list[str]:
        found = ids(flt, limit)
        entered.set()
        assert go.wait(30)
        return found

    monkeypatch.setattr(world.vectors, "ids", listing)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(graphs.get, A, world.vectors)
        assert entered.wait(30)
        world.turn(A, "Melanie", "I loved Clay Corner.", seq=2)  # told, during the build
        go.set()
        assert "clay corner" not in first.result(30).entities  # listed before the write
    monkeypatch.setattr(world.vectors, "ids", ids)
    kept = graphs.get(A, world.vectors)
    assert "clay corner" in kept.entities
    assert_same(kept, scratch(world, A), "a write during a build")
