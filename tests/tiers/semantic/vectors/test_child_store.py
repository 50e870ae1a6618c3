"""The embedded store in a process of its own (tiers.semantic.vectors.child): what crosses the
socket comes back as it was, errors keep their class, a process killed is started again with
every acknowledged point and the store made ready, a call under way when it dies is told so,
a close ends it, and a call runs there at its caller's priority and within its rests. What
every store does is in tests/contracts/test_vector_store.py (the "child" backend)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.contracts.vectors import ALICE, DIM, MODEL, alice, ids, mem, unit
from tests.support import hold_still, wait_until
from tiers.core import priority
from tiers.core.errors import IndexBuildCancelled, VectorStoreInterrupted, VectorStoreMismatch
from tiers.semantic.vectors import (
    Hit,
    PointFilter,
    Source,
    SparseVector,
    Validity,
    VectorStoreUnavailable,
)
from tiers.semantic.vectors.child import ChildVectorStore
from tiers.semantic.vectors.child.codec import decode, decode_error, encode, encode_error
from tiers.semantic.vectors.storage import DenseStorage

SHARDS = 4


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ChildVectorStore]:
    s = ChildVectorStore("sharded", tmp_path / "vectors", SHARDS)
    s.ensure(MODEL, DIM)
    yield s
    s.close()


def test_records_cross_the_socket_as_they_were() -> None:
    point = mem(
        "alice moved to Lisbon",
        valid_from_us=5,
        valid_to_us=9,
        replaced_by="f2",
        attrs={"subject": "alice", "n": [1, 2]},
    )
    point = point.__class__(
        **{
            **{f: getattr(point, f) for f in point.__slots__},  # type: ignore[attr-defined]
            "sources": [Source("s", 3, "m", {"k": "v"}, "Alice", 7, "hi", "user")],
        }
    )
    flt = PointFilter(
        user_id="alice",
        kinds=("fact", "summary"),
        created_from_us=1,
        include_superseded=False,
        exclude_from=(("s", 1, 4),),
        replaced_by=("x",),
    )
    values = [
        point,
        Hit(point, 0.5),
        flt,
        PointFilter(),
        Validity(3, "f9"),
        Validity(),
        SparseVector([1, 7], [0.5, 0.25]),
        {"a", "b"},
        Path("/x/y"),
        {"id": [0.5, 1.0]},
        DenseStorage("int8", "float16", rescore=False),
    ]
    for value in values:
        assert decode(encode(value)) == value, value
    assert decode(encode((1, "a"))) == [1, "a"]  # a tuple outside a filter comes back a list
    with pytest.raises(TypeError, match="object cannot cross"):
        encode(object())
    with pytest.raises(ValueError, match="unknown record"):
        decode({"$": "nothing"})


def test_errors_keep_their_class_and_the_others_say_theirs() -> None:
    for exc in (
        VectorStoreMismatch("m"),
        VectorStoreInterrupted("i"),
        IndexBuildCancelled("c"),
        ValueError("v"),
    ):
        back = decode_error(encode_error(exc))
        assert type(back) is type(exc) and str(back) == str(exc)
    other = decode_error(encode_error(KeyError("k")))
    assert type(other) is VectorStoreUnavailable and "KeyError" in str(other)


def test_a_killed_process_is_started_again_with_every_acknowledged_point(store) -> None:
    pts = [mem(f"alice note {i}", seq=i, seed=i) for i in range(5)]
    store.upsert(pts)
    first = store.pid
    assert psutil.Process(first).ppid() == os.getpid()
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: store.pid not in (0, first), 60, "for the process to start again")
    assert store.starts == 2 and store.last_exit == "killed by signal 9"
    # Ready again without a new ensure: the last one was made again.
    assert store.count(PointFilter()) == 5
    assert ids(store.search_dense(unit(3), alice(), 1)) == [pts[3].id]
    with pytest.raises(VectorStoreMismatch):
        store.ensure(MODEL, DIM + 1)


def test_the_process_runs_in_a_group_of_its_own(store) -> None:
    # A terminal's Ctrl-C goes to the daemon's whole group; the daemon closes the store itself.
    assert os.getpgid(store.pid) == store.pid != os.getpgrp()


def test_a_call_under_way_when_the_process_dies_is_told(store) -> None:
    store.upsert([mem("alice note", seed=1)])
    pid = store.pid
    hold_still(pid)  # the call below waits on it
    got: list[BaseException] = []

    def call() -> None:
        try:
            store.count(PointFilter())
        except BaseException as exc:
            got.append(exc)

    t = threading.Thread(target=call)
    t.start()

    def waiting() -> bool:  # the call sent, its answer awaited
        frame = sys._current_frames().get(t.ident or 0)
        return frame is not None and "receive" in str(traceback.extract_stack(frame))

    wait_until(waiting, 30, "for the call to be sent")
    os.kill(pid, signal.SIGKILL)
    t.join(60)
    assert len(got) == 1 and isinstance(got[0], VectorStoreUnavailable)
    assert "ended during the call (killed by signal 9)" in str(got[0])
    wait_until(lambda: store.pid not in (0, pid), 60, "for the process to start again")
    assert store.count(PointFilter()) == 1


def test_a_first_start_that_fails_raises_what_the_process_said(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="1 to 256 shards, not 0"):
        ChildVectorStore("sharded", tmp_path / "vectors", 0)
    with pytest.raises(VectorStoreUnavailable, match="ended as it started"):
        ChildVectorStore("sharded", tmp_path / "v", 1, command=["python3", "-c", "pass"])


def test_close_ends_the_process_and_later_calls_are_refused(tmp_path: Path) -> None:
    s = ChildVectorStore("sharded", tmp_path / "vectors", SHARDS)
    s.ensure(MODEL, DIM)
    s.upsert([mem("alice note", scope=ALICE, seed=1)])
    proc = psutil.Process(s.pid)
    s.close()
    s.close()  # idempotent
    assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    with pytest.raises(VectorStoreUnavailable, match="closed"):
        s.count(PointFilter())
    again = ChildVectorStore("sharded", tmp_path / "vectors", SHARDS)  # the locks are free
    try:
        again.ensure(MODEL, DIM)
        assert again.count(PointFilter()) == 1
    finally:
        again.close()


def test_a_call_runs_there_at_its_callers_priority_and_rests() -> None:
    probe = [sys.executable, "-m", "tests.support.probe_vectors"]
    s = ChildVectorStore("probe", command=probe)
    seen: list[list[str]] = []

    def lowered_and_resting() -> None:
        priority.lower_this_thread(3)
        with priority.resting(0.25):
            seen.append(s.ids(PointFilter()))
        seen.append(s.ids(PointFilter()))  # out of the rests, at the same priority

    try:
        assert s.ids(PointFilter()) == ["0.0", "0"]
        caller = threading.Thread(target=lowered_and_resting)
        caller.start()
        caller.join()
        assert seen == [["0.25", "3"], ["0.0", "3"]]
        assert s.ids(PointFilter()) == ["0.0", "0"]  # a connection of its own priority
    finally:
        s.close()


def test_the_point_caches_counts_come_from_the_process_without_the_daemons_own_reads(
    store,
) -> None:
    """The metrics read them (strata_point_cache_*); a call made as the daemon's own work
    (tiers.core.priority.background) is not counted there either."""
    points = [mem("alice note", seed=1), mem("alice other note", seed=2)]
    store.upsert(points)
    before = store.points.counts()
    assert before.capacity > 0
    with priority.background():  # what it reads is kept, not counted
        assert len(store.get(ids(points), "alice")) == 2
    assert store.points.counts()[:2] == before[:2]
    assert len(store.get(ids(points), "alice")) == 2
    after = store.points.counts()
    assert after.hits + after.misses == before.hits + before.misses + 2
    assert after.points >= 2
