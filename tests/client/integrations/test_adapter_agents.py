"""The OpenAI Agents SDK adapter with the real ``agents`` package: a Runner run against a real
daemon, with a scripted model (the SDK's Model interface) standing in for OpenAI."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from stratad_client import MemoryClient
from stratad_client.integrations.openai_agents import ITEM_KEY, StrataSession
from stratad_client.pb import memory_pb2 as pb

set_tracing_disabled(True)  # no trace export to OpenAI from a test


def _say(text: str, n: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{n}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class ScriptedModel(Model):
    """Answers with the next scripted output; records every input it was given."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = list(script)
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):
        self.inputs.append(json.loads(json.dumps(input, default=str)))
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError


@function_tool
def find_city(person: str) -> str:
    """Where a person lives."""
    return "Berlin" if person == "Alice" else "unknown"


def _script() -> list[list[Any]]:
    call = ResponseFunctionToolCall(
        type="function_call",
        call_id="call_1",
        name="find_city",
        arguments=json.dumps({"person": "Alice"}),
        id="fc_1",
        status="completed",
    )
    return [
        [call],
        [_say("You live in Berlin.", 1)],
        [_say("You asked where you live; Berlin.", 2)],
    ]


async def _two_turns(session: Any) -> ScriptedModel:
    model = ScriptedModel(_script())
    agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[find_city])
    await Runner.run(agent, "Where do I live? I am Alice.", session=session)
    await Runner.run(agent, "What did I ask?", session=session)
    return model


def test_a_runner_keeps_the_same_history_in_strata_as_in_the_sdks_own_session(daemon):
    strata = StrataSession("chat-1", user_id="alice", address=daemon.address)
    reference = SQLiteSession("chat-1")  # the SDK's own implementation, in memory
    try:
        seen_strata = asyncio.run(_two_turns(strata))
        seen_reference = asyncio.run(_two_turns(reference))
        # The model saw the same input on every call, history included...
        assert seen_strata.inputs == seen_reference.inputs
        assert any(
            item.get("type") == "function_call_output" and item.get("output") == "Berlin"
            for item in seen_strata.inputs[-1]
        )
        # ...and the stored histories are equal, item for item.
        assert asyncio.run(strata.get_items()) == asyncio.run(reference.get_items())
        assert asyncio.run(strata.get_items(limit=2)) == asyncio.run(reference.get_items(limit=2))
    finally:
        strata.close()
        reference.close()
    # In Strata the history is readable memory: roles, text and the tool call.
    with MemoryClient(daemon.address) as client:
        window = client.get_working_memory("chat-1", user_id="alice").messages
    got = [(m.message.role, m.message.content, m.message.tool_call.name) for m in window]
    assert got[0] == (pb.ROLE_USER, "Where do I live? I am Alice.", "")
    assert (pb.ROLE_ASSISTANT, "", "find_city") in got
    assert (pb.ROLE_TOOL, "Berlin", "") in got
    assert (pb.ROLE_ASSISTANT, "You live in Berlin.", "") in got


# One item of each kind the SDK keeps in a session (Responses API input items).
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "plain user text"},
    {"role": "system", "content": "be brief"},
    {"role": "developer", "content": "developer note"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "parts"}]},
    {
        "type": "message",
        "id": "msg_9",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "an answer", "annotations": []},
            {"type": "refusal", "refusal": "not that"},
        ],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "thinking it over"}],
        "encrypted_content": "opaque==",
    },
    {"type": "reasoning", "id": "rs_2", "summary": []},
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_2",
        "name": "lookup",
        "arguments": '{"q": "weather"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_2", "output": "sunny"},
    {"type": "function_call", "call_id": "call_3", "name": "broken", "arguments": "{not json"},
    {
        "type": "function_call_output",
        "call_id": "call_3",
        "output": [{"type": "input_text", "text": "error: bad arguments"}],
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {"type": "file_search_call", "id": "fs_1", "queries": ["contract"], "status": "completed"},
    {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": "call_4",
        "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
        "pending_safety_checks": [],
        "status": "completed",
    },
    {
        "type": "computer_call_output",
        "call_id": "call_4",
        "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA=="},
    },
    {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": None},
    {
        "type": "code_interpreter_call",
        "id": "ci_1",
        "code": "print(1)",
        "container_id": "c1",
        "outputs": [{"type": "logs", "logs": "1"}],
        "status": "completed",
    },
    {
        "type": "local_shell_call",
        "id": "ls_1",
        "call_id": "call_5",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
        "status": "completed",
    },
    {"type": "local_shell_call_output", "id": "call_5", "output": "README.md"},
    {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "strata",
        "name": "recall",
        "arguments": "{}",
        "output": "no memories",
    },
    {
        "type": "mcp_list_tools",
        "id": "mcpl_1",
        "server_label": "strata",
        "tools": [{"name": "recall", "input_schema": {"type": "object"}}],
    },
    {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "strata",
        "name": "forget",
        "arguments": "{}",
    },
    {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": False},
    {"type": "custom_tool_call", "call_id": "call_6", "name": "grammar", "input": "x = 1"},
    {"type": "custom_tool_call_output", "call_id": "call_6", "output": "ok"},
    {"type": "item_reference", "id": "msg_0"},
    {"role": "assistant", "content": "last words"},
]


def test_items_of_every_type_round_trip_and_pop_and_clear_are_durable(daemon):
    session = StrataSession("items", user_id="bob", agent_id="planner", address=daemon.address)

    async def run() -> None:
        await session.add_items(ITEMS)
        assert await session.get_items() == ITEMS
        assert await session.get_items(limit=2) == ITEMS[-2:]
        # a tool output whose call is cut off by the limit is left out
        assert await session.get_items(limit=3) == ITEMS[-2:]
        # pop_item: the newest item, gone from the daemon too
        assert await session.pop_item() == ITEMS[-1]
        assert await session.get_items() == ITEMS[:-1]
        assert await session.pop_item() == ITEMS[-2]

    try:
        asyncio.run(run())
        with MemoryClient(daemon.address) as client:
            view = client.get_working_memory("items", user_id="bob")
            assert view.scope.agent_id == "planner"
            assert len(view.messages) == len(ITEMS) - 2
            # A plain message is stored as itself; every other item keeps its JSON.
            assert not view.messages[0].message.metadata
            assert ITEM_KEY in view.messages[4].message.metadata
            assert view.messages[5].message.content == "thinking it over"  # reasoning's text
            ended = client.end_session("items", user_id="bob")
            episode = client.get_episode(ended.episode_id)
        # The episode has what was left, not what was popped.
        assert ended.message_count == len(ITEMS) - 2
        assert "last words" not in [m.message.content for m in episode.messages]
        # An ended session has no items, pops nothing, and clears without an error.
        assert asyncio.run(session.get_items()) == []
        assert asyncio.run(session.pop_item()) is None
        asyncio.run(session.clear_session())
    finally:
        session.close()


def test_clear_session_and_unknown_sessions(daemon):
    with MemoryClient(daemon.address) as client:
        session = StrataSession("c", user_id="carol", client=client)

        async def run() -> None:
            assert await session.get_items() == []  # never seen
            assert await session.pop_item() is None
            await session.clear_session()
            await session.add_items([{"role": "user", "content": "hello"}])
            await session.add_items([])
            await session.clear_session()
            assert await session.get_items() == []
            await session.add_items([{"role": "user", "content": "again"}])
            assert await session.get_items() == [{"role": "user", "content": "again"}]

        asyncio.run(run())
        assert client.list_episodes(user_id="carol").episodes == []  # cleared: no episode
        session.close()  # the client is the caller's: still usable
        assert client.get_working_memory("c", user_id="carol").messages[0].message.content == (
            "again"
        )


def test_a_tool_output_whose_call_left_the_window_is_not_returned(start_daemon):
    d = start_daemon(working_memory={"max_messages": 2})
    session = StrataSession("w", user_id="dan", address=d.address)
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "done"}
    answer = {"role": "assistant", "content": "finished"}

    async def run() -> None:
        await session.add_items([{"role": "user", "content": "go"}, call, output])
        assert await session.get_items() == [call, output]
        await session.add_items([answer])  # the window now starts at the output
        assert await session.get_items() == [answer]
        assert await session.get_items(limit=1) == [answer]

    try:
        asyncio.run(run())
    finally:
        session.close()


def test_a_session_needs_a_user():
    with pytest.raises(ValueError, match="user_id is required"):
        StrataSession("s", user_id="")
