"""A run's rewrite of its scopes' entity profiles and digests
(:meth:`tiers.journal.stale.StaleScopes.rewrite`): a stop ends it between two scopes and
leaves the rest marked for the next run, after a restart too; a scope whose rewrite raises
is left marked while the others go on, and a rebuild says so at its end."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from tests.support.llm_server import FakeOpenAI, Reply
from tests.support.model_clients import client_settings
from tests.support.worker import ALICE, World
from tiers.core.errors import VectorStoreUnavailable
from tiers.core.models import ModelClient
from tiers.core.records import Message, Scope
from tiers.journal.stale import StaleScopes
from tiers.scoped import Covered
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint, PointFilter
from tiers.working.memory import WorkingMemory
from weaver.consolidate import Consolidator
from weaver.digests import LLMDigestWriter
from weaver.errors import RewriteFailed
from weaver.rebuild import Rebuilder
from weaver.run import Progress, Run

BOB = Scope("bob", "bot")


@dataclass(slots=True)
class StopsAtTheRefresh(Run):
    """A run whose caller stops the weaver once every episode is consolidated."""

    stopping: threading.Event = field(default_factory=threading.Event)

    def publish(self, event: Progress) -> None:
        Run.publish(self, event)
        if event.stage == "consolidate" and event.total and event.done == event.total:
            self.stopping.set()


class SetAfter(threading.Event):
    """Unset for the first ``checks`` looks, then set: a stop between two scopes."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self.checks = checks

    def is_set(self) -> bool:
        self.checks -= 1
        return self.checks < 0


LISBON = ("I moved to Lisbon last spring.", "I live in Lisbon with my sister now.")


def end_sessions(working: WorkingMemory, *scopes: Scope, prefix: str = "s") -> None:
    for n, scope in enumerate(scopes):
        said = [Message("user", text, name=scope.user_id.title()) for text in LISBON]
        working.append(f"{prefix}{n}", scope, said)
        working.end_session(f"{prefix}{n}", user_id=scope.user_id)


def test_a_stop_ends_the_runs_refresh_and_logs_the_scopes_it_left(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """Rewriting a fleet's profiles and digests took a stop 17-89 s at 10M: a stop now ends
    the refresh between two scopes, and the scopes left are said, and marked in the state
    store for the next run."""
    weaver = world.weaver
    runs, consolidator = weaver._runs, weaver._runs.consolidator
    end_sessions(world.working, ALICE, BOB)
    run = StopsAtTheRefresh("r1", stopping=weaver._stopping)
    with caplog.at_level(logging.WARNING, logger="strata.weaver"):
        runs.run(run)
    report = run.report
    assert report is not None and report.episodes == 2, report
    assert (report.profiles, report.digests) == (0, 0)
    assert not report.ok and report.error == (
        "stopped by shutdown: the profiles of 2 scopes and the digests of 2 left to the next run"
    )
    (left,) = [r for r in caplog.records if r.getMessage() == "weaver.refresh_left"]
    assert left.fields == {  # type: ignore[attr-defined]
        "profiles_scopes": 2,
        "digests_scopes": 2,
        "abstracts_scopes": 0,  # no digest writer
    }
    marks = StaleScopes(consolidator.state)
    assert marks.marked("profiles") == marks.marked("digests") == {ALICE, BOB}

    # A refresh told to stop after its first look writes one scope and keeps the other.
    assert consolidator.refresh_profiles(SetAfter(1)) > 0
    assert marks.marked("profiles") == {BOB}
    assert consolidator.digests.refresh(stopping=SetAfter(1)) > 0
    assert marks.marked("digests") == {BOB}
    assert consolidator.refresh_profiles() > 0 and consolidator.digests.refresh() > 0
    assert marks.count() == 0


def profiles_of(semantic: SemanticStore, scope: Scope) -> list[MemoryPoint]:
    _embedder, vectors = semantic.wait_ready(30)
    return vectors.scroll(PointFilter(user_id=scope.user_id, kinds=("profile",)), 100)


def test_the_scopes_a_stop_left_are_refreshed_by_the_next_run_after_a_restart(
    world: World,
) -> None:
    """Before their marks, the scopes a stop left kept their old profiles and digests until
    a later run consolidated one of their episodes: for a user who never came back, for
    good."""
    weaver = world.weaver
    runs, cut = weaver._runs, weaver._runs.consolidator
    end_sessions(world.working, ALICE, BOB)
    runs.run(StopsAtTheRefresh("r1", stopping=weaver._stopping))
    assert not profiles_of(cut.semantic, ALICE) and not profiles_of(cut.semantic, BOB)

    # The daemon starts again: a consolidator on the same stores, where what was left is marked.
    again = Consolidator(cut.journal, cut.state, cut.semantic, cut.extractor, cut.fallback, set())
    marks = StaleScopes(cut.state)
    assert marks.marked("profiles") == marks.marked("digests") == {ALICE, BOB}
    weaver._stopping.clear()
    runs.consolidator = again
    run = Run("r2")
    runs.run(run)  # no episode left to consolidate
    report = run.report
    assert report is not None and report.ok and report.episodes == 0, report
    assert report.profiles > 0 and report.digests > 0
    assert profiles_of(cut.semantic, ALICE) and profiles_of(cut.semantic, BOB)
    assert marks.count() == 0


def test_a_scope_whose_mark_a_forget_took_is_marked_again_by_its_next_episode(
    world: World,
) -> None:
    """A Forget of the scope takes its marks, and the refresh then leaves the scope alone
    (a Forget rewrites what is left of it at once); the scope's next episode marks it
    again."""
    weaver = world.weaver
    runs, consolidator = weaver._runs, weaver._runs.consolidator
    end_sessions(world.working, ALICE)
    runs.run(StopsAtTheRefresh("r1", stopping=weaver._stopping))
    marks = StaleScopes(consolidator.state)
    batch = consolidator.state.batch()
    with marks.lock:
        assert marks.forget_into(batch, Covered(scope=Scope(ALICE.user_id))).count == 2
        consolidator.state.write(batch)
    assert marks.count() == 0
    assert consolidator.refresh_profiles() == consolidator.digests.refresh() == 0
    assert not profiles_of(consolidator.semantic, ALICE)  # only the marks went, here

    weaver._stopping.clear()
    end_sessions(world.working, ALICE, prefix="later")
    runs.run(StopsAtTheRefresh("r2", stopping=weaver._stopping))
    assert marks.marked("profiles") == marks.marked("digests") == {ALICE}


def digests_of(semantic: SemanticStore, scope: Scope) -> list[MemoryPoint]:
    _embedder, vectors = semantic.wait_ready(30)
    return vectors.scroll(PointFilter(user_id=scope.user_id, kinds=("digest",)), 100)


def test_the_writers_rewrite_a_stop_left_is_asked_for_after_a_restart(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an LLM, a stop between a run's extractive digests and the writer's rewrite of
    them left them extractive until their period's next change: the scopes the writer is to
    rewrite were held in memory only."""
    weaver = world.weaver
    runs, c = weaver._runs, weaver._runs.consolidator
    marks = StaleScopes(c.state)
    with FakeOpenAI(default=Reply.text("Alice moved to Lisbon.")) as fake:
        settings = client_settings(fake, ("STRATA_TEST_LLM_KEY", "k"), [], monkeypatch)
        writer = LLMDigestWriter(ModelClient(name="llm:test", **settings))

        def consolidator() -> Consolidator:  # the daemon's, at each start
            made = Consolidator(c.journal, c.state, c.semantic, c.extractor, c.fallback, set(),
                                digest_writer=writer)  # fmt: skip
            runs.consolidator = made
            return made

        first = consolidator()
        end_sessions(world.working, ALICE, BOB)
        runs.run(StopsAtTheRefresh("r1", stopping=weaver._stopping))
        assert marks.marked("digests") == marks.marked("abstracts") == {ALICE, BOB}
        # The stop comes once both scopes' digests are extractive, before the writer's turn.
        assert first.digests.refresh(stopping=SetAfter(2)) > 0
        assert marks.marked("digests") == set() and marks.marked("abstracts") == {ALICE, BOB}
        assert not fake.requests and all(digests_of(c.semantic, s) for s in (ALICE, BOB))

        again = consolidator()  # a restart
        assert again.digests.refresh() > 0
        assert marks.marked("abstracts") == set()
        asked = len(fake.requests)
        assert asked >= 2  # each scope's digests, once each
        written = [d.text for d in digests_of(c.semantic, ALICE)]
        assert "Alice moved to Lisbon." in written, written
        assert again.digests.refresh() == 0 and len(fake.requests) == asked  # nothing left

    # An LLM no longer configured: its rewrites still marked are dropped, never asked for.
    marks.mark("abstracts", [ALICE])
    assert Consolidator(c.journal, c.state, c.semantic, c.extractor, c.fallback,
                        set()).digests.refresh() == 0  # fmt: skip
    assert marks.marked("abstracts") == set()


# -- a scope whose rewrite raises ------------------------------------------------------------
def failing_for(
    scope: Scope, rewrite: Callable[[Scope], object], error: Exception
) -> Callable[[Scope], object]:
    """``rewrite``, raising ``error`` for ``scope``'s."""

    def rewritten(asked: Scope) -> object:
        if asked == scope:
            raise error
        return rewrite(asked)

    return rewritten


def break_rewrites(
    monkeypatch: pytest.MonkeyPatch, semantic: SemanticStore, scope: Scope, error: Exception
) -> None:
    """``scope``'s profiles and digests cannot be rewritten: each raises ``error``."""
    for name in ("refresh_profiles", "refresh_stories"):
        monkeypatch.setattr(semantic, name, failing_for(scope, getattr(semantic, name), error))


def test_a_scope_whose_rewrite_raises_stays_marked_and_the_others_are_rewritten(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, the first scope whose profiles raised ended the run's refresh: every scope
    after it in order kept its old profiles and digests, run after run."""
    runs, consolidator = world.weaver._runs, world.weaver._runs.consolidator
    semantic = consolidator.semantic
    end_sessions(world.working, ALICE, BOB)  # alice's comes first
    break_rewrites(monkeypatch, semantic, ALICE, ValueError("no profile for you"))
    run = Run("r1")
    with caplog.at_level(logging.WARNING, logger="strata.weaver"):
        runs.run(run)
    report = run.report
    assert report is not None and report.episodes == 2, report
    assert not report.ok and report.failures == 2
    assert report.error == (
        "the profiles of 1 scope and the digests of 1 scope could not be rewritten "
        "(ValueError: no profile for you); left to the next run"
    )
    assert profiles_of(semantic, BOB) and not profiles_of(semantic, ALICE)
    assert report.profiles > 0 and report.digests > 0  # bob's
    marks = StaleScopes(consolidator.state)
    assert marks.marked("profiles") == marks.marked("digests") == {ALICE}
    failed = [r for r in caplog.records if r.getMessage() == "weaver.rewrite_failed"]
    assert [(r.fields["part"], r.fields["user_id"]) for r in failed] == [  # type: ignore[attr-defined]
        ("profiles", "alice"),
        ("digests", "alice"),
    ]

    monkeypatch.undo()  # mended: the next run rewrites alice's, with no episode of hers
    run = Run("r2")
    runs.run(run)
    assert run.report is not None and run.report.ok and run.report.episodes == 0, run.report
    assert profiles_of(semantic, ALICE)
    assert marks.count() == 0


def test_a_store_that_cannot_be_written_ends_the_refresh_and_fails_the_run(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error of the store, not of the scope, would fail every scope after it: the refresh
    ends there, and the run fails as before."""
    runs, consolidator = world.weaver._runs, world.weaver._runs.consolidator
    end_sessions(world.working, ALICE, BOB)
    down = VectorStoreUnavailable("the vector store is down")
    break_rewrites(monkeypatch, consolidator.semantic, ALICE, down)
    run = Run("r1")
    with pytest.raises(VectorStoreUnavailable):
        runs.run(run)
    assert run.report is not None and run.report.error == "run: the vector store is down"
    marks = StaleScopes(consolidator.state)
    assert marks.marked("profiles") == marks.marked("digests") == {ALICE, BOB}
    assert not profiles_of(consolidator.semantic, BOB)


def test_a_rebuild_rewrites_every_other_scope_then_says_which_failed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, consolidator = world.weaver._runs, world.weaver._runs.consolidator
    semantic = consolidator.semantic
    end_sessions(world.working, ALICE, BOB)
    runs.run(Run("r1"))
    rebuilder = Rebuilder(
        consolidator.journal, consolidator.state, semantic, world.indexer, consolidator
    )
    break_rewrites(monkeypatch, semantic, ALICE, KeyError("entity"))
    with pytest.raises(RewriteFailed) as raised:
        rebuilder.rebuild()
    assert str(raised.value) == (
        "rebuilt, but the profiles of 1 scope and the digests of 1 scope could not be "
        "rewritten (KeyError: 'entity'); left to the next run"
    )
    assert profiles_of(semantic, BOB) and not profiles_of(semantic, ALICE)
    marks = StaleScopes(consolidator.state)
    assert marks.marked("profiles") == marks.marked("digests") == {ALICE}
