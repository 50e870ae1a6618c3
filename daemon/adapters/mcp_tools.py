"""The tools of ``strata-mcp``: their arguments, descriptions and results (see mcp_server).

Each tool maps its arguments to one call of :class:`daemon.client.MemoryClient` (two for the
checks that an id belongs to the configured user) and the reply to a result: structured
content (the pydantic models below, published as the tool's output schema) plus readable
text. No tool takes a user id: the caller (``Backend.caller``) supplies it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message as ProtoMessage
from google.protobuf.timestamp_pb2 import Timestamp
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from daemon.pb import memory_pb2 as pb

if TYPE_CHECKING:
    from daemon.adapters.mcp_server import Backend

Kind = Literal["episode_chunk", "episode_turn", "summary", "fact", "profile"]
Kinds = Annotated[
    list[Kind] | None,
    Field(
        description="Only these kinds of memory (default: all). episode_chunk and episode_turn "
        "are passages of past conversations, summary a conversation's summary, fact an atomic "
        "fact, profile what is known about one entity."
    ),
]
Start = Annotated[
    dt.datetime | None,
    Field(description="Only what happened at or after this time (ISO 8601; no zone means UTC)."),
]
End = Annotated[
    dt.datetime | None,
    Field(description="Only what happened before this time (ISO 8601; no zone means UTC)."),
]
Query = Annotated[str, Field(min_length=1, description="What to look for, in plain words.")]
SessionId = Annotated[
    str, Field(min_length=1, description="The conversation's id, chosen by you; stable per chat.")
]
IdList = Annotated[list[str] | None, Field(max_length=100)]
M = TypeVar("M", bound=BaseModel)


class Source(BaseModel):
    session_id: str
    seq: int = Field(description="The message's number in its session.")
    speaker: str
    created_at: str | None
    episode_id: str
    message_id: str
    metadata: dict[str, str]


class Memory(BaseModel):
    id: str = Field(description="The memory's id: for get_sources and forget(memory_ids).")
    kind: str
    text: str
    created_at: str | None
    superseded: bool = Field(description="A fact that a newer fact replaced.")
    sources: list[Source] = Field(description="The messages this memory comes from.")


class Hit(Memory):
    score: float
    episode_id: str
    session_id: str


class PackItem(Memory):
    tokens: int


class Episode(BaseModel):
    episode_id: str
    session_id: str
    agent_id: str
    started_at: str | None
    ended_at: str | None
    expires_at: str | None
    message_count: int
    end_reason: str
    consolidation: str


class StoredMessage(BaseModel):
    seq: int
    role: str
    content: str
    speaker: str
    created_at: str | None
    message_id: str
    metadata: dict[str, str]
    tool_call: dict[str, str] | None


class Remembered(BaseModel):
    session_id: str
    seq: int
    duplicate: bool = Field(description="The message_id was stored before; nothing was added.")


class Ended(BaseModel):
    session_id: str
    episode_id: str
    message_count: int


class Recalled(BaseModel):
    hits: list[Hit]
    degraded_channels: list[str]


class Packed(BaseModel):
    text: str = Field(description="The memories formatted for a prompt.")
    tokens: int
    items: list[PackItem]
    degraded_channels: list[str]


class Episodes(BaseModel):
    episodes: list[Episode]
    next_page_token: str


class EpisodeMessages(BaseModel):
    episode: Episode
    messages: list[StoredMessage]
    next_page_token: str


class Sources(BaseModel):
    node: Hit
    episode: Episode | None
    messages: list[StoredMessage]
    journal_expired: bool


class Forgotten(BaseModel):
    counts: dict[str, int] = Field(description="What was deleted, per tier.")
    skipped_ids: list[str] = Field(description="Unknown ids, or ids of another user.")


class WeaverStatus(BaseModel):
    running: bool
    pending: int
    unindexed: int
    pending_near_expiry: int
    next_run: str | None
    last_error: str
    extractor: str
    embedding_model: str
    embedding_ready: bool
    tier3_error: str
    last_run: dict[str, Any] | None


def _time(msg: ProtoMessage, field: str) -> str | None:
    if not msg.HasField(field):
        return None
    ts: Timestamp = getattr(msg, field)
    return ts.ToDatetime(dt.UTC).isoformat()


def _plain(msg: ProtoMessage, model: type[M], **given: Any) -> M:
    """``model`` from the protobuf fields of the same names (and ``given``): times as ISO 8601
    strings (None when unset), maps as dicts."""
    values = dict(given)
    for name in model.model_fields.keys() - given.keys():
        value = getattr(msg, name)
        if isinstance(value, Timestamp):
            value = _time(msg, name)
        elif isinstance(value, Mapping):
            value = dict(value)
        values[name] = value
    return model(**values)


def _enum(name: str, prefix: str) -> str:
    return name.removeprefix(prefix).lower()


def _sources(memory: pb.Hit | pb.PackItem) -> list[Source]:
    return [_plain(s, Source) for s in memory.sources]


def _episode(e: pb.Episode) -> Episode:
    return _plain(
        e,
        Episode,
        agent_id=e.scope.agent_id,
        end_reason=_enum(pb.EndReason.Name(e.end_reason), "END_REASON_"),
        consolidation=_enum(pb.ConsolidationState.Name(e.consolidation), "CONSOLIDATION_STATE_"),
    )


def _message(m: pb.StoredMessage) -> StoredMessage:
    msg, call = m.message, m.message.tool_call
    return _plain(
        msg,
        StoredMessage,
        seq=m.seq,
        role=_enum(pb.Role.Name(msg.role), "ROLE_"),
        speaker=msg.name,
        tool_call={"name": call.name, "arguments": call.arguments} if call.name else None,
    )


def _result(model: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=model.model_dump(mode="json"),
    )


def _where(s: Source) -> str:
    who = f", {s.speaker}" if s.speaker else ""
    return f"session {s.session_id} #{s.seq}{who}"


def _lines(messages: list[StoredMessage]) -> list[str]:
    return [
        f"#{m.seq} {m.role}{f' ({m.speaker})' if m.speaker else ''}: {m.content}" for m in messages
    ]


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
        return _result(
            Remembered(session_id=session_id, seq=r.seq, duplicate=r.duplicate),
            f"Stored message #{r.seq} of session {session_id}{dup}.",
        )

    @server.tool(annotations=WRITE)
    async def end_session(session_id: SessionId, ctx: Context) -> Annotated[CallToolResult, Ended]:
        """End a conversation: its messages become an episode of the journal, which the weaver
        indexes within seconds, so that recall and pack find it. Call it when a conversation
        is over (an idle session also ends by itself)."""
        c = await backend.caller(ctx)
        r = await backend.run(c.client.end_session, session_id, user_id=c.user_id)
        return _result(
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
    ) -> Annotated[CallToolResult, Recalled]:
        """Search the user's long-term memory: past conversations, their summaries, facts and
        entity profiles, best match first. Each hit has an id (for get_sources and forget),
        a score and its sources (session, message number, speaker, time). For a prompt-ready
        block within a token budget, use pack."""
        c = await backend.caller(ctx)
        r = await backend.run(
            c.client.recall, query, k=k, kinds=kinds or (), start=start, end=end, **c.scope
        )
        hits = [_plain(h, Hit, sources=_sources(h)) for h in r.hits]
        text = [f"{len(hits)} memories for {query!r}:"] if hits else [f"No memory for {query!r}."]
        for i, h in enumerate(hits, 1):
            where = "; ".join(_where(s) for s in h.sources)
            text.append(f"{i}. [{h.kind} {h.created_at or ''} score {h.score:.4f}] {h.text}")
            text.append(f"   id {h.id}; from {where}")
        out = Recalled(hits=hits, degraded_channels=list(r.degraded_channels))
        return _result(out, "\n".join(text))

    @server.tool(annotations=READ_ONLY)
    async def pack(
        query: Query,
        ctx: Context,
        max_tokens: Annotated[
            int, Field(ge=1, le=200_000, description="The block's budget in tokens.")
        ] = 1500,
        kinds: Kinds = None,
        per_kind_caps: Annotated[
            dict[Kind, int] | None, Field(description="At most this many items of a kind.")
        ] = None,
        start: Start = None,
        end: End = None,
    ) -> Annotated[CallToolResult, Packed]:
        """Call this before answering a question that may depend on what the user said
        before (their preferences, facts about them, earlier conversations): it returns the
        most relevant memories as one text block ready to read as context, never over
        max_tokens, each line "[kind · date · speaker] text", plus the items with their ids
        and sources."""
        c = await backend.caller(ctx)
        r = await backend.run(
            c.client.pack, query, max_tokens=max_tokens, per_kind_caps=per_kind_caps,
            kinds=kinds or (), start=start, end=end, **c.scope,
        )  # fmt: skip
        items = [_plain(i, PackItem, sources=_sources(i)) for i in r.items]
        degraded = list(r.degraded_channels)
        out = Packed(text=r.text, tokens=r.tokens, items=items, degraded_channels=degraded)
        return _result(out, r.text or f"No memory for {query!r}.")

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
        eps = [_episode(e) for e in r.episodes]
        text = [f"{len(eps)} episodes."] + [
            f"{e.episode_id} session {e.session_id} {e.started_at} ({e.message_count} messages)"
            for e in eps
        ]
        if r.next_page_token:
            text.append(f"More: page_token={r.next_page_token!r}")
        return _result(Episodes(episodes=eps, next_page_token=r.next_page_token), "\n".join(text))

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
        ep = _episode(r.episode)
        msgs = [_message(m) for m in r.messages]
        text = [f"Episode {ep.episode_id} (session {ep.session_id}, {ep.started_at}):"]
        text += _lines(msgs)
        if r.next_page_token:
            text.append(f"More: page_token={r.next_page_token!r}")
        out = EpisodeMessages(episode=ep, messages=msgs, next_page_token=r.next_page_token)
        return _result(out, "\n".join(text))

    @server.tool(annotations=READ_ONLY)
    async def get_sources(
        id: Annotated[str, Field(min_length=1, description="A hit's or pack item's id.")],
        ctx: Context,
    ) -> Annotated[CallToolResult, Sources]:
        """The exact messages a memory (a recall hit or a pack item) comes from, with its
        episode: to quote what was said, or to check a memory before relying on it."""
        c = await backend.caller(ctx)
        r = await backend.run(c.client.get_node, id, **c.scope)
        node = _plain(r.node, Hit, sources=_sources(r.node))
        msgs = [_message(m) for m in r.messages]
        ep = _episode(r.episode) if r.HasField("episode") else None
        text = [f"[{node.kind}] {node.text}", "Sources:", *_lines(msgs)]
        out = Sources(node=node, episode=ep, messages=msgs, journal_expired=r.journal_expired)
        return _result(out, "\n".join(text))

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
        return _result(Forgotten(counts=counts, skipped_ids=skipped), text)

    @server.tool(annotations=READ_ONLY)
    async def weaver_status(ctx: Context) -> Annotated[CallToolResult, WeaverStatus]:
        """The Memory Weaver's state: whether a run is going on, episodes still to index
        (unindexed: not yet recallable) or to consolidate (pending), the next run, the last
        error and whether the embedding model is loaded."""
        c = await backend.caller(ctx)
        r = await backend.run(c.client.weaver_status)
        last = MessageToDict(r.last_run, preserving_proto_field_name=True)
        out = _plain(r, WeaverStatus, last_run=last if r.HasField("last_run") else None)
        text = (
            f"Weaver {'running' if r.running else 'idle'}; {r.unindexed} episodes to index, "
            f"{r.pending} to consolidate; next run {out.next_run}; embedding model "
            f"{r.embedding_model} {'ready' if r.embedding_ready else 'loading'}"
            + (f"; last error: {r.last_error}" if r.last_error else "")
        )
        return _result(out, text)
