"""Stage 1, index: an ended episode's turns become ``episode_chunk`` points (and, with
``weaver.index_turns``, one ``episode_turn`` point per turn) within seconds.

No LLM: windows of consecutive turns (with overlap), and the turns alone, are embedded in one
batch across the episodes at hand and upserted with full provenance. A chunk gives a turn its
neighbours' context; a turn point lets a hit cite exactly the turn that matched. Point ids
are deterministic, so indexing an episode again (after a crash) overwrites the same points.
An episode's ``unindexed`` mark is removed only once its points are durable.

Keyed documents (:mod:`tiers.keyed.documents`) are indexed here too (:class:`DocumentIndexer`): one
``document`` point per document put since it was last indexed, its id derived from its key,
written only if the record is still what was embedded (a document replaced meanwhile keeps
its mark and is indexed again; one deleted meanwhile is not written back).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from tiers.core.errors import EpisodeNotFound
from tiers.core.records import Scope
from tiers.journal.store import Journal
from tiers.keyed.document import Document
from tiers.keyed.documents import DocumentStore
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint, PointFilter
from tiers.working.progress import LiveProgress, Progress
from tiers.working.session import LiveSession
from weaver.episodes import chunk_text, episode_point, latest, load_episode, sources, windows
from weaver.extractors import EpisodeInput, Turn
from weaver.settings import WeaverSettings
from weaver.turn_text import ToolText

log = logging.getLogger("strata.weaver")
# Documents per index job (one embedding batch), as MAX_INDEX_BATCH is for episodes.
MAX_DOCUMENT_BATCH = 64


@dataclass(frozen=True, slots=True)
class IndexResult:
    episodes: int
    points: int  # chunks and turns
    missing: list[str]  # episodes gone from the journal before they were indexed


@dataclass(eq=False)
class Indexer:
    """``progress``: the live index stage's marks (:mod:`weaver.live`): an episode whose
    session was indexed while it lived embeds only what its mark does not cover."""

    journal: Journal
    semantic: SemanticStore
    settings: WeaverSettings
    progress: LiveProgress | None = None
    # How tool calls and results read in the turns; the consolidator and a rebuild get
    # the same (app.py), so every point cites the same text for a message.
    tool_text: ToolText = field(init=False)

    def __post_init__(self) -> None:
        s = self.settings
        self.tool_text = ToolText(s.tool_call_max_tokens, s.tool_result_max_tokens)

    def index(self, episode_ids: list[str], stopping: threading.Event | None = None) -> IndexResult:
        """Index these episodes (one embedding batch). Raises when Tier 3 is unavailable, and
        Stopped when ``stopping`` is set before the batch is all embedded (nothing written:
        the episodes stay unindexed)."""
        self.semantic.wait_ready(timeout=None)  # unavailable: raise before reading anything
        points: list[MemoryPoint] = []
        done: list[str] = []
        missing: list[str] = []
        for eid in episode_ids:
            try:
                episode = load_episode(self.journal, eid, self.tool_text)
            except EpisodeNotFound:
                missing.append(eid)
                continue
            points += self.episode_points(episode, self._live(eid))
            done.append(eid)
        points = self.embed(points, stopping)  # outside the lock: the write adds keyword vectors
        with self.semantic.write_lock:  # points and marks together, for a backup
            points = self.semantic.write(points)  # never writes forgotten ones
            written = Counter(p.episode_id for p in points)
            for eid in done:
                self.journal.mark_indexed(eid, written[eid])
            for eid in missing:
                self.journal.mark_indexed(eid, expired=True)
            if self.progress is not None:  # after the marks: a crash between re-embeds
                self.progress.delete(done + missing)
        for eid in missing:
            log.warning(
                "weaver.index_missing",
                extra={"fields": {"episode_id": eid, "detail": "expired before indexing"}},
            )
        return IndexResult(len(done), len(points), missing)

    def _live(self, episode_id: str) -> Progress | None:
        return None if self.progress is None else self.progress.get(episode_id)

    def ended(self, session: LiveSession) -> bool:
        """Whether the live session ``session`` ended with an episode (in the journal)."""
        return self.journal.find(session.episode_id) is not None

    def episode_points(
        self, episode: EpisodeInput, live: Progress | None = None
    ) -> list[MemoryPoint]:
        """The chunk and turn points of the ended ``episode``; past ``live`` (the live
        stage's mark), only what the live stage did not index: its later turns and windows."""
        s = self.settings
        items = episode.turns
        first = 0 if live is None else first_at(items, live.chunk_from)
        covered = 0 if live is None else first_at(items, live.covered_from) - first
        made = windows(
            items[first:], s.chunk_turns, s.chunk_overlap, s.chunk_max_tokens, covered=covered
        )
        through = 0 if live is None else live.turns_through
        singles = [[t] for t in items if t.seq > through] if s.index_turns else []
        return [self.point(episode, "episode_chunk", w) for w in made.windows] + [
            self.point(episode, "episode_turn", w) for w in singles
        ]

    def point(self, episode: EpisodeInput, kind: str, window: list[Turn]) -> MemoryPoint:
        """The ``kind`` point (a chunk or a turn) of these turns of ``episode``."""
        text = chunk_text(window)
        seqs = [t.seq for t in window]
        srcs = sources(episode, seqs, with_text=True)
        return episode_point(episode, kind, text, srcs, latest(episode, seqs), "index")

    def embed(
        self, points: list[MemoryPoint], stopping: threading.Event | None = None
    ) -> list[MemoryPoint]:
        """The points with their dense vectors (:meth:`SemanticStore.embed`: no lock held;
        a set ``stopping`` raises Stopped between two of its calls).
        With ``weaver.chunk_vectors = "derived"`` (and turns indexed) only the turns are
        embedded, and a chunk's vector is the normalised mean of its turns' vectors: each
        text is embedded once. A chunk whose turns are not all among the points is embedded
        as usual."""
        s = self.settings
        if not (s.index_turns and s.chunk_vectors == "derived"):
            return self.semantic.embed(points, stopping)
        bare = [p for p in points if p.kind == "episode_turn"]
        turns = iter(self.semantic.embed(bare, stopping))
        points = [next(turns) if p.kind == "episode_turn" else p for p in points]
        vectors = {
            (p.episode_id, p.sources[0].seq): p.dense for p in points if p.kind == "episode_turn"
        }
        out: list[MemoryPoint] = []
        for point in points:
            if point.kind == "episode_chunk":
                rows = [vectors.get((point.episode_id, src.seq)) for src in point.sources]
                if rows and None not in rows:
                    mean = np.mean(np.asarray(rows, dtype=np.float32), axis=0)
                    norm = float(np.linalg.norm(mean))
                    point = replace(point, dense=(mean / norm if norm > 0 else mean).tolist())
            out.append(point)
        return self.semantic.embed(out, stopping)  # anything still without a vector


def first_at(items: list[Turn], seq: int) -> int:
    """The index of the first of ``items`` whose seq is at least ``seq`` (len: none is)."""
    return next((i for i, t in enumerate(items) if t.seq >= seq), len(items))


@dataclass(frozen=True, slots=True)
class DocumentIndexResult:
    documents: int
    points: int
    more: bool  # documents are still waiting (beyond this batch)


class DocumentIndexer:
    def __init__(self, documents: DocumentStore, semantic: SemanticStore) -> None:
        self.documents = documents
        self._semantic = semantic

    def index(
        self, limit: int = MAX_DOCUMENT_BATCH, stopping: threading.Event | None = None
    ) -> DocumentIndexResult:
        """Index up to ``limit`` documents marked unindexed. Raises when Tier 3 is
        unavailable, and Stopped when ``stopping`` is set before they are all embedded (the
        marks stay either way)."""
        pending = self.documents.unindexed(limit + 1)
        more = len(pending) > limit
        pending = pending[:limit]
        return DocumentIndexResult(len(pending), self.write(pending, stopping), more)

    def reindex(self, user_id: str = "") -> int:
        """Write the points of every document (one user's, or all): a rebuild. Returns the
        points written."""
        docs = self.documents.of_scope(Scope(user_id)) if user_id else self.documents.all()
        batch: list[Document] = []
        points = 0
        for doc in docs:
            batch.append(doc)
            if len(batch) >= MAX_DOCUMENT_BATCH:
                points += self.write(batch)
                batch = []
        return points + self.write(batch)

    def write(self, docs: list[Document], stopping: threading.Event | None = None) -> int:
        """Embed ``docs`` and write the points of those still stored as they are, then clear
        their marks. Returns the points written."""
        if not docs:
            return 0
        bare = [d.point() for d in docs if d.recalled]
        points = self._semantic.embed(bare, stopping)  # outside the lock
        by_id = {p.id: p for p in points}
        with self._semantic.write_lock:  # no Forget between the check and the write
            current = self.documents.current(docs)
            written = self._semantic.write([by_id[d.id] for d in current if d.recalled])
            # A document put again without text is no longer recalled: its point goes.
            silent = [d for d in current if not d.recalled]
            if silent:
                ids = tuple(d.id for d in silent)
                self._semantic.delete(PointFilter(ids=ids), {d.scope.user_id for d in silent})
            self.documents.mark_indexed(current)
        return len(written)
