"""The tools of ``stratad-mcp``: their arguments, descriptions and results (see mcp_server).

Each tool maps its arguments to one call of :class:`stratad_client.MemoryClient` (two for the
checks that an id belongs to the configured user) and the reply to a result: structured
content (the models of :mod:`stratad_client.integrations.mcp.results`, published as output schemas)
plus readable text. No tool takes a user id: the caller (``Backend.caller``) supplies it.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Annotated, Any, Literal

from google.protobuf.json_format import MessageToDict
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from stratad_client.kinds import MemoryKind
from stratad_client.pb import memory_pb2 as pb

if TYPE_CHECKING:
    from stratad_client.integrations.mcp.backend import Backend

from stratad_client.integrations.mcp.results import (
    End,
    Ended,
    EpisodeMessages,
    Episodes,
    Forgotten,
    Hit,
    IdList,
    Kinds,
    MaxTokens,
    Noted,
    Packed,
    PackItem,
    Query,
    Recalled,
    Remembered,
    SessionId,
    Sources,
    Start,
    Thread,
    WeaverStatus,
    episode_of,
    from_proto,
    message_lines,
    message_of,
    source_label,
    sources_of,
    tool_result,
)

# The namespace of the notes the note tool keeps (keyed documents).
NOTES = ("notes",)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def register(server: MCPServer[Any], backend: Backend) -> None:
    """Add Strata's tools to ``server``; every call goes through ``backend``."""

    @server.tool(annotations=WRITE)
    async def remember(
        session_id: SessionId,
        content: Annotated[str, Field(description="The message's text.")],
        ctx: Context,
        role: Annotated[
            Literal["user", "assistant", "system", "tool"], Field(description="Who wrote it.")
        ] = "user",
        speaker: Annotated[str | None, Field(description="Who said it, e.g. 'Alice'.")] = None,
        metadata: Annotated[
            dict[str, str] | None, Field(description="Strings kept with the message.")
        ] = None,
        message_id: Annotated[
            str | None, Field(description="Your id for the message: a repeat is stored once.")
        ] = None,
    ) -> Annotated[CallToolResult, Remembered]:
        """Store one message of a conversation in Strata's memory (the session's working
        memory). Call it for each user and assistant turn worth remembering, with the same
        session_id for the whole conversation. It returns at once with the message's number
        (seq): the daemon has stored the message durably, and does not wait for the Memory
        Weaver, which indexes the conversation after end_session."""
        c = await backend.caller(ctx)
        r = await backend.run(
            c.client.append, session_id, content, role=role, name=speaker or "",
            message_id=message_id or "", metadata=metadata, **c.scope,
        )  # fmt: skip
        dup = " (a repeat of a stored message_id: nothing added)" if r.duplicate else ""
        return tool_result(
            Remembered(session_id=session_id, seq=r.seq, duplicate=r.duplicate),
            f"Stored message #{r.seq} of session {session_id}{dup}.",
        )

    @server.tool(annotations=WRITE)
    async def note(
        text: Annotated[str, Field(min_length=1, description="The note, in plain words.")],
        ctx: Context,
        key: Annotated[
            str | None,
            Field(
                description="A name for the note, e.g. 'diet'; a note of the same key is "
                "replaced. Default: a new key."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, Noted]:
        """Keep a note in the user's long-term memory: a standing fact, preference or
        instruction worth recalling in later conversations ("prefers metric units"). Use a
        key to keep one current version (writing the key again replaces the note). Stored
        durably at once; recall and pack find it (kind document) within seconds."""
        c = await backend.caller(ctx)
        name = key or uuid.uuid4().hex
        r = await backend.run(c.client.put_document, NOTES, name, text, **c.scope)
        did = "Kept" if r.created else "Replaced"
        return tool_result(
            Noted(key=name, id=r.document.id, created=r.created),
            f"{did} note {name!r} (memory id {r.document.id}).",
        )

    @server.tool(annotations=WRITE)
    async def end_session(session_id: SessionId, ctx: Context) -> Annotated[CallToolResult, Ended]:
        """End a conversation: its messages become an episode of the journal, which the weaver
        indexes within seconds, so that recall and pack find it. Call it when a conversation
        is over (an idle session also ends by itself)."""
        c = await backend.caller(ctx)
        r = await backend.run(c.client.end_session, session_id, user_id=c.user_id)
        return tool_result(
            Ended(session_id=session_id, episode_id=r.episode_id, message_count=r.message_count),
            f"Session {session_id} ended: episode {r.episode_id} with {r.message_count} "
            "messages; recallable once the weaver has indexed it (seconds).",
        )

    @server.tool(annotations=READ_ONLY)
    async def recall(
        query: Query,
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=100, description="How many memories at most.")] = 10,
        kinds: Kinds = None,
        start: Start = None,
        end: End = None,
        thread: Thread = "",
    ) -> Annotated[CallToolResult, Recalled]:
        """Search the user's long-term memory: past conversations, their summaries, facts,
        entity profiles, digests (what happened in a week, the story so far) and story
        threads (one topic's conversations), best match first. Each hit has an id (for
        get_sources and forget), a score and its sources (session, message number, speaker,
        time). For a prompt-ready block within a token budget, use pack."""
        c = await backend.caller(ctx)
        r = await backend.run(
            c.client.recall, query, k=k, kinds=kinds or (), start=start, end=end,
            thread=thread, **c.scope,
        )  # fmt: skip
        hits = [from_proto(h, Hit, sources=sources_of(h)) for h in r.hits]
        text = [f"{len(hits)} memories for {query!r}:"] if hits else [f"No memory for {query!r}."]
        for i, h in enumerate(hits, 1):
            where = "; ".join(source_label(s) for s in h.sources)
            text.append(f"{i}. [{h.kind} {h.created_at or ''} score {h.score:.4f}] {h.text}")
            text.append(f"   id {h.id}; from {where}")
        out = Recalled(hits=hits, degraded_channels=list(r.degraded_channels))
        return tool_result(out, "\n".join(text))

    @server.tool(annotations=READ_ONLY)
    async def pack(
        query: Query,
        ctx: Context,
        max_tokens: MaxTokens = 1500,
        kinds: Kinds = None,
        per_kind_caps: Annotated[
            dict[MemoryKind, int] | None, Field(description="At most this many items of a kind.")
        ] = None,
        start: Start = None,
        end: End = None,
        thread: Thread = "",
    ) -> Annotated[CallToolResult, Packed]:
        """For an explicit question outside a conversation (no session): the memories most
        relevant to query (the user's preferences, facts about them, earlier conversations)
        as one text block ready to read as context, never over max_tokens, each line
        "[kind · date · speaker] text", plus the items with their ids and sources. In a
        conversation, call get_context instead."""
        c = await backend.caller(ctx)
        r = await backend.run(
            c.client.pack, query, max_tokens=max_tokens, per_kind_caps=per_kind_caps,
            kinds=kinds or (), start=start, end=end, thread=thread, **c.scope,
        )  # fmt: skip
        items = [from_proto(i, PackItem, sources=sources_of(i)) for i in r.items]
        degraded = list(r.degraded_channels)
        out = Packed(text=r.text, tokens=r.tokens, items=items, degraded_channels=degraded)
        return tool_result(out, r.text or f"No memory for {query!r}.")

    @server.tool(annotations=READ_ONLY)
    async def list_episodes(
        ctx: Context,
        start: Start = None,
        end: End = None,
        page_size: Annotated[int, Field(ge=1, le=1000, description="Episodes per page.")] = 20,
        page_token: Annotated[str, Field(description="next_page_token of the last page.")] = "",
        newest_first: Annotated[bool, Field(description="Newest first, else oldest.")] = True,
    ) -> Annotated[CallToolResult, Episodes]:
        """List the user's past conversations (episodes) by start time, a page at a time:
        ids, session ids, times and message counts. Read one with get_episode."""
        c = await backend.caller(ctx)
        r = await backend.run(
            c.client.list_episodes, start=start, end=end, page_size=page_size,
            page_token=page_token, newest_first=newest_first, **c.scope,
        )  # fmt: skip
        eps = [episode_of(e) for e in r.episodes]
        text = [f"{len(eps)} episodes."] + [
            f"{e.episode_id} session {e.session_id} {e.started_at} ({e.message_count} messages)"
            for e in eps
        ]
        if r.next_page_token:
            text.append(f"More: page_token={r.next_page_token!r}")
        return tool_result(
            Episodes(episodes=eps, next_page_token=r.next_page_token), "\n".join(text)
        )

    @server.tool(annotations=READ_ONLY)
    async def get_episode(
        episode_id: Annotated[str, Field(min_length=1, description="The episode's id.")],
        ctx: Context,
        page_size: Annotated[int, Field(ge=1, le=1000, description="Messages per page.")] = 100,
        page_token: Annotated[str, Field(description="next_page_token of the last page.")] = "",
    ) -> Annotated[CallToolResult, EpisodeMessages]:
        """Read one past conversation (an episode from list_episodes, or a hit's episode_id):
        its messages in order, a page at a time."""
        c = await backend.caller(ctx)
        r = await backend.run(
            c.client.get_episode, episode_id, page_size=page_size, page_token=page_token
        )
        if not c.owns(r.episode.scope):  # the daemon checks tenants only with tokens
            raise backend.not_found(f"episode {episode_id!r} not found")
        ep = episode_of(r.episode)
        msgs = [message_of(m) for m in r.messages]
        text = [f"Episode {ep.episode_id} (session {ep.session_id}, {ep.started_at}):"]
        text += message_lines(msgs)
        if r.next_page_token:
            text.append(f"More: page_token={r.next_page_token!r}")
        out = EpisodeMessages(episode=ep, messages=msgs, next_page_token=r.next_page_token)
        return tool_result(out, "\n".join(text))

    @server.tool(annotations=READ_ONLY)
    async def get_sources(
        id: Annotated[str, Field(min_length=1, description="A hit's or pack item's id.")],
        ctx: Context,
    ) -> Annotated[CallToolResult, Sources]:
        """The exact messages a memory (a recall hit or a pack item) comes from, with its
        episode: to quote what was said, or to check a memory before relying on it."""
        c = await backend.caller(ctx)
        r = await backend.run(c.client.get_node, id, **c.scope)
        node = from_proto(r.node, Hit, sources=sources_of(r.node))
        msgs = [message_of(m) for m in r.messages]
        ep = episode_of(r.episode) if r.HasField("episode") else None
        text = [f"[{node.kind}] {node.text}", "Sources:", *message_lines(msgs)]
        out = Sources(node=node, episode=ep, messages=msgs, journal_expired=r.journal_expired)
        return tool_result(out, "\n".join(text))

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def forget(
        ctx: Context,
        episode_ids: Annotated[
            IdList, Field(description="Episodes to delete, with all derived.")
        ] = None,
        memory_ids: Annotated[IdList, Field(description="Memories (hit ids) to delete.")] = None,
        everything: Annotated[
            bool, Field(description="Delete ALL of this user's memories. Only on explicit request.")
        ] = False,
    ) -> Annotated[CallToolResult, Forgotten]:
        """Delete memories for good, from every tier: episodes (by id, with everything derived
        from them), single memories (by hit id), or, with everything=true, all memories of
        this user. Give exactly one of the three. Returns what was deleted, per tier."""
        c = await backend.caller(ctx)
        eps, mems = list(episode_ids or ()), list(memory_ids or ())
        skipped: list[str] = []
        if not everything:  # only the user's own ids: the daemon checks them with tokens only
            eps, mems, skipped = await backend.own_ids(c, eps, mems)
        counts = {f.name: 0 for f in pb.ForgetResponse.DESCRIPTOR.fields}
        if eps or mems or not skipped:  # nothing asked at all: the daemon says what is wrong
            user, agent = (c.user_id, c.agent_id) if everything else ("", "")
            r = await backend.run(
                c.client.forget, user_id=user, agent_id=agent, episode_ids=eps, memory_ids=mems
            )
            counts = {name: getattr(r, name) for name in counts}
        done = ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "nothing"
        text = f"Forgot: {done}."
        if skipped:
            text += f" Skipped (unknown, or not this user's): {', '.join(skipped)}."
        return tool_result(Forgotten(counts=counts, skipped_ids=skipped), text)

    @server.tool(annotations=READ_ONLY)
    async def weaver_status(ctx: Context) -> Annotated[CallToolResult, WeaverStatus]:
        """The Memory Weaver's state: whether a run is going on, episodes still to index
        (unindexed: not yet recallable) or to consolidate (pending), the next run, the last
        error and whether the embedding model is loaded."""
        c = await backend.caller(ctx)
        r = await backend.run(c.client.admin.weaver_status)
        last = MessageToDict(r.last_run, preserving_proto_field_name=True)
        out = from_proto(r, WeaverStatus, last_run=last if r.HasField("last_run") else None)
        text = (
            f"Weaver {'running' if r.running else 'idle'}; {r.unindexed} episodes to index, "
            f"{r.pending} to consolidate; next run {out.next_run}; embedding model "
            f"{r.embedding_model} {'ready' if r.embedding_ready else 'loading'}"
            + (f"; last error: {r.last_error}" if r.last_error else "")
        )
        return tool_result(out, text)
