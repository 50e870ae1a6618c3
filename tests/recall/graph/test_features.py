"""The graph's features on disk (recall.graph.features.FeatureFiles): a scope built again after
a restart reads its features from the file and only the points the file lacks; Forget leaves
no file and no byte of the user's names, even with a build's save under way; an unreadable
file is ignored and written again; a full disk writes nothing; a first build of many memories
runs behind the query, which takes the file's graph meanwhile if there is one. Real RocksDB,
NetworkXGraph and embedded engine (tests.recall.world's World)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recall import ChannelNotReady
from recall.graph.features import Features, FeatureTable
from recall.graph.files import FeatureFiles
from recall.graph.memory import MemoryGraphs
from tests.recall.graph.test_kept import assert_same, scratch
from tests.recall.world import A, B, World
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, PointFilter, VectorStore
from tiers.space import DiskSpace


class CountingReads:
    """The world's vector store, counting the points ``get`` returns and the ``count`` calls
    (a proxy, not a fake)."""

    def __init__(self, vectors: VectorStore) -> None:
        self._vectors = vectors
        self.read = 0
        self.counts = 0

    def count(self, flt: PointFilter, *, exact: bool = True) -> int:
        self.counts += 1
        return self._vectors.count(flt, exact=exact)

    def get(self, ids: list[str], user_id: str | None = None) -> list[MemoryPoint]:
        found = self._vectors.get(ids, user_id)
        self.read += len(found)
        return found

    def __getattr__(self, name: str) -> object:
        return getattr(self._vectors, name)


def fill(world: World) -> None:
    for seq, name in enumerate(("Caroline", "Lisbon", "Biscuit", "Clay Corner"), start=1):
        world.turn(A, "Melanie", f"We talked about {name} all day.", seq=seq)
        world.turn(B, "Jon", f"{name} again?", seq=seq)
    world.fact(A, "Melanie", "visited", "Lisbon", seqs=(9,))


def files_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def rows(files: FeatureFiles, scope: Scope) -> int:
    """The memories of the scope's file (0: none readable), read beside ``files``' counts."""
    return len(FeatureFiles(files.path).load(scope))


def test_a_build_after_a_restart_reads_the_file_and_only_new_points(world: World, tmp_path: Path):
    fill(world)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    MemoryGraphs(world.semantic, files=files).get(A, world.vectors)
    assert files.saves == 1 and len(files_of(tmp_path / "graphs")) == 1
    world.turn(A, "Melanie", "We met Dave at Clay Corner.", seq=20)  # after the save

    reads = CountingReads(world.vectors)
    restarted = MemoryGraphs(world.semantic, files=files)
    graph = restarted.get(A, reads)  # type: ignore[arg-type]
    assert reads.read == 1  # the new turn; the others' features came from the file
    assert files.loads == 1
    assert_same(graph, scratch(world, A), "a restart")
    assert files.saves == 2  # the file now holds the new turn too
    assert "dave" in graph.entities


def test_a_first_build_of_many_reads_runs_behind_the_query_and_one_with_a_file_is_loaded(
    world: World, tmp_path: Path
):
    """A scope of more than ``inline_reads`` memories is not built in its first query: with
    no file, the query goes without the graph; with one, it takes the file's graph at once,
    no point read, and the build that lists the scope runs behind, the file's graph served
    until it is done (a write meanwhile included)."""
    fill(world)  # A: four turns and a fact
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    graphs = MemoryGraphs(world.semantic, files=files, inline_reads=4, wait_seconds=0)
    try:
        with pytest.raises(ChannelNotReady, match="alice"):
            graphs.get(A, world.vectors)  # five points to read: more than four
        assert graphs.get(B, world.vectors).count == 4  # four: built by the query
        assert graphs.idle(30)
        assert graphs.get(A, world.vectors).count == 5
        assert rows(files, A) == 5
    finally:
        graphs.close()

    world.turn(A, "Melanie", "We met Dave at Clay Corner.", seq=20)
    world.turn(A, "Melanie", "Dave likes Lisbon.", seq=21)
    reads = CountingReads(world.vectors)
    restarted = MemoryGraphs(world.semantic, files=files, inline_reads=4, wait_seconds=0)
    try:
        with restarted.deferred():  # the build behind starts at the query's end
            loaded = restarted.get(A, reads)  # type: ignore[arg-type]
            assert (reads.read, files.loads) == (0, 1) and loaded.count == 5
            assert "dave" not in loaded.entities  # written after the save: not in the file
            world.turn(A, "Melanie", "Dave drove to Lisbon.", seq=22)  # a write meanwhile
            assert restarted.get(A, reads) is loaded  # type: ignore[arg-type]
        assert restarted.idle(30)
        graph = restarted.get(A, reads)  # type: ignore[arg-type]
        assert reads.read == 3 and files.loads == 1  # the turns the file lacks, read behind
        assert_same(graph, scratch(world, A), "a build behind a file's graph")
        assert "dave" in graph.entities and rows(files, A) == 8  # the file has them now
    finally:
        restarted.close()


def test_forget_drops_a_graph_loaded_from_its_file(world: World, tmp_path: Path):
    fill(world)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    MemoryGraphs(world.semantic, files=files).get(A, world.vectors)
    world.turn(A, "Melanie", "We met Dave at Clay Corner.", seq=20)
    graphs = MemoryGraphs(world.semantic, files=files, inline_reads=4)
    try:
        with graphs.deferred():
            assert graphs.get(A, world.vectors).count == 5  # the file's
            assert graphs.forget_scope(A.user_id) == 1
            assert graphs.held(A) is None and not files_of(tmp_path / "graphs")
    finally:
        graphs.close()


def test_a_scope_written_since_its_build_is_rebuilt_in_the_query_unless_many_points_came(
    world: World,
):
    """A scope built here and written since is rebuilt by its next query from the new points
    alone, with no count of its memories (an exact count of the engine at every query of a
    scope under writes: found by py-spy under a fleet at 10M); when more than
    ``inline_reads`` came at once, it is rebuilt behind and the query takes the last build."""
    fill(world)  # B: four turns
    graphs = MemoryGraphs(world.semantic, inline_reads=4, wait_seconds=0)
    try:
        reads = CountingReads(world.vectors)
        assert graphs.get(B, reads).count == 4  # type: ignore[arg-type]
        world.turn(B, "Jon", "We met Dave at Clay Corner.", seq=20)
        reads.read = reads.counts = 0
        graph = graphs.get(B, reads)  # type: ignore[arg-type]
        assert (reads.read, reads.counts) == (1, 0)
        assert_same(graph, scratch(world, B), "a rebuild in the query")
        for seq in range(30, 35):  # five at once: more than four to read
            world.turn(B, "Jon", f"Dave went to Lisbon on day {seq}.", seq=seq)
        reads.read = 0
        assert graphs.get(B, reads).count == 5  # type: ignore[arg-type]
        assert graphs.idle(30) and reads.read == 5  # the query read none: the build did
        assert graphs.get(B, reads).count == 10  # type: ignore[arg-type]
        assert reads.counts == 0
        assert_same(graphs.get(B, world.vectors), scratch(world, B), "a rebuild behind")
    finally:
        graphs.close()


def test_a_file_holding_points_deleted_since_is_rewritten_without_them(
    world: World, tmp_path: Path
):
    fill(world)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    MemoryGraphs(world.semantic, files=files).get(A, world.vectors)
    gone = world.turn(A, "Melanie", "Zanzibar is on my list.", seq=30)
    MemoryGraphs(world.semantic, files=files).get(A, world.vectors)
    world.semantic.delete(PointFilter(user_id=A.user_id, ids=(gone,)), {A.user_id})

    graph = MemoryGraphs(world.semantic, files=files).get(A, world.vectors)
    assert "zanzibar" not in graph.entities
    assert_same(graph, scratch(world, A), "a delete")
    assert not any(
        b"Zanzibar" in f.read_bytes() or gone.encode() in f.read_bytes()
        for f in files_of(tmp_path / "graphs")
    )


def test_forget_deletes_the_users_files_and_a_save_under_way_is_dropped(
    world: World, tmp_path: Path
):
    fill(world)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    graphs = MemoryGraphs(world.semantic, files=files)
    graphs.get(A, world.vectors)
    graphs.get(B, world.vectors)
    assert len(files_of(tmp_path / "graphs")) == 2

    generation = files.generation(A.user_id)  # a build of A begins ...
    features = FeatureTable.of(
        [(p.id, Features.of(p)) for p in world.vectors.scroll(PointFilter(user_id="alice"), 99)]
    )
    graphs.forget_scope(A.user_id)  # ... A is forgotten meanwhile ...
    assert not files.save(A, features, generation)  # ... and its save is dropped

    left = files_of(tmp_path / "graphs")
    assert len(left) == 1  # B's
    assert not any(b"caroline" in f.read_bytes() and b"melanie" in f.read_bytes() for f in left)
    assert files.save(A, features, files.generation(A.user_id))  # a build after the Forget


def test_an_unreadable_file_is_ignored_and_written_again(world: World, tmp_path: Path):
    fill(world)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    MemoryGraphs(world.semantic, files=files).get(A, world.vectors)
    (file,) = files_of(tmp_path / "graphs")
    file.write_bytes(b'{"format": 1, "rows": [["cut')
    assert rows(files, A) == 0

    graph = MemoryGraphs(world.semantic, files=files).get(A, world.vectors)
    assert_same(graph, scratch(world, A), "an unreadable file")
    assert files.loads == 0 and files.saves == 2
    assert len(files.load(A)) == graph.count  # readable again


def test_no_file_is_written_below_the_disk_reserve_or_for_a_small_scope(
    world: World, tmp_path: Path
):
    fill(world)
    space = DiskSpace(tmp_path, 100 * 2**20, probe=lambda _path: 2**20)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1, check=space.check)
    graph = MemoryGraphs(world.semantic, files=files).get(A, world.vectors)
    assert graph.count and files.saves == 0
    assert files_of(tmp_path / "graphs") == []

    few = FeatureFiles(tmp_path / "few", min_memories=100)
    MemoryGraphs(world.semantic, files=few).get(A, world.vectors)
    assert few.saves == 0 and not (tmp_path / "few").exists()


def test_a_temporary_file_a_crash_left_is_swept_at_open(tmp_path: Path):
    (tmp_path / "graphs" / "tmp").mkdir(parents=True)
    (tmp_path / "graphs" / "tmp" / "cut.json").write_text("{")
    FeatureFiles(tmp_path / "graphs")
    assert not (tmp_path / "graphs" / "tmp").exists()


def test_steady_writes_rewrite_the_file_per_tenth_and_a_delete_at_once(
    world: World, tmp_path: Path
):
    for seq in range(1, 31):
        world.turn(A, "Melanie", f"Note {seq} about Lisbon.", seq=seq)
    files = FeatureFiles(tmp_path / "graphs", min_memories=1)
    graphs = MemoryGraphs(world.semantic, files=files)
    graphs.get(A, world.vectors)
    assert files.saves == 1  # 30 memories
    for seq in (31, 32):
        world.turn(A, "Melanie", f"Note {seq} about Biscuit.", seq=seq)
        graphs.get(A, world.vectors)
    assert files.saves == 1  # 2 new of 30: under a tenth, kept in memory only
    world.turn(A, "Melanie", "Note 33 about Biscuit.", seq=33)
    graphs.get(A, world.vectors)
    assert files.saves == 2  # 3 of 30
    gone = [world.turn(A, "Melanie", f"Zanzibar, time {n}.", seq=34 + n) for n in range(4)]
    graphs.get(A, world.vectors)
    assert files.saves == 3  # 4 of 33: the file now names Zanzibar
    assert any(b"zanzibar" in f.read_bytes() for f in files_of(tmp_path / "graphs"))
    world.semantic.delete(PointFilter(user_id=A.user_id, ids=tuple(gone)), {A.user_id})
    graphs.get(A, world.vectors)
    assert files.saves == 4  # memories went: their names leave the file at once
    assert not any(b"zanzibar" in f.read_bytes() for f in files_of(tmp_path / "graphs"))


def test_a_scope_without_turns_counts_its_chunks_among_the_reads_of_a_first_build(
    world: World, tmp_path: Path
):
    for seq in range(1, 6):  # A: five chunks and a fact, no turn: the build reads all six
        world.chunk(A, (seq,), text=f"Melanie talked about Lisbon, part {seq}.")
    world.fact(A, "Melanie", "visited", "Lisbon", seqs=(9,))
    world.turn(B, "Jon", "Lisbon again?", seq=1)  # B: two turns, two chunks and a fact
    world.turn(B, "Jon", "Lisbon once more?", seq=2)
    world.chunk(B, (1,))
    world.chunk(B, (2,))
    world.fact(B, "Jon", "visited", "Lisbon", seqs=(1,))
    graphs = MemoryGraphs(
        world.semantic, files=FeatureFiles(tmp_path / "graphs"), inline_reads=4, wait_seconds=0
    )
    try:
        with pytest.raises(ChannelNotReady, match="alice"):
            graphs.get(A, world.vectors)  # one fact alone would be read in the query
        assert graphs.get(B, world.vectors).count == 3  # its turns and its fact: three reads
        assert graphs.idle(30)
        assert graphs.get(A, world.vectors).count == 6
    finally:
        graphs.close()


def test_a_build_asked_for_behind_within_a_deferred_block_starts_at_its_end(
    world: World, tmp_path: Path
):
    fill(world)  # A: four turns and a fact
    graphs = MemoryGraphs(world.semantic, inline_reads=4, wait_seconds=0)
    reads = CountingReads(world.vectors)
    try:
        with graphs.deferred():
            with graphs.deferred(), pytest.raises(ChannelNotReady, match="alice"):
                graphs.get(A, reads)  # type: ignore[arg-type]  # nested: the outer one starts it
            with pytest.raises(ChannelNotReady, match="being built"):
                graphs.get(A, reads)  # type: ignore[arg-type]
            assert not graphs.idle(1) and reads.read == 0  # held, not started
        assert graphs.idle(30) and reads.read == 5
        assert graphs.get(A, world.vectors).count == 5

        world.turn(B, "Jon", "Lisbon, Lisbon.", seq=9)  # B: five turns
        with graphs.deferred():
            with pytest.raises(ChannelNotReady, match="bob"):
                graphs.get(B, world.vectors)
            graphs.close()
        assert graphs.idle(0)  # closed meanwhile: nothing started
        with pytest.raises(ChannelNotReady, match="bob"):
            graphs.get(B, world.vectors)
    finally:
        graphs.close()
