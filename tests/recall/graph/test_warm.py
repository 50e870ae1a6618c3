"""The graphs warmed at a start (recall.graph.warm): once Tier 3 has opened, the graphs of the
feature files are loaded, the files written last first, within the warm-up's budget; a first
query takes such a graph with no count and no point read, and the build that lists its scope
runs behind it; the warm-up evicts nothing, and its graphs go first out of the budget; a file
written without its scope, or not where its scope's would be, is left out. Real RocksDB,
NetworkXGraph and embedded engine (tests.recall.world's World); Tier 3's opening is its own
event, published as the store publishes it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from recall.graph.files import FeatureFiles
from recall.graph.memory import MemoryGraphs
from tests.recall.graph.test_features import CountingReads, fill
from tests.recall.graph.test_kept import assert_same, scratch
from tests.recall.world import A2, A, B, World
from tiers.semantic.events import Tier3Opened


def saved(world: World, files: FeatureFiles) -> dict[str, int]:
    """Build A's and B's graphs once (their files written, A's before B's); their sizes."""
    graphs = MemoryGraphs(world.semantic, files=files)
    try:
        sizes = {s.user_id: graphs.get(s, world.vectors).nbytes for s in (A, B)}
    finally:
        graphs.close()
    os.utime(files._file(A), (1_000_000, 1_000_000))  # A's file written long before B's
    return sizes


def started(world: World, files: FeatureFiles, warm_bytes: int, **kw: int) -> MemoryGraphs:
    graphs = MemoryGraphs(world.semantic, files=files, warm_bytes=warm_bytes, **kw)
    world.semantic.events.publish(Tier3Opened(True))  # as Tier 3 opens at a start
    assert graphs.idle(30)
    return graphs


def test_the_files_written_last_are_loaded_first_within_the_budget(world: World, tmp_path: Path):
    fill(world)  # A: four turns and a fact; B: four turns
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    sizes = saved(world, files)
    assert list(files.saved()) == [B, A]
    world.turn(B, "Jon", "We met Dave at Clay Corner.", seq=20)  # after B's file was saved

    graphs = started(world, files, warm_bytes=sizes["bob"] + sizes["alice"] - 1)
    try:
        warmed = graphs.held(B)
        assert warmed is not None and graphs.held(A) is None  # A's would pass the budget
        assert graphs.nbytes == warmed.nbytes
        reads = CountingReads(world.vectors)
        with graphs.deferred():  # the build behind starts at the query's end
            assert graphs.get(B, reads) is warmed  # type: ignore[arg-type]
            assert (reads.read, reads.counts) == (0, 0)  # no count, no point read
            assert "dave" not in warmed.entities  # written after the save: not in the file
        assert graphs.idle(30)
        built = graphs.get(B, reads)  # type: ignore[arg-type]
        assert built is not warmed and reads.read == 1  # the new turn alone, read behind
        assert "dave" in built.entities
        assert_same(built, scratch(world, B), "a build behind a warmed graph")
        assert graphs.get(A, world.vectors).count == 5  # asked: loaded as ever
    finally:
        graphs.close()

    nothing = started(world, files, warm_bytes=0)
    try:
        assert nothing.held(A) is None and nothing.held(B) is None and nothing.nbytes == 0
    finally:
        nothing.close()


def test_the_warm_up_evicts_nothing_and_its_graphs_go_out_first(world: World, tmp_path: Path):
    fill(world)
    world.turn(A2, "Melanie", "Biscuit ran to Lisbon.", seq=1)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    sizes = saved(world, files)
    budget = sizes["alice"] + sizes["bob"]
    graphs = MemoryGraphs(world.semantic, files=files, warm_bytes=budget, max_bytes=budget)
    try:
        asked = graphs.get(A, world.vectors)  # a query before the warm-up: built, kept
        world.semantic.events.publish(Tier3Opened(True))
        assert graphs.idle(30)
        assert graphs.held(A) is asked and graphs.held(B) is not None  # both fit
        graphs.get(A2, world.vectors)  # past the budget: one goes
        assert graphs.held(B) is None and graphs.held(A) is asked  # the warmed one first
    finally:
        graphs.close()

    small = MemoryGraphs(world.semantic, files=files, warm_bytes=budget, max_bytes=budget)
    try:
        bigger = small.get(A2, world.vectors)
        small.max_bytes = bigger.nbytes + min(sizes.values()) - 1  # room for neither file
        small.warm_bytes = small.max_bytes
        world.semantic.events.publish(Tier3Opened(True))
        assert small.idle(30)
        assert small.held(A2) is bigger and small.held(A) is None and small.held(B) is None
    finally:
        small.close()


def test_a_forgotten_user_or_a_closed_store_warms_nothing(world: World, tmp_path: Path):
    fill(world)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    sizes = saved(world, files)
    graphs = MemoryGraphs(world.semantic, files=files, warm_bytes=2 * sum(sizes.values()))
    try:
        graphs.forget_scope(B.user_id)  # its files deleted
        world.semantic.events.publish(Tier3Opened(True))
        assert graphs.idle(30)
        assert graphs.held(B) is None and graphs.held(A) is not None
    finally:
        graphs.close()

    closed = MemoryGraphs(world.semantic, files=files, warm_bytes=2 * sum(sizes.values()))
    closed.close()
    world.semantic.events.publish(Tier3Opened(True))
    failed = MemoryGraphs(world.semantic, files=files, warm_bytes=2 * sum(sizes.values()))
    world.semantic.events.publish(Tier3Opened(False))  # Tier 3 failed to open
    try:
        assert closed.idle(30) and failed.idle(30)
        assert closed.held(A) is None and failed.held(A) is None
    finally:
        failed.close()


def test_a_file_without_its_scope_or_out_of_its_place_is_left_out(world: World, tmp_path: Path):
    fill(world)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    saved(world, files)
    a, b = files._file(A), files._file(B)
    with np.load(a) as archive:  # as a version before the scope was written saved it
        np.savez(a, **{k: archive[k] for k in archive.files if k != "scope"})
    moved = b.parent.parent / "elsewhere" / b.name
    moved.parent.mkdir()
    shutil.copy(b, moved)
    assert list(files.saved()) == [B]  # B's, in its place
    b.unlink()
    assert list(files.saved()) == []
