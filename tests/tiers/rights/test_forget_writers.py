"""A forgotten memory never comes back, whichever writer runs after the Forget: a consolidation
run, a rebuild (one user's and every user's), an import of an export made before the Forget, the
re-indexing of documents and the rewriting of entity profiles. Every one of them writes Tier 3
through the semantic store's door (:mod:`tiers.semantic.store`), which checks the tombstones."""

from __future__ import annotations

import pytest

from tests.support import QUIET, ThreadDaemon, consolidate, wait_indexed
from tests.support.exporting import exported
from tests.support.forgetting import SECRET, talk, texts
from tiers.core.records import Scope
from tiers.semantic.vectors import PointFilter

pytestmark = pytest.mark.slow
ALICE = Scope("alice")


def tier3_ids(daemon: ThreadDaemon) -> set[str]:
    """The ids of alice's vector points and graph edges."""
    semantic = daemon.daemon.parts.semantic
    _embedder, vectors = semantic.wait_ready(60)
    points = {p.id for p in vectors.scroll(PointFilter(user_id="alice"), 100_000)}
    return points | {e.id for e in semantic.graph.edges_where(lambda e: e.scope == ALICE)}


def test_a_forgotten_id_comes_back_through_no_writer(start_daemon):
    daemon = start_daemon(weaver=QUIET)
    with daemon.client(timeout=120) as c:
        berlin = talk(c, "alice", "a1", "I moved to Berlin last year.", "Berlin is lovely.")
        secret = talk(c, "alice", "a2", f"My locker code is {SECRET}.", "Noted, I keep it.")
        talk(c, "alice", "a3", "I work at Acme as a designer.", "Acme is a good place.")
        doc = c.put_document(
            ["notes"], "locker", text=f"Locker {SECRET} in hall B.", user_id="alice"
        )
        wait_indexed(c)
        consolidate(c)
        _embedder, vectors = daemon.daemon.parts.semantic.wait_ready(60)
        facts = vectors.scroll(PointFilter(user_id="alice", kinds=("fact",)), 1000)
        (fact,) = [p for p in facts if p.episode_id == berlin and "Berlin" in p.text][:1]
        of_secret = {p.id for p in vectors.scroll(PointFilter(episode_ids=(secret,)), 1000)}
        assert of_secret and doc.document.id in tier3_ids(daemon)
        before = exported(c, "alice")  # holds everything about to be forgotten
        assert SECRET.encode() in before

        c.forget(episode_ids=[secret])
        c.forget(memory_ids=[fact.id, doc.document.id])
        forgotten = of_secret | {fact.id, doc.document.id}
        kept = tier3_ids(daemon)
        assert not forgotten & kept and kept  # the rest of alice's memory stays

        def nothing_came_back(writer: str) -> None:
            ids = tier3_ids(daemon)
            assert not forgotten & ids, f"{writer} wrote forgotten ids {forgotten & ids}"
            hits = texts(c, "alice", f"locker code {SECRET} Berlin")
            assert not any(SECRET in t or i in forgotten for i, _e, t in hits), writer

        consolidate(c)  # a run (profiles rewritten for the scope's facts)
        list(c.admin.run_weaver(episode_ids=[berlin, secret]))  # asked by id: the episode is gone
        nothing_came_back("a consolidation run")
        for user in ("alice", ""):
            report = c.admin.rebuild(user, timeout=120)
            assert report.episodes >= 2, report
            nothing_came_back(f"a rebuild of {user or 'every user'}")
        imported = c.admin.import_([before])
        assert imported.skipped_forgotten >= len(forgotten) - 1, imported
        nothing_came_back("an import of an export made before the Forget")
        consolidate(c)
        nothing_came_back("a run after the import")
        assert tier3_ids(daemon) == kept  # and nothing else was lost on the way
