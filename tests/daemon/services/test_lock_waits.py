"""An RPC that waits for the working memory's lock (held by a Forget, a backup's checkpoints or a
session's flush) waits without blocking the event loop: every other RPC goes on meanwhile. And a
scope's Forget holds that lock only from a last look at the scope's open sessions to their drop,
not while it reads and deletes the scope's points and edges or writes its tombstones."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.support import QUIET, ThreadDaemon
from tests.support.forgetting import talk
from tests.support.gates import WatchedLock
from tiers.core.records import Scope
from tiers.rights.forget.cascade import Forgetter
from tiers.rights.forget.finder import Finder


def test_an_append_waiting_for_the_working_memorys_lock_holds_up_no_other_rpc(start_daemon):
    daemon: ThreadDaemon = start_daemon(weaver=QUIET)
    working = daemon.daemon.parts.working
    watched = WatchedLock(working.write_lock)
    working.write_lock = watched  # type: ignore[assignment]
    with daemon.client(timeout=60) as c, ThreadPoolExecutor(2) as pool:
        talk(c, "bob", "b1", "I keep bees on the roof.", "How many hives?")
        with watched:  # as a Forget or a backup holds it, on another thread
            append = pool.submit(c.append, "a1", "I moved to Lisbon.", user_id="alice")
            window = pool.submit(c.get_working_memory, "b2", user_id="bob")
            watched.refused()  # the append (or the window) asked for it
            # The loop serves the rest meanwhile: bob's episodes come from the journal.
            episodes = c.list_episodes(user_id="bob", timeout=30).episodes
            assert len(episodes) == 1
            assert not append.done() and not window.done()
        assert append.result(60).seq == 1
        assert window.exception(60) is not None  # b2 was never opened: NOT_FOUND, in turn
        assert [m.message.content for m in c.get_working_memory("a1").messages] == [
            "I moved to Lisbon."
        ]


def test_a_scopes_forget_reads_its_points_without_the_working_memorys_lock(
    start_daemon, monkeypatch
):
    daemon: ThreadDaemon = start_daemon(weaver=QUIET)
    reading, go = threading.Event(), threading.Event()
    stored = Finder.stored

    def held_stored(finder: Finder, scope: Scope, plan: Any, **kwargs: Any) -> list[str]:
        reading.set()
        assert go.wait(60)
        return stored(finder, scope, plan, **kwargs)

    monkeypatch.setattr(Finder, "stored", held_stored)
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


def test_a_session_of_the_scope_that_ends_during_its_forget_is_forgotten_at_the_last_look(
    start_daemon, monkeypatch
):
    """The tombstones are written before the working memory's lock is taken; a session of the
    scope that ends in between is found at the last look under the lock, and forgotten too."""
    daemon: ThreadDaemon = start_daemon(weaver=QUIET)
    dropping, go = threading.Event(), threading.Event()
    drop = Forgetter._drop_sessions

    def held_drop(forgetter: Forgetter, *args: Any) -> list[str]:
        dropping.set()
        assert go.wait(60)
        return drop(forgetter, *args)

    monkeypatch.setattr(Forgetter, "_drop_sessions", held_drop)
    tombstones = daemon.daemon.parts.semantic.tombstones
    with daemon.client(timeout=60) as c, ThreadPoolExecutor(1) as pool:
        first = talk(c, "alice", "a1", "My locker code is 4417.", "Noted.")
        forget = pool.submit(c.forget, user_id="alice")
        try:
            assert dropping.wait(60)
            assert tombstones.episode(first)
            late = talk(c, "alice", "a2", "My new code is 9921.", "Noted again.")
            assert not tombstones.episode(late)
        finally:
            go.set()
        counts = forget.result(60)
        assert counts.episodes == 2  # both gone from the journal
        assert tombstones.episode(late)
        assert c.list_episodes(user_id="alice").episodes == []
        # A session begun after the Forget is kept.
        assert c.append("a3", "Hello again.", user_id="alice").seq == 1
        assert len(c.get_working_memory("a3").messages) == 1
