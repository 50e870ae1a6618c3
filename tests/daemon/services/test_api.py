"""The gRPC API end to end: a real daemon on a loopback port, RocksDB in tmp_path."""

from __future__ import annotations

import datetime as dt
import json

import grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from stratad_client import AsyncMemoryClient, MemoryClient, message
from stratad_client.pb import memory_pb2 as pb
from stratad_client.pb import memory_pb2_grpc
from tests.support import code, wait_until


def test_append_window_end_list_and_get(client: MemoryClient):
    when = dt.datetime(2023, 5, 8, 13, 56, tzinfo=dt.UTC)
    r1 = client.append(
        "chat-1",
        "I moved to Berlin.",
        user_id="alice",
        agent_id="helper",
        name="Alice",
        created_at=when,
        message_id="m1",
        metadata={"dia_id": "D1:1"},
    )
    r2 = client.append(
        "chat-1",
        "",
        role="assistant",
        tool_call=("lookup_city", json.dumps({"city": "Berlin"})),
        created_at=when,
    )
    assert (r1.seq, r2.seq) == (1, 2)

    wm = client.get_working_memory("chat-1")
    assert wm.state == pb.SESSION_STATE_OPEN
    assert wm.scope.user_id == "alice" and wm.scope.agent_id == "helper"
    first = wm.messages[0].message
    assert first.content == "I moved to Berlin." and first.name == "Alice"
    assert dict(first.metadata) == {"dia_id": "D1:1"}
    assert first.created_at.ToDatetime(dt.UTC) == when
    assert wm.messages[1].message.tool_call.name == "lookup_city"

    ended = client.end_session("chat-1")
    assert ended.message_count == 2 and len(ended.episode_id) == 32
    episodes = client.list_episodes(user_id="alice").episodes
    assert [e.episode_id for e in episodes] == [ended.episode_id]
    assert episodes[0].consolidation == pb.CONSOLIDATION_STATE_PENDING
    assert episodes[0].started_at.ToDatetime(dt.UTC) == when
    got = client.get_episode(ended.episode_id)
    assert [m.message.content for m in got.messages] == ["I moved to Berlin.", ""]
    assert dict(got.messages[0].message.metadata) == {"dia_id": "D1:1"}
    assert got.messages[0].message.message_id == "m1"
    assert client.get_working_memory("chat-1").state == pb.SESSION_STATE_ENDED


def test_append_batch_is_atomic_and_redelivery_is_not_doubled(client: MemoryClient):
    batch = [message(f"turn {i}", message_id=f"id-{i}") for i in range(5)]
    first = client.append_batch("s", batch, user_id="alice")
    again = client.append_batch("s", batch, user_id="alice")  # a retry after a timeout
    assert [r.seq for r in first] == [1, 2, 3, 4, 5]
    assert [r.seq for r in again] == [1, 2, 3, 4, 5] and all(r.duplicate for r in again)
    # one bad message rejects the whole batch: nothing of it is stored
    bad = [message("fine", message_id="id-9"), message("bad", role=pb.ROLE_UNSPECIFIED)]
    status, details = code(lambda: client.append_batch("s", bad, user_id="alice"))
    assert status == grpc.StatusCode.INVALID_ARGUMENT
    assert "messages[1].role" in details
    assert client.get_working_memory("s").log_messages == 5


def test_episode_paging(client: MemoryClient):
    client.append_batch("s", [message(f"m{i}") for i in range(7)], user_id="u")
    eid = client.end_session("s").episode_id
    seen, token = [], ""
    while True:
        page = client.get_episode(eid, page_size=3, page_token=token)
        seen += [m.seq for m in page.messages]
        token = page.next_page_token
        if not token:
            break
    assert seen == list(range(1, 8))
    for i in range(5):
        client.append(f"p{i}", "x", user_id="u")
        client.end_session(f"p{i}")
    assert len(list(client.iter_episodes(user_id="u", page_size=2))) == 6


def test_end_session_errors(client: MemoryClient):
    assert code(lambda: client.end_session("never-seen"))[0] == grpc.StatusCode.NOT_FOUND
    client.append("s", "hi", user_id="u")
    client.end_session("s")
    assert code(lambda: client.end_session("s"))[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert code(lambda: client.get_working_memory("never-seen"))[0] == grpc.StatusCode.NOT_FOUND
    assert code(lambda: client.get_episode("0" * 32))[0] == grpc.StatusCode.NOT_FOUND


def test_remove_messages(client: MemoryClient):
    client.append_batch(
        "undo", [message("one"), message("two"), message("three", message_id="t")], user_id="u"
    )
    popped = client.remove_messages("undo", last=1)
    assert [m.message.content for m in popped.removed] == ["three"]
    assert popped.removed[0].seq == 3 and popped.removed[0].message.message_id == "t"
    assert (popped.log_messages, popped.state) == (2, pb.SESSION_STATE_OPEN)
    assert [m.message.content for m in client.get_working_memory("undo").messages] == [
        "one",
        "two",
    ]
    for bad in ({}, {"last": 1, "all": True}):
        status, details = code(lambda: client.remove_messages("undo", **bad))  # noqa: B023
        assert status == grpc.StatusCode.INVALID_ARGUMENT
        assert "exactly one of last" in details
    missing = code(lambda: client.remove_messages("never-seen", all=True))[0]
    assert missing == grpc.StatusCode.NOT_FOUND
    cleared = client.remove_messages("undo", all=True)
    assert [m.seq for m in cleared.removed] == [1, 2]
    assert cleared.state == pb.SESSION_STATE_ENDED
    assert client.get_working_memory("undo").state == pb.SESSION_STATE_ENDED
    assert client.list_episodes(user_id="u").episodes == []  # no episode of nothing
    assert not client.remove_messages("undo", all=True).removed  # clearing twice is fine
    client.append("undo", "again")
    assert client.end_session("undo").message_count == 1


def test_stats(client: MemoryClient):
    client.append_batch("a", [message("x"), message("y")], user_id="u")
    client.append("b", "z", user_id="u")
    client.end_session("b")
    stats = client.admin.stats()
    assert stats.working_memory.live_sessions == 1
    assert stats.working_memory.log_messages == 2
    assert stats.journal.episodes == 1
    assert stats.journal.pending_consolidation == 1
    assert stats.journal.size_bytes > 0 and stats.state_size_bytes > 0
    assert stats.uptime_seconds > 0
    # every kind of scoped data (tiers.schema.KINDS) is counted, in every scope
    before = dict(stats.records)
    assert set(before) == {
        "documents", "anchors", "pins", "access_counts", "stale_scopes", "changes"
    }  # fmt: skip
    client.put_document("notes", "k1", "a document", user_id="u")
    client.put_document("notes", "k1", "its replacement", user_id="u")  # the same record
    client.put_document("notes", "k2", "another user's", user_id="v")
    client.set_anchor("a", "the anchor", user_id="u")
    after = dict(client.admin.stats().records)
    assert after["documents"] == before["documents"] + 2
    assert after["anchors"] == before["anchors"] + 1
    client.delete_document("notes", "k2", user_id="v")
    assert client.admin.stats().records["documents"] == before["documents"] + 1


def test_health_and_reflection(daemon, client: MemoryClient):
    assert client.health("strata.v1.MemoryService") == "SERVING"  # at once: appends work
    daemon.daemon.parts.semantic.wait_ready(120)  # "" turns SERVING once Tier 3 is open
    wait_until(lambda: client.health() == "SERVING", 10, "for health SERVING", interval=0.02)
    with grpc.insecure_channel(daemon.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        (response,) = list(stub.ServerReflectionInfo(iter([request]), timeout=5))
        names = {s.name for s in response.list_services_response.service}
    assert {
        "strata.v1.MemoryService",
        "strata.v1.AdminService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= names


def test_async_client(daemon):
    import asyncio

    async def run() -> tuple[int, int]:
        async with AsyncMemoryClient(daemon.address) as c:
            await c.append("s", "hello", user_id="u")
            await c.append_batch("s", [message("a"), message("b")])
            ended = await c.end_session("s")
            listed = [e async for e in c.iter_episodes(user_id="u")]
            return ended.message_count, len(listed)

    assert asyncio.run(run()) == (3, 1)


def test_scope_rules(client: MemoryClient):
    status, details = code(lambda: client.append("s", "no scope"))
    assert status == grpc.StatusCode.INVALID_ARGUMENT
    assert "scope.user_id" in details
    client.append("s", "hi", user_id="alice")
    planner = code(lambda: client.append("s", "hi", user_id="alice", agent_id="planner"))[0]
    assert planner == grpc.StatusCode.FAILED_PRECONDITION
    assert client.get_working_memory("s").log_messages == 1
    # Sessions are per user: mallory's "s" is another session.
    client.append("s", "hi", user_id="mallory")
    status, details = code(lambda: client.get_working_memory("s"))
    assert status == grpc.StatusCode.INVALID_ARGUMENT
    assert "exists for 2 users: name scope.user_id" in details
    assert client.get_working_memory("s", user_id="alice").log_messages == 1
    assert client.end_session("s", user_id="mallory").message_count == 1


def test_raw_stub_calls_by_name(daemon):
    """Outside harnesses call the generated stubs directly."""
    with grpc.insecure_channel(daemon.address) as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        r = stub.Append(
            pb.AppendRequest(
                session_id="raw",
                scope=pb.Scope(user_id="u"),
                message=pb.Message(role=pb.ROLE_USER, content="hi"),
            )
        )
        assert r.seq == 1
        assert stub.EndSession(pb.EndSessionRequest(session_id="raw")).message_count == 1
