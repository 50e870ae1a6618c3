"""The fan-out of a query's channels (:class:`recall.channels.fanout.Fanout`) once its threads
are shut. Real model, RocksDB and embedded engine (the contract corpus); the order of work
beside the embedding is tested through the engine (``tests/recall/test_engine.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recall.channels.fanout import Fanout
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
