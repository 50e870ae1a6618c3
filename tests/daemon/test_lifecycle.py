"""A real daemon's start and stop (RocksDB stores, a gRPC server on loopback): each once, safe
to call again; a part that fails to start stops what had started before it, in reverse order;
a stage of the stop that fails stops no other; a stop waits for no shard's term count; a
restart warms the graphs of the users asked before it."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from daemon.app import Daemon, NotStarted
from daemon.server.metrics import Metrics
from daemon.settings import Settings
from tests.support import MAY, QUIET, ThreadDaemon, wait_until
from tests.support.models import shared_factories
from tests.support.weaving import conversation
from tiers.rocks import RocksStore
from tiers.semantic.store import edge_store_path
from tiers.semantic.vectors import (
    PointFilter,
    shard_of,
)
from tiers.semantic.vectors.edge import layout
from tiers.semantic.vectors.edge import shard as edge_shard
from tiers.semantic.vectors.shards.members import ShardSet
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.semantic.vectors.term_frequencies import Tally

METRICS = {"enabled": True, "listen": "127.0.0.1:0"}


def _serving(address: str) -> bool:
    """Whether a gRPC server answers the health check on ``address``."""
    with grpc.insecure_channel(address) as channel:
        try:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return False
    return True


def test_start_and_stop_are_safe_to_call_again(
    start_daemon: Callable[..., ThreadDaemon], make_settings: Callable[..., Settings]
) -> None:
    d = start_daemon(weaver=QUIET)
    daemon = d.daemon

    async def twice(call: Callable[[], Any]) -> list[Any]:
        return list(await asyncio.gather(call(), call()))

    assert d.call(twice(daemon.start)) == [d.address, d.address]  # started once
    assert daemon.address == d.address and _serving(d.address)
    state = daemon.parts.state
    d.call(twice(daemon.stop))  # together: one shutdown
    d.call(daemon.stop())  # and again, after it
    assert daemon.stop_failures == []
    assert not _serving(d.address)
    with pytest.raises(Exception):  # noqa: B017 - closed: rocksdict's own error type
        state.get("sessions", b"x")
    with pytest.raises(RuntimeError, match="stopped"):
        d.call(daemon.start())  # a daemon starts once
    assert daemon.parts.state is state  # what it ran on stays readable (closed)

    # The data directory is free again: a new daemon on it starts.
    again = start_daemon(weaver=QUIET, data_dir=make_settings().data_dir)
    assert _serving(again.address)


@pytest.mark.daemon
def test_before_start_nothing_is_open_and_a_stop_is_safe(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(weaver=QUIET)
    daemon = Daemon(settings, factories=shared_factories())
    with pytest.raises(NotStarted):
        daemon.parts  # noqa: B018 - the property raises
    assert not settings.data_dir.exists()  # nothing opened by the constructor

    async def stop_then_start() -> None:
        await daemon.stop()
        await daemon.wait_stopped()
        await daemon.start()

    with pytest.raises(RuntimeError, match="stopped"):
        asyncio.run(stop_then_start())
    assert not settings.data_dir.exists()


@pytest.mark.daemon
def test_a_part_that_fails_to_start_stops_what_started_before_it(
    make_settings: Callable[..., Settings],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The gRPC server cannot listen (its port is taken): the metrics endpoint, then the
    journal and state stores, started before it, are closed (in that order), and the error
    says which part failed."""
    closed: list[str] = []
    served: list[str] = []
    close_metrics, close_store, serve_metrics = Metrics.close, RocksStore.close, Metrics.serve

    def metrics_closed(self: Metrics) -> None:
        closed.append("metrics")
        close_metrics(self)

    def store_closed(self: RocksStore) -> None:
        closed.append(self.path.name)
        close_store(self)

    def metrics_served(self: Metrics, listen: str) -> str:
        served.append(serve_metrics(self, listen))
        return served[-1]

    monkeypatch.setattr(Metrics, "close", metrics_closed)
    monkeypatch.setattr(RocksStore, "close", store_closed)
    monkeypatch.setattr(Metrics, "serve", metrics_served)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = make_settings(listen=f"127.0.0.1:{port}", metrics=METRICS, weaver=QUIET)
        daemon = Daemon(settings, factories=shared_factories())
        with caplog.at_level(logging.INFO, logger="strata.daemon"), pytest.raises(OSError) as err:
            asyncio.run(daemon.start())
    assert f"cannot listen on 127.0.0.1:{port}" in str(err.value)
    assert any("starting the daemon's server" in note for note in err.value.__notes__)
    [failed] = [r for r in caplog.records if r.getMessage() == "server.start_failed"]
    assert failed.__dict__["fields"]["part"] == "server"
    assert closed == ["metrics", "journal", "state"]
    assert daemon.stop_failures == []
    with pytest.raises(OSError):  # the metrics endpoint is closed
        urllib.request.urlopen(f"http://{served[0]}/metrics", timeout=2)
    with pytest.raises(OSError, match="cannot listen"):
        asyncio.run(daemon.start())  # the same error again: a daemon starts once
    # The stores are free: a daemon on the same data directory starts and stops.
    free = make_settings(metrics=METRICS, weaver=QUIET)
    assert free.data_dir == settings.data_dir

    async def start_and_stop() -> Daemon:
        async with Daemon(free, factories=shared_factories()) as other:
            assert await asyncio.to_thread(_serving, other.address)  # off the serving loop
        return other

    other = asyncio.run(start_and_stop())
    assert not _serving(other.address) and other.stop_failures == []


def test_a_stage_of_the_stop_that_fails_stops_no_other(
    start_daemon: Callable[..., ThreadDaemon], caplog: pytest.LogCaptureFixture
) -> None:
    """The weaver's stop fails: the server, the scheduler and the stores are stopped anyway,
    and the failure is named (``stratad serve`` exits with 1)."""
    d = start_daemon(weaver=QUIET)
    parts = d.daemon.parts
    weaver = parts.weaver
    assert weaver is not None
    stop_weaver = weaver.stop

    def failing_stop(timeout: float = 30.0) -> None:
        stop_weaver(timeout)
        raise RuntimeError("injected: the weaver's stop failed")

    weaver.stop = failing_stop  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="strata.daemon"):
        d.call(d.daemon.stop(), timeout=60)
    assert d.daemon.stop_failures == ["weaver"]
    [record] = [r for r in caplog.records if r.getMessage() == "server.stop_failed"]
    assert record.__dict__["fields"]["stage"] == "weaver"
    [stopped] = [r for r in caplog.records if r.getMessage() == "server.stopped"]
    assert stopped.__dict__["fields"]["failed"] == "weaver"
    assert not _serving(d.address)
    assert not parts.scheduler.running
    with pytest.raises(Exception):  # noqa: B017 - closed: rocksdict's own error type
        parts.state.get("sessions", b"x")


def test_a_stop_gives_up_a_shards_term_count_and_the_next_start_counts_it(
    start_daemon, make_settings, monkeypatch, caplog
):
    """After a crash each shard's keyword terms are counted when it opens, under whatever
    opens it: at ten million points on a slow disk a SIGTERM waited over two minutes for the
    weaver's job counting one (2026-12-02). A stop interrupts Tier 3 before it waits for the
    weaver: the count gives up at its next page, the job with it, and the next start counts
    the shard whole and indexes the episode."""
    d = start_daemon(weaver=QUIET)
    d.daemon.parts.semantic.wait_ready(120)
    with d.client() as c:
        conversation(c, "s1", MAY, *(f"Note {i} on the lighthouse's lamp." for i in range(6)))
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 60)
    d.stop()
    vectors_dir = edge_store_path(make_settings().data_dir)
    layout.term_counts(vectors_dir).unlink()  # as a crash leaves it: every shard to count

    monkeypatch.setattr(edge_shard, "READ_PAGE", 1)  # a page a point
    monkeypatch.setattr(ShardSet, "_open_rest", lambda self: None)  # the writer opens it
    counting, release, pages = threading.Event(), threading.Event(), []
    tally, interrupt = Tally.add, ShardSet.interrupt

    def slow(self: Tally, vectors: Iterable[Any]) -> None:  # a cold page read
        pages.append(threading.current_thread().name)
        counting.set()
        assert release.wait(60)
        tally(self, vectors)

    def interrupted(self: ShardSet) -> None:
        interrupt(self)
        release.set()  # the page under way is read now

    monkeypatch.setattr(Tally, "add", slow)
    monkeypatch.setattr(ShardSet, "interrupt", interrupted)
    d = start_daemon(weaver=QUIET)
    d.daemon.parts.semantic.wait_ready(120)
    with d.client() as c:
        conversation(c, "s2", MAY, "The lighthouse keeper retired.", "Who took over?")
    assert counting.wait(60)  # the weaver's write opens alice's shard
    with caplog.at_level(logging.INFO):
        d.stop()
    assert pages == ["weaver"]  # given up after its first page
    assert not [r for r in caplog.records if r.getMessage() == "weaver.job_failed"]
    with np.load(layout.term_counts(vectors_dir)) as doc:
        assert doc["uncounted"].tolist() == [shard_of("alice", make_settings().vectors.shards)]

    monkeypatch.undo()
    d = start_daemon(weaver=QUIET)
    vectors = d.daemon.parts.semantic.wait_ready(120)[1].inner
    assert isinstance(vectors, ShardedVectorStore)
    with d.client() as c:
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 60)
        hits = c.recall("Who retired from the lighthouse?", user_id="alice", k=3).hits
        assert any("retired" in h.text for h in hits)
    vectors.open_shards()  # every shard counted: the counts are exact again
    frequencies = vectors._frequencies
    assert frequencies.exact and frequencies.points == vectors.count(PointFilter())


def test_a_restart_warms_the_graphs_of_the_users_asked_before_it(start_daemon, caplog):
    """At a start the graphs of the feature files are loaded before anyone asks, within
    ``recall.graph_warm_mb`` (its workings: tests/recall/graph/test_warm.py)."""
    files = {"graph_files_min_memories": 1}
    d = start_daemon(weaver=QUIET, recall=files)
    d.daemon.parts.semantic.wait_ready(120)
    with d.client() as c:
        conversation(c, "s1", MAY, *(f"Note {i} on Clara's lighthouse lamp." for i in range(6)))
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 60)
        c.recall("Who keeps the lighthouse?", user_id="alice", k=3)  # builds alice's graph
    d.stop()

    def warmed() -> list[int]:
        return [
            r.fields["graphs"]  # type: ignore[attr-defined]
            for r in caplog.records
            if r.getMessage() == "recall.graphs_warmed"
        ]

    caplog.clear()  # the first daemon's records: it is stopped
    with caplog.at_level(logging.INFO, logger="strata.recall"):
        start_daemon(weaver=QUIET, recall={**files, "graph_warm_mb": 16})
        wait_until(lambda: warmed() == [1], 60, "for alice's graph to be warmed")
