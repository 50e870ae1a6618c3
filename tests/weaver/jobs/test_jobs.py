"""The weaver's worker on real stores, without a daemon: its typed jobs handled with ``match``
(anything else is refused with a clear error) and the events it publishes (``Weaver.events``).

RocksDB state and journal, working memory, the embedded vector engine and a small hashing
embedder instead of the model; the local extractor consolidates."""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from tests.support.polling import wait_until
from tiers.core.records import Message, Scope
from tiers.journal.stale import StaleScopes
from tiers.journal.store import JOURNAL_CFS, Journal
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.scoped import Covered
from tiers.semantic.embedding import EmbeddingService
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint, PointFilter
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.working.memory import WorkingMemory
from tiers.working.session import SessionFlushed, WindowLimits
from weaver.consolidate import Consolidator
from weaver.extractors.local import LocalExtractor
from weaver.index import Indexer
from weaver.jobs.events import EpisodesIndexed, RunFinished
from weaver.jobs.jobqueue import JobQueue
from weaver.jobs.kinds import Call, Consolidate, IndexEpisodes, IndexLive, UnknownJob
from weaver.jobs.runner import Weaver
from weaver.run import Progress, Run
from weaver.settings import WeaverSettings

DIM = 32
TTL = 3600
ALICE = Scope("alice", "bot")


class HashEmbedder:
    """Deterministic bag of words: each word adds 1 to a hashed column; rows L2-normalised."""

    model_name = "hash"
    dim = DIM

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        rows = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                rows[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
            norm = np.linalg.norm(rows[i])
            if norm:
                rows[i] /= norm
        return rows

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode_documents(texts)


@dataclass
class World:
    working: WorkingMemory
    weaver: Weaver


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    state = RocksStore(tmp_path / "state", STATE_CFS)
    jstore = RocksStore(tmp_path / "journal", JOURNAL_CFS, ttl_seconds=TTL)
    journal = Journal(jstore, state, TTL)
    working = WorkingMemory(state, journal, WindowLimits())
    working.recover()
    embedder = HashEmbedder()
    semantic = SemanticStore(
        state, EmbeddingService(lambda: embedder, "hash"), lambda: EdgeVectorStore(tmp_path / "v")
    )
    semantic.start()
    semantic.wait_ready(30)
    indexer = Indexer(journal, semantic, WeaverSettings())
    local = LocalExtractor(embed=embedder.encode_documents)
    consolidator = Consolidator(journal, state, semantic, local, local, set())
    weaver = Weaver(journal, semantic, indexer, consolidator)
    working.events.subscribe(
        SessionFlushed, lambda event: weaver.notify_flushed(event.result.episode_id)
    )
    try:
        yield World(working, weaver)
    finally:
        weaver.stop()
        semantic.close()
        jstore.close()
        state.close()


def end_session(working: WorkingMemory, session_id: str) -> str:
    turns = ["I moved to Lisbon last spring.", "Nice! Do you like the trams there?"]
    messages = [Message("user", t, name="Alice") for t in turns]
    working.append(session_id, ALICE, messages)
    return working.end_session(session_id, user_id=ALICE.user_id).episode_id


# -- the jobs --------------------------------------------------------------------------------
def test_something_else_than_a_job_is_refused_at_the_door(world: World) -> None:
    refused = (
        r"not a weaver job: \('index', .*\(the kinds: IndexEpisodes, IndexLive, IndexDocuments, "
    )
    with pytest.raises(UnknownJob, match=refused):
        world.weaver._jobs.put(("index", ["a" * 32]))  # type: ignore[arg-type]
    assert world.weaver._jobs.kinds() == []


def test_the_worker_refuses_a_value_of_no_job_kind_by_name(world: World) -> None:
    with pytest.raises(UnknownJob, match="not a weaver job: 42"):
        world.weaver._handle(42)  # type: ignore[arg-type]


def test_each_kind_of_job_goes_to_its_part_in_the_order_queued(world: World) -> None:
    weaver, done = world.weaver, []
    release = threading.Event()
    blocked = weaver.submit(lambda: release.wait(30))
    weaver.start()
    wait_until(weaver._jobs.empty, 30, "for the worker", interval=0.01)  # it took the call
    episode = end_session(world.working, "s1")
    run = weaver.request_run()
    failing: Future[None] = Future()
    weaver._jobs.put(Call(lambda: done.append("call") or 1 / 0, failing))
    assert weaver._jobs.kinds() == ["index", "run", "call"]
    release.set()
    assert blocked.result(30) is True
    with pytest.raises(ZeroDivisionError):
        failing.result(30)  # a call's failure is its caller's, not the worker's
    assert done == ["call"] and weaver.last_error == ""
    report = run.report
    assert report is not None and report.ok and report.episodes == 1, report
    assert weaver.last_run is report and weaver.running is None
    assert weaver.submit(lambda: episode).result(30) == episode  # the worker goes on


def test_the_jobs_are_frozen_values() -> None:
    job = IndexEpisodes(("a" * 32,))
    with pytest.raises(AttributeError):
        job.episode_ids = ()  # type: ignore[misc]
    assert (job.kind, Consolidate(Run("r1")).kind) == ("index", "run")


# -- the events ------------------------------------------------------------------------------
def test_an_indexed_episode_and_a_finished_run_reach_their_subscribers_on_the_worker(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    weaver, seen = world.weaver, []
    requested: list[Run] = []
    delivered: list[bool] = []  # whether the run's report was out when the event came

    def broken(event: EpisodesIndexed) -> None:
        raise RuntimeError("observer bug")

    def indexed(event: EpisodesIndexed) -> None:
        seen.append((event, threading.current_thread().name))

    def finished(event: RunFinished) -> None:
        # The weaver's state says the run is over, but its caller has not had the report
        # yet: what the observers count is there when the caller looks (the metrics).
        assert weaver.last_run is event.report and weaver.running is None
        wait_until(lambda: requested, 30, "for the test to hold the run")
        delivered.extend(run.report is not None for run in requested)
        seen.append((event, threading.current_thread().name))

    weaver.events.subscribe(EpisodesIndexed, broken)  # first: the others still hear it
    weaver.events.subscribe(EpisodesIndexed, indexed)
    weaver.events.subscribe(RunFinished, finished)
    weaver.start()
    with caplog.at_level(logging.ERROR, logger="strata.weaver"):
        end_session(world.working, "s1")
        wait_until(lambda: seen, 30, "for the index job")
    (indexed_event, thread), *_ = seen
    assert isinstance(indexed_event, EpisodesIndexed) and thread == "weaver"
    assert indexed_event.episodes == 1 and indexed_event.points > 0
    assert indexed_event.seconds >= 0
    failed = [r for r in caplog.records if r.getMessage() == "weaver.observer_failed"]
    assert len(failed) == 1 and failed[0].exc_info is not None
    assert weaver.last_error == ""  # an observer's failure is not the weaver's

    run = weaver.request_run()
    requested.append(run)
    wait_until(lambda: len(seen) == 2, 30, "for the run")
    finished_event, thread = seen[1]
    assert isinstance(finished_event, RunFinished) and thread == "weaver"
    assert delivered == [False]
    wait_until(lambda: run.report is not None, 30, "for the report")
    assert finished_event.report is run.report and finished_event.report.ok


def test_index_jobs_in_line_overtake_a_run_between_two_of_its_episodes(world: World) -> None:
    """A run holds the worker for minutes under a fleet: the episodes that end meanwhile are
    indexed before the run's next episode, not after the run, in one batch."""
    weaver, order = world.weaver, []
    entered, release = threading.Event(), threading.Event()
    consolidator = weaver._runs.consolidator
    consolidate = consolidator.consolidate

    def gated(episode_id: str, near_expiry: bool = False):  # type: ignore[no-untyped-def]
        order.append("consolidate")
        if len(order) == 1:
            entered.set()
            assert release.wait(30)
        return consolidate(episode_id, near_expiry)

    consolidator.consolidate = gated  # type: ignore[method-assign]
    weaver.events.subscribe(EpisodesIndexed, lambda event: order.append(f"{event.episodes}"))
    weaver.start()
    end_session(world.working, "s1")
    end_session(world.working, "s2")
    wait_until(lambda: sum(map(int, order)) == 2, 30, "for s1 and s2's index")  # their events
    order.clear()
    run = weaver.request_run()
    assert entered.wait(30)
    end_session(world.working, "s3")  # their index jobs queue behind the run
    end_session(world.working, "s4")
    assert weaver._jobs.kinds() == ["index", "index"]
    release.set()
    wait_until(lambda: run.report is not None, 30, "for the run")
    assert run.report is not None and run.report.episodes == 2, run.report
    assert order == ["consolidate", "2", "consolidate"]  # both ended episodes, one batch


def test_a_run_lets_only_the_index_jobs_then_in_line_overtake_it() -> None:
    """``JobQueue.take``: the index jobs in line, in order, and nothing else; what is queued
    after is the next episode's to take, so a stream of jobs cannot hold a run back."""
    line = JobQueue()
    first, run, live, second = (
        IndexEpisodes(("a",)),
        Consolidate(Run("r")),
        IndexLive(),
        IndexEpisodes(("b",)),
    )
    for job in (first, run, live, second):
        line.put(job)
    assert line.take(IndexLive, IndexEpisodes) == [first, live, second]
    assert line.kinds() == ["run"] and line.take(IndexLive, IndexEpisodes) == []
    line.put(IndexLive())
    assert line.take(IndexLive) == [IndexLive()] and line.kinds() == ["run"]


# -- a stop ----------------------------------------------------------------------------------
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
    assert consolidator.stale_profiles == consolidator.digests.stale == {ALICE, BOB}
    (left,) = [r for r in caplog.records if r.getMessage() == "weaver.refresh_left"]
    assert left.fields == {"profiles_scopes": 2, "digests_scopes": 2}  # type: ignore[attr-defined]
    marks = StaleScopes(consolidator.state)
    assert marks.marked("profiles") == marks.marked("digests") == {ALICE, BOB}

    # A refresh told to stop after its first look writes one scope and keeps the other.
    assert consolidator.refresh_profiles(SetAfter(1)) > 0
    assert consolidator.stale_profiles == marks.marked("profiles") == {BOB}
    assert consolidator.digests.refresh(stopping=SetAfter(1)) > 0
    assert consolidator.digests.stale == marks.marked("digests") == {BOB}
    assert consolidator.refresh_profiles() > 0 and consolidator.digests.refresh() > 0
    assert consolidator.stale_profiles == consolidator.digests.stale == set()
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

    # The daemon starts again: a consolidator on the same stores knows what was left.
    again = Consolidator(cut.journal, cut.state, cut.semantic, cut.extractor, cut.fallback, set())
    assert again.stale_profiles == again.digests.stale == {ALICE, BOB}
    weaver._stopping.clear()
    runs.consolidator = again
    run = Run("r2")
    runs.run(run)  # no episode left to consolidate
    report = run.report
    assert report is not None and report.ok and report.episodes == 0, report
    assert report.profiles > 0 and report.digests > 0
    assert profiles_of(cut.semantic, ALICE) and profiles_of(cut.semantic, BOB)
    assert again.stale_profiles == again.digests.stale == set()
    assert StaleScopes(cut.state).count() == 0


def test_a_scope_whose_mark_a_forget_took_is_marked_again_by_its_next_episode(
    world: World,
) -> None:
    """A Forget of the scope takes its marks but not its place in the consolidator's sets:
    the scope's next episode marks it again all the same."""
    weaver = world.weaver
    runs, consolidator = weaver._runs, weaver._runs.consolidator
    end_sessions(world.working, ALICE)
    runs.run(StopsAtTheRefresh("r1", stopping=weaver._stopping))
    marks = StaleScopes(consolidator.state)
    batch = consolidator.state.batch()
    with marks.lock:
        assert marks.forget_into(batch, Covered(scope=Scope(ALICE.user_id))).count == 2
        consolidator.state.write(batch)
    assert marks.count() == 0 and consolidator.stale_profiles == {ALICE}

    weaver._stopping.clear()
    end_sessions(world.working, ALICE, prefix="later")
    runs.run(StopsAtTheRefresh("r2", stopping=weaver._stopping))
    assert marks.marked("profiles") == marks.marked("digests") == {ALICE}
