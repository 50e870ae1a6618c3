"""Stage 2, consolidate: an episode becomes a summary, atomic facts and graph edges.

Per episode, in this order, so that a crash at any point resumes without duplicates:

1. the extraction (from the configured extractor, or the local one when the LLM fails) is
   stored in the state store (``extractions <episode_id>``) before anything reaches Tier 3;
   a resumed run reuses it instead of asking the LLM again, so its output is identical. The
   record also keeps the episode's provenance (scope, session, each turn's seq, speaker,
   time, message id and metadata; not the text), so a rebuild can replay it after the
   journal entry has expired (:func:`decode_record`);
2. the summary and fact points are written (deterministic ids; ``SemanticStore.write``);
3. the graph edges are written, and facts a new fact supersedes are closed (``valid_to`` and
   ``replaced_by``): one of the same subject and functional predicate with another value,
   and one the extractor said it updates (:attr:`Fact.updates`: an extractor that
   ``reads_known`` is shown the scope's current facts nearest to the episode);
4. only then is the episode's ``pending`` mark removed;
5. once per run, the entity profiles of the scopes whose facts changed are rewritten from
   their current facts (:meth:`Consolidator.refresh_profiles`, ``tiers.semantic.profiles``),
   and the digests and story threads of the scopes whose summaries changed from their
   summaries (:mod:`weaver.digests`; with a digest writer, an LLM then rewrites the
   digests that changed, one at a time outside the lock). Those scopes are marked in the
   state store before step 4 (:mod:`tiers.journal.stale`), so that a stop or a crash
   leaves them to the next run.

An episode's summary carries its topics: the topic hints of its messages' metadata
(``attrs["topics"]``) and the weaver's own, from its facts (``attrs["weaver_topics"]``):
``tiers.semantic.threads``.

Steps 2-4 hold ``SemanticStore.write_lock`` (a backup or a rebuild never sees half of them).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from dataclasses import KW_ONLY, InitVar, dataclass, field, replace

from tiers.core.records import Scope, pack, unpack
from tiers.journal.consolidation import EXTRACTIONS_CF, put_extraction
from tiers.journal.stale import StaleScopes
from tiers.journal.store import Journal
from tiers.rocks import RocksStore
from tiers.semantic.digests import DigestWriter
from tiers.semantic.graph import Edge
from tiers.semantic.store import SemanticStore
from tiers.semantic.threads import hints, topics_of_episode
from tiers.semantic.vectors import MemoryPoint, Source
from weaver.categories import categorize
from weaver.digests import Digests
from weaver.episodes import episode_point, latest, load_episode, sources
from weaver.errors import ExtractionDeferred, ExtractionFailed
from weaver.extractors import EpisodeInput, Extraction, Extractor, Fact, Triplet, Turn
from weaver.run import logged
from weaver.supersession import apply_updates, known_facts, supersede
from weaver.turn_text import ToolText

log = logging.getLogger("strata.weaver")


@dataclass(slots=True)
class EpisodeOutcome:
    summaries: int = 0
    facts: int = 0
    triplets: int = 0
    superseded: int = 0
    fallback: bool = False
    llm_calls: int = 0
    forgotten: bool = False  # Forget removed the episode meanwhile: nothing was written


@dataclass(eq=False)
class Consolidator:
    journal: Journal
    state: RocksStore
    semantic: SemanticStore
    extractor: Extractor
    fallback: Extractor
    functional_predicates: set[str]
    _: KW_ONLY
    # wait_for_llm (llm.on_failure = "wait"): an episode the LLM fails stays pending
    # (ExtractionDeferred) unless it is close to expiry; otherwise the fallback does it.
    wait_for_llm: bool = False
    # How tool calls and results read in the turns: the indexer's (Indexer.tool_text).
    tool_text: ToolText = field(default_factory=ToolText)
    digest_writer: InitVar[DigestWriter | None] = None
    # The marks of the scopes left stale (the state store's kind; one on ``state`` if None).
    stale: InitVar[StaleScopes | None] = None
    marks: StaleScopes = field(init=False)
    # The digests and threads of the scopes whose summaries changed (weaver.digests).
    digests: Digests = field(init=False)
    # The scopes whose profiles the last refresh_profiles failed to rewrite, with the error.
    profiles_failed: dict[Scope, Exception] = field(init=False, default_factory=dict)

    def __post_init__(self, digest_writer: DigestWriter | None, stale: StaleScopes | None) -> None:
        self.marks = stale if stale is not None else StaleScopes(self.state)
        self.digests = Digests(self.semantic, digest_writer, self.marks)

    # -- 1. extraction -------------------------------------------------------------------------
    def _extract(
        self, episode: EpisodeInput, outcome: EpisodeOutcome, near_expiry: bool = False
    ) -> Extraction:
        key = episode.episode_id.encode()
        stored = self.state.get(EXTRACTIONS_CF, key)
        if stored is not None:
            return decode_extraction(stored)
        try:
            extraction = self.extractor.extract(self._with_known(episode))
        except ExtractionFailed as exc:
            if self.extractor is self.fallback:
                raise
            if self.wait_for_llm and not near_expiry:
                raise ExtractionDeferred(str(exc)) from exc
            log.warning(
                "weaver.fallback",
                extra={"fields": {"episode_id": episode.episode_id, "error": str(exc)}},
            )
            outcome.fallback = True
            extraction = self.fallback.extract(episode)
        finally:
            stats = getattr(self.extractor, "last_stats", None)  # LLMExtractor's, per thread
            outcome.llm_calls += int(getattr(stats, "attempts", 0) or 0)
        with self.semantic.write_lock:
            if self.semantic.tombstones.episode(episode.episode_id):
                return extraction  # forgotten meanwhile: keep nothing (consolidate skips it)
            batch = self.state.batch()
            put_extraction(batch, episode.episode_id, encode_extraction(extraction, episode))
            self.state.write(batch)
        return extraction

    def _with_known(self, episode: EpisodeInput) -> EpisodeInput:
        """``episode`` with the scope's known facts when the extractor reads them."""
        if not self.extractor.reads_known:
            return episode
        return replace(episode, known=known_facts(self.semantic, episode))

    def store_provenance(self, episode: EpisodeInput) -> None:
        """Add the episode's provenance to its stored record when the record predates it."""
        key = episode.episode_id.encode()
        raw = self.state.get(EXTRACTIONS_CF, key)
        if raw is None or decode_record(raw)[1] is not None:
            return
        batch = self.state.batch()
        put_extraction(
            batch, episode.episode_id, encode_extraction(decode_extraction(raw), episode)
        )
        self.state.write(batch)

    # -- 2-4 -----------------------------------------------------------------------------------
    def consolidate(self, episode_id: str, near_expiry: bool = False) -> EpisodeOutcome:
        """Raises EpisodeNotFound (expired), ExtractionFailed, ExtractionDeferred (the LLM
        failed, the episode stays pending; never when ``near_expiry``), Tier 3 errors."""
        self.semantic.wait_ready(timeout=None)
        tombstones = self.semantic.tombstones
        if tombstones.episode(episode_id):
            return EpisodeOutcome(forgotten=True)
        episode = load_episode(self.journal, episode_id, self.tool_text)
        outcome = EpisodeOutcome()
        extraction = self._extract(episode, outcome, near_expiry)
        with self.semantic.write_lock:
            if tombstones.episode(episode_id):  # forgotten during the extraction
                outcome.forgotten = True
                return outcome
            self.project(episode, extraction, outcome)
            added = {"summaries": outcome.summaries, "facts": outcome.facts}
            added["superseded"] = outcome.superseded
            self.journal.mark_consolidated(episode_id, added)
        return outcome

    def project(
        self, episode: EpisodeInput, extraction: Extraction, outcome: EpisodeOutcome | None = None
    ) -> EpisodeOutcome:
        """Steps 2-3: write an extraction's summary, facts and edges to Tier 3 (idempotent).
        A rebuild calls it with stored records, from the journal or from the record alone."""
        self.semantic.wait_ready(timeout=None)
        outcome = outcome or EpisodeOutcome()
        points: list[MemoryPoint] = []
        if extraction.summary:
            srcs = sources(episode, extraction.summary_source_seqs) or sources(
                episode, [t.seq for t in episode.turns]
            )
            points.append(
                self._point(episode, "summary", extraction.summary, srcs, extraction, None)
            )
        facts: list[tuple[MemoryPoint, Fact]] = []
        for fact in extraction.facts:
            # With the text, as chunks: a profile citing the fact finds its turn points.
            srcs = sources(episode, fact.source_seqs, with_text=True)
            if not srcs:
                continue
            facts.append((self._point(episode, "fact", fact.text, srcs, extraction, fact), fact))
        known = self._as_known([p for p, _f in facts])
        facts = list(zip(known, [f for _p, f in facts], strict=True))
        points += [p for p, _f in facts]
        # Forgotten memories are never written again (the door's tombstone check).
        points = self.semantic.write(points)
        kept = {p.id for p in points}
        facts = [(p, f) for p, f in facts if p.id in kept]
        outcome.summaries = sum(p.kind == "summary" for p in points)
        outcome.facts = len(facts)

        edges = [_edge(point, fact.triplet) for point, fact in facts if fact.triplet is not None]
        edges = self.semantic.write_edges(edges)
        outcome.triplets = len(edges)
        superseded = supersede(self.semantic, edges, self.functional_predicates)
        outcome.superseded = superseded + apply_updates(self.semantic, facts)
        # Marked before the episode's pending mark goes (consolidate): a crash until then
        # consolidates the episode again, and marks its scope then.
        if facts or outcome.superseded:
            self.marks.mark("profiles", [episode.scope])
        if outcome.summaries:
            self.digests.add(episode.scope)
        return outcome

    def _as_known(self, points: list[MemoryPoint]) -> list[MemoryPoint]:
        """Facts written again (a resumed run, from the stored extraction) keep the end of
        validity, and what replaced them, that they have: a fact superseded since is never
        current again, not even between its write and the supersession step after it. A
        rebuild removes the points and edges first, so it derives validity afresh. One read
        of the vector store for them all."""
        if not points:
            return points
        _embedder, vectors = self.semantic.wait_ready(timeout=None)
        stored = {p.id: p for p in vectors.get([p.id for p in points], points[0].scope.user_id)}
        out = []
        for point in points:
            old = stored.get(point.id)
            known = self.semantic.graph.get(point.id)
            if old is not None and old.valid_to_us is not None:
                point = replace(point, valid_to_us=old.valid_to_us, replaced_by=old.replaced_by)
            elif known is not None and known.valid_to_us is not None:
                point = replace(point, valid_to_us=known.valid_to_us)
            out.append(point)
        return out

    def refresh_profiles(self, stopping: threading.Event | None = None) -> int:
        """Step 5: rewrite the entity profiles of every scope whose facts changed since they
        were last written, as marked in the state store (:mod:`tiers.journal.stale`:
        ``tiers.semantic.profiles``); returns how many profiles were written. Called once per
        run (and per rebuild) rather than per episode: a profile is rewritten, and embedded,
        once for all the episodes of a run; Forget rewrites them at once, and takes the
        scope's mark. A set ``stopping`` (the daemon stops) ends it between two scopes: the
        scopes left stay marked, as after a crash, so the next run rewrites them, after a
        restart too. A scope whose rewrite raises stays so too, and the others go on
        (:attr:`profiles_failed`, :meth:`tiers.journal.stale.StaleScopes.rewrite`)."""

        def rewrite(scope: Scope) -> int:
            return self.semantic.refresh_profiles(scope)[0]

        with self.semantic.write_lock:
            done = self.marks.rewrite("profiles", self.marks.marked("profiles"), rewrite, stopping)
        self.profiles_failed = logged("profiles", done)
        return done.written

    def _point(
        self,
        episode: EpisodeInput,
        kind: str,
        text: str,
        srcs: list[Source],
        extraction: Extraction,
        fact: Fact | None,
    ) -> MemoryPoint:
        created = latest(episode, [s.seq for s in srcs])
        attrs: dict[str, object] = {}
        valid_from = None
        if kind == "summary":
            topics = hints(t.metadata for t in episode.turns)
            if topics:
                attrs["topics"] = topics
            own = [(f.text, f.triplet.predicate if f.triplet else "") for f in extraction.facts]
            if weaver_topics := topics_of_episode(own):
                attrs["weaver_topics"] = weaver_topics
        if fact is not None:
            valid_from = fact.valid_from_us if fact.valid_from_us is not None else created
            attrs["confidence"] = fact.confidence
            category = categorize(text)
            if category:
                attrs["category"] = category
            if fact.triplet is not None:
                attrs.update(
                    subject=fact.triplet.subject,
                    predicate=fact.triplet.predicate,
                    object=fact.triplet.object,
                )
        return episode_point(
            episode,
            kind,
            text,
            srcs,
            created,
            extraction.extractor,
            valid_from_us=valid_from,
            attrs=attrs,
        )


def _edge(point: MemoryPoint, triplet: Triplet) -> Edge:
    return Edge(
        id=point.id,
        scope=point.scope,
        subject=triplet.subject,
        predicate=triplet.predicate,
        object=triplet.object,
        fact_text=point.text,
        episode_id=point.episode_id,
        sources=point.sources,
        created_at_us=point.created_at_us,
        valid_from_us=point.valid_from_us or point.created_at_us,
        valid_to_us=point.valid_to_us,
        confidence=float(point.attrs.get("confidence", 1.0)),
        extractor=point.extractor,
    )


def encode_extraction(extraction: Extraction, episode: EpisodeInput | None = None) -> bytes:
    """The stored record: the extraction, plus the episode's provenance when given."""
    doc: dict[str, object] = {}
    if episode is not None:
        doc["ep"] = {
            "e": episode.episode_id,
            "s": episode.session_id,
            "u": episode.scope.user_id,
            "a": episode.scope.agent_id,
            "t": [
                [t.seq, t.speaker, t.role, t.created_at_us, t.message_id, t.metadata]
                for t in episode.turns
            ],
        }
    return pack(
        doc
        | {
            "x": extraction.extractor,
            "s": extraction.summary,
            "ss": extraction.summary_source_seqs,
            "f": [
                [
                    f.text,
                    f.source_seqs,
                    [f.triplet.subject, f.triplet.predicate, f.triplet.object]
                    if f.triplet
                    else None,
                    f.valid_from_us,
                    f.confidence,
                    f.updates,
                ]
                for f in extraction.facts
            ],
        }
    )


def redact_record(raw: bytes, forgotten: Collection[MemoryPoint]) -> bytes:
    """A stored record without the summary and facts that ``forgotten`` (points of its
    episode, being forgotten by id) were made from: Forget's hook, so no stored record keeps
    a forgotten memory's text. The rest of the record stays, so a rebuild derives the rest."""
    summaries = {p.text for p in forgotten if p.kind == "summary"}
    facts = {p.text for p in forgotten if p.kind == "fact"}
    doc = unpack(raw)
    if doc.get("s") in summaries:
        doc["s"], doc["ss"] = "", []
    doc["f"] = [f for f in doc["f"] if f[0] not in facts]
    return pack(doc)


def decode_record(raw: bytes) -> tuple[Extraction, EpisodeInput | None]:
    """A stored record: the extraction and, when recorded, the episode's provenance (turns
    without their text: enough to rebuild the extraction's points and edges exactly)."""
    ep = unpack(raw).get("ep")
    if ep is None:
        return decode_extraction(raw), None
    turns = [
        Turn(seq, speaker, role, "", created_at, message_id, dict(metadata))
        for seq, speaker, role, created_at, message_id, metadata in ep["t"]
    ]
    return decode_extraction(raw), EpisodeInput(ep["e"], ep["s"], Scope(ep["u"], ep["a"]), turns)


def decode_extraction(raw: bytes) -> Extraction:
    d = unpack(raw)
    return Extraction(
        summary=d["s"],
        summary_source_seqs=list(d["ss"]),
        facts=[
            # A record stored before Fact.updates has five fields.
            Fact(text, list(seqs), Triplet(*t) if t else None, valid_from, confidence, list(*up))
            for text, seqs, t, valid_from, confidence, *up in d["f"]
        ],
        extractor=d["x"],
    )
