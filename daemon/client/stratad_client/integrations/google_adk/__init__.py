"""Google ADK's ``BaseMemoryService`` on Strata (``stratad-client[adk]``).

::

    from google.adk.runners import Runner
    from stratad_client.integrations.google_adk import StrataMemoryService

    runner = Runner(agent=agent, app_name="travel", session_service=sessions,
                    memory_service=StrataMemoryService())

How it maps:

- The scope: ADK's ``user_id`` is Strata's user, its ``app_name`` the agent (``agent_id``), so
  one app's memories are not another's.
- ``add_session_to_memory(session)``: the session's events become one episode of the Strata
  session of the same id (``AppendBatch``, then ``EndSession``), indexed within seconds. ADK
  may add a session again as it grows: only the events after the newest episode already
  made of that session are added, so nothing is stored twice.
- ``add_events_to_memory(events)``: the events given become one episode.
- An event is a message: the user's are ``user`` messages, the agents' ``assistant``
  messages (the author is the speaker), a function call is a tool call and a function
  response a ``tool`` message. Events without content are left out. Each message's
  ``message_id`` is the event's id.
- ``search_memory``: Recall's hits (every kind: turns, chunks, facts, summaries...), each a
  ``MemoryEntry`` with the hit's id, text, speaker and time, and its kind, score and sources
  in ``custom_metadata``.
- ``delete_memory(memory_id)``: ``Forget`` of that hit (the token needs the ``forget``
  right).

The calls are the blocking client's, run in a worker thread, so the service works from any
event loop.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types
from google.protobuf.timestamp_pb2 import Timestamp

from stratad_client import MemoryClient, message
from stratad_client.integrations.connection import Connection
from stratad_client.pb import memory_pb2 as pb

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session


class StrataMemoryService(BaseMemoryService):
    """ADK memory kept by a running ``stratad`` (see the module docstring)."""

    def __init__(self, *, k: int = 10, client: MemoryClient | None = None, **client_args: Any):
        """``k``: memories per search. ``client``: a :class:`MemoryClient` to use (not closed
        by :meth:`close`); without one, a client is made from ``client_args`` (``address``,
        ``token``, ``ca_file``..., each defaulting to the environment)."""
        self.k = k
        self._daemon = Connection(client, client_args)
        self._client = self._daemon.client
        self._call = self._daemon.call

    def close(self) -> None:
        self._daemon.close()

    async def add_session_to_memory(self, session: Session) -> None:
        await self._call(self._add_session, session)

    def _add_session(self, session: Session) -> None:
        events = [e for e in session.events if _has_content(e)]
        if not events:
            return
        added_until = self._newest_episode_end(
            session.user_id, session.app_name, session.id, _us(events[0])
        )
        if added_until is not None:
            events = [e for e in events if _us(e) > added_until]
        self._store(session.user_id, session.app_name, session.id, events)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        chosen = [e for e in events if _has_content(e)]
        if chosen:
            sid = session_id or f"adk-events-{chosen[0].id}"
            await self._call(self._store, user_id, app_name, sid, chosen)

    def _store(self, user_id: str, app_name: str, session_id: str, events: list[Event]) -> None:
        if not events:
            return
        self._client.append_batch(
            session_id,
            [_message(e) for e in events],
            user_id=user_id,
            agent_id=app_name,
        )
        self._client.end_session(session_id, user_id=user_id)

    def _newest_episode_end(
        self, user_id: str, app_name: str, session_id: str, since_us: int
    ) -> int | None:
        """When (µs) the newest episode already made of this session ended (its last
        message's time), or None. Only episodes that started at ``since_us`` or later (the
        session's first event) are read."""
        start = Timestamp()
        start.FromMicroseconds(since_us)
        ends = [
            episode.ended_at.ToMicroseconds()
            for episode in self._client.iter_episodes(
                user_id=user_id, agent_id=app_name, start=start
            )
            if episode.session_id == session_id
        ]
        return max(ends, default=None)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        response = await self._call(
            self._client.recall, query, user_id=user_id, agent_id=app_name, k=self.k
        )
        return SearchMemoryResponse(memories=[_entry(hit) for hit in response.hits])

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        if memory_id:
            await self._call(self._client.forget, memory_ids=[memory_id])


def _us(event: Event) -> int:
    """The event's time in µs: what its message's created_at keeps."""
    return round(event.timestamp * 1_000_000)


def _has_content(event: Event) -> bool:
    return bool(event.content and event.content.parts)


def _message(event: Event) -> pb.Message:
    content = event.content
    assert content is not None and content.parts
    texts: list[str] = []
    tool_call: tuple[str, str] | None = None
    role = "user" if content.role == "user" else "assistant"
    for part in content.parts:
        if part.text and not part.thought:
            texts.append(part.text)
        elif part.function_call is not None and tool_call is None:
            call = part.function_call
            tool_call = (call.name or "function", json.dumps(call.args or {}, default=str))
        elif part.function_call is not None:
            texts.append(f"[call {part.function_call.name}] {part.function_call.args}")
        elif part.function_response is not None:
            role = "tool"
            result = json.dumps(part.function_response.response or {}, default=str)
            texts.append(f"{part.function_response.name}: {result}")
    return message(
        "\n".join(texts) if texts or tool_call else f"[{event.author} event]",
        role,
        name=event.author,
        created_at=_timestamp(_us(event)),
        message_id=event.id,
        tool_call=tool_call,
    )


def _timestamp(us: int) -> Timestamp:
    ts = Timestamp()
    ts.FromMicroseconds(us)
    return ts


def _entry(hit: pb.Hit) -> MemoryEntry:
    speakers: Iterable[str] = (s.speaker for s in hit.sources if s.speaker)
    return MemoryEntry(
        id=hit.id,
        content=types.Content(role="user", parts=[types.Part(text=hit.text)]),
        author=next(iter(speakers), None),
        timestamp=hit.created_at.ToDatetime(dt.UTC).isoformat()
        if hit.HasField("created_at")
        else None,
        custom_metadata={
            "kind": hit.kind,
            "score": hit.score,
            "episode_id": hit.episode_id,
            "sources": [
                {"session_id": s.session_id, "seq": s.seq, "message_id": s.message_id}
                for s in hit.sources
            ],
        },
    )
