"""A disk that fills up under a real stratad: the kernel's file-size limit (RLIMIT_FSIZE) makes
RocksDB's own writes fail with EFBIG ("File too large"), the error a full disk gives too.

Append and EndSession must answer UNAVAILABLE, naming the store and the cause, and never
acknowledge a write that did not happen; after a restart (the operator's recovery, once there
is space again) everything acknowledged is there and nothing refused is."""

from __future__ import annotations

import resource
import signal

import grpc
import pytest

from stratad_client import StrataClientError, message
from stratad_client.pb import memory_pb2 as pb

pytestmark = pytest.mark.slow

LIMIT = 1_000_000  # bytes any one file of the daemon may grow to
BIG = 40_000  # bytes of content per message


def _limit_file_size() -> None:  # runs in the child between fork and exec
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def _content(sid: str, i: int) -> str:
    head = f"{sid} message {i} "
    return head + "x" * (BIG - len(head))


def _unavailable(err: StrataClientError, store: str = "state") -> None:
    assert err.code == grpc.StatusCode.UNAVAILABLE, err
    detail = err.message or ""
    assert f"the {store} store cannot be written" in detail, detail
    assert "File too large" in detail, detail


def test_a_full_disk_refuses_writes_and_acknowledges_nothing_false(spawn, tmp_path):
    data = tmp_path / "data"
    proc = spawn(data, _limit_file_size, weaver__enabled="false")
    acked: dict[str, list[str]] = {"a": [], "b": []}
    with proc.client() as c:
        # Session a fits: 10 x 40 KB in the state store's log, then in the journal.
        for i in range(10):
            c.append("a", _content("a", i), user_id="u", message_id=f"a-{i}")
            acked["a"].append(_content("a", i))
        ended_a = c.end_session("a")
        assert ended_a.message_count == 10

        # Session b fills the state store's write-ahead log until the kernel refuses.
        refused: list[str] = []
        for i in range(40):
            try:
                c.append("b", _content("b", i), user_id="u", message_id=f"b-{i}")
            except StrataClientError as err:
                _unavailable(err, "state")
                refused.append(_content("b", i))
                break
            acked["b"].append(_content("b", i))
        assert refused, "the file-size limit was never reached"
        assert 5 <= len(acked["b"]) < 40

        # Once RocksDB has seen the error it refuses every write, however small: still no
        # acknowledgement, and a retry with the same message id is refused the same way.
        for sid, text, mid in (
            ("b", "small", "b-small"),
            ("c", "tiny", "c-0"),
            ("b", *refused, "b-x"),
        ):
            with pytest.raises(StrataClientError) as info:
                c.append(sid, text, user_id="u", message_id=mid)
            _unavailable(info.value, "state")
        with pytest.raises(StrataClientError) as info:
            c.append_batch("d", [message("one"), message("two")], user_id="u")
        _unavailable(info.value, "state")

        # Ending b writes the episode to the journal, then commits the end in the state
        # store, which refuses: the episode is taken back out of the journal (whose own
        # writes still work) and the session stays open.
        with pytest.raises(StrataClientError) as info:
            c.end_session("b")
        _unavailable(info.value)
        # Reads still work, and b is still open with exactly what was acknowledged.
        window = c.get_working_memory("b")
        assert window.state == pb.SESSION_STATE_OPEN
        assert window.log_messages == len(acked["b"])
    proc.kill()

    # The operator frees space and restarts: everything acknowledged is back, nothing else.
    proc = spawn(data, weaver__enabled="false")
    with proc.client() as c:
        episode_a = c.get_episode(ended_a.episode_id)
        assert [m.message.content for m in episode_a.messages] == acked["a"]
        assert c.get_working_memory("b").log_messages == len(acked["b"])
        ended_b = c.end_session("b")
        assert [m.message.content for m in c.get_episode(ended_b.episode_id).messages] == acked["b"]
        for sid in ("c", "d"):
            with pytest.raises(StrataClientError) as info:
                c.get_working_memory(sid)
            assert info.value.code == grpc.StatusCode.NOT_FOUND
        # Writes work again.
        assert c.append("b", "after the restart", user_id="u").seq == len(acked["b"]) + 1
    assert proc.terminate() == 0
