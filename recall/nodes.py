"""GetNode: from any hit down to its episode and its exact source messages.

The messages come from the journal while it has the episode; from the working memory while
the session still lives (a live session's point, stored or only staged for the keyword
channel, :mod:`tiers.semantic.pending`); after the journal entry has expired they come from
Tier 3, whose chunk points keep each source message's text, speaker and time. A memory
citing several sessions (an entity profile) has no one episode: its
messages are its sources' own texts, in the order of its sources (each names its session).
A keyed document (``tiers.keyed.documents``) comes from no conversation: the node alone, no episode
and no messages. A digest or a story thread (``tiers.semantic.digests``, ``tiers.semantic.threads``)
drills down to its children (summaries, or the story's period digests) and the source messages
of the summaries under it. Every node shows its chain of values: the memories it replaces and
those that replace it (:func:`recall.cues.updates.chain`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from recall.cues.updates import chain
from tiers.core.errors import EpisodeNotFound, NotFound, TierError
from tiers.core.records import Episode, Scope, StoredMessage
from tiers.core.tokens import count_tokens
from tiers.journal.store import Journal
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint, PointFilter, Source, VectorStore
from tiers.working.memory import WorkingMemory
from tiers.working.session import LiveSession


class NodeNotFound(TierError, NotFound):
    """No memory with this id (in this scope)."""


@dataclass(frozen=True, slots=True)
class NodeView:
    point: MemoryPoint
    episode: Episode | None
    messages: list[StoredMessage]
    journal_expired: bool
    children: list[MemoryPoint] = field(default_factory=list)  # a digest's or a thread's
    # Its chain of values (recall.cues.updates.chain): what it replaces, newest first, and
    # what replaces it, oldest first.
    replaces: list[MemoryPoint] = field(default_factory=list)
    replaced_by: list[MemoryPoint] = field(default_factory=list)


MAX_CITED = 200  # source messages of a digest or a thread at most (its newest)


def get_node(
    semantic: SemanticStore,
    journal: Journal,
    node_id: str,
    scope: Scope,
    working: WorkingMemory | None = None,
    *,
    depth: int = 10,
    similarity: float = 0.5,
) -> NodeView:
    """The node ``node_id`` of ``scope``; its chain of values compares it with its ``depth``
    nearest statements at ``similarity`` (the recipe's ``updates_depth`` and
    ``updates_similarity``). Raises NodeNotFound."""
    _embedder, vectors = semantic.wait_ready(0)
    found = vectors.get([node_id], scope.user_id) or semantic.pending.get([node_id], scope.user_id)
    if not found:
        raise NodeNotFound(f"memory {node_id!r} not found")
    point = found[0]
    if scope.user_id and (
        point.scope.user_id != scope.user_id
        or (scope.agent_id and point.scope.agent_id != scope.agent_id)
    ):
        raise NodeNotFound(f"memory {node_id!r} not found")
    if point.kind == "document":
        return NodeView(point, None, [], False)
    if point.kind in ("digest", "thread"):
        return _overview(journal, vectors, point)
    older, newer = chain(point, vectors, depth=depth, similarity=similarity)
    if len({s.session_id for s in point.sources}) > 1:
        view = NodeView(point, None, [_message(s) for s in point.sources if s.text], False)
    else:
        view = _episode(journal, vectors, point, working)
    return replace(view, replaces=older, replaced_by=newer)


def _episode(
    journal: Journal,
    vectors: VectorStore,
    point: MemoryPoint,
    working: WorkingMemory | None = None,
) -> NodeView:
    """A memory of one episode: the episode and its source messages."""
    seqs = sorted({s.seq for s in point.sources})
    try:
        episode = journal.get(point.episode_id)
    except EpisodeNotFound:
        live = _live(working, point, seqs) if working is not None and seqs else None
        if live is not None:  # its session has not ended: no episode yet, nothing expired
            return NodeView(point, None, live, False)
        return NodeView(point, None, _from_tier3(vectors, point, seqs), True)
    messages = (
        [
            m
            for m in journal.messages(point.episode_id, after_seq=seqs[0] - 1, limit=len(seqs) * 50)
            if m.seq in set(seqs)
        ]
        if seqs
        else []
    )
    return NodeView(point, episode, messages, False)


def _overview(journal: Journal, vectors: VectorStore, point: MemoryPoint) -> NodeView:
    """A digest or a thread: its children, and the source messages of the summaries under
    it (the newest :data:`MAX_CITED`), oldest first."""
    user = point.scope.user_id
    children = vectors.get([str(i) for i in point.attrs.get("children") or []], user)
    summaries = [c for c in children if c.kind == "summary"]
    below = [str(i) for c in children if c.kind == "digest" for i in c.attrs.get("children") or []]
    if below:  # the story: its periods' summaries
        summaries += [c for c in vectors.get(below, user) if c.kind == "summary"]
    messages: list[StoredMessage] = []
    expired = False
    for summary in reversed(summaries):
        if len(messages) >= MAX_CITED:
            break
        view = _episode(journal, vectors, summary)
        expired = expired or view.journal_expired
        messages[:0] = view.messages[-(MAX_CITED - len(messages)) :]
    return NodeView(point, None, messages, expired, children)


def _live(
    working: WorkingMemory, point: MemoryPoint, seqs: list[int]
) -> list[StoredMessage] | None:
    """The source messages of a live session's point, from its session's log; None once
    that generation of the session is not live."""
    session = LiveSession(point.scope, point.sources[0].session_id, point.episode_id)
    wanted = set(seqs)
    messages = working.live(session, seqs[0] - 1, seqs[-1] - seqs[0] + 1)
    return None if messages is None else [m for m in messages if m.seq in wanted]


def _from_tier3(vectors: VectorStore, point: MemoryPoint, seqs: list[int]) -> list[StoredMessage]:
    wanted = set(seqs)
    found: dict[int, StoredMessage] = {}
    chunks = (
        [point]
        if point.kind == "episode_chunk"
        else vectors.scroll(
            PointFilter(
                user_id=point.scope.user_id,
                agent_id=point.scope.agent_id,
                kinds=("episode_chunk",),
                episode_ids=(point.episode_id,),
            ),
            limit=10_000,
        )
    )
    for chunk in chunks:
        for s in chunk.sources:
            if s.seq in wanted and s.seq not in found and s.text:
                found[s.seq] = _message(s)
    return [found[s] for s in seqs if s in found]


def _message(s: Source) -> StoredMessage:
    return StoredMessage(
        seq=s.seq,
        role=s.role or "user",
        content=s.text,
        created_at_us=s.created_at_us,
        received_at_us=s.created_at_us,
        tokens=count_tokens(s.text),
        name=s.speaker,
        message_id=s.message_id,
        metadata=s.metadata,
    )
