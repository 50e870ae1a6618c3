"""An RPC that waits for the working memory's lock (held by a Forget, a backup's checkpoints or a
session's flush) waits without blocking the event loop: every other RPC goes on meanwhile. And a
scope's Forget holds that lock only from the scope's open sessions to their drop, not while it
reads and deletes the scope's points and edges."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.support import QUIET, ThreadDaemon
from tests.support.forgetting import talk
from tiers.core.records import Scope


class WatchedLock:
    """The working memory's lock, as the services see it: the same lock, with the refused
    attempts to take it without waiting noted (``refused``)."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.refused = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got: bool = self.lock.acquire(blocking, timeout)
        if not got:
            self.refused.set()
        return got

    def release(self) -> None:
        self.lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_an_append_waiting_for_the_working_memorys_lock_holds_up_no_other_rpc(start_daemon):
    daemon: ThreadDaemon = start_daemon(weaver=QUIET)
    working = daemon.daemon.parts.working
    watched = WatchedLock(working.write_lock)
    working.write_lock = watched
    with daemon.client(timeout=60) as c, ThreadPoolExecutor(2) as pool:
        talk(c, "bob", "b1", "I keep bees on the roof.", "How many hives?")
        with watched.lock:  # as a Forget or a backup holds it, on another thread
            append = pool.submit(c.append, "a1", "I moved to Lisbon.", user_id="alice")
            window = pool.submit(c.get_working_memory, "b2", user_id="bob")
            assert watched.refused.wait(60), "the append never asked for the lock"
            # The loop serves the rest meanwhile: bob's episodes come from the journal.
            episodes = c.list_episodes(user_id="bob", timeout=30).episodes
            assert len(episodes) == 1
            assert not append.done() and not window.done()
        assert append.result(60).seq == 1
        assert window.exception(60) is not None  # b2 was never opened: NOT_FOUND, in turn
        assert [m.message.content for m in c.get_working_memory("a1").messages] == [
            "I moved to Lisbon."
        ]


def test_a_scopes_forget_reads_its_points_without_the_working_memorys_lock(start_daemon):
    daemon: ThreadDaemon = start_daemon(weaver=QUIET)
    forgetter = daemon.daemon.parts.forgetter
    finder = forgetter._finder
    reading, go = threading.Event(), threading.Event()
    stored = finder.stored

    def held_stored(scope: Scope, plan: Any) -> list[str]:
        reading.set()
        assert go.wait(60)
        return stored(scope, plan)

    finder.stored = held_stored  # type: ignore[method-assign]
    with daemon.client(timeout=60) as c, ThreadPoolExecutor(1) as pool:
        talk(c, "alice", "a1", "My locker code is 4417.", "Noted.")
        talk(c, "alice", "a2", "I am still here.", "Good.", end=False)
        forget = pool.submit(c.forget, user_id="alice")
        try:
            assert reading.wait(60)
            # The Forget holds Tier 3's writers off, but not the appends of another user.
            assert c.append("b1", "I keep bees.", user_id="bob").seq == 1
            assert c.get_working_memory("b1").messages[0].message.content == "I keep bees."
            assert not forget.done()
        finally:
            go.set()
        counts = forget.result(60)
    assert counts.sessions == 1 and counts.episodes == 1  # a2 open, a1 in the journal
    with daemon.client(timeout=60) as c:
        assert c.list_episodes(user_id="alice").episodes == []
        assert len(c.get_working_memory("b1").messages) == 1
