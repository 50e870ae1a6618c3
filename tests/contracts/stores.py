"""Shared parts of the contract suites of the RocksDB tiers (graph, journal, working memory):
a settable clock, a journal on its stores and the stores of a daemon's data directory, each
reopenable like a restarted daemon, and a disk that is full for the length of a ``with``
block.
"""

from __future__ import annotations

import contextlib
import resource
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

from tiers.core.records import Episode, Scope, StoredMessage, episode_id_for
from tiers.journal.store import JOURNAL_CFS, Journal
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.working.memory import WorkingMemory
from tiers.working.session import WindowLimits

JOURNAL_TTL_SECONDS = 3600


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


DAY_US = 86_400 * 1_000_000
T0 = 1_700_000_000 * 1_000_000


class Journals:
    """A journal on its two stores, reopenable like a restarted daemon's."""

    def __init__(self, path: Path, clock: Clock | None = None) -> None:
        self.path = path
        self.clock = clock or Clock()
        self.open()

    def open(self) -> None:
        self.state = RocksStore(self.path / "state", STATE_CFS)
        self.jstore = RocksStore(
            self.path / "journal", JOURNAL_CFS, ttl_seconds=JOURNAL_TTL_SECONDS
        )
        self.journal = Journal(self.jstore, self.state, JOURNAL_TTL_SECONDS, clock=self.clock)

    def close(self) -> None:
        self.jstore.close()
        self.state.close()

    def reopen(self) -> Journal:
        self.close()
        self.open()
        return self.journal

    def and_reopened(self) -> Iterator[Journal]:
        """The journal, then the journal of a restarted daemon."""
        yield self.journal
        yield self.reopen()

    def now_us(self) -> int:
        return int(self.clock() * 1_000_000)

    def write(
        self, sid: str, user: str, agent: str, day: int, n: int = 2, content: str = ""
    ) -> Episode:
        """A session's episode of ``n`` messages, written and marked pending as a flush does."""
        messages = [
            StoredMessage(
                seq=i + 1,
                role="user",
                content=content or f"{sid} message {i}",
                created_at_us=T0 + day * DAY_US + i,
                received_at_us=T0 + day * DAY_US + i,
                tokens=3,
                message_id=f"{sid}-{i}",
            )
            for i in range(n)
        ]
        episode = Episode(
            episode_id_for(sid, 1, user),
            sid,
            Scope(user, agent),
            messages[0].created_at_us,
            messages[-1].created_at_us,
            self.now_us(),
            n,
            1,
            n,
            "client",
        )
        self.journal.write_episode(episode, messages)
        batch = self.state.batch()
        Journal.mark_pending(batch, episode)
        self.state.write(batch)
        return episode


class Tiers(Journals):
    """State store + journal + working memory, reopenable like a restarted daemon."""

    def __init__(self, path: Path, limits: WindowLimits, clock: Clock) -> None:
        self.limits = limits
        super().__init__(path, clock)

    def open(self) -> None:
        super().open()
        self.wm = WorkingMemory(self.state, self.journal, self.limits, clock=self.clock)
        self.recovered = self.wm.recover()


@contextlib.contextmanager
def full_disk(limit_bytes: int = 64 * 1024) -> Iterator[None]:
    """No file of this process may grow past ``limit_bytes`` inside the block: the kernel
    refuses the write with EFBIG ("File too large"), as a full disk refuses it (ENOSPC).
    RocksDB then refuses every later write of that store, and its ``close`` fails, until the
    process ends (so a test that fills the disk does not reopen that store)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills us
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def close_broken(*stores: RocksStore) -> None:
    """Close stores that a full disk broke: their ``close`` raises RocksDB's write error."""
    for store in stores:
        with contextlib.suppress(Exception):
            store.close()


BIG = "x" * (128 * 1024)  # past any limit full_disk sets by default


@contextlib.contextmanager
def tiers_maker(root: Path) -> Iterator[Callable[..., Tiers]]:
    """Makes working memories, each on its own stores under ``root``: ``make(clock, **limits)``;
    all are closed at the end (stores a full disk broke included)."""
    made: list[Tiers] = []

    def make(clock: Clock | None = None, **limits: float) -> Tiers:
        t = Tiers(root / f"t{len(made)}", WindowLimits(**limits), clock or Clock())  # type: ignore[arg-type]
        made.append(t)
        return t

    yield make
    for t in made:
        close_broken(t.jstore, t.state)
