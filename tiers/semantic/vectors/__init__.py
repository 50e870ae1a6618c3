"""Tier 3 vector store: the seam and the records it stores.

Every *memory point* has a dense vector (``dense``, from the embedding model) and a sparse
BM25 vector (``sparse``, weighed by IDF at query time, so the keyword channel lives in the
same engine), plus a payload (:meth:`MemoryPoint.payload`). Two implementations share the
collection layout and payload schema (and a third runs one of them elsewhere):

- :class:`tiers.semantic.vectors.shards.store.ShardedVectorStore`: the embedded Qdrant engine
  (``qdrant-edge-py``) in shards, the default: one
  :class:`tiers.semantic.vectors.edge.store.EdgeVectorStore` per shard, a user's points in one
  of them (:func:`shard_of`);
- :class:`tiers.semantic.vectors.child.ChildVectorStore`: the same sharded store in a child
  process of its own (``vectors.process``), the seam's calls forwarded over a local socket;
- :class:`tiers.semantic.vectors.qdrant.store.QdrantVectorStore`: ``qdrant-client``, against a
  Qdrant server or cluster by URL (or ``:memory:`` in tests), with Qdrant's own shard keys.

``tests/contracts/test_vector_store.py`` runs one contract suite against each (and against one
``EdgeVectorStore`` alone).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from tiers.core.errors import (  # noqa: F401 (the seam's errors, exported from here too)
    IndexBuildCancelled,
    VectorStoreInterrupted,
    VectorStoreMismatch,
    VectorStoreUnavailable,
)
from tiers.core.records import Scope

# The one list of the kinds of memory: the client's (stratad_client/kinds.py) is written from it
# by `python -m daemon.dev.protogen`.
Kind = Literal[
    "episode_chunk",
    "episode_turn",
    "summary",
    "fact",
    "profile",
    "document",
    "digest",
    "thread",
]
KINDS: tuple[str, ...] = get_args(Kind)
DENSE = "dense"
SPARSE = "sparse"
COLLECTION = "strata_memory"
MAX_SHARDS = 256  # shards of a store at most (the embedded store's shard-NNN directories)
# Shards of this many bytes on disk or more are opened at the start: about 50,000 points, whose
# load would cost a first Recall 100 ms or more (:mod:`tiers.semantic.vectors.shards.members`)
OPEN_FIRST = 128 << 20


@dataclass(frozen=True, slots=True)
class Source:
    """One source message of a memory: where it came from, with the client's metadata."""

    session_id: str
    seq: int
    message_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    speaker: str = ""
    created_at_us: int = 0  # the message's event time
    # The message's content, kept on chunk, turn and fact points so that drilling down to the
    # exact source messages works after the journal entry has expired, and a profile citing
    # a fact finds the turn points of its messages (empty on summaries).
    text: str = ""
    role: str = ""  # on chunk points, with the text


@dataclass(frozen=True, slots=True)
class SparseVector:
    indices: list[int]
    values: list[float]


@dataclass(frozen=True, slots=True)
class MemoryPoint:
    """A memory in Tier 3: an episode chunk or turn, an episode summary, an atomic fact, an
    entity profile (tiers.semantic.profiles), a keyed document (tiers.keyed.documents), a
    digest (tiers.semantic.digests) or a story thread (tiers.semantic.threads)."""

    id: str  # a UUID string; see point_id()
    kind: str  # one of KINDS
    text: str
    scope: Scope
    episode_id: str
    session_id: str
    sources: list[Source]
    created_at_us: int  # event time (of the newest source message)
    extractor: str  # "index", "local", "llm:<model>"
    valid_from_us: int | None = None  # facts: when it became true
    valid_to_us: int | None = None  # facts: when a newer fact superseded it
    attrs: dict[str, Any] = field(default_factory=dict)  # e.g. subject/predicate/object
    dense: list[float] | None = None
    sparse: SparseVector | None = None
    replaced_by: str | None = None  # facts: the id of the newer fact that superseded it

    def payload(self) -> dict[str, Any]:
        """The payload schema, identical in every implementation."""
        return {
            "kind": self.kind,
            "text": self.text,
            "user_id": self.scope.user_id,
            "agent_id": self.scope.agent_id,
            "episode_id": self.episode_id,
            "session_id": self.session_id,
            "sources": [
                {
                    "session_id": s.session_id,
                    "seq": s.seq,
                    "message_id": s.message_id,
                    "metadata": s.metadata,
                    "speaker": s.speaker,
                    "created_at": s.created_at_us,
                    "text": s.text,
                    "role": s.role,
                }
                for s in self.sources
            ],
            "created_at": self.created_at_us,
            "valid_from": self.valid_from_us,
            "valid_to": self.valid_to_us,
            "superseded": self.valid_to_us is not None,
            "replaced_by": self.replaced_by,
            "extractor": self.extractor,
            "attrs": self.attrs,
        }

    @classmethod
    def from_payload(cls, point_id: str, payload: dict[str, Any]) -> MemoryPoint:
        return cls(
            id=point_id,
            kind=payload["kind"],
            text=payload["text"],
            scope=Scope(payload["user_id"], payload["agent_id"]),
            episode_id=payload["episode_id"],
            session_id=payload["session_id"],
            sources=[
                Source(
                    s["session_id"],
                    s["seq"],
                    s["message_id"],
                    dict(s["metadata"]),
                    s.get("speaker", ""),
                    s.get("created_at", 0),
                    s.get("text", ""),
                    s.get("role", ""),
                )
                for s in payload["sources"]
            ],
            created_at_us=payload["created_at"],
            extractor=payload["extractor"],
            valid_from_us=payload.get("valid_from"),
            valid_to_us=payload.get("valid_to"),
            attrs=dict(payload.get("attrs") or {}),
            replaced_by=payload.get("replaced_by"),
        )


def canonical_id(point_id: object) -> str | None:
    """The canonical form of a point id (engines may return ``uuid.UUID`` objects), or None
    when it is not a UUID (then no point can have it)."""
    try:
        return str(point_id if isinstance(point_id, uuid.UUID) else uuid.UUID(str(point_id)))
    except ValueError:
        return None


def canonical_ids(ids: Iterable[object]) -> list[str]:
    """The UUIDs among ``ids`` in canonical form (:func:`canonical_id`), once each, in order."""
    return [i for i in dict.fromkeys(map(canonical_id, ids)) if i is not None]


def episodes_of(payloads: Iterable[Mapping[str, Any] | None]) -> set[str]:
    """The non-empty ``episode_id`` fields of these payloads (:meth:`VectorStore.episode_ids`)."""
    return {str(p["episode_id"]) for p in payloads if p and p.get("episode_id")}


def point_id(scope: Scope, kind: str, text: str, sources: Sequence[Source]) -> str:
    """Deterministic id: a hash of scope, kind, content and sources, as a UUID. Writing the
    same memory twice overwrites one point."""
    h = hashlib.sha256()
    for part in (scope.user_id, scope.agent_id, kind, text):
        h.update(part.encode())
        h.update(b"\x00")
    for s in sources:
        h.update(f"{s.session_id}\x00{s.seq}\x00".encode())
    return str(uuid.UUID(bytes=h.digest()[:16]))


def shard_of(user_id: str, shards: int) -> int:
    """The shard (``0 <= shard < shards``) that holds every point of ``user_id``: the first
    8 bytes of the SHA-256 of the id, big-endian, modulo ``shards``. Stable across processes,
    releases and machines (never Python's ``hash()``, which is salted per process), so every
    daemon and every start agrees. Raises ``ValueError`` when ``shards`` < 1."""
    if shards < 1:
        raise ValueError(f"a store has at least one shard, not {shards}")
    digest = hashlib.sha256(user_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


# Kinds whose points stand for themselves in recall, keyed by their own id (source_key): a
# keyed document (its one source names no message), a digest and a story thread (they tell
# what many messages say, and are not any one of them).
STANDALONE = ("document", "digest", "thread")


def source_key(point: MemoryPoint, source: Source) -> tuple[str, int]:
    """The message a source names, as ``(session_id, seq)``; a point of a
    :data:`STANDALONE` kind stands for itself, keyed by its id (NUL first: no session id
    holds a control character)."""
    if point.kind in STANDALONE:
        return ("\x00" + point.id, 0)
    return (source.session_id, source.seq)


def message_line(speaker: str, text: str) -> str:
    """A message as chunk and turn points hold it: ``speaker: text``."""
    return f"{speaker}: {text}"


def turn_point_id(scope: Scope, source: Source) -> str:
    """The id of the ``episode_turn`` point of one message (its source carrying the text, as
    chunk points' sources do), without reading the store."""
    return point_id(scope, "episode_turn", message_line(source.speaker, source.text), [source])


@dataclass(frozen=True, slots=True)
class PointFilter:
    """Which points a read or delete applies to. Empty fields match everything; ``user_id`` is
    required for searches (scope is a hard filter)."""

    user_id: str = ""
    agent_id: str = ""
    kinds: tuple[str, ...] = ()
    episode_ids: tuple[str, ...] = ()
    created_from_us: int | None = None  # inclusive
    created_to_us: int | None = None  # exclusive
    include_superseded: bool = True
    ids: tuple[str, ...] = ()  # point ids (UUID strings)
    exclude_sessions: tuple[str, ...] = ()  # no point of these sessions (payload session_id)
    # (session_id, first, last): no point of that session citing a message with a seq from
    # first to last (a session's window, which GetContext shows as it is).
    exclude_from: tuple[tuple[str, int, int], ...] = ()
    replaced_by: tuple[str, ...] = ()  # only points that one of these ids superseded


@dataclass(frozen=True, slots=True)
class Validity:
    """What :meth:`VectorStore.set_valid_to` writes on facts: when they stopped being true
    (``None``: current again) and the fact that superseded them, if known (kept only if ended)."""

    valid_to_us: int | None = None
    replaced_by: str | None = None

    def payload(self) -> dict[str, Any]:
        ended = self.valid_to_us is not None
        return {
            "valid_to": self.valid_to_us,
            "superseded": ended,
            "replaced_by": self.replaced_by if ended else None,
        }


def admits(flt: PointFilter, point: MemoryPoint) -> bool:
    """Whether ``point`` passes ``flt`` (scope, kinds, time range, superseded)."""
    if point.scope.user_id != flt.user_id:
        return False
    if flt.agent_id and point.scope.agent_id != flt.agent_id:
        return False
    if flt.kinds and point.kind not in flt.kinds:
        return False
    if flt.episode_ids and point.episode_id not in flt.episode_ids:
        return False
    if flt.created_from_us is not None and point.created_at_us < flt.created_from_us:
        return False
    if flt.created_to_us is not None and point.created_at_us >= flt.created_to_us:
        return False
    if flt.exclude_sessions and point.session_id in flt.exclude_sessions:
        return False
    for session_id, first, last in flt.exclude_from:
        if point.session_id == session_id and any(first <= s.seq <= last for s in point.sources):
            return False
    if flt.replaced_by and point.replaced_by not in flt.replaced_by:
        return False
    return flt.include_superseded or point.valid_to_us is None


@dataclass(frozen=True, slots=True)
class Hit:
    point: MemoryPoint  # without vectors
    score: float


@runtime_checkable
class VectorStore(Protocol):
    """The vector store seam.

    Errors: every method may raise :class:`VectorStoreUnavailable` (an ``Unavailable``) when
    the engine or server fails, and every method but :meth:`close` when the store is closed
    or :meth:`ensure` has not been called yet. Besides, :meth:`ensure` raises
    :class:`VectorStoreMismatch` (a ``FailedPrecondition``); :meth:`upsert` raises
    ``ValueError`` for a point without a ``dense`` vector, and the searches for a filter
    without ``user_id``, before anything is read or written; :meth:`optimize` may raise
    :class:`IndexBuildCancelled` (a :class:`VectorStoreUnavailable`); after :meth:`interrupt`,
    any method but :meth:`close` may raise :class:`VectorStoreInterrupted` (one too). Ids that
    are not UUIDs, or name no point, are skipped by the reads and writes that take ids."""

    def ensure(self, model: str, dim: int) -> None:
        """Create the collection (dense ``dim`` cosine + sparse IDF, payload indexes) or check
        an existing one; raise :class:`VectorStoreMismatch` when it was made with another
        ``model`` or ``dim``. Must be called before anything else."""

    def upsert(self, points: Sequence[MemoryPoint]) -> None:
        """Insert or replace points (each with ``dense`` and ``sparse``); durable on return,
        some may be written before a crash (in parts). ``ValueError``: one has no ``dense``."""

    def search_dense(self, vector: Sequence[float], flt: PointFilter, limit: int) -> list[Hit]:
        """Nearest by cosine, best first (ties by id: :mod:`~tiers.semantic.vectors.ranking`),
        only points matching ``flt``. ``ValueError``: ``flt`` has no ``user_id``."""

    def search_sparse(self, vector: SparseVector, flt: PointFilter, limit: int) -> list[Hit]:
        """Best BM25 (sparse dot product, the query's terms weighed by IDF over the store's
        points, every user's: the embedded store counts them itself, a Qdrant server per
        shard) first, ties by id as :meth:`search_dense`'s, only points matching ``flt``.
        ``ValueError``: ``flt`` has no ``user_id``."""

    def weigh(self, vector: SparseVector) -> SparseVector:
        """A keyword query's terms weighed as :meth:`search_sparse` weighs them before its
        dot product (BM25's IDF over the store), for scoring texts that are not stored yet
        on the same scale (:mod:`tiers.semantic.pending`). A store whose engine applies the
        IDF itself (a Qdrant server) returns ``vector`` unchanged."""

    def get(self, ids: Sequence[str], user_id: str = "") -> list[MemoryPoint]:
        """The points that exist among ``ids`` (without vectors), in the order of ``ids``.
        With ``user_id``, only that user's points: the others are skipped as if missing (a
        sharded store then reads the user's shard alone; Recall always knows the user)."""

    def dense(self, ids: Sequence[str], user_id: str = "") -> dict[str, list[float]]:
        """The stored dense vectors of the points that exist among ``ids``, by canonical id
        (the reranker reads them instead of embedding the texts again). With ``user_id``,
        only that user's points, as :meth:`get`."""

    def scroll(self, flt: PointFilter, limit: int = 1000) -> list[MemoryPoint]:
        """Up to ``limit`` points matching ``flt`` (without vectors), in no particular order."""

    def ids(self, flt: PointFilter, limit: int = 1000) -> list[str]:
        """The ids of up to ``limit`` points matching ``flt``, in no particular order: what
        :meth:`scroll` would return, without reading the payloads (a caller that keeps what
        it derived from each point reads only the new ones)."""

    def episode_ids(self, flt: PointFilter, limit: int = 1000) -> set[str]:
        """The episode ids of up to ``limit`` points matching ``flt`` (none empty), reading
        that one payload field: a scope's Forget finds its episodes without decoding every
        point."""

    def set_valid_to(self, ids: Sequence[str], validity: Validity, user_id: str = "") -> None:
        """Mark facts superseded: set ``valid_to`` (and ``superseded``) and ``replaced_by`` in
        their payloads (:meth:`Validity.payload`); a ``valid_to_us`` of ``None`` makes them
        current again (Forget of the fact that superseded them). Ids that do not exist are
        skipped. With ``user_id``, only that user's points change, and a sharded store
        touches that user's shard alone (without, every shard is asked)."""

    def delete(self, flt: PointFilter) -> int:
        """Delete the matching points; returns how many there were."""

    def count(self, flt: PointFilter, *, exact: bool = True) -> int:
        """The matching points' count; with ``exact=False`` the engine's estimate from its
        indexes (or the count), from 0 to ``flt.user_id``'s points: 0.3 ms for 36-45 at 1M."""

    def optimize(self) -> None:
        """Build indexes (HNSW) for fast queries; may take seconds on large stores (a sharded
        store builds the shards written since their last build, one at a time). Raises
        :class:`IndexBuildCancelled` when a purge of what it builds runs meanwhile (a later
        call starts afresh)."""

    def purge(self) -> None:
        """Remove from the store's files every byte of the points deleted so far (Forget's
        guarantee; a sharded store rewrites the shards deleted from since their last purge).
        Reads go on meanwhile; writes may wait. A store that keeps no files under the daemon's
        data directory (a Qdrant server) does nothing."""

    def flush(self) -> None:
        """Make every write durable on disk."""

    def interrupt(self) -> None:
        """The daemon is stopping: work that can wait for the next start stops (an embedded
        store's count of a shard's keyword terms, under way or asked for later, raises
        :class:`VectorStoreInterrupted`; its shards left to open behind stay closed), so that
        no stop waits for it. Everything else goes on until :meth:`close`. Idempotent; a store
        with no such work does nothing."""

    def close(self) -> None:
        """Idempotent."""
