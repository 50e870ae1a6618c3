"""Tier 1's working memory: the contract of :class:`tiers.working.memory.WorkingMemory` (with its
durable side, :mod:`tiers.working.log`), on real RocksDB stores in tmp_path, reopened like a
restarted daemon. What a crash leaves half done is
``tests/tiers/working/test_working_memory.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.contracts.stores import BIG, Clock, Tiers, full_disk, tiers_maker
from tiers.core.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ScopeMismatch,
    SessionEnded,
    SessionNotFound,
    StoreUnavailable,
)
from tiers.core.records import Message, Scope, episode_id_for
from tiers.working.memory import AmbiguousSession, ScopeRequired
from tiers.working.session import EndResult, SessionFlushed, WindowLimits, WorkingMemoryStats

ALICE = Scope("alice", "agent-1")


@pytest.fixture(params=["rocksdb"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Tiers]]:
    """Makes working memories, each on its own stores: ``impl(clock, **limits)``."""
    with tiers_maker(tmp_path) as make:
        yield make


def msg(text: str, **kw: object) -> Message:
    return Message(role="user", content=text, **kw)  # type: ignore[arg-type]


def test_window_is_bounded_by_messages_and_the_log_keeps_everything(impl):
    t = impl(max_messages=3)
    for i in range(10):
        t.wm.append("s", ALICE, [msg(f"message {i}")])
    view = t.wm.window("s")
    assert [m.content for m in view.messages] == ["message 7", "message 8", "message 9"]
    assert view.log_messages == 10
    ended = t.wm.end_session("s")
    assert ended.message_count == 10
    assert [m.content for m in t.journal.messages(ended.episode_id)] == [
        f"message {i}" for i in range(10)
    ]


def test_window_is_bounded_by_tokens(impl):
    t = impl(max_tokens=8)
    t.wm.append("s", ALICE, [msg("one two three four"), msg("five six seven"), msg("eight nine")])
    view = t.wm.window("s")
    assert [m.content for m in view.messages] == ["five six seven", "eight nine"]
    assert view.total_tokens == 5
    # A read budget tighter than the window
    assert [m.content for m in t.wm.window("s", max_tokens=2).messages] == ["eight nine"]
    assert [m.content for m in t.wm.window("s", max_messages=1).messages] == ["eight nine"]
    assert t.wm.window("s", max_tokens=1).messages == []
    # One message over the window's budget alone is still the window (the newest is kept).
    t.wm.append(
        "s", ALICE, [msg("ten eleven twelve thirteen fourteen fifteen sixteen seventeen x")]
    )
    assert len(t.wm.window("s").messages) == 1


def test_message_id_is_an_idempotency_key(impl):
    t = impl()
    first = t.wm.append("s", ALICE, [msg("hi", message_id="m-1")])
    again = t.wm.append("s", ALICE, [msg("hi", message_id="m-1"), msg("new", message_id="m-2")])
    assert first[0].duplicate is False
    assert (again[0].seq, again[0].duplicate) == (first[0].seq, True)
    assert again[1].duplicate is False
    # the same id twice in one batch stores one message
    twice = t.wm.append("s", ALICE, [msg("x", message_id="m-3"), msg("x", message_id="m-3")])
    assert twice[0].seq == twice[1].seq and twice[1].duplicate
    assert t.wm.window("s").log_messages == 3


def test_scope_is_fixed_by_the_first_message(impl):
    t = impl()
    with pytest.raises(ScopeRequired):
        t.wm.append("s", Scope(""), [msg("who am I")])
    t.wm.append("s", ALICE, [msg("hi")])
    t.wm.append("s", Scope(""), [msg("empty scope inherits")])
    with pytest.raises(ScopeMismatch):
        t.wm.append("s", Scope("alice", "agent-2"), [msg("another agent")])
    t.wm.end_session("s")
    with pytest.raises(ScopeMismatch):  # reopening keeps the scope too
        t.wm.append("s", Scope("alice"), [msg("still another agent")])
    assert t.wm.window("s").log_messages == 0


def test_sessions_are_per_user(impl):
    t = impl()
    t.wm.append("s", ALICE, [msg("alice one"), msg("alice two")])
    t.wm.append("s", Scope("bob", "agent-1"), [msg("bob one")])  # another session
    t.wm.append("s", Scope(""), [msg("bob two")], user_id="bob")  # the caller's user
    assert [m.content for m in t.wm.window("s", user_id="alice").messages] == [
        "alice one",
        "alice two",
    ]
    bob = t.wm.window("s", user_id="bob")
    assert [m.content for m in bob.messages] == ["bob one", "bob two"]
    assert bob.scope == Scope("bob", "agent-1")
    with pytest.raises(AmbiguousSession, match=r"name scope\.user_id"):
        t.wm.window("s")
    with pytest.raises(AmbiguousSession):
        t.wm.append("s", Scope(""), [msg("whose?")])
    # Among the users a caller may see, one is found.
    assert t.wm.window("s", allowed=lambda u: u == "bob").scope.user_id == "bob"
    with pytest.raises(SessionNotFound):
        t.wm.window("s", allowed=lambda u: u == "carol")
    a = t.wm.end_session("s", user_id="alice")
    b = t.wm.end_session("s", user_id="bob")
    assert a.episode_id != b.episode_id and (a.user_id, b.user_id) == ("alice", "bob")
    assert t.journal.get(a.episode_id).scope == ALICE
    assert [m.content for m in t.journal.messages(b.episode_id)] == ["bob one", "bob two"]
    with pytest.raises(SessionEnded):
        t.wm.end_session("s", user_id="alice")
    assert t.wm.window("s", user_id="alice").open is False


def test_end_session_errors_and_reopening(impl):
    t = impl()
    with pytest.raises(SessionNotFound):
        t.wm.end_session("nope")
    t.wm.append("s", ALICE, [msg("a"), msg("b")])
    first = t.wm.end_session("s")
    with pytest.raises(SessionEnded):
        t.wm.end_session("s")
    assert t.wm.window("s").open is False
    t.wm.append("s", ALICE, [msg("c")])
    second = t.wm.end_session("s")
    assert second.episode_id != first.episode_id
    assert [m.seq for m in t.journal.messages(second.episode_id)] == [3]
    assert t.journal.is_pending(first.episode_id) and t.journal.is_pending(second.episode_id)


def test_idle_sessions_are_ended(impl):
    clock = Clock()
    t = impl(clock, idle_timeout_seconds=60)
    t.wm.append("old", ALICE, [msg("a")])
    clock.now += 50
    t.wm.append("young", ALICE, [msg("b")])
    clock.now += 20
    ended = t.wm.end_idle()
    assert [(e.session_id, e.reason) for e in ended] == [("old", "idle")]
    assert t.wm.stats().live_sessions == 1
    assert t.journal.get(ended[0].episode_id).end_reason == "idle"


def test_live_sessions_are_bounded_least_recently_used_first(impl):
    clock = Clock()
    t = impl(clock, max_sessions=3)
    for sid in ("a", "b", "c"):
        clock.now += 1
        t.wm.append(sid, ALICE, [msg(sid)])
    clock.now += 1
    t.wm.append("a", ALICE, [msg("a again")])  # b is now the least recently active
    t.wm.append("d", ALICE, [msg("d")])
    assert t.wm.stats().live_sessions == 3
    with pytest.raises(SessionEnded):
        t.wm.end_session("b")
    page = t.journal.list(user_id="alice")
    assert [(e.session_id, e.end_reason) for e in page.episodes] == [("b", "capacity")]


def test_a_long_session_rolls_over_into_episodes(impl):
    t = impl(max_log_messages=4)
    for i in range(10):
        t.wm.append("s", ALICE, [msg(str(i))])
    episodes = t.journal.list(user_id="alice").episodes
    assert [e.message_count for e in episodes] == [4, 4]
    assert {e.end_reason for e in episodes} == {"rollover"}
    assert t.wm.window("s").log_messages == 2
    assert t.wm.end_session("s").message_count == 2


def test_open_sessions_survive_a_restart(impl):
    t = impl(max_messages=2)
    t.wm.append("s", ALICE, [msg("a", message_id="x"), msg("b"), msg("c")])
    t.reopen()
    view = t.wm.window("s")
    assert [m.content for m in view.messages] == ["b", "c"]
    assert view.log_messages == 3
    assert t.wm.append("s", ALICE, [msg("a", message_id="x")])[0].duplicate
    assert t.wm.append("s", ALICE, [msg("d")])[0].seq == 4
    assert t.wm.end_session("s").message_count == 4


def test_removing_the_newest_messages_is_durable_and_the_episode_leaves_them_out(impl):
    clock = Clock()
    t = impl(clock, max_messages=2, idle_timeout_seconds=60)
    t.wm.append("s", ALICE, [msg("a"), msg("b", message_id="id-b"), msg("c"), msg("d")])
    with pytest.raises(SessionNotFound):
        t.wm.remove_last("nope", 1)
    popped = t.wm.remove_last("s", 2)
    assert [m.content for m in popped.removed] == ["c", "d"]
    assert (popped.log_messages, popped.open) == (2, True)
    # The window refills from the log: what the removal uncovered is back in it.
    assert [m.content for m in t.wm.window("s").messages] == ["a", "b"]
    t.reopen()  # durable: a restart sees the removal
    assert [m.content for m in t.wm.window("s").messages] == ["a", "b"]
    removed_b = t.wm.remove_last("s", 1)
    assert [m.seq for m in removed_b.removed] == [2]
    # A removed message's id may be appended again; seqs are never reused.
    again = t.wm.append("s", ALICE, [msg("b again", message_id="id-b")])[0]
    assert (again.seq, again.duplicate) == (5, False)
    # The idle flush writes what is left, not what was removed.
    clock.now += 120
    (ended,) = t.wm.end_idle()
    assert [(m.seq, m.content) for m in t.journal.messages(ended.episode_id)] == [
        (1, "a"),
        (5, "b again"),
    ]
    # An ended session has nothing to remove: its messages are an episode.
    assert t.wm.remove_last("s", None) == type(popped)([], 0, False)


def test_removing_every_message_closes_the_session_without_an_episode(impl):
    t = impl()
    t.wm.append("s", ALICE, [msg("a"), msg("b")])
    t.wm.append("s", Scope("bob"), [msg("bob's")])  # another user's session of the same id
    cleared = t.wm.remove_last("s", None, user_id="alice")
    assert [m.content for m in cleared.removed] == ["a", "b"] and not cleared.open
    assert t.wm.window("s", user_id="alice").open is False
    assert t.wm.stats().live_sessions == 1  # bob's
    assert t.journal.list(user_id="alice").episodes == []
    t.reopen()
    assert t.wm.window("s", user_id="alice").open is False
    # The next append opens the session again; its episode holds only the new message.
    t.wm.append("s", Scope(""), [msg("fresh start")], user_id="alice")
    ended = t.wm.end_session("s", user_id="alice")
    assert [m.content for m in t.journal.messages(ended.episode_id)] == ["fresh start"]
    assert [m.content for m in t.wm.window("s", user_id="bob").messages] == ["bob's"]


def test_errors_are_of_their_kind_and_a_refused_call_stores_nothing(impl):
    t = impl()
    t.wm.append("s", ALICE, [msg("a", message_id="m-a")])
    t.wm.append("s", Scope("bob"), [msg("bob's")])
    failures: list[tuple[type[Exception], type[Exception], Callable[[], object]]] = [
        (ScopeRequired, InvalidArgument, lambda: t.wm.append("new", Scope(""), [msg("x")])),
        (ScopeRequired, InvalidArgument, lambda: t.wm.append("new", Scope("", "agent"), [])),
        (
            ScopeMismatch,
            FailedPrecondition,
            lambda: t.wm.append("s", Scope("alice", "other"), [msg("x")], user_id="alice"),
        ),
        (AmbiguousSession, InvalidArgument, lambda: t.wm.append("s", Scope(""), [msg("x")])),
        (AmbiguousSession, InvalidArgument, lambda: t.wm.end_session("s")),
        (AmbiguousSession, InvalidArgument, lambda: t.wm.remove_last("s", 1)),
        (SessionNotFound, NotFound, lambda: t.wm.window("nope")),
        (SessionNotFound, NotFound, lambda: t.wm.resolve("nope")),
        (SessionNotFound, NotFound, lambda: t.wm.end_session("s", user_id="carol")),
    ]
    for error, kind, call in failures:
        with pytest.raises(error) as info:
            call()
        assert isinstance(info.value, kind), error
    t.wm.end_session("s", user_id="alice")
    with pytest.raises(SessionEnded) as ended:
        t.wm.end_session("s", user_id="alice")
    assert isinstance(ended.value, FailedPrecondition)
    t.reopen()  # nothing the refused calls carried was stored
    assert [m.content for m in t.wm.window("s", user_id="bob").messages] == ["bob's"]
    with pytest.raises(SessionNotFound):
        t.wm.window("new")
    (episode,) = t.journal.list(user_id="alice").episodes
    assert [m.content for m in t.journal.messages(episode.episode_id)] == ["a"]


def test_resolve_names_the_user_of_a_session(impl):
    t = impl()
    assert t.wm.resolve("anything", user_id="carol") == "carol"  # named: not looked up
    t.wm.append("s", ALICE, [msg("a")])
    assert t.wm.resolve("s") == "alice"
    t.wm.end_session("s")
    assert t.wm.resolve("s") == "alice"  # an ended session still names its user
    t.wm.append("s", Scope("bob"), [msg("b")])
    with pytest.raises(AmbiguousSession):
        t.wm.resolve("s")
    assert t.wm.resolve("s", allowed=lambda u: u != "bob") == "alice"
    with pytest.raises(SessionNotFound):
        t.wm.resolve("s", allowed=lambda u: False)
    t.reopen()
    assert t.wm.resolve("s", allowed=lambda u: u == "bob") == "bob"


def test_dropping_a_scopes_sessions_forgets_their_logs_without_an_episode(impl):
    t = impl()
    t.wm.append("s1", ALICE, [msg("a"), msg("b")])
    t.wm.append("s2", Scope("alice", "agent-2"), [msg("c")])
    t.wm.append("s3", Scope("bob"), [msg("d")])
    with t.wm.write_lock:
        assert t.wm.drop_sessions("alice", "agent-1") == [("s1", 2)]
        assert t.wm.drop_sessions("alice") == [("s2", 1)]
        assert t.wm.drop_sessions("carol") == []
    assert t.wm.stats() == WorkingMemoryStats(live_sessions=1, window_messages=1, log_messages=1)
    t.reopen()
    assert t.wm.stats().live_sessions == 1 and t.wm.window("s1").open is False
    with pytest.raises(SessionEnded):
        t.wm.end_session("s1")
    assert t.journal.list(user_id="alice").episodes == []
    # A reused id opens a new generation: its episode never gets the dropped log's id.
    t.wm.append("s1", Scope(""), [msg("again")], user_id="alice")
    ended = t.wm.end_session("s1")
    assert ended.episode_id != episode_id_for("s1", 1, "alice")
    assert [m.content for m in t.journal.messages(ended.episode_id)] == ["again"]


def test_stats_flush_listeners_and_capacity_at_a_restart(impl):
    clock = Clock()
    t = impl(clock, max_messages=2)
    flushed: list[EndResult] = []
    t.wm.events.subscribe(SessionFlushed, lambda event: flushed.append(event.result))
    for sid in ("a", "b", "c"):
        clock.now += 1
        t.wm.append(sid, ALICE, [msg(f"{sid}{i}") for i in range(3)])
    assert t.wm.stats() == WorkingMemoryStats(live_sessions=3, window_messages=6, log_messages=9)
    ended = t.wm.end_session("a")
    assert flushed == [ended] == [EndResult("a", ended.episode_id, 3, "client", "alice")]
    t.limits = WindowLimits(max_messages=2, max_sessions=1)
    t.reopen()  # fewer sessions may stay open now: the least recently active ends
    assert [(e.session_id, e.reason, e.message_count) for e in t.recovered] == [
        ("b", "capacity", 3)
    ]
    assert t.wm.stats() == WorkingMemoryStats(live_sessions=1, window_messages=2, log_messages=3)
    assert t.journal.get(t.recovered[0].episode_id).end_reason == "capacity"


def test_a_refused_write_raises_store_unavailable_and_changes_nothing(impl):
    t = impl()
    t.wm.append("s", ALICE, [msg("a"), msg("b", message_id="id-b")])
    before = t.wm.window("s")
    with full_disk(), pytest.raises(StoreUnavailable, match="File too large"):
        t.wm.append("s", ALICE, [msg(BIG), msg("c")])
    assert t.wm.window("s") == before and t.wm.stats().log_messages == 2
    # The state store refuses every later write (until a restart): still nothing changes.
    with pytest.raises(StoreUnavailable):
        t.wm.append("other", ALICE, [msg("x")])  # a new session is not opened either
    with pytest.raises(SessionNotFound):
        t.wm.window("other")
    with pytest.raises(StoreUnavailable):
        t.wm.remove_last("s", 1)
    with pytest.raises(StoreUnavailable):
        t.wm.end_session("s")  # the episode is taken back out of the journal
    assert t.wm.window("s") == before and t.wm.stats().live_sessions == 1
    assert t.journal.list().episodes == [] and t.journal.pending() == []
