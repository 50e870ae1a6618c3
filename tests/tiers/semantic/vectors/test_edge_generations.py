"""The embedded store builds its index in a child process and swaps the built copy in
(tiers.semantic.vectors.edge.generations): writes made during the build are kept, a failed or
interrupted build leaves the store as it was, crash leftovers are swept, and a store in the
layout before generations (the shard in the directory itself) is read and moved on."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from qdrant_edge import EdgeShard, Memory, PayloadSchemaType, UpdateOperation

from tests.contracts.vectors import BOB, T0, alice, ids, mem, ready, unit
from tests.support.builds import child_running, gated_child, index_small_stores
from tests.support.disk import files_with
from tests.support.gates import served
from tests.support.polling import wait_until
from tiers.core.sparse import data_size
from tiers.semantic.vectors import (
    IndexBuildCancelled,
    MemoryPoint,
    PointFilter,
    Validity,
    VectorStoreUnavailable,
)
from tiers.semantic.vectors.edge import generations
from tiers.semantic.vectors.edge import shard as edge_shard
from tiers.semantic.vectors.edge.store import SIDECAR, EdgeVectorStore
from tiers.semantic.vectors.storage import DenseStorage

DEADLINE = 60.0


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "vectors"


@pytest.fixture(autouse=True)
def _indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    index_small_stores(monkeypatch)  # a build of these few points swaps a copy in


@pytest.fixture
def store(path: Path) -> Iterator[EdgeVectorStore]:
    with ready(EdgeVectorStore, path) as s:
        yield s


def points(n: int, start: int = 0, seed: int = 0) -> list[MemoryPoint]:
    return [mem(f"memory {i} of the build", seq=i, seed=seed + i) for i in range(start, start + n)]


def test_a_new_store_starts_in_its_first_generation(store, path):
    assert (path / generations.CURRENT).read_text().strip() == "gen-000001"
    assert (path / "gen-000001" / "edge_config.json").exists()
    assert (path / SIDECAR).exists()
    assert not (path / "edge_config.json").exists()


def test_a_load_reads_the_int8_copies_and_payload_indexes_first_and_nothing_else(path):
    with ready(EdgeVectorStore, path, storage=DenseStorage("int8")) as store:
        store.upsert(points(300))
        store.optimize()  # an indexed segment, with its int8 copy
    gen = generations.current(path)
    copies = [f for f in gen.glob("segments/*/vector_storage-*/quantized.*") if f.is_file()]
    indexes = [f for f in gen.glob("segments/*/payload_index/**/*") if f.is_file()]
    assert copies and indexes
    assert edge_shard.warm(gen) == sum(data_size(f) for f in [*copies, *indexes])
    assert edge_shard.warm(path / "gen-none") == 0  # nothing there: nothing read
    with ready(EdgeVectorStore, path, storage=DenseStorage("int8")) as reopened:
        assert reopened.count(PointFilter()) == 300


def test_a_read_ahead_reads_a_files_data_and_passes_over_its_holes(tmp_path):
    """The engine preallocates its files sparse: a shard's int8 copies and payload indexes at
    1M are 68 MiB, of which 5.7 are data; reading the holes' zeros took most of a load's
    warm-up. Each byte of data is read once (and ``between`` called before each MiB)."""
    index = tmp_path / "gen" / "segments" / "s1" / "payload_index" / "kind-map"
    index.mkdir(parents=True)
    with (index / "page_0.dat").open("wb") as f:
        f.write(b"k" * 3000)
        f.seek(4 << 20)
        f.write(b"v" * (3 << 20))  # three MiB of data after a hole
        f.truncate(16 << 20)  # and a hole to the end
    calls: list[None] = []
    read = edge_shard.read_ahead(tmp_path / "gen", ["payload_index"], lambda: calls.append(None))
    assert read == data_size(index / "page_0.dat")  # whole blocks: at least what was written
    assert 3000 + (3 << 20) <= read < 4 << 20
    assert len(calls) == 4  # the first range, then the second's three MiB


def test_a_read_of_a_large_share_of_a_shard_reads_its_files_ahead(store, path, monkeypatch):
    """The episode ids of a user holding most of the shard read its payload files ahead, and
    the delete of their points its sparse vectors, payloads and payload indexes (what the
    deletes would fault one page at a time); a user's few points read nothing ahead."""
    from tiers.semantic.vectors.edge import builds as edge_builds

    read: list[tuple[list[str], int]] = []

    def spy(gen: Path, parts: list[str], between: Callable[[], None] | None = None) -> int:
        read.append((list(parts), n := edge_shard.read_ahead(gen, parts, between)))
        return n

    monkeypatch.setattr(edge_builds, "read_ahead", spy)
    store.upsert([mem(f"alice {i}", seq=i, episode=f"ep-{i % 7}") for i in range(600)])
    store.upsert([mem(f"bob {i}", scope=BOB, seq=i, seed=i) for i in range(20)])
    assert store.episode_ids(PointFilter(user_id="bob"), 10_000) == {"ep-1"}
    assert read == []  # 20 points: no read ahead
    assert store.episode_ids(alice(), 10_000) == {f"ep-{i}" for i in range(7)}
    payloads = list(generations.current(path).glob("segments/*/payload_storage/**/*"))
    size = sum(data_size(f) for f in payloads if f.is_file())
    assert read == [(["payload_storage"], size)]
    assert store.episode_ids(alice(), 100) <= {f"ep-{i}" for i in range(7)}  # 100: none
    assert store.delete(alice()) == 600
    reads = ["vector_storage-sparse", "payload_index", "payload_storage"]
    assert [parts for parts, n in read[1:]] == [reads] and read[1][1] > size
    assert store.count(alice()) == 0 and store.count(PointFilter(user_id="bob")) == 20


def test_a_build_swaps_the_built_copy_in(store, path):
    store.upsert(points(300))
    query = [float(x) for x in unit(7)]
    before = ids(store.search_dense(query, alice(), limit=10))
    store.optimize()
    assert store.builds == 1
    assert generations.current(path) == path / "gen-000002"
    assert not (path / "gen-000001").exists()  # the old generation is gone
    assert ids(store.search_dense(query, alice(), limit=10)) == before
    store.optimize()  # nothing new to index: the copy is dropped, the live generation stays
    assert store.builds == 1 and store.builds_unneeded == 1
    assert generations.current(path) == path / "gen-000002"
    assert not (path / "gen-000003").exists()
    store.upsert(points(50, start=300))
    before = ids(store.search_dense(query, alice(), limit=10))
    store.optimize()
    assert store.builds == 2 and generations.current(path) == path / "gen-000003"
    assert ids(store.search_dense(query, alice(), limit=10)) == before
    store.close()
    with ready(EdgeVectorStore, path) as again:
        assert again.count(PointFilter()) == 350
        assert ids(again.search_dense(query, alice(), limit=10)) == before


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set when a build asks to step aside before it loads its built copy; the wait is
    bounded by an hour, so it lasts as long as a request is served."""
    from tiers.semantic.vectors.edge import builds as edge_builds

    event = threading.Event()
    real = edge_builds.REQUESTS.step_aside

    def step_aside(most: float, stopped: Callable[[], bool] | None = None) -> float:
        event.set()
        return real(most, stopped)

    monkeypatch.setattr(edge_builds, "STEP_ASIDE_SECONDS", 3600.0)
    monkeypatch.setattr(edge_builds.REQUESTS, "step_aside", step_aside)
    return event


def test_a_built_copy_is_loaded_only_once_no_request_is_served(store, asked):
    """The load of a built copy holds the interpreter throughout: none starts while a Recall
    is served (tiers.core.priority.REQUESTS), and the copy is swapped in once none is."""
    store.upsert(points(300))
    with served():
        build = threading.Thread(target=store.optimize, daemon=True)
        build.start()
        assert asked.wait(DEADLINE), "the build never stepped aside before its load"
        assert not threading.Event().wait(0.3)  # time to load, were it not waiting
        assert store.builds == 0 and build.is_alive()
    build.join(DEADLINE)
    assert not build.is_alive() and store.builds == 1


def test_a_close_while_a_build_steps_aside_leaves_the_built_copy_unloaded(store, path, asked):
    """A store closed while its build waits to load the built copy (a Recall being served)
    stops the wait: the build fails as closed, its copy is removed and the live generation
    stays the store's."""
    store.upsert(points(300))
    failed: list[BaseException] = []

    def build() -> None:
        try:
            store.optimize()
        except VectorStoreUnavailable as exc:
            failed.append(exc)

    with served():
        thread = threading.Thread(target=build, daemon=True)
        thread.start()
        assert asked.wait(DEADLINE), "the build never stepped aside before its load"
        store.close()  # within the wait's poll, not its hour
        thread.join(DEADLINE)
    assert not thread.is_alive() and len(failed) == 1 and "closed" in str(failed[0])
    assert store.builds == 0
    assert generations.current(path) == path / "gen-000001"
    assert not (path / "gen-000002").exists()
    with ready(EdgeVectorStore, path) as again:
        assert again.count(PointFilter()) == 300


def test_writes_during_a_build_are_replayed_into_the_built_copy(store, path, tmp_path, monkeypatch):
    first = points(200)
    store.upsert(first)
    gate = tmp_path / "go"
    gated_child(monkeypatch, gate)
    thread, errors = child_running(store.optimize, store, "the build's child")
    # The live store serves reads and takes writes while the child builds.
    late = points(50, start=1000)
    store.upsert(late)
    store.set_valid_to([first[0].id], Validity(T0 + 5))
    deleted = store.delete(PointFilter(ids=(first[1].id,)))
    assert deleted == 1
    assert store.count(PointFilter()) == 249
    gate.touch()
    thread.join(DEADLINE)
    assert not thread.is_alive() and not errors
    assert store.builds == 1 and store.live._recorded is None

    def check(s: EdgeVectorStore) -> None:
        assert s.count(PointFilter()) == 249
        assert {p.id for p in s.get([p.id for p in late])} == {p.id for p in late}
        assert s.get([first[1].id]) == []
        assert s.get([first[0].id])[0].valid_to_us == T0 + 5

    check(store)
    store.close()
    with ready(EdgeVectorStore, path) as again:
        check(again)


def test_a_failed_build_leaves_the_store_as_it_was(store, path, monkeypatch):
    store.upsert(points(20))
    monkeypatch.setattr(
        generations,
        "child_command",
        lambda gen: [sys.executable, "-c", "import sys; sys.exit('the disk is full')"],
    )
    with pytest.raises(VectorStoreUnavailable, match="the disk is full"):
        store.optimize()
    assert generations.current(path) == path / "gen-000001"
    assert not (path / "gen-000002").exists()
    assert store.live._recorded is None  # writes are no longer recorded
    store.upsert(points(5, start=100))
    assert store.count(PointFilter()) == 25


def test_close_stops_a_running_build(store, path, tmp_path, monkeypatch):
    store.upsert(points(20))
    gated_child(monkeypatch, tmp_path / "never")
    thread, errors = child_running(store.optimize, store, "the build's child")
    store.close()
    thread.join(DEADLINE)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], VectorStoreUnavailable)
    assert "closed" in str(errors[0])
    assert not (path / "gen-000002").exists()
    with ready(EdgeVectorStore, path) as again:
        assert again.count(PointFilter()) == 20


def test_a_build_s_child_runs_in_a_group_of_its_own_and_a_ctrl_c_leaves_it_building(
    store, path, tmp_path, monkeypatch
):
    """A terminal's Ctrl-C (to the daemon's group) is the daemon's to handle: it used to kill
    the build's child, a failed build for what was a stop. The child is bound to the daemon
    (tiers.core.children), which kills it with the daemon too."""
    store.upsert(points(20))
    gate, waiting = tmp_path / "go", tmp_path / "waiting"
    gated_child(monkeypatch, gate, waiting=waiting)
    thread, errors = child_running(store.optimize, store, "the build's child")
    wait_until(waiting.exists, DEADLINE, "for the child to be bound", interval=0.01)
    child = store.live._child
    assert child is not None
    assert os.getpgid(child.pid) == child.pid != os.getpgrp()
    os.kill(child.pid, signal.SIGINT)
    os.kill(child.pid, signal.SIGTERM)
    gate.touch()
    thread.join(DEADLINE)
    assert not thread.is_alive() and not errors
    assert store.builds == 1 and generations.current(path) == path / "gen-000002"
    assert store.count(PointFilter()) == 20


def test_crash_leftovers_are_swept_when_the_store_opens(store, path):
    store.upsert(points(10))
    store.close()
    (path / "gen-000002" / "segments").mkdir(parents=True)  # a build cut short
    (path / (generations.CURRENT + ".tmp")).write_text("gen-000002\n")
    with ready(EdgeVectorStore, path) as again:
        assert again.count(PointFilter()) == 10
        assert sorted(p.name for p in path.iterdir()) == [
            generations.CURRENT,
            "gen-000001",
            SIDECAR,
        ]


def test_a_store_in_the_layout_before_generations_is_read_and_moved_on(store, path):
    """Written by an earlier release: the shard's files directly in the directory."""
    store.upsert(points(30))
    store.close()
    for entry in (path / "gen-000001").iterdir():
        shutil.move(str(entry), str(path / entry.name))
    (path / "gen-000001").rmdir()
    (path / generations.CURRENT).unlink()
    with ready(EdgeVectorStore, path) as old:
        assert generations.current(path) == path
        assert old.count(PointFilter()) == 30
        old.upsert(points(3, start=500))
        old.optimize()
        assert generations.current(path) == path / "gen-000001"
        assert sorted(p.name for p in path.iterdir()) == [
            generations.CURRENT,
            "gen-000001",
            SIDECAR,
        ]
        assert old.count(PointFilter()) == 33


def test_a_purge_leaves_no_byte_of_deleted_points_and_gives_up_a_running_build(
    store, path, tmp_path, monkeypatch
):
    marked = [mem(f"the secret Wombatmark{i} of the purge", seq=i, seed=i) for i in range(5)]
    store.upsert(points(30) + marked)
    store.delete(PointFilter(ids=tuple(p.id for p in marked)))
    store.flush()
    assert files_with(path, b"Wombatmark")  # deleted, but in the engine's WAL and segments
    # A build running now works on a copy that still holds them: the purge gives it up.
    gated_child(monkeypatch, tmp_path / "never")
    build, errors = child_running(store.optimize, store, "the build's child")
    query = [float(x) for x in unit(3)]
    before = ids(store.search_dense(query, alice(), limit=10))
    store.purge()
    build.join(DEADLINE)
    assert len(errors) == 1 and isinstance(errors[0], IndexBuildCancelled)
    assert store.purges == 1 and store.builds == 0
    assert files_with(path, b"Wombatmark") == []
    assert sorted(p.name for p in path.iterdir() if p.name.startswith("gen-")) == ["gen-000003"]
    assert store.count(PointFilter()) == 30
    assert ids(store.search_dense(query, alice(), limit=10)) == before
    # The store goes on: writes, a build, and a reopen.
    store.upsert(points(5, start=100))
    monkeypatch.undo()
    index_small_stores(monkeypatch)  # undone with the gate
    store.optimize()
    assert store.builds == 1 and store.count(PointFilter()) == 35
    store.close()
    with ready(EdgeVectorStore, path) as again:
        assert again.count(PointFilter()) == 35
        assert files_with(path, b"Wombatmark") == []


def test_a_built_shard_is_not_filled_with_the_write_ahead_logs_zeros(store, path):
    store.upsert(points(100))
    store.optimize()
    assert store.builds == 1
    files = [p for p in path.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) > 64 << 20  # two preallocated WAL files
    assert sum(p.stat().st_blocks * 512 for p in files) < 16 << 20


def _on_disk(path: Path, fields: tuple[str, ...]) -> dict[str, bool]:
    """Whether each of the current generation's payload indexes ``fields`` is on disk."""
    shard = EdgeShard.load(str(generations.current(path)))
    try:
        schema = shard.info().payload_schema
        return {f: getattr(schema[f].params, "memory", None) == Memory.Cold for f in fields}
    finally:
        shard.close()


def test_a_build_moves_the_indexes_an_earlier_release_kept_in_memory_to_disk(path):
    """The episode, session and time indexes of an earlier release, held in RAM, are left so
    by the daemon's open (making them again holds the GIL) and made again on disk by the
    shard's next build, in the build's child: filters by them find the same points after."""
    made = {"episode_id": PayloadSchemaType.Keyword, "session_id": PayloadSchemaType.Keyword}
    made["created_at"] = PayloadSchemaType.Integer
    fields = tuple(made)
    minute = 60_000_000
    hour = replace(alice(), created_from_us=T0, created_to_us=T0 + 60 * minute)
    with ready(EdgeVectorStore, path) as store:
        store.upsert(
            [
                mem(f"m {i}", seq=i, seed=i, episode=f"ep-{i % 3}", created=T0 + i * minute)
                for i in range(300)
            ]
        )
    shard = EdgeShard.load(str(generations.current(path)))
    for field, schema in made.items():  # as an earlier release made them
        shard.update(UpdateOperation.create_field_index(field, schema))
    shard.close()
    assert _on_disk(path, fields) == dict.fromkeys(fields, False)
    with ready(EdgeVectorStore, path) as store:
        assert store.count(replace(alice(), episode_ids=("ep-1",))) == 100
        assert store.count(hour) == 60
    assert _on_disk(path, fields) == dict.fromkeys(fields, False)  # open: left
    with ready(EdgeVectorStore, path) as store:
        store.upsert(points(300, start=300))
        store.optimize()
        assert store.count(replace(alice(), episode_ids=("ep-1",))) == 400
        assert store.count(replace(alice(), exclude_sessions=("chat-1",))) == 0
        assert store.count(hour) == 60 + 300  # the new points' time is the hour's start
    assert generations.current(path).name != "gen-000001"  # built: a copy swapped in
    assert _on_disk(path, fields) == dict.fromkeys(fields, True)
