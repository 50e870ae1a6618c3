"""Rebuild: re-derive Tier 3's projections (vector points, graph edges) from the journal and the
stored consolidation records, e.g. after the vector store was lost or damaged.

Where each episode's projections come from:

- *still in the journal*: its chunks are re-indexed from the turns; when it has a stored
  consolidation record, the record's summary, facts and edges are written again from it. The
  extractor (the LLM) is never called: an episode without a record stays pending for the
  weaver.
- *journal entry expired, record kept*: the summary, facts and edges are replayed from the
  record alone (a record keeps the episode's provenance, see :mod:`weaver.consolidate`). Its
  chunk points cannot be re-derived: existing ones are kept as they are.
- records written before records kept provenance, whose journal entry has expired, cannot be
  replayed; they are counted (``skipped``) and logged by a rebuild of every user (they name
  no owner: a user's rebuild finds its records by their owners' entries,
  :func:`tiers.journal.consolidation.extractions_of`, and reads no other user's).
- keyed documents (:mod:`tiers.keyed.documents`): their points are written again from their records
  (same ids, the records' texts), after the episodes'.

Strategy: *delete, then re-derive*. The projections of every episode about to be re-derived
are deleted first (its points by episode id, chunks only when the journal still has the turns;
its graph edges), then written again with the same deterministic ids, oldest episode first so
that supersession closes the same facts as the weaver did. Projections of episodes that cannot
be re-derived are left alone. Forgotten episodes and memories (:mod:`tiers.semantic.tombstones`) are
never re-derived: episodes are skipped here, memories by the indexer and the consolidator.

The rebuild runs on the weaver's worker thread (never during a consolidation run) and holds
``SemanticStore.write_lock`` throughout, so a backup or a forget waits for it. Recall for the
users concerned returns partial results until it ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

from tiers.core.errors import EpisodeNotFound
from tiers.core.records import Episode
from tiers.journal.consolidation import EXTRACTIONS_CF, extractions_of
from tiers.journal.store import Journal
from tiers.rocks import RocksStore
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import PointFilter
from weaver.consolidate import Consolidator, decode_record
from weaver.episodes import load_episode
from weaver.errors import RewriteFailed
from weaver.extractors import EpisodeInput, Extraction
from weaver.index import DocumentIndexer, Indexer
from weaver.run import rewrites_failed

log = logging.getLogger("strata.weaver")
BATCH = 64  # episodes per index call (one embedding batch)
DELETE_BATCH = 512  # episode ids per vector delete
READ_BATCH = 1000  # a user's stored records read in one multi-get


@dataclass(slots=True)
class RebuildReport:
    episodes: int = 0  # re-derived from the journal
    records_replayed: int = 0  # re-derived from the record alone
    vector_points: int = 0
    graph_edges: int = 0
    skipped: int = 0  # expired records without provenance
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Rebuilder:
    journal: Journal
    state: RocksStore
    semantic: SemanticStore
    indexer: Indexer
    consolidator: Consolidator
    documents: DocumentIndexer | None = None

    def rebuild(self, user_id: str = "") -> RebuildReport:
        """Rebuild one user's projections (every user's with ``user_id`` empty)."""
        began = time.monotonic()
        report = RebuildReport()
        semantic = self.semantic
        semantic.wait_ready(timeout=None)
        with semantic.write_lock:
            live = self._live_episodes(user_id)
            live_ids = {e.episode_id for e in live}
            replay = self._expired_records(user_id, live_ids, report)

            users = {e.scope.user_id for e in live} | {ep.scope.user_id for _x, ep in replay}
            for batch in _batches(sorted(live_ids), DELETE_BATCH):
                semantic.delete(PointFilter(user_id=user_id, episode_ids=tuple(batch)), users)
            replay_ids = [episode.episode_id for _extraction, episode in replay]
            for batch in _batches(replay_ids, DELETE_BATCH):
                summaries = PointFilter(
                    user_id=user_id, kinds=("summary", "fact"), episode_ids=tuple(batch)
                )
                semantic.delete(summaries, users)
            semantic.remove_episode_edges(live_ids | set(replay_ids), user_id)

            ordered = [e.episode_id for e in live]
            for batch in _batches(ordered, BATCH):
                report.vector_points += self.indexer.index(batch).points
            for extraction, episode in replay:  # older than every live episode
                self._project(episode, extraction, report)
                report.records_replayed += 1
            for eid in ordered:
                report.episodes += 1
                raw = self.state.get(EXTRACTIONS_CF, eid.encode())
                if raw is None:
                    continue  # not consolidated yet: the weaver will
                try:
                    episode = load_episode(self.journal, eid, self.consolidator.tool_text)
                except EpisodeNotFound:
                    continue  # expired during the rebuild
                self.consolidator.store_provenance(episode)
                self._project(episode, decode_record(raw)[0], report)
            report.vector_points += self.consolidator.refresh_profiles()
            report.vector_points += self.consolidator.digests.refresh(abstract=False)
            if self.documents is not None:
                report.vector_points += self.documents.reindex(user_id)
        report.seconds = round(time.monotonic() - began, 3)
        log.info(
            "weaver.rebuilt",
            extra={
                "fields": {
                    "user_id": user_id or "*",
                    "episodes": report.episodes,
                    "records_replayed": report.records_replayed,
                    "vector_points": report.vector_points,
                    "graph_edges": report.graph_edges,
                    "skipped": report.skipped,
                    "seconds": report.seconds,
                }
            },
        )
        count, said = rewrites_failed(
            self.consolidator.profiles_failed, self.consolidator.digests.failed
        )
        if count:  # every other scope is rebuilt; these stay marked for the next run
            raise RewriteFailed(f"rebuilt, but {said}; left to the next run")
        return report

    def _project(
        self, episode: EpisodeInput, extraction: Extraction, report: RebuildReport
    ) -> None:
        outcome = self.consolidator.project(episode, extraction)
        report.vector_points += outcome.summaries + outcome.facts
        report.graph_edges += outcome.triplets

    def _live_episodes(self, user_id: str) -> list[Episode]:
        """The journal's episodes (not expired, not forgotten), oldest flush first."""
        out: list[Episode] = []
        token = ""
        while True:
            page = self.journal.list(user_id=user_id, page_size=1000, page_token=token)
            out += [e for e in page.episodes if not self.semantic.tombstones.episode(e.episode_id)]
            token = page.next_page_token
            if not token:
                break
        out.sort(key=lambda e: (e.flushed_at_us, e.episode_id))
        return out

    def _expired_records(
        self, user_id: str, live_ids: set[str], report: RebuildReport
    ) -> list[tuple[Extraction, EpisodeInput]]:
        """Records whose episode is gone from the journal, oldest episode first."""
        out: list[tuple[Extraction, EpisodeInput]] = []
        for eid, raw in self._stored(user_id):
            if eid in live_ids or self.semantic.tombstones.episode(eid):
                continue
            extraction, episode = decode_record(raw)
            if episode is None:
                report.skipped += 1
                log.warning(
                    "weaver.rebuild_skipped",
                    extra={
                        "fields": {
                            "episode_id": eid,
                            "detail": "journal entry expired and the record has no provenance",
                        }
                    },
                )
                continue
            if user_id and episode.scope.user_id != user_id:
                continue
            out.append((extraction, episode))
        out.sort(key=lambda item: (_last_time(item[1]), item[1].episode_id))
        return out

    def _stored(self, user_id: str) -> Iterator[tuple[str, bytes]]:
        """The stored records a rebuild reads, by episode id: every one for the whole store;
        for a user, those its owners' entries name (no other user's record is read; a record
        without provenance names no owner, so only the whole store's rebuild counts it)."""
        if not user_id:
            for key, raw in self.state.scan(EXTRACTIONS_CF, b""):
                yield key.decode(), raw
            return
        ids = sorted(eid for eid, _owner in extractions_of(self.state, user_id))
        for i in range(0, len(ids), READ_BATCH):
            batch = ids[i : i + READ_BATCH]
            raws = self.state.get_many(EXTRACTIONS_CF, [eid.encode() for eid in batch])
            yield from ((eid, raw) for eid, raw in zip(batch, raws, strict=True) if raw is not None)


def _last_time(episode: EpisodeInput) -> int:
    return max((t.created_at_us for t in episode.turns), default=0)


def _batches(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
