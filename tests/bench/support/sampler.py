"""What a running daemon holds, sampled every few seconds beside a benchmark's load: the
daemon's RSS and its worker processes', the files of its stores, and the weaver's backlog."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from stratad_client import MemoryClient, StrataClientError
from tests.bench.support.daemon import (
    RunningDaemon,
    anon_rss_bytes,
    children_rss_bytes,
    dir_bytes,
    rss_bytes,
)


@dataclass(frozen=True, slots=True)
class Sample:
    s: float  # seconds since the sampler's start
    rss_mib: float  # the daemon's
    anon_mib: float  # of which anonymous (not the pages of mapped files)
    workers_mib: float  # its children's: the worker processes (and an index build's child)
    vectors_mib: float  # files of the vector store
    rocksdb_mib: float  # files of the state and journal stores
    unindexed: int  # -1: the daemon did not answer
    pending: int


class Sampler(threading.Thread):
    """Samples ``daemon`` every ``interval`` seconds once started, and when :meth:`sample` is
    called; :meth:`finish` stops it, takes a last sample and closes its client."""

    def __init__(self, daemon: RunningDaemon, interval: float, t0: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.t0 = daemon.pid, interval, t0
        self.data_dir = daemon.data_dir
        self.client = MemoryClient(daemon.address, timeout=30)
        self.samples: list[Sample] = []
        self._done = threading.Event()

    def sample(self) -> None:
        t = time.monotonic() - self.t0
        vectors = rocks = 0.0
        if self.data_dir is not None:
            vectors = dir_bytes(self.data_dir / "vectors") / 2**20
            state, journal = self.data_dir / "state", self.data_dir / "journal"
            rocks = (dir_bytes(state) + dir_bytes(journal)) / 2**20
        try:
            status = self.client.admin.weaver_status()
            backlog = (int(status.unindexed), int(status.pending))
        except StrataClientError:
            backlog = (-1, -1)
        rss = rss_bytes(self.pid) / 2**20
        anon = anon_rss_bytes(self.pid) / 2**20
        workers = children_rss_bytes(self.pid) / 2**20
        self.samples.append(Sample(t, rss, anon, workers, vectors, rocks, *backlog))

    def run(self) -> None:
        while not self._done.wait(self.interval):
            self.sample()

    def finish(self) -> None:
        self._done.set()
        self.join()
        self.sample()
        self.client.close()
