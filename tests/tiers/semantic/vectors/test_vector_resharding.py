"""Moving an embedded store into shards at start-up (tiers.semantic.vectors.edge.resharding): an
earlier release's single shard (flat, or in generations) and a store with another shard count
are moved with every point's vectors and payload; a process killed at any step of the move
leaves the old store whole or the new one complete, and the next start finishes; no file of
the old store is left (a deleted point's bytes among them); a store of another model is
refused and left as it is."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.contracts.vectors import DIM, KEYWORDS, MODEL, mem
from tests.support import ROOT
from tests.support.disk import files_with
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, PointFilter, Validity, VectorStoreMismatch, shard_of
from tiers.semantic.vectors.edge import generations, layout
from tiers.semantic.vectors.edge.store import SIDECAR, EdgeVectorStore
from tiers.semantic.vectors.shards.store import ShardedVectorStore

USERS = ("alice", "bob", "carol", "ivan", "judy")
SECRET = b"Wombatsecret"
# Every step of a move at which a crash is tried (tiers.semantic.vectors.edge.layout.reached); the
# fast tier tries one before the commit and one after it, the full suite every step.
STEPS = (
    "staging",
    "batch-written",
    "copied",
    "committed",
    "old-removed",
    "shard-moved",
    "sidecar-moved",
)
FAST_STEPS = ("batch-written", "shard-moved")


def points() -> list[MemoryPoint]:
    out = []
    for u, user in enumerate(USERS):
        scope = Scope(user, "assistant")
        out += [
            mem(
                f"{user} remembers thing {i}", scope=scope, seq=i, seed=100 * u + i, episode=f"e{u}"
            )
            for i in range(12)
        ]
    return out


def legacy(root: Path, *, flat: bool = False, model: str = MODEL) -> list[MemoryPoint]:
    """An earlier release's store at ``root``: one shard in generations (or ``flat``), with
    the points of every user and a deleted point whose bytes are still in its files."""
    written = points()
    old = EdgeVectorStore(root)
    old.ensure(model, DIM)
    secret = mem("the Wombatsecret nobody may keep", scope=Scope("bob"), seed=999)
    old.upsert([*written, secret])
    old.delete(PointFilter(ids=(secret.id,)))
    old.set_valid_to([written[0].id], Validity(77))
    old.close()
    if flat:
        gen = root / "gen-000001"
        for entry in gen.iterdir():
            shutil.move(str(entry), str(root / entry.name))
        gen.rmdir()
        (root / generations.CURRENT).unlink()
    assert files_with(root, SECRET)
    return written


def check_moved(root: Path, shards: int, written: list[MemoryPoint]) -> None:
    """The store at ``root``, once opened with ``shards`` shards, holds every point as
    written (payload and vectors), each in its user's shard, in the sharded layout, and
    nothing of the old layout."""
    store = ShardedVectorStore(root, shards)
    store.ensure(MODEL, DIM)
    try:
        ids = [p.id for p in written]
        got = store.get(ids)
        assert [p.id for p in got] == ids
        assert got[0].valid_to_us == 77 and got[1].valid_to_us is None
        assert got[5].sources == written[5].sources and got[5].text == written[5].text
        dense = store.dense(ids)
        for p in written:
            assert p.dense is not None and np.allclose(dense[p.id], p.dense, atol=1e-6)
        for index, shard in store.open_shards().items():
            users = {p.scope.user_id for p in shard.scroll(PointFilter(), 1000)}
            assert users and {shard_of(u, shards) for u in users} == {index}
        query = KEYWORDS.embed_query("remembers")  # the sparse vectors came along
        sparse = store.search_sparse(query, PointFilter(user_id="carol"), limit=3)
        assert sparse and all(h.point.scope.user_id == "carol" for h in sparse)
    finally:
        store.close()
    names = {p.name for p in root.iterdir()}
    marks = {layout.BUILD_MARKS} | {layout.build_mark(root, i).name for i in range(shards)}
    marks.add(layout.term_counts(root).name)  # the keyword counts a clean close keeps
    marks.add(layout.term_checkpoint(root).name)  # and those a crash would start from
    marks.add(layout.build_counts(root).name)  # and the points each shard holds unindexed
    marks.add(layout.build_checkpoint(root).name)  # as of the last round, for a crash
    present = layout.shards_present(root, shards)
    assert names - {SIDECAR} - marks == {layout.shard_name(i) for i in present}
    assert layout.inspect(root) == layout.Found("sharded", MODEL, DIM, shards)
    assert files_with(root, SECRET) == []


@pytest.mark.parametrize("flat", [False, True], ids=["generations", "flat"])
def test_an_earlier_single_shard_store_is_moved_into_shards(tmp_path, flat, caplog):
    root = tmp_path / "vectors"
    written = legacy(root, flat=flat)
    caplog.set_level(logging.INFO, "strata.vectors")
    store = ShardedVectorStore(root, 4)
    store.ensure(MODEL, DIM)
    store.close()
    (done,) = [r for r in caplog.records if r.getMessage() == "vectors.resharded"]
    fields = done.fields  # type: ignore[attr-defined]
    assert fields["from"] == "single" and fields["to"] == 4 and fields["points"] == 60
    assert fields["shards_written"] == len({shard_of(u, 4) for u in USERS})
    assert fields["ms"] >= 0
    check_moved(root, 4, written)


def test_a_change_of_the_shard_count_moves_the_points(tmp_path):
    """One shard into 4 (the upgrade), then 4 into 2 (a change of ``vectors.shards``)."""
    root = tmp_path / "vectors"
    written = legacy(root)
    for shards in (4, 2):
        store = ShardedVectorStore(root, shards)
        store.ensure(MODEL, DIM)
        store.upsert([])  # nothing: the store is simply opened
        store.close()
        check_moved(root, shards, written)


def test_a_store_of_another_model_is_refused_and_left_as_it_is(tmp_path):
    root = tmp_path / "vectors"
    legacy(root, model="another-model")
    before = sorted(p.name for p in root.iterdir())
    with pytest.raises(VectorStoreMismatch, match="another-model"):
        ShardedVectorStore(root, 4).ensure(MODEL, DIM)
    assert sorted(p.name for p in root.iterdir()) == before
    (root / SIDECAR).unlink()
    with pytest.raises(VectorStoreMismatch, match="unknown"):
        ShardedVectorStore(root, 4).ensure(MODEL, DIM)


CRASH = """
import os, sys
from pathlib import Path
from tiers.semantic.vectors.edge import layout as edge_layout
from tiers.semantic.vectors.shards.store import ShardedVectorStore

root, step, shards = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])

def reached(name):
    if name == step:
        os._exit(9)  # as a SIGKILL: no cleanup, no flush

edge_layout.reached = reached
ShardedVectorStore(root, shards).ensure(sys.argv[4], int(sys.argv[5]))
sys.exit(3)  # the step never came
"""


def crash_at(root: Path, step: str, shards: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CRASH, str(root), step, str(shards), MODEL, str(DIM)],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 9, done.stderr.decode()


@pytest.mark.parametrize(
    "step", [pytest.param(s, marks=() if s in FAST_STEPS else pytest.mark.slow) for s in STEPS]
)
def test_a_move_killed_at_any_step_is_finished_or_started_over_at_the_next_start(tmp_path, step):
    root = tmp_path / "vectors"
    written = legacy(root)
    crash_at(root, step, 4)
    committed = step not in ("staging", "batch-written", "copied")
    if committed:  # the new layout is complete, in reshard/ or in place
        staged = (layout.staging(root) / SIDECAR).exists()
        assert staged or layout.inspect(root).kind == "sharded"
    else:  # the old store is whole
        assert (root / generations.CURRENT).exists() and layout.inspect(root).kind == "single"
    check_moved(root, 4, written)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["batch-written", "old-removed"])
def test_a_killed_change_of_the_shard_count_is_finished_or_started_over(tmp_path, step):
    root = tmp_path / "vectors"
    written = legacy(root)
    first = ShardedVectorStore(root, 4)
    first.ensure(MODEL, DIM)
    first.close()
    crash_at(root, step, 2)
    check_moved(root, 2, written)
