"""The fan-out of a query's channels (:class:`recall.channels.fanout.Fanout`): the searches
started ahead (the query's, then its speaker-neutral form's, in turn on one thread), dropped
or cut by a close before they ran, and once its threads are shut. Real model, RocksDB and
embedded engine (the contract corpus); the order of work beside the embedding is tested
through the engine (``tests/recall/test_engine.py``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import CancelledError
from dataclasses import replace

import pytest

from recall.channels import KeywordChannel
from recall.channels.fanout import Fanout, drop
from tests.contracts.corpus import Tier3, channels, ctx, filled


@pytest.fixture(scope="module")
def tier3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tier3]:
    t = filled(tmp_path_factory.mktemp("corpus"))
    yield t
    t.close()


def test_closed_threads_leave_every_search_to_the_query_s_thread(tier3: Tier3) -> None:
    """A query under way when the engine closes (its threads shut) is answered whole."""
    every = channels(tier3.semantic)
    fanout = Fanout(every, 1, ahead=lambda _scope: True)
    names, c, timings = list(every), ctx(), {}
    started = fanout.ahead(c.query, names, 20, timings)
    assert set(started) == {"keyword"}
    open_results, _ = fanout.run(c, names, 20, timings, started)
    fanout.close()
    fanout.close()  # idempotent
    assert fanout.ahead(c.query, names, 20, {}) == {}
    results, degraded = fanout.run(c, names, 20, timings, {})
    assert not degraded and list(results) == names and all(results.values())
    assert results == open_results


def test_the_neutral_form_is_searched_after_the_query_on_the_same_thread(tier3: Tier3) -> None:
    every = channels(tier3.semantic)
    fanout = Fanout(every, 2, ahead=lambda _scope: True)
    c, timings = ctx(), {}
    neutral = replace(c.query, text="Where does the beagle Biscuit go for walks?")
    keyword = KeywordChannel(tier3.semantic)
    try:
        started = fanout.ahead(c.query, list(every), 20, timings, neutral)
        assert list(started) == ["keyword", "keyword:neutral"]
        assert started["keyword"].result(30) == keyword.search_text(c.query, 20)
        assert started["keyword:neutral"].result(30) == keyword.search_text(neutral, 20)
        assert started["keyword:neutral"].result() != started["keyword"].result()
        assert {"keyword", "keyword:neutral"} <= set(timings)
        results, degraded = fanout.run(c, list(every), 20, timings, started)
        assert list(results) == list(every) and not degraded  # the cue's list is not a channel's
    finally:
        fanout.close()


def test_searches_dropped_or_cut_by_a_close_before_they_ran_never_run_nor_hang(
    tier3: Tier3,
) -> None:
    every = channels(tier3.semantic)
    fanout = Fanout(every, 1, ahead=lambda _scope: True)
    c = ctx()
    neutral = replace(c.query, text="the beagle Biscuit")
    busy, timings = threading.Event(), {}
    try:
        fanout._texts.submit(busy.wait, 30)  # the one thread is taken: the job waits
        dropped = fanout.ahead(c.query, list(every), 20, timings, neutral)
        drop(dropped)
        busy.set()
        fanout._texts.submit(lambda: None).result(30)  # the dropped job had its turn before
        assert timings == {}  # neither of its searches ran
        busy.clear()
        fanout._texts.submit(busy.wait, 30)
        cut = fanout.ahead(c.query, list(every), 20, timings, neutral)
        fanout.close()  # cancels the job before it runs
        for future in [*dropped.values(), *cut.values()]:
            with pytest.raises(CancelledError):
                future.result(5)
    finally:
        busy.set()
