"""The journal's count of episodes not expired (``tiers.journal.tally.EpisodeTally``) on real
RocksDB stores, held against a read of every index entry: after writes, a write repeated,
deletes, expiry and a restart; and with writes and deletes while its first read runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contracts.stores import Clock
from tiers.core.records import Episode, Scope, StoredMessage, pack, unpack
from tiers.journal import tally
from tiers.journal.store import BY_TIME_CF, JOURNAL_CFS, Journal
from tiers.journal.tally import EpisodeTally
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS

TTL = 3600


class Stores:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.clock = Clock()
        self.open()

    def open(self) -> None:
        self.state = RocksStore(self.path / "state", STATE_CFS)
        self.jstore = RocksStore(self.path / "journal", JOURNAL_CFS, ttl_seconds=TTL)
        self.journal = Journal(self.jstore, self.state, TTL, clock=self.clock)

    def close(self) -> None:
        self.jstore.close()
        self.state.close()

    def episode(self, i: int, *, ago: float = 0.0) -> Episode:
        now = int((self.clock() - ago) * 1_000_000)
        return Episode(
            f"{i:032x}", f"s{i}", Scope(f"u{i % 3}"), now - 10, now - 5, now, 1, 1, 1, "client"
        )

    def write(self, episode: Episode) -> None:
        message = StoredMessage(1, "user", "hi", episode.started_at_us, episode.started_at_us, 1)
        self.journal.write_episode(episode, [message])

    def every_entry(self) -> int:
        """The count as a read of every index entry gives it."""
        cutoff = int(self.clock() * 1_000_000) - TTL * 1_000_000
        return sum(1 for _k, v in self.jstore.scan(BY_TIME_CF, b"") if unpack(v)[0] > cutoff)


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    s = Stores(tmp_path)
    yield s
    s.close()


@pytest.mark.parametrize("merge", [65_536, 4])
def test_the_count_follows_writes_deletes_expiry_and_a_restart(
    stores: Stores, merge: int, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(tally, "_MERGE", merge)  # 4: the kept times join the sorted ones often
    episodes = [stores.episode(i, ago=i * 100) for i in range(30)]  # flushed over 50 minutes
    for e in episodes[:20]:
        stores.write(e)
    assert stores.journal.count() == stores.every_entry() == 20  # the first count reads them
    for e in episodes[20:]:
        stores.write(e)
    stores.write(episodes[3])  # again: still one episode
    assert stores.journal.count() == stores.every_entry() == 30
    stores.journal.delete_episode(episodes[5])
    stores.journal.delete_episode(episodes[5])  # gone already: nothing to count out
    batch = stores.jstore.batch()
    for e in (episodes[7], episodes[25]):
        Journal.delete_into(batch, e)
    stores.journal.write_deletes(batch, [episodes[7], episodes[25]])
    assert stores.journal.count() == stores.every_entry() == 27
    stores.clock.now += 30 * 60  # 18 to 29 are over an hour old now (25 is gone)
    assert stores.journal.count() == stores.every_entry() == 16
    stores.write(stores.episode(100))
    stores.journal.delete_episode(episodes[29])  # expired already: counted out before
    assert stores.journal.count() == stores.every_entry() == 17
    stores.close()
    stores.open()
    assert stores.journal.count() == stores.every_entry() == 17


def test_writes_and_deletes_while_the_first_count_reads_are_counted_once(tmp_path: Path):
    store = RocksStore(tmp_path / "journal", JOURNAL_CFS)
    try:
        batch = store.batch()
        for i in range(1000):
            batch.put(BY_TIME_CF, f"{i:08d}".encode(), pack([i]))
        store.write(batch)
        counted: EpisodeTally

        def put(i: int) -> tuple[list[int], list[int]]:
            batch = store.batch()
            batch.put(BY_TIME_CF, f"{i:08d}".encode(), pack([i]))
            store.write(batch)
            return [i], []

        def delete(i: int) -> tuple[list[int], list[int]]:
            batch = store.batch()
            batch.delete(BY_TIME_CF, f"{i:08d}".encode())
            store.write(batch)
            return [], [i]

        def read() -> Iterator[int]:
            for n, (_key, value) in enumerate(store.scan(BY_TIME_CF, b"")):
                if n == 1:  # the read has begun: a write and two deletes land meanwhile
                    counted.write(lambda: put(5000))
                    counted.write(lambda: delete(500))  # one it has not reached yet
                    counted.write(lambda: delete(0))  # and one it has read
                yield unpack(value)[0]

        counted = EpisodeTally(read)
        assert counted.count(-1) == 1000 - 2 + 1
        assert counted.count(4999) == 1  # only the one written during the read is newer
        assert sum(1 for _ in store.scan(BY_TIME_CF, b"")) == 999
    finally:
        store.close()
