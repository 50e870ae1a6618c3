"""The ids each write touched, kept per user while a graph of theirs is held
(recall.graph.writes.WriteLog): what a kept graph's next build reads instead of listing the
scope."""

from __future__ import annotations

from recall.graph.writes import WriteLog


def test_the_writes_after_a_held_version_are_the_union_of_their_ids():
    log = WriteLog(most_ids=10)
    log.written("alice", 1, ["a"])  # no graph of alice held: not kept
    assert log.since("alice", 0) is None
    log.hold("alice", 1)
    log.written("alice", 2, ["b", "c"])
    log.written("alice", 3, [])  # edges alone: no point touched
    log.written("bob", 1, ["x"])
    assert log.since("alice", 1) == {"b", "c"}
    assert log.since("alice", 2) is None  # no graph held at 2: the log may not reach back
    log.hold("alice", 3)
    assert log.since("alice", 3) == frozenset()


def test_a_write_told_without_its_ids_or_past_the_budget_makes_the_versions_before_unknown():
    log = WriteLog(most_ids=3)
    log.hold("alice", 0)
    log.written("alice", 1, ["a", "b"])
    log.written("alice", 2, None)  # a delete by episode
    log.hold("alice", 2)
    log.written("alice", 3, ["c"])
    assert log.since("alice", 0) is None
    assert log.since("alice", 2) == {"c"}
    log.written("alice", 4, ["d", "e", "f"])  # past 3 ids in all
    assert log.since("alice", 2) is None
    log.hold("alice", 4)
    log.written("alice", 5, ["g"])
    assert log.since("alice", 4) == {"g"}


def test_a_release_drops_what_no_held_graph_needs_and_the_last_drops_the_user():
    log = WriteLog(most_ids=2)
    log.hold("alice", 0)
    log.written("alice", 1, ["a", "b"])
    log.hold("alice", 1)
    log.release("alice", 0)  # the graph of version 0 replaced by that of 1
    log.written("alice", 2, ["c"])  # within the budget: version 1's write was let go
    assert log.since("alice", 1) == {"c"}
    log.release("alice", 1)
    log.release("alice", 1)  # more releases than holds change nothing
    assert log.since("alice", 1) is None
    log.written("alice", 3, ["d"])
    log.hold("alice", 3)
    assert log.since("alice", 3) == frozenset()


def test_writes_that_touch_no_point_count_too():
    """Writes of edges alone touch no point, but each costs the log one: a graph held while
    many come is listed again rather than keeping an endless log."""
    log = WriteLog(most_ids=3)
    log.hold("alice", 0)
    for version in (1, 2, 3):
        log.written("alice", version, [])
    assert log.since("alice", 0) == frozenset()
    log.written("alice", 4, [])
    assert log.since("alice", 0) is None
