"""The journal's count of episodes not expired (``tiers.journal.tally.EpisodeTally``) on real
RocksDB stores, held against a read of every index entry: after writes, a write repeated,
deletes, expiry and a restart; and with writes and deletes while its first read runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contracts.stores import JOURNAL_TTL_SECONDS, Journals
from tiers.core.records import pack, unpack
from tiers.journal import tally
from tiers.journal.store import BY_TIME_CF, JOURNAL_CFS, Journal
from tiers.journal.tally import EpisodeTally
from tiers.rocks import RocksStore

TTL = JOURNAL_TTL_SECONDS


def every_entry(j: Journals) -> int:
    """The count as a read of every index entry of the journal gives it."""
    cutoff = j.now_us() - TTL * 1_000_000
    return sum(1 for _k, v in j.jstore.scan(BY_TIME_CF, b"") if unpack(v)[0] > cutoff)


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Journals]:
    j = Journals(tmp_path)
    yield j
    j.jstore.close()
    j.state.close()


@pytest.mark.parametrize("merge", [65_536, 4])
def test_the_count_follows_writes_deletes_expiry_and_a_restart(
    stores: Journals, merge: int, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(tally, "_MERGE", merge)  # 4: the kept times join the sorted ones often
    episodes = []
    for i in range(30):  # flushed over 50 minutes, 100 s apart
        episodes.append(stores.write(f"s{i}", f"u{i % 3}", "bot", 0))
        stores.clock.now += 100
    j = stores.journal
    assert j.count() == every_entry(stores) == 30  # the first count reads them
    j.write_episode(episodes[3], [])  # again: still one episode
    stores.write("s30", "u0", "bot", 0)
    assert j.count() == every_entry(stores) == 31
    j.delete_episode(episodes[5])
    j.delete_episode(episodes[5])  # gone already: nothing to count out
    batch = stores.jstore.batch()
    for e in (episodes[7], episodes[25]):
        Journal.delete_into(batch, e)
    j.write_deletes(batch, [episodes[7], episodes[25]])
    assert j.count() == every_entry(stores) == 28
    stores.clock.now += 30 * 60  # 0 to 12 are an hour old or more now (5 and 7 are gone)
    assert j.count() == every_entry(stores) == 17
    stores.write("s31", "u1", "bot", 0)
    j.delete_episode(episodes[0])  # expired already: counted out before
    assert j.count() == every_entry(stores) == 18
    j = stores.reopen()
    assert j.count() == every_entry(stores) == 18


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
