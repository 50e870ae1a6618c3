"""``MemoryService.Watch`` end to end, through gRPC against real daemons: a user's changes in
order (sessions, the weaver, keyed records, deletions), none of another tenant's; resume from a
cursor after the daemon was killed; a Forget that leaves no change of what it forgot; a cursor
older than retention; clear errors; both clients; a stream that ends when the daemon stops."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from daemon.wiring import Factories
from stratad_client import (
    AsyncMemoryClient,
    InvalidArgumentError,
    MemoryClient,
    OutOfRangeError,
    PermissionDeniedError,
    StrataClientError,
    UnavailableError,
)
from stratad_client.pb import memory_pb2 as pb
from tests.daemon.server.test_auth import TOKENS, entries
from tests.support import MAY, QUIET, QUIET_ENV, consolidate, talk, wait_indexed, wait_until

pytestmark = pytest.mark.slow
DEADLINE = 120.0


class Watcher:
    """Follows ``client.watch(**asked)`` on a thread until an event ``until`` accepts."""

    def __init__(
        self, client: MemoryClient, until: Callable[[pb.ChangeEvent], bool], **asked: Any
    ) -> None:
        self.events: list[pb.ChangeEvent] = []
        self.error: BaseException | None = None
        self._until = until
        self._thread = threading.Thread(target=self._run, args=(client, asked), daemon=True)
        self._thread.start()

    def _run(self, client: MemoryClient, asked: dict[str, Any]) -> None:
        try:
            for event in client.watch(timeout=DEADLINE, **asked):
                self.events.append(event)
                if self._until(event):
                    return  # leaves the stream: the call is cancelled
        except BaseException as exc:
            self.error = exc

    def join(self) -> list[pb.ChangeEvent]:
        self._thread.join(DEADLINE)
        assert not self._thread.is_alive(), [e.type for e in self.events]
        if self.error is not None:
            raise self.error
        return self.events


def types(events: list[pb.ChangeEvent]) -> list[str]:
    return [e.type for e in events]


def cursors(events: list[pb.ChangeEvent]) -> list[int]:
    return [int(e.cursor) for e in events]


def is_(kind: str, **attrs: str) -> Callable[[pb.ChangeEvent], bool]:
    return lambda e: e.type == kind and all(e.attrs.get(k) == v for k, v in attrs.items())


def test_a_watcher_follows_its_user_in_order_and_sees_no_other_tenant(quiet_daemon) -> None:
    with quiet_daemon.client() as c, quiet_daemon.client() as w:
        alice = Watcher(w, is_("anchor.set", cleared="true"), user_id="alice")
        wait_until(lambda: quiet_daemon.daemon.parts.feed.waiting, timeout=30)  # the stream waits
        episode = talk(c, "alice", "s1", MAY, "My locker code is 4471.", "Noted.")
        talk(c, "bob", "b1", MAY, "Bob's own words.", "Fine.")
        wait_indexed(c)
        doc = c.put_document("notes", "gym", "The gym opens at six.", user_id="alice")
        c.set_anchor("s1", "Find the gym's hours", user_id="alice")
        consolidate(c)
        c.pin_memory(doc.document.id, user_id="alice")
        c.delete_document("notes", "gym", user_id="alice")
        c.set_anchor("s1", "", user_id="alice")
        events = alice.join()
    assert types(events) == [
        "session.started",
        "session.appended",
        "session.ended",
        "episode.indexed",
        "document.put",
        "anchor.set",
        "episode.consolidated",
        "pin.changed",
        "document.deleted",
        "anchor.set",
    ]
    assert cursors(events) == sorted(set(cursors(events)))
    assert {(e.scope.user_id, e.scope.agent_id) for e in events} == {("alice", "")}
    started, appended, ended, indexed, put, _set, consolidated, pinned, deleted, _clear = events
    assert appended.session_id == "s1" and appended.count == 2
    assert dict(appended.attrs) == {"first_seq": "1", "last_seq": "2"}
    assert ended.episode_id == indexed.episode_id == consolidated.episode_id == episode
    assert ended.count == 2 and indexed.count > 0
    assert put.memory_id == pinned.memory_id == deleted.memory_id == doc.document.id
    assert put.attrs["namespace"] == '["notes"]' and put.attrs["key"] == "gym"
    assert pinned.attrs["pinned"] == "true" and int(consolidated.attrs["summaries"]) >= 0
    assert started.at.seconds > 0


def test_a_cursor_resumes_after_the_daemon_was_killed(spawn, tmp_path) -> None:
    first = spawn(**QUIET_ENV)
    with MemoryClient(first.address, timeout=30) as c:
        talk(c, "alice", "s1", MAY, "The boat is moored at pier 9.", "Noted.")
        before = Watcher(c, is_("session.ended"), user_id="alice", from_oldest=True).join()
    first.kill()  # SIGKILL: only what is on disk is left
    second = spawn(**QUIET_ENV)
    with MemoryClient(second.address, timeout=30) as c:
        c.append("s2", "A second session.", user_id="alice")
        new = lambda e: e.type == "session.appended" and e.session_id == "s2"  # noqa: E731
        after = Watcher(c, new, user_id="alice", cursor=before[0].cursor).join()
    assert types(before) == ["session.started", "session.appended", "session.ended"]
    # what came after the cursor: the rest of the first daemon's changes, then the new ones
    # (the weaver indexes s1 on one daemon or the other, in between)
    assert types(after)[:2] == ["session.appended", "session.ended"]
    assert set(types(after)[2:-2]) <= {"episode.indexed"}
    assert types(after)[-2:] == ["session.started", "session.appended"]
    assert [e.cursor for e in after[:2]] == [e.cursor for e in before[1:]]
    assert int(after[-1].cursor) > int(before[-1].cursor)


def test_a_forget_leaves_no_change_of_what_it_forgot(quiet_daemon) -> None:
    with quiet_daemon.client() as c:
        gone = talk(c, "alice", "s1", MAY, "My PIN is 0451.", "Noted.")
        kept = talk(c, "alice", "s2", MAY, "I like tea.", "Noted.")
        c.forget(episode_ids=[gone])
        events = Watcher(c, is_("memory.forgotten"), user_id="alice", from_oldest=True).join()
        assert {e.episode_id for e in events if e.episode_id} == {kept}
        assert events[-1].attrs["target"] == "episodes" and events[-1].attrs["episodes"] == "1"
        # a Forget of the user: nothing of before is left, the Forget itself is said
        c.forget(user_id="alice")
        events = Watcher(c, is_("memory.forgotten"), user_id="alice", from_oldest=True).join()
        assert types(events) == ["memory.forgotten"] and events[0].attrs["target"] == "scope"


def test_a_cursor_older_than_retention_is_out_of_range(start_daemon) -> None:
    now = [1_900_000_000.0]
    daemon = start_daemon(
        weaver=QUIET, changes={"retention_seconds": 3600}, factories=Factories(clock=lambda: now[0])
    )
    with daemon.client() as c:
        c.append("s1", "One.", user_id="alice")
        c.append("s1", "Two.", user_id="alice")
        first = Watcher(c, is_("session.appended"), user_id="alice", from_oldest=True).join()
        now[0] += 7200
        c.append("s1", "Three.", user_id="alice")
        assert daemon.daemon.parts.changes.trim() == 3  # as the scheduled job does
        with pytest.raises(OutOfRangeError, match="older than the change log keeps"):
            next(iter(c.watch(user_id="alice", cursor=first[0].cursor, timeout=30)))
        # from the oldest kept: the third append
        kept = Watcher(c, is_("session.appended"), user_id="alice", from_oldest=True).join()
        assert [e.attrs["first_seq"] for e in kept] == ["3"]


def test_an_expired_episode_is_told_once(start_daemon) -> None:
    now = [1_900_000_000.0]
    daemon = start_daemon(
        weaver=QUIET, journal={"ttl_seconds": 3600}, factories=Factories(clock=lambda: now[0])
    )
    journal = daemon.daemon.parts.journal
    with daemon.client() as c:
        episode = talk(c, "alice", "s1", MAY, "Short-lived words.", "Noted.")
        assert journal.announce_expired() == 0  # not yet
        now[0] += 7200
        assert journal.announce_expired() == 1  # as the compaction job does first
        assert journal.announce_expired() == 0  # once
        events = Watcher(c, is_("episode.expired"), user_id="alice", from_oldest=True).join()
    expired = events[-1]
    assert (expired.episode_id, expired.session_id) == (episode, "s1")


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ({"cursor": "next week"}, "is not a Watch cursor"),
        ({"cursor": "\u00b2"}, "is not a Watch cursor"),  # a digit to str.isdigit, not to int
        ({"cursor": "99999"}, "is ahead of this change log"),
        ({"types": ["session.exploded"]}, "unknown change type 'session.exploded'"),
        ({"cursor": "1", "from_oldest": True}, "from_oldest is for a watch without a cursor"),
        ({"user_id": ""}, "scope.user_id is required"),
    ],
)
def test_bad_requests_say_what_was_wrong(
    quiet_daemon, asked: dict[str, Any], expected: str
) -> None:
    with quiet_daemon.client() as c:
        c.append("s1", "One.", user_id="alice")
        with pytest.raises(InvalidArgumentError, match=expected):
            next(iter(c.watch(**{"user_id": "alice", **asked}, timeout=30)))


def test_tenant_checks_apply_as_for_reads(start_daemon) -> None:
    daemon = start_daemon(auth={"tokens": entries()}, weaver=QUIET)
    with MemoryClient(daemon.address, token=TOKENS["agent"][0]) as c:
        c.append("s1", "Alice's words.", user_id="alice")
        with pytest.raises(PermissionDeniedError):
            next(iter(c.watch(user_id="bob", timeout=30)))
        # the token's one tenant when none is named
        events = Watcher(c, is_("session.appended"), from_oldest=True).join()
        assert {e.scope.user_id for e in events} == {"alice"}
    writer = MemoryClient(daemon.address, token=TOKENS["writer"][0])  # append only
    with writer as c, pytest.raises(PermissionDeniedError):
        next(iter(c.watch(user_id="alice", timeout=30)))


def test_the_async_client_filters_types_and_a_stop_ends_the_stream(start_daemon) -> None:
    daemon = start_daemon(weaver=QUIET)
    stopper = threading.Thread(target=daemon.stop, daemon=True)

    async def follow() -> tuple[list[pb.ChangeEvent], StrataClientError | None]:
        seen: list[pb.ChangeEvent] = []
        async with AsyncMemoryClient(daemon.address) as c:
            try:
                async for event in c.watch(user_id="alice", types=["session.appended"]):
                    seen.append(event)
                    if len(seen) == 2:
                        stopper.start()
            except StrataClientError as exc:
                return seen, exc
        return seen, None

    with daemon.client() as c:
        feed = daemon.daemon.parts.feed
        result: list[Any] = []
        runner = threading.Thread(target=lambda: result.append(asyncio.run(follow())))
        runner.start()
        wait_until(lambda: feed.waiting, timeout=30)
        c.append("s1", "One.", user_id="alice")
        c.append("s1", "Two.", user_id="alice")
        runner.join(DEADLINE)
    stopper.join(DEADLINE)
    seen, error = result[0]
    assert types(seen) == ["session.appended", "session.appended"]
    assert isinstance(error, UnavailableError) and error.code == grpc.StatusCode.UNAVAILABLE
    assert "watch again from cursor" in str(error)


def test_catch_up_ends_the_stream_once_what_was_written_is_sent(quiet_daemon) -> None:
    with quiet_daemon.client() as c:
        talk(c, "alice", "s1", MAY, "One.", "Two.")
        talk(c, "bob", "b1", MAY, "Bob's.", "Fine.")
        wait_indexed(c)  # nothing more is written after this (no consolidation run)
        events = list(c.watch(user_id="alice", from_oldest=True, catch_up=True, timeout=30))
        assert types(events) == [
            "session.started",
            "session.appended",
            "session.ended",
            "episode.indexed",
        ]
        assert {e.scope.user_id for e in events} == {"alice"}
        # from the last cursor: nothing new, and the stream still ends
        after = c.watch(user_id="alice", cursor=events[-1].cursor, catch_up=True, timeout=30)
        assert list(after) == []
