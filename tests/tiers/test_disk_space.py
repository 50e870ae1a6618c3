"""A full disk is an answer, not a crash (tiers.space): below ``storage.min_free_mb`` every
write is refused with RESOURCE_EXHAUSTED before it starts, reads go on, a Forget may still
free space, and writes resume by themselves once there is room, with no restart.

On a real small filesystem (a tmpfs, when this process may mount one) against a ``stratad``
subprocess; everywhere, against a daemon in this process whose free-space probe is a
hand-written fake (the seam :class:`tiers.space.DiskSpace` reads through)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from stratad_client import MemoryClient, StrataClientError, message
from stratad_client.pb import memory_pb2 as pb
from tests.support import QUIET, wait_until
from tiers.rocks import RocksStore
from tiers.space import MB, DiskFull, DiskSpace

BIG = 50_000  # bytes of content per message
DISK_MB, BALLAST_MB, RESERVE_MB = 1000, 600, 320  # the small disk's test


class Probe:
    """Free bytes as a test says: the seam DiskSpace reads the disk through."""

    def __init__(self, free: int) -> None:
        self.free = free

    def __call__(self, _path: Path) -> int:
        return self.free


def test_writes_stop_at_the_reserve_and_resume_without_a_reopen(tmp_path):
    probe = Probe(100 * MB)
    space = DiskSpace(tmp_path, 64 * MB, probe)
    store = RocksStore(tmp_path / "state", ["a"], space=space)
    try:
        batch = store.batch()
        batch.put("a", b"k1", b"v1")
        store.write(batch)
        probe.free = 63 * MB
        batch = store.batch()
        batch.put("a", b"k2", b"v2")
        with pytest.raises(DiskFull) as info:
            store.write(batch)
        said = str(info.value)
        assert "storage.min_free_mb (64 MB)" in said and "63.0 MB free" in said
        assert store.get("a", b"k2") is None and store.get("a", b"k1") == b"v1"  # reads go on
        with space.freeing():  # a Forget: down to a quarter of the reserve
            store.write(batch)
            probe.free = 15 * MB
            with pytest.raises(DiskFull):
                store.write(batch)
        probe.free = 64 * MB  # space freed: the same store takes writes again
        batch = store.batch()
        batch.put("a", b"k3", b"v3")
        store.write(batch)
        assert store.get("a", b"k3") == b"v3"
        assert DiskSpace(tmp_path, 0, Probe(0)).low is False  # 0: no check
    finally:
        store.close()


def test_a_data_dir_that_cannot_be_read_is_named_with_its_error(tmp_path, caplog):
    data = tmp_path / "data"
    data.mkdir()
    space = DiskSpace(data, 1 * MB)  # the real probe (statvfs)
    space.check("an append")
    data.rmdir()  # deleted under the daemon
    with pytest.raises(DiskFull) as info:
        space.check("an append")
    said = str(info.value)
    assert f"cannot be read at {data}" in said and "No such file or directory" in said
    assert "MB free" not in said  # not a disk of 0.0 MB
    (low,) = [r for r in caplog.records if r.getMessage() == "storage.disk_low"]
    assert "No such file or directory" in low.fields["error"]  # type: ignore[attr-defined]
    data.mkdir()  # back: writes go on by themselves
    space.check("an append")


def _content(sid: str, i: int) -> str:
    """``BIG`` characters that take their size on disk: random hex in words of 1,000 (the
    stores compress, and a message of one repeated letter filled the disk so slowly that a
    flush of the log's files could keep it above the reserve for 4,000 messages)."""
    head = f"{sid} message {i} "
    digits = os.urandom(BIG // 2).hex()
    return (head + " ".join(digits[j : j + 1000] for j in range(0, BIG, 1000)))[:BIG]


def _exhausted(err: StrataClientError) -> None:
    assert err.code == grpc.StatusCode.RESOURCE_EXHAUSTED, err
    assert "storage.min_free_mb" in (err.message or ""), err.message


def tier3_ready(c: MemoryClient) -> bool:
    try:
        c.recall("anything", user_id="u")
    except StrataClientError as err:
        assert err.code == grpc.StatusCode.UNAVAILABLE, err
        return False
    return True


def fill_until_refused(
    c: MemoryClient,
    sid: str,
    acked: list[str],
    limit: int = 4000,
    died: Callable[[], str] = lambda: "",
) -> None:
    """Append to ``sid`` until the disk's reserve refuses; ``acked`` gets what was taken.
    Tier 3 is open first (its shards are files on the same disk). ``died``: how the daemon
    ended, if it did (for the failure's message)."""
    wait_until(lambda: tier3_ready(c), 120, "for Tier 3 to open")
    for i in range(limit):
        text = _content(sid, i)
        try:
            c.append(sid, text, user_id="u", message_id=f"{sid}-{i}")
        except StrataClientError as err:
            assert err.code == grpc.StatusCode.RESOURCE_EXHAUSTED, (err, died())
            _exhausted(err)
            return
        acked.append(text)
    raise AssertionError(f"the reserve never refused a write in {limit} messages")


def while_full(c: MemoryClient, sid: str, acked: list[str]) -> None:
    """Below the reserve: every write refused with the cause, every read answered."""
    for call in (
        lambda: c.append(sid, "small", user_id="u", message_id=f"{sid}-small"),
        lambda: c.append_batch("other", [message("one"), message("two")], user_id="u"),
        lambda: c.end_session(sid),
        lambda: c.put_document("notes", "k", "a note", user_id="u"),
    ):
        with pytest.raises(StrataClientError) as info:
            call()
        _exhausted(info.value)
    window = c.get_working_memory(sid, user_id="u")
    assert window.state == pb.SESSION_STATE_OPEN and window.log_messages == len(acked)
    assert window.messages and window.messages[-1].message.content == acked[-1]
    c.recall("message", user_id="u")  # a read, with its access counts left out


def after_freeing(c: MemoryClient, sid: str, acked: list[str]) -> None:
    """Space freed: writes go on in the same daemon, and nothing acknowledged is missing."""
    c.append(sid, "after the disk was freed", user_id="u", message_id=f"{sid}-after")
    acked.append("after the disk was freed")
    ended = c.end_session(sid)
    assert ended.message_count == len(acked)
    texts: list[str] = []
    token = ""
    while True:  # the episode's pages
        page = c.get_episode(ended.episode_id, page_token=token)
        texts += [m.message.content for m in page.messages]
        if not (token := page.next_page_token):
            break
    assert texts == acked


@pytest.mark.slow
def test_a_full_disk_refuses_writes_serves_reads_and_recovers_in_process(start_daemon, tmp_path):
    d = start_daemon(weaver=QUIET, storage={"min_free_mb": 64})
    space = d.daemon.parts.state.space
    assert space is not None
    data = d.daemon.parts.state.path.parent
    budget = 64 * MB + 2 * MB  # what is left above the reserve when the fill starts

    def used() -> int:
        total = 0
        for f in data.rglob("*"):
            with contextlib.suppress(FileNotFoundError):  # the stores delete files meanwhile
                total += f.stat().st_size if f.is_file() else 0
        return total

    start = used()
    probe = Probe(0)
    space.probe = lambda _path: budget - (used() - start) + probe.free
    acked: list[str] = []
    with d.client(timeout=60) as c:
        fill_until_refused(c, "s", acked)
        assert acked, "nothing fitted before the reserve"
        while_full(c, "s", acked)
        probe.free = 256 * MB  # the operator frees space
        after_freeing(c, "s", acked)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of ``DISK_MB``, mounted for the test; skipped where this process may not mount
    (the in-process test above covers the same behaviour through the probe)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small filesystem needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.slow
def test_a_full_disk_is_an_answer_not_a_crash(spawn, small_disk):
    """A real stratad on a real small disk, its live index stage on: it fills until the
    reserve refuses, stays up (no SIGBUS), serves reads, and takes writes again once a
    ballast file is deleted. The reserve is what RocksDB may write at once in the background
    (a memtable flush and a preallocated log file per store: about 140 MB each), so the
    default's 512 MB is cut to 320 here, not further. About 50 MB of messages fit.

    Once space is freed, the index stage goes on turning the acknowledged messages into
    points, several times their size, while the session's end needs its episode's room above
    the reserve: hence a ballast that frees about twice that much."""
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * (BALLAST_MB * MB))
    # One session holds every message: no rollover (at 2,000 messages) ends it on the way.
    proc = spawn(
        small_disk / "data",
        storage__min_free_mb=str(RESERVE_MB),
        working_memory__max_log_messages="100000",
    )
    acked: list[str] = []
    with proc.client(timeout=60) as c:
        fill_until_refused(
            c, "s", acked, died=lambda: f"exit {proc.proc.poll()}: {proc.log()[-3000:]}"
        )
        assert acked and proc.proc.poll() is None
        # The disk stays full: a log file the stores delete after a flush would lift it back
        # above the reserve (the daemon then takes writes again, rightly), so a second file
        # takes it down to half the reserve.
        full = small_disk / "full"
        full.write_bytes(b"\0" * max(0, shutil.disk_usage(small_disk).free - RESERVE_MB * MB // 2))
        while_full(c, "s", acked)
        assert proc.proc.poll() is None, proc.log()
        full.unlink()
        ballast.unlink()
        room = RESERVE_MB * MB + sum(len(text) for text in acked)  # the end's episode
        assert shutil.disk_usage(small_disk).free > room, "the ballast freed too little"
        after_freeing(c, "s", acked)
    assert proc.terminate() == 0, proc.log()


@pytest.mark.slow
def test_an_end_refused_after_its_episode_reached_the_journal_is_taken_back(start_daemon, tmp_path):
    """The journal takes the episode, then the disk drops below the reserve before the
    state store commits the end: the episode comes back out of the journal (a write that
    frees space, under the reserve), the session stays open, and nothing ends at the next
    start."""
    d = start_daemon(data_dir=tmp_path / "data", weaver=QUIET, storage={"min_free_mb": 64})
    space = d.daemon.parts.state.space
    assert space is not None
    with d.client(timeout=60) as c:
        c.append_batch("s", [message(f"turn {i}") for i in range(3)], user_id="u")
        checks: list[int] = []

        def probe(_path: Path) -> int:  # room for the journal's write, then none
            checks.append(1)
            return 256 * MB if len(checks) == 1 else 20 * MB

        space.probe = probe
        with pytest.raises(StrataClientError) as info:
            c.end_session("s", user_id="u")
        _exhausted(info.value)
        assert len(checks) >= 2  # the journal's write, then the state's, then the undo
        space.probe = Probe(256 * MB)
        window = c.get_working_memory("s", user_id="u")
        assert window.state == pb.SESSION_STATE_OPEN and window.log_messages == 3
    d.stop()
    again = start_daemon(data_dir=tmp_path / "data", weaver=QUIET)
    with again.client(timeout=60) as c:
        window = c.get_working_memory("s", user_id="u")
        assert window.state == pb.SESSION_STATE_OPEN and window.log_messages == 3
        assert not list(c.list_episodes(user_id="u").episodes)


def test_an_append_whose_rollover_the_reserve_refuses_is_still_acknowledged(start_daemon):
    """The append that fills a session's log is stored, then its rollover (the log as an
    episode in the journal) is refused by the reserve: the append still succeeds (it was
    stored), the session stays open with every message, and the next append rolls it over."""
    d = start_daemon(
        weaver={**QUIET, "live_index": False},
        working_memory={"max_log_messages": 5},
        storage={"min_free_mb": 64},
    )
    space = d.daemon.parts.state.space
    assert space is not None
    with d.client(timeout=60) as c:
        for i in range(4):
            c.append("s", f"turn {i}", user_id="u", message_id=f"m{i}")
        checks: list[int] = []

        def probe(_path: Path) -> int:  # room for the append's write, then none
            checks.append(1)
            return 256 * MB if len(checks) == 1 else 20 * MB

        space.probe = probe
        assert c.append("s", "turn 4", user_id="u", message_id="m4").seq == 5
        assert len(checks) >= 2  # the append's write, then the rollover's
        window = c.get_working_memory("s", user_id="u")
        assert window.state == pb.SESSION_STATE_OPEN and window.log_messages == 5
        assert not list(c.list_episodes(user_id="u").episodes)

        space.probe = Probe(256 * MB)  # space freed: the next append rolls the log over
        c.append("s", "turn 5", user_id="u", message_id="m5")
        (episode,) = c.list_episodes(user_id="u").episodes
        assert episode.message_count == 6 and episode.end_reason == pb.END_REASON_ROLLOVER
