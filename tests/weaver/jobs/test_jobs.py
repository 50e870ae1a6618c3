"""The weaver's worker on real stores, without a daemon: its typed jobs handled with ``match``
(anything else is refused with a clear error) and the events it publishes (``Weaver.events``).

RocksDB state and journal, working memory, the embedded vector engine and a small hashing
embedder instead of the model; the local extractor consolidates."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future

import pytest

from tests.support.polling import wait_until
from tests.support.worker import World, end_session
from weaver.jobs.events import EpisodesIndexed, RunFinished
from weaver.jobs.jobqueue import JobQueue
from weaver.jobs.kinds import Call, Consolidate, IndexEpisodes, IndexLive, UnknownJob
from weaver.run import Run


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
