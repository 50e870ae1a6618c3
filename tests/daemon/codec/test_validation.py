"""Every validation rule: its status code, a message naming the field and limit, and nothing
written."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from stratad_client.pb import memory_pb2 as pb
from stratad_client.pb import memory_pb2_grpc

LIMITS = {
    "max_session_id_bytes": 16,
    "max_id_bytes": 16,
    "max_content_bytes": 100,
    "max_message_bytes": 400,
    "max_metadata_entries": 3,
    "max_batch_messages": 4,
    "max_request_bytes": 8192,
    "max_page_size": 10,
}
INVALID, EXHAUSTED = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.fixture
def stub(start_daemon):
    daemon = start_daemon(limits=LIMITS)
    with grpc.insecure_channel(daemon.address) as channel:
        yield memory_pb2_grpc.MemoryServiceStub(channel)


def user(content: str = "hello", **kw) -> pb.Message:
    return pb.Message(role=pb.ROLE_USER, content=content, **kw)


def append(stub, message: pb.Message, session_id: str = "s", user_id: str = "u"):
    return stub.Append(
        pb.AppendRequest(session_id=session_id, scope=pb.Scope(user_id=user_id), message=message),
        timeout=5,
    )


def expect(code: grpc.StatusCode, fragment: str, call):
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == code, err.value.details()
    assert fragment in err.value.details()


def nothing_written(stub, session_id: str = "s"):
    expect(
        grpc.StatusCode.NOT_FOUND,
        "not found",
        lambda: stub.GetWorkingMemory(pb.GetWorkingMemoryRequest(session_id=session_id)),
    )


def ts(seconds: int) -> Timestamp:
    return Timestamp(seconds=seconds)


CASES = [
    ("empty session id", dict(session_id=""), user(), INVALID, "session_id is required"),
    (
        "long session id",
        dict(session_id="x" * 17),
        user(),
        INVALID,
        "session_id is 17 bytes; the limit is 16",
    ),
    (
        "control char",
        dict(session_id="a\x00b"),
        user(),
        INVALID,
        "session_id must not contain control",
    ),
    ("long user id", dict(user_id="u" * 17), user(), INVALID, "scope.user_id is 17 bytes"),
    ("no role", {}, pb.Message(content="x"), INVALID, "message.role is required"),
    (
        "unknown role",
        {},
        pb.Message(role=42, content="x"),
        INVALID,
        "message.role 42 is not a known role",
    ),
    ("empty content", {}, user(""), INVALID, "message.content is required"),
    ("long content", {}, user("é" * 51), INVALID, "message.content is 102 bytes; the limit is 100"),
    (
        "bad tool json",
        {},
        user("x", tool_call=pb.ToolCall(name="t", arguments="{nope")),
        INVALID,
        "message.tool_call.arguments is not valid JSON",
    ),
    (
        "tool without name",
        {},
        user("x", tool_call=pb.ToolCall(arguments="{}")),
        INVALID,
        "message.tool_call.name is required",
    ),
    (
        "too much metadata",
        {},
        user(metadata={str(i): "v" for i in range(4)}),
        INVALID,
        "message.metadata has 4 entries; the limit is 3",
    ),
    (
        "oversized message",
        {},
        user(metadata={"k": "v" * 390}),
        EXHAUSTED,
        "the limit is 400 (limits.max_message_bytes)",
    ),
    (
        "bad timestamp",
        {},
        user(created_at=ts(10**12)),
        INVALID,
        "message.created_at is not a valid",
    ),
    ("long message id", {}, user(message_id="m" * 17), INVALID, "message.message_id is 17 bytes"),
]


@pytest.mark.parametrize(
    ("where", "message", "code", "fragment"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_append_validation(stub, where, message, code, fragment):
    session_id = where.get("session_id", "s")
    expect(code, fragment, lambda: append(stub, message, session_id, where.get("user_id", "u")))
    if session_id and "\x00" not in session_id and len(session_id) <= 16:
        nothing_written(stub, session_id)


def test_missing_message(stub):
    expect(
        INVALID,
        "message is required",
        lambda: stub.Append(pb.AppendRequest(session_id="s", scope=pb.Scope(user_id="u"))),
    )
    nothing_written(stub)


def test_batch_limits(stub):
    def batch(messages):
        return lambda: stub.AppendBatch(
            pb.AppendBatchRequest(session_id="s", scope=pb.Scope(user_id="u"), messages=messages)
        )

    expect(INVALID, "messages is empty", batch([]))
    expect(INVALID, "messages has 5 items; the limit is 4", batch([user()] * 5))
    expect(INVALID, "messages[2].content is required", batch([user(), user(), user("")]))
    nothing_written(stub)


def test_request_over_the_grpc_size_limit(stub):
    huge = [user("x" * 90, metadata={"a": "b" * 200})] * 4
    expect(
        EXHAUSTED,
        "",
        lambda: stub.AppendBatch(
            pb.AppendBatchRequest(session_id="s", scope=pb.Scope(user_id="u"), messages=huge * 10)
        ),
    )
    nothing_written(stub)


def test_read_validation(stub):
    append(stub, user())
    expect(
        INVALID,
        "max_messages must not be negative",
        lambda: stub.GetWorkingMemory(pb.GetWorkingMemoryRequest(session_id="s", max_messages=-1)),
    )
    expect(
        INVALID,
        "max_tokens must not be negative",
        lambda: stub.GetWorkingMemory(pb.GetWorkingMemoryRequest(session_id="s", max_tokens=-5)),
    )
    expect(
        INVALID,
        "page_size is 11; the limit is 10",
        lambda: stub.ListEpisodes(pb.ListEpisodesRequest(page_size=11)),
    )
    expect(
        INVALID,
        "time_range.end is before",
        lambda: stub.ListEpisodes(
            pb.ListEpisodesRequest(time_range=pb.TimeRange(start=ts(100), end=ts(50)))
        ),
    )
    expect(
        INVALID,
        "page_token",
        lambda: stub.ListEpisodes(pb.ListEpisodesRequest(page_token="garbage!")),
    )
    expect(
        INVALID,
        "episode_id must be 32",
        lambda: stub.GetEpisode(pb.GetEpisodeRequest(episode_id="short")),
    )
    expect(INVALID, "episode_id is required", lambda: stub.GetEpisode(pb.GetEpisodeRequest()))
    expect(INVALID, "session_id is required", lambda: stub.EndSession(pb.EndSessionRequest()))
