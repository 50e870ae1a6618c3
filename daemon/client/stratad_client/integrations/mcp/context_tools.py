"""The context tools of ``stratad-mcp``: ``get_context`` (what the assistant reads before
answering in a conversation), ``set_anchor`` and ``pin``. Registered beside
:mod:`.tools`, with the same conventions: one call of the client each, the
user (and agent) supplied by the caller, never by the model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from stratad_client.integrations.mcp.results import (
    Anchored,
    ContextMemory,
    MaxTokens,
    PinResult,
    SessionId,
    enum_name,
    from_proto,
    message_of,
    sources_of,
    tool_result,
)
from stratad_client.integrations.mcp.results import Context as ContextResult
from stratad_client.integrations.mcp.tools import READ_ONLY, WRITE
from stratad_client.pb import memory_pb2 as pb

if TYPE_CHECKING:
    from stratad_client.integrations.mcp.backend import Backend


def register(server: MCPServer[Any], backend: Backend) -> None:
    """Add the context tools to ``server``; every call goes through ``backend``."""

    @server.tool(annotations=READ_ONLY)
    async def get_context(
        session_id: SessionId,
        ctx: Context,
        max_tokens: MaxTokens = 1500,
        query: Annotated[
            str | None,
            Field(description="What to recall; default: the conversation's last user message."),
        ] = None,
    ) -> Annotated[CallToolResult, ContextResult]:
        """Call this before answering in a conversation: after storing the user's message
        with remember, get_context returns what to read first, as one block within
        max_tokens: the session's anchor (set_anchor), the user's pinned memories, the
        memories relevant to the conversation (recalled for its last user message unless
        query is given) and the conversation's latest messages, with dates and speakers."""
        c = await backend.caller(ctx)
        r = await backend.run(
            c.client.get_context, session_id, max_tokens, query=query or None, **c.scope
        )
        memories = [from_proto(m, ContextMemory, sources=sources_of(m)) for m in r.memories]
        out = ContextResult(
            text=r.text,
            tokens=r.tokens,
            query=r.query,
            state=enum_name(pb.SessionState.Name(r.state), "SESSION_STATE_"),
            anchor=r.anchor.text if r.HasField("anchor") else None,
            messages=[message_of(m) for m in r.messages],
            memories=memories,
            degraded_channels=list(r.degraded_channels),
        )
        return tool_result(out, r.text or f"Nothing in memory for session {session_id} yet.")

    @server.tool(annotations=WRITE)
    async def set_anchor(
        session_id: SessionId,
        text: Annotated[
            str,
            Field(
                description="The task in flight, the plan step, the last decisions and the "
                "next step, in a few lines; replaces the anchor whole. Empty: clear it."
            ),
        ],
        ctx: Context,
    ) -> Annotated[CallToolResult, Anchored]:
        """Keep the conversation's anchor: a short, always-current note of where the work
        stands that get_context puts first, so the work resumes exactly after the context
        was cut or the assistant restarted. Update it when the plan or the next step
        changes; it stays readable after the conversation ends."""
        c = await backend.caller(ctx)
        r = await backend.run(c.client.set_anchor, session_id, text, **c.scope)
        cleared = not r.HasField("anchor")
        out = Anchored(session_id=session_id, cleared=cleared, replaced=r.replaced)
        return tool_result(
            out, f"Anchor of session {session_id} {'cleared' if cleared else 'set'}."
        )

    @server.tool(annotations=WRITE)
    async def pin(
        id: Annotated[
            str, Field(min_length=1, description="A memory's id (a recall hit's or item's).")
        ],
        ctx: Context,
        pinned: Annotated[bool, Field(description="False unpins it.")] = True,
    ) -> Annotated[CallToolResult, PinResult]:
        """Pin a memory so that get_context always shows it first (a standing instruction or
        preference of the user), or unpin it with pinned=false."""
        c = await backend.caller(ctx)
        r = await backend.run(c.client.pin_memory, id, pinned=pinned, **c.scope)
        out = PinResult(id=id, pinned=r.pinned, changed=r.changed)
        state = "pinned" if r.pinned else "unpinned"
        return tool_result(out, f"Memory {id} {state}{'' if r.changed else ' already'}.")
