"""The Google ADK adapter with the real ``google-adk`` package: ADK's Runner, session service and
preload-memory tool against a real daemon, with a scripted model standing in for Gemini."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from pydantic import Field

from stratad_client import MemoryClient
from stratad_client.integrations.google_adk import StrataMemoryService
from tests.support import wait_indexed

pytestmark = pytest.mark.slow
APP = "travel"


class ScriptedLlm(BaseLlm):
    """Answers every turn with ``reply``; keeps the requests it was sent."""

    reply: str = "Noted."
    requests: list[Any] = Field(default_factory=list)

    async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
        self.requests.append(llm_request)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=self.reply)]))


def _text(content: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=content)])


async def _turn(runner: Runner, user: str, session_id: str, text: str) -> None:
    async for _event in runner.run_async(
        user_id=user, session_id=session_id, new_message=_text(text)
    ):
        pass


def test_an_adk_session_becomes_an_episode_that_the_next_session_recalls(quiet_daemon):
    llm = ScriptedLlm(model="scripted")
    agent = LlmAgent(name="helper", model=llm, tools=[PreloadMemoryTool()])
    sessions = InMemorySessionService()
    memory = StrataMemoryService(address=quiet_daemon.address)
    runner = Runner(agent=agent, app_name=APP, session_service=sessions, memory_service=memory)

    async def first_session() -> Any:
        s = await sessions.create_session(app_name=APP, user_id="alice")
        await _turn(runner, "alice", s.id, "I moved to Lisbon in May, near the river.")
        s = await sessions.get_session(app_name=APP, user_id="alice", session_id=s.id)
        await memory.add_session_to_memory(s)
        await memory.add_session_to_memory(s)  # added again: nothing stored twice
        return s

    first = asyncio.run(first_session())
    with MemoryClient(quiet_daemon.address) as c:
        wait_indexed(c)
        (episode,) = c.list_episodes(user_id="alice").episodes
        assert (episode.session_id, episode.scope.agent_id) == (first.id, APP)
        messages = c.get_episode(episode.episode_id).messages
        assert [(m.message.name, m.message.content) for m in messages] == [
            ("user", "I moved to Lisbon in May, near the river."),
            ("helper", "Noted."),
        ]
        assert messages[0].message.message_id == first.events[0].id

    async def second_session() -> Any:
        s = await sessions.create_session(app_name=APP, user_id="alice")
        await _turn(runner, "alice", s.id, "Which city do I live in now?")
        return await memory.search_memory(app_name=APP, user_id="alice", query="Lisbon river")

    found = asyncio.run(second_session())
    # ADK's preload tool put the recalled memory into what the model was sent.
    sent = " ".join(p.text or "" for c in llm.requests[-1].contents for p in c.parts or [])
    assert "PAST_CONVERSATIONS" in sent and "Lisbon" in sent
    # search_memory: Strata's hits, with their provenance.
    top = found.memories[0]
    assert "Lisbon" in top.content.parts[0].text
    assert top.author == "user" and top.timestamp
    assert top.custom_metadata["sources"][0]["session_id"] == first.id
    # Scopes: another app, another user.
    other_app = asyncio.run(memory.search_memory(app_name="other", user_id="alice", query="Lisbon"))
    other_user = asyncio.run(memory.search_memory(app_name=APP, user_id="bob", query="Lisbon"))
    assert other_app.memories == [] and other_user.memories == []

    # The session goes on and is added again: only the new events make a second episode.
    async def more() -> None:
        await _turn(runner, "alice", first.id, "Also, my sister Ana visits in June.")
        s = await sessions.get_session(app_name=APP, user_id="alice", session_id=first.id)
        await memory.add_session_to_memory(s)

    asyncio.run(more())
    with MemoryClient(quiet_daemon.address) as c:
        episodes = c.list_episodes(user_id="alice").episodes
        assert sorted(e.message_count for e in episodes) == [2, 2]
        wait_indexed(c)

    # delete_memory forgets the hit.
    ana = asyncio.run(memory.search_memory(app_name=APP, user_id="alice", query="sister Ana"))
    hit = next(m for m in ana.memories if "Ana" in m.content.parts[0].text)
    asyncio.run(memory.delete_memory(app_name=APP, user_id="alice", memory_id=hit.id))
    again = asyncio.run(memory.search_memory(app_name=APP, user_id="alice", query="sister Ana"))
    assert hit.id not in {m.id for m in again.memories}
    memory.close()


def test_function_calls_and_events_deltas(quiet_daemon):
    from google.adk.events.event import Event

    memory = StrataMemoryService(address=quiet_daemon.address)
    call = Event(
        author="helper",
        content=types.Content(
            role="model",
            parts=[
                types.Part(function_call=types.FunctionCall(name="book", args={"city": "Rome"}))
            ],
        ),
    )
    answer = Event(
        author="helper",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(name="book", response={"ok": True})
                )
            ],
        ),
    )
    empty = Event(author="helper")  # no content: left out
    asyncio.run(
        memory.add_events_to_memory(
            app_name=APP, user_id="carol", events=[call, answer, empty], session_id="trip"
        )
    )
    with MemoryClient(quiet_daemon.address) as c:
        (episode,) = c.list_episodes(user_id="carol").episodes
        first, second = c.get_episode(episode.episode_id).messages
    assert first.message.tool_call.name == "book"
    assert first.message.tool_call.arguments == '{"city": "Rome"}'
    assert second.message.content == 'book: {"ok": true}'
    memory.close()
