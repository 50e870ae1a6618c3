"""A backup taken right after a Forget: it waits for the Forget's compactions, so none of the
files it links holds what was forgotten, and it is refused, not taken, when they last too long
(``Purger.settle``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

from tests.support import QUIET, wait_until
from tests.support.disk import files_with
from tests.support.forgetting import SECRET, talk
from tiers.core.errors import StoreUnavailable
from tiers.rights.backup import take_backup
from tiers.rocks import RocksStore

pytestmark = pytest.mark.slow


def held(store: RocksStore, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Hold ``store``'s compactions (Forget's purge) until the returned event is set."""
    release = threading.Event()
    purge: Callable[..., None] = store.purge

    def slow(families: Iterable[str], prefixes: Mapping[str, bytes] | None = None) -> None:
        release.wait(60)
        purge(families, prefixes)

    monkeypatch.setattr(store, "purge", slow)
    return release


def test_a_backup_waits_for_the_compactions_of_a_forget(start_daemon, tmp_path, monkeypatch):
    daemon = start_daemon(weaver=QUIET)
    parts = daemon.daemon.parts
    parts.semantic.wait_ready(120)
    release = held(parts.journal_store, monkeypatch)
    try:
        with daemon.client() as c:
            gone = talk(c, "alice", "s1", f"My locker code is {SECRET}.", "Noted.")
            talk(c, "bob", "s2", "I like jazz.")
            wait_until(lambda: not c.admin.weaver_status().unindexed, 60, "for the index stage")
            assert c.forget(episode_ids=[gone]).episodes == 1
            taken: list[Any] = []
            backup = threading.Thread(
                target=lambda: taken.append(c.admin.backup(str(tmp_path / "after")))
            )
            backup.start()
            backup.join(1.0)
            assert backup.is_alive() and not (tmp_path / "after" / "journal").exists()
            release.set()  # the journal's compaction runs, then the backup
            backup.join(60)
            assert taken and "journal" in taken[0].stores
    finally:
        release.set()
    for store in ("journal", "state", "vectors"):
        assert files_with(tmp_path / "after" / store, SECRET.encode()) == [], store


def test_a_backup_whose_forget_does_not_settle_in_time_is_refused(
    start_daemon, tmp_path, monkeypatch
):
    daemon = start_daemon(weaver=QUIET)
    parts = daemon.daemon.parts
    parts.semantic.wait_ready(120)
    purger = parts.forgetter.purger
    release = held(parts.journal_store, monkeypatch)
    stores = {"state": parts.state, "journal": parts.journal_store}
    try:
        with daemon.client() as c:
            gone = talk(c, "alice", "s1", f"My locker code is {SECRET}.")
            wait_until(lambda: not c.admin.weaver_status().unindexed, 60, "for the index stage")
            c.forget(episode_ids=[gone])
        with pytest.raises(StoreUnavailable, match="compaction is still rewriting"):
            take_backup(
                tmp_path / "refused",
                stores,
                parts.semantic.quiet,
                parts.working.write_lock,
                None,
                lambda: purger.settle(timeout=0.2),
            )
        assert not (tmp_path / "refused").exists()
    finally:
        release.set()
    purger.settle(timeout=60)  # then it settles
