"""Crash, shutdown and restart of a real stratad subprocess."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest

from stratad_client import MemoryClient, StrataClientError, message
from tests.support import ProcessDaemon, wait_until

pytestmark = pytest.mark.slow


def _writer(address: str, sid: str, acked: list[int], stop: threading.Event) -> None:
    """Append to ``sid`` until stopped or the daemon goes away; record every acked seq."""
    with MemoryClient(address, timeout=5) as c:
        i = 0
        while not stop.is_set():
            try:
                r = c.append(sid, f"{sid} message {i}", user_id="u", message_id=f"{sid}-{i}")
            except StrataClientError:
                return
            acked.append(r.seq)
            i += 1


@contextmanager
def _writing(address: str, sids: list[str]) -> Iterator[dict[str, list[int]]]:
    """A writer (:func:`_writer`) per session, each acknowledged at least once when the block
    begins, stopped when it ends: the seqs acknowledged to each session."""
    stop = threading.Event()
    acked: dict[str, list[int]] = {sid: [] for sid in sids}
    threads = [
        threading.Thread(target=_writer, args=(address, sid, seqs, stop))
        for sid, seqs in acked.items()
    ]
    for t in threads:
        t.start()
    try:
        # however busy the machine
        wait_until(lambda: all(acked.values()), 60, "for every writer's acknowledgement")
        yield acked
    finally:
        stop.set()
        for t in threads:
            t.join(10)


def _contents(c: MemoryClient, sid: str, acked: list[int]) -> list[str]:
    """Every message of an open session, from its episode (ending it), checked to begin with
    the ``acked`` ones, in order, and to hold at most one more (written, not acknowledged)."""
    eid = c.end_session(sid).episode_id
    contents = [m.message.content for m in c.get_episode(eid).messages]
    assert contents[: len(acked)] == [f"{sid} message {i}" for i in range(len(acked))]
    assert len(contents) - len(acked) in (0, 1)
    return contents


def test_sigkill_loses_no_acknowledged_message(spawn, tmp_path):
    rng = random.Random(7)
    for trial in range(3):
        proc = spawn(tmp_path / "data")
        # Every writer has been acknowledged at least once, then a random moment later the
        # kill lands while appends are in flight.
        with _writing(proc.address, [f"t{trial}-s{i}" for i in range(4)]) as acked:
            time.sleep(rng.uniform(0.0, 0.5))
            proc.kill()  # SIGKILL while appends are in flight

        proc = spawn(tmp_path / "data")
        with proc.client() as c:
            for sid, seqs in acked.items():
                assert seqs, "the writer got no acknowledgement at all"
                # every acknowledged message is back, in order, once; at most one more message
                # (written but not acknowledged before the kill) may follow
                contents = _contents(c, sid, seqs)
                assert len(set(contents)) == len(contents)
        proc.terminate()


def test_redelivery_after_a_restart_is_not_doubled(spawn, tmp_path):
    proc = spawn(tmp_path / "data")
    batch = [message(f"m{i}", message_id=f"id-{i}") for i in range(20)]
    with proc.client() as c:
        first = c.append_batch("s", batch, user_id="u")
    proc.kill()
    proc = spawn(tmp_path / "data")
    with proc.client() as c:
        again = c.append_batch("s", batch, user_id="u")  # the client never saw the answer
        assert [r.seq for r in again] == [r.seq for r in first]
        assert all(r.duplicate for r in again)
        assert c.get_working_memory("s").log_messages == 20
    assert proc.terminate() == 0


def test_sigterm_with_appends_in_flight_exits_zero_and_loses_nothing(spawn, tmp_path):
    proc = spawn(tmp_path / "data")
    with _writing(proc.address, [f"s{i}" for i in range(4)]) as acked:
        time.sleep(0.2)
        assert proc.terminate() == 0, proc.log()
    log = proc.log()
    assert "server.stopping" in log and "server.stopped" in log

    proc = spawn(tmp_path / "data")
    with proc.client() as c:
        for sid, seqs in acked.items():
            _contents(c, sid, seqs)
    proc.terminate()


@pytest.mark.timeout(300)
def test_health_goes_not_serving_and_a_second_signal_forces_the_exit(spawn, tmp_path):
    proc = spawn(tmp_path / "data", shutdown_grace_seconds="30")
    statuses: list[str] = []
    channel = grpc.insecure_channel(proc.address)
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""))

    def follow() -> None:
        try:
            for update in watch:
                statuses.append(health_pb2.HealthCheckResponse.ServingStatus.Name(update.status))
        except grpc.RpcError:
            pass

    follower = threading.Thread(target=follow)
    follower.start()
    # NOT_SERVING while Tier 3 opens, then SERVING (the model load is slow on a busy machine).
    wait_until(lambda: "SERVING" in statuses, 240, "for health SERVING")
    proc.signal(signal.SIGTERM)
    # The open Watch stream keeps the graceful stop waiting (grace is 30 s)...
    wait_until(lambda: statuses[-1:] == ["NOT_SERVING"], 5, "for NOT_SERVING", interval=0.02)
    assert "SERVING" in statuses and "NOT_SERVING" in statuses[statuses.index("SERVING") :]
    assert proc.proc.poll() is None
    # ...and a second signal forces the exit.
    proc.signal(signal.SIGTERM)
    assert proc.wait(10) == 130
    watch.cancel()
    channel.close()
    follower.join(5)
    # Everything acknowledged was durable anyway: the store reopens.
    ProcessDaemon(tmp_path / "data").terminate()


def test_bad_config_exits_with_a_distinct_code_and_one_line(tmp_path):
    from tests.support import daemon_env
    from tests.support.daemons import python

    for env, reason in (
        ({"working_memory__max_messages": "0"}, "working_memory.max_messages"),
        ({"listen": "nowhere"}, "listen must be host:port"),
        ({"bogus": "1"}, "unknown setting in the environment: STRATA_BOGUS"),
    ):
        out = python("-m", "daemon", "serve", env=daemon_env(tmp_path / "data", **env), timeout=30)
        assert out.returncode == 78
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and reason in lines[0], out.stderr


def test_a_second_daemon_on_the_same_data_dir_is_refused(spawn, tmp_path):
    spawn(tmp_path / "data")
    with pytest.raises(RuntimeError, match="exited with 74"):
        ProcessDaemon(tmp_path / "data")
