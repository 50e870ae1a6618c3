"""The ``strata://changes`` resource of ``stratad-mcp``: the newest changes of the configured
user's memory (``MemoryService.Watch``), and subscriptions to it.

Reading the resource gives the newest changes the daemon keeps (at most :data:`NEWEST`, oldest
first) as JSON. A client that subscribes (``resources/subscribe``) is sent
``notifications/resources/updated`` for it each time the user's memory changes: the server
follows the user's changes with one Watch stream while anyone is subscribed, and resumes it
from its last cursor when stratad restarts.

The SDK's ``MCPServer`` has no public hook for ``resources/subscribe`` (the request of the
protocol versions before 2026-07-28, which the SDK's own clients negotiate over stdio and
HTTP), so the handlers are added to its low-level server. Served for one user only: with
``--forward-token`` (several users) the resource is not offered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import mcp.types as types
from mcp.server.mcpserver import MCPServer

from stratad_client import AsyncMemoryClient, MemoryClient, StrataClientError
from stratad_client.pb import memory_pb2 as pb

if TYPE_CHECKING:
    from stratad_client.integrations.mcp.backend import Backend

URI = "strata://changes"
NEWEST = 100
RETRY_SECONDS = 1.0
log = logging.getLogger("strata.mcp")


def change_json(event: pb.ChangeEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"cursor": event.cursor, "type": event.type}
    out["at"] = event.at.ToDatetime().isoformat() + "Z"
    for name in ("session_id", "episode_id", "memory_id"):
        if getattr(event, name):
            out[name] = getattr(event, name)
    if event.count:
        out["count"] = event.count
    out.update(event.attrs)
    return out


class Subscriptions:
    """The sessions subscribed to :data:`URI`, and the Watch stream that tells them."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        # The subscribed clients' sessions, by their connection: each request has a session
        # object of its own, over the one connection of its client (the SDK's private
        # ``_connection``: no public identity of a client connection).
        self._sessions: dict[int, Any] = {}
        self._follower: asyncio.Task[None] | None = None

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        """Subscribe the session; the first subscriber starts the Watch stream, from the
        newest change kept (read before this returns: a change after it is told)."""
        if str(params.uri) == URI:
            if self._follower is None or self._follower.done():
                c, backend = self._backend.config, self._backend
                kept = await backend.run(_newest, backend.client, c.user_id, c.agent_id)
                cursor = kept[-1].cursor if kept else ""  # none kept: from the oldest
                self._follower = asyncio.create_task(self._follow(cursor))
            self._sessions[_client(ctx)] = ctx.session
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Any, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        if str(params.uri) == URI:
            self._sessions.pop(_client(ctx), None)
            if not self._sessions and self._follower is not None:
                self._follower.cancel()
        return types.EmptyResult()

    async def _follow(self, cursor: str) -> None:
        """Tell the subscribed sessions of each change after ``cursor`` (empty: after the
        oldest kept), until none is left."""
        c = self._backend.config
        async with AsyncMemoryClient(c.address) as client:
            while self._sessions:
                try:
                    async for event in client.watch(
                        user_id=c.user_id,
                        agent_id=c.agent_id,
                        cursor=cursor,
                        from_oldest=not cursor,
                    ):
                        cursor = event.cursor
                        await self._tell()
                        if not self._sessions:
                            return
                except StrataClientError as exc:  # stratad restarts: resume from the cursor
                    log.warning("mcp.watch_failed", extra={"fields": {"error": str(exc)}})
                    if exc.kind == "OutOfRange":
                        cursor = ""
                    await asyncio.sleep(RETRY_SECONDS)

    async def close(self) -> None:
        """End the Watch stream (the server stops)."""
        self._sessions.clear()
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower

    async def _tell(self) -> None:
        for client, session in list(self._sessions.items()):
            try:
                await session.send_resource_updated(URI)
            except Exception as exc:  # the client is gone
                log.warning("mcp.notify_failed", extra={"fields": {"error": repr(exc)}})
                self._sessions.pop(client, None)


def _client(ctx: Any) -> int:
    return id(getattr(ctx.session, "_connection", ctx.session))


def _newest(client: MemoryClient, user_id: str, agent_id: str) -> list[pb.ChangeEvent]:
    """The newest changes kept of the user (a catch-up read from the oldest)."""
    read = client.watch(user_id=user_id, agent_id=agent_id, from_oldest=True, catch_up=True)
    return list(deque(read, maxlen=NEWEST))


def register(server: MCPServer[Any], backend: Backend) -> Subscriptions | None:
    """Add the resource and its subscriptions to ``server`` (none with forwarded tokens)."""
    if backend.config.forward_token:
        return None
    c = backend.config

    @server.resource(
        URI,
        name="changes",
        title="What changed in the user's memory",
        description=(
            f"The newest changes of the user's memory (at most {NEWEST}, oldest first): "
            "sessions started, appended and ended, episodes indexed, consolidated and "
            "expired, documents put and deleted, anchors, pins, forgets. Subscribe to be "
            "told when it changes."
        ),
        mime_type="application/json",
    )
    async def changes() -> str:
        newest = await backend.run(_newest, backend.client, c.user_id, c.agent_id)
        return json.dumps([change_json(e) for e in newest])

    subscriptions = Subscriptions(backend)
    low = server._lowlevel_server  # the SDK has no public hook for resources/subscribe
    low.add_request_handler(
        "resources/subscribe", types.SubscribeRequestParams, subscriptions.subscribe
    )
    low.add_request_handler(
        "resources/unsubscribe", types.UnsubscribeRequestParams, subscriptions.unsubscribe
    )
    return subscriptions
