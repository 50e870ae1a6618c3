"""Forget: delete a scope's, some episodes' or some memories' data from every tier.

:meth:`Forgetter.plan` resolves what a request names into episode ids and memory ids, with
their owners (so a caller can check rights before anything is deleted; a scope's episodes are
found by :meth:`Forgetter.run`, under its locks); :meth:`Forgetter.run` deletes, in
this order, holding ``SemanticStore.write_lock`` (no weaver, rebuild or backup step runs
meanwhile), and the working-memory lock from a last look at the scope's open sessions to their
drop only (no session of the scope starts or ends in between, and other users' appends wait for
no more: a large scope's points, edges and tombstones are read and written before it, its
deletes made after it):

1. tombstones for every episode and memory (``tiers.semantic.tombstones``), durable first, so a
   weaver job that read the data before the Forget cannot write it back afterwards;
2. Tier 1: the scope's open sessions (window, durable log, idempotency keys, index marks);
3. Tier 2: the episodes' headers, messages and index entries;
4. consolidation state: ``pending`` and ``unindexed`` marks, stored extractions; and every
   kind of scoped data (``tiers.schema.KINDS``, in its order, each through
   :meth:`tiers.scoped.ScopedKind.forget_into`, holding each kind's lock): keyed documents
   (their records, marks and ids: memories themselves, forgotten with the named ones),
   session anchors (a scope's), pins (a scope's, and those of the forgotten memory ids) and
   access counts (the scope's, and those of the forgotten episodes and memories), all in
   the tombstones' batch;
5. Tier 3: vector points of every kind (by episode, by scope, by id), graph edges (state
   store and in-memory graph) and nodes left without edges; then the owners' entity
   profiles are rebuilt from the facts that remain (``tiers.semantic.profiles``), so no profile
   keeps a forgotten fact's text, and their digests and story threads from the summaries
   that remain (``tiers.semantic.digests``, ``tiers.semantic.threads``), so no digest cites or
   quotes a forgotten episode;
6. caches: the semantic cache and per-scope caches (:class:`ScopeCache`).

A fact that a forgotten fact had superseded (or replaced, as an extractor reported) is made
current again, or closed at the next remaining fact that supersedes it
(:mod:`tiers.rights.forget.validity`).

A whole user's Forget with :data:`~tiers.semantic.erasures.ERASE_LATER_POINTS` vector points or
more hides them instead of deleting them (:mod:`tiers.semantic.erasures`): the purger's thread
deletes them after the Forget returns, tombstoning their episodes as it goes.

Then, without the locks, the deletes are made physical (:mod:`tiers.rights.forget.purge`):
RocksDB's memtables flushed before Forget returns (no log holds them), its files compacted and
the vector store's purged after it, each on a thread of its own (a ``purge`` mark, written with
the tombstones, makes the next start finish them after a crash).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from operator import attrgetter

from tiers.changes.log import Change, ChangeLog
from tiers.core.records import Scope
from tiers.journal.consolidation import (
    CONSOLIDATION_CFS,
    EXTRACTIONS_CF,
    OWNER_CFS,
    delete_extraction,
    delete_mark_owner,
    put_extraction,
)
from tiers.journal.store import JOURNAL_CFS, Journal
from tiers.rights.forget.finder import READY_TIMEOUT, Finder
from tiers.rights.forget.plan import ForgetCounts, ForgetPlan, ForgetTarget, Laps, ScopeCache
from tiers.rights.forget.purge import Purger
from tiers.rights.forget.validity import reopen, restore_superseded
from tiers.rocks import Batch, RocksStore
from tiers.scoped import Covered, Owned, ScopedKind
from tiers.semantic.erasures import ERASE_LATER_POINTS
from tiers.semantic.graph import Edge, rows
from tiers.semantic.graph.nxgraph import GRAPH_CF, GRAPH_CFS
from tiers.semantic.store import SemanticStore
from tiers.semantic.tombstones import Tombstones
from tiers.semantic.vectors import MemoryPoint, PointFilter
from tiers.space import freeing
from tiers.working.memory import WorkingMemory
from tiers.working.progress import LIVE_CF
from tiers.working.session import LOG_CF, MSGIDS_CF

_scope_order = attrgetter("user_id", "agent_id")  # a scope as (user, agent)
log = logging.getLogger("strata.forget")
# The state store's families Forget deletes from, besides the kinds' (compacted by the purge).
STATE_CFS_TOUCHED = (LOG_CF, MSGIDS_CF, LIVE_CF, *CONSOLIDATION_CFS, *OWNER_CFS, *GRAPH_CFS)
JOURNAL_CFS_TOUCHED = JOURNAL_CFS


@dataclass(eq=False)
class Forgetter:
    working: WorkingMemory
    journal: Journal
    journal_store: RocksStore
    state: RocksStore
    semantic: SemanticStore
    caches: Sequence[ScopeCache] = ()
    # Rewrites an episode's stored extraction without what forgotten memories were made
    # from (weaver.consolidate.redact_record): the weaver owns that record's format.
    redact_record: Callable[[bytes, Collection[MemoryPoint]], bytes] | None = None
    kinds: Sequence[ScopedKind] = ()  # tiers.schema.KINDS, opened
    # The change log (one of the kinds, when given): a Forget's batch says it happened.
    _changes: ChangeLog | None = field(init=False, repr=False)
    _kind_cfs: tuple[str, ...] = field(init=False, repr=False)
    _finder: Finder = field(init=False, repr=False)
    # a whole user's, from this many on
    erase_later_points: int = field(init=False, default=ERASE_LATER_POINTS)
    purger: Purger = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.caches = list(self.caches)
        self.kinds = tuple(self.kinds)
        self._changes = next((k for k in self.kinds if isinstance(k, ChangeLog)), None)
        self._kind_cfs = tuple(cf for kind in self.kinds for cf in kind.column_families)
        self._finder = Finder(
            self.working, self.journal, self.journal_store, self.state, self.semantic, self.kinds
        )
        self.purger = Purger(
            self.state,
            self.journal_store,
            self.semantic,
            STATE_CFS_TOUCHED + self._kind_cfs,
            JOURNAL_CFS_TOUCHED,
        )

    @property
    def tombstones(self) -> Tombstones:
        return self.semantic.tombstones

    # -- the two calls of the services --------------------------------------------------------
    def forget(self, target: ForgetTarget, visible: Callable[[Scope], bool]) -> ForgetCounts:
        """Forget ``target``: its plan, without the episodes and memories whose owner is not
        ``visible`` (another tenant's are unknown ids to the caller), run. Raises what
        :meth:`plan` and :meth:`run` raise."""
        plan = self.plan(target)
        plan.keep_only(visible)
        return self.run(plan)

    def delete_document(self, memory_id: str) -> bool:
        """Forget one keyed document by its memory id, when it exists; whether it did."""
        plan = self.plan(ForgetTarget(memory_ids=(memory_id,)))
        return bool(plan.memory_ids) and self.run(plan).documents > 0

    # -- plan ------------------------------------------------------------------------------
    def plan(self, target: ForgetTarget) -> ForgetPlan:
        """What ``target`` covers, and whose it is (:meth:`Finder.plan`)."""
        return self._finder.plan(target)

    # -- run -------------------------------------------------------------------------------
    def run(self, plan: ForgetPlan) -> ForgetCounts:
        """Carry out ``plan`` (a Forget frees space: its writes may use the disk's reserve,
        :mod:`tiers.space`)."""
        with freeing(self.state.space):
            return self._run(plan)

    def _run(self, plan: ForgetPlan) -> ForgetCounts:
        counts, laps = ForgetCounts(), Laps()
        _embedder, vectors = self.semantic.wait_ready(READY_TIMEOUT)
        scope = plan.target.scope
        erasures = self.semantic.erasures
        with self.semantic.write_lock:  # then the working memory's: the backup's order
            # A whole large user's points: hidden now, deleted after (tiers.semantic.erasures).
            whole = PointFilter(user_id=scope.user_id) if scope and not scope.agent_id else None
            erased = vectors.count(whole) if whole is not None else 0
            erased = erased if erased >= self.erase_later_points else 0
            if scope is not None:
                self._finder.stored(scope, plan, points=not erased)
                self._finder.open(scope, plan)  # and once more below, under the working lock
            laps.lap("scope")
            plan.episode_ids.discard("")
            episodes = sorted(plan.episode_ids)
            batch = self.state.batch()
            covered = Covered(
                scope,
                tuple((plan.owner_of[e], e) for e in episodes if e in plan.owner_of),
                tuple((plan.owner_of[m], m) for m in plan.memory_ids if m in plan.owner_of),
            )
            # No put (a document, an access count) between the tombstones and the deletes.
            with ExitStack() as locks:
                for kind in self.kinds:
                    locks.enter_context(kind.lock)
                records: list[Owned] = []  # what the kinds forgot that are memories
                for kind in self.kinds:
                    forgotten = kind.forget_into(batch, covered)
                    counts.kinds[kind.name] = forgotten.count
                    records += forgotten.memories
                    covered = replace(covered, memories=covered.memories + forgotten.memories)
                record_ids = {memory_id for _owner, memory_id in records}
                memories = plan.memory_ids | record_ids
                Tombstones.add(batch, episodes, sorted(memories))
                if erased and scope is not None:
                    erasures.add_into(batch, scope.user_id)
                with self._noted(batch, plan, len(episodes), len(memories), records):
                    mark, earlier = self.purger.write_marked(batch)
                if erased and scope is not None:
                    erasures.hide(scope.user_id)  # from here on, its deletes are the purger's
            laps.lap("tombstones")
            # The edges removed, for the facts they superseded (none left in a scope's Forget).
            removed: list[Edge] | None = [] if scope is None else None
            if scope is not None:
                episodes = self._drop_sessions(scope, plan, episodes, counts)
                laps.lap("sessions")
            self._delete_episodes(episodes, plan, counts)
            laps.lap("journal")
            semantic, graph = self.semantic, self.semantic.graph
            # The facts forgotten, read before their points go: what they replaced is current
            # again (an update the extractor reported; supersession is derived again below).
            # A scope's Forget takes every fact of the scope, and a fact replaces only facts
            # of its own scope: nothing to read then.
            facts = set(plan.memory_ids)
            if episodes and scope is None:
                of_facts = PointFilter(episode_ids=tuple(episodes), kinds=("fact",))
                facts |= set(vectors.ids(of_facts, limit=vectors.count(of_facts)))
            # A scope's episodes are its own: their points and edges are looked for in the
            # user's shard and edges only, after the scope's (most of them go with those).
            user_id = scope.user_id if scope is not None else ""
            if scope is not None:
                deleted = semantic.delete(  # an erased user's: only its staged points now
                    PointFilter(user_id=scope.user_id, agent_id=scope.agent_id), ()
                )
                counts.vector_points += erased or deleted
                laps.lap("points")
                edges, nodes = semantic.remove_edges(scope=scope)  # read as rows, not edges
                counts.graph_edges += edges
                counts.graph_nodes += nodes
                laps.lap("graph")
            if episodes:
                of_episodes = PointFilter(user_id=user_id, episode_ids=tuple(episodes))
                counts.vector_points += semantic.delete(of_episodes, ())
                wanted = set(episodes)
                edge_ids = [
                    e.id for e in graph.edges_where(lambda e: e.episode_id in wanted, user_id)
                ]
                self._remove_edges(edge_ids, counts, removed)
            if plan.memory_ids:
                ids = tuple(sorted(plan.memory_ids))
                counts.consolidation_records += self._redact(vectors.get(list(ids)))
                counts.vector_points += semantic.delete(PointFilter(ids=ids), ())
                self._remove_edges(list(ids), counts, removed)
            laps.lap("points")
            counts.facts_restored = reopen(semantic, facts) + restore_superseded(
                semantic, removed or []
            )
            # A scope's own Forget deleted its profiles with its points; documents are in none.
            if scope is None and (episodes or plan.memory_ids - record_ids):
                for owner in sorted(plan.owners, key=lambda o: (o.user_id, o.agent_id)):
                    written, deleted = self.semantic.refresh_profiles(owner)
                    counts.profiles_rewritten += written
                    counts.vector_points += deleted
                    # Digests and threads again from the summaries left (extractive).
                    points, deleted = self.semantic.refresh_stories(owner)
                    counts.digests_rewritten += len(points)
                    counts.vector_points += deleted
            users = {o.user_id for o in plan.owners if o.user_id}
            for user_id in sorted(users):
                for cache in self.caches:
                    counts.cache_entries += cache.forget_scope(user_id)
        if not earlier and not any(counts.as_dict().values()):
            self.purger.clear(mark)  # nothing was deleted (unknown ids): nothing to rewrite
        else:
            # Keyed records alone (DeleteDocument): only the kinds' column families to compact.
            alone = not (earlier or scope or episodes or plan.memory_ids - record_ids)
            # A scope's edges (60,000 of a 200,000-point user) are one range of their family:
            # only its files are rewritten (unless an earlier Forget's purge is not over).
            ranged = {GRAPH_CF: rows.user_prefix(scope.user_id)} if scope and not earlier else {}
            # The compactions and the vector store's purge after it returns: they grow with
            # the store (tiers.rights.forget.compactions).
            try:
                counts.flush_ms = self.purger.flush_stores()
            finally:
                self.purger.request(mark, self._kind_cfs if alone else (), ranged)
        laps.lap("rest")
        fields = {"users": len(users), **counts.as_dict(), "erased_later": erased, **laps.ms}
        log.info("forget.done", extra={"fields": fields})
        return counts

    def _drop_sessions(
        self, scope: Scope, plan: ForgetPlan, episodes: list[str], counts: ForgetCounts
    ) -> list[str]:
        """Drop the scope's open sessions, holding the working memory's lock from a last look
        at the scope's episodes to the drop, so that no session of the scope starts or ends in
        between: an episode that ``episodes`` (tombstoned already) lacks, of a session that
        started or ended since they were found, is tombstoned first. Appends wait for that
        much alone. Returns every episode of the scope."""
        with self.working.write_lock:
            self._finder.open(scope, plan)
            plan.episode_ids.discard("")
            late = sorted(plan.episode_ids.difference(episodes))
            if late:
                batch = self.state.batch()
                Tombstones.add(batch, late)
                self.state.write(batch)
            dropped = self.working.drop_sessions(scope.user_id, scope.agent_id)
        counts.sessions = len(dropped)
        counts.session_messages = sum(n for _sid, n in dropped)
        return sorted(plan.episode_ids)

    def _noted(
        self, batch: Batch, plan: ForgetPlan, episodes: int, memories: int, records: list[Owned]
    ) -> AbstractContextManager[object]:
        """The Forget's changes staged in ``batch``, for the block that writes it: a
        ``document.deleted`` for each keyed document it deleted (``records``: by its memory
        id alone), and a ``memory.forgotten`` per scope it covers (counts only)."""
        if self._changes is None:
            return nullcontext()
        scope = plan.target.scope
        deleted = records if scope is None else []  # a scope's Forget says it once
        changes = [Change(o, "document.deleted", {"memory_id": m}) for o, m in deleted]
        if scope is not None or len(records) < memories or episodes:
            target = "scope" if scope is not None else "episodes" if episodes else "memories"
            attrs = {"target": target, "episodes": episodes, "memories": memories}
            owners = [scope] if scope is not None else sorted(plan.owners, key=_scope_order)
            changes += [Change(o, "memory.forgotten", attrs) for o in owners if o.user_id]
        return self._changes.staged(batch, changes)

    def _redact(self, points: list[MemoryPoint]) -> int:
        """Rewrite the stored extractions that the forgotten ``points`` were made from."""
        if self.redact_record is None:
            return 0
        by_episode: dict[str, list[MemoryPoint]] = {}
        for p in points:
            if p.episode_id and p.kind in ("fact", "summary"):
                by_episode.setdefault(p.episode_id, []).append(p)
        batch = self.state.batch()
        rewritten = 0
        for eid, forgotten in by_episode.items():
            raw = self.state.get(EXTRACTIONS_CF, eid.encode())
            if raw is not None:
                put_extraction(batch, eid, self.redact_record(raw, forgotten))
                rewritten += 1
        self.state.write(batch)
        return rewritten

    def _remove_edges(
        self, ids: Iterable[str], counts: ForgetCounts, removed: list[Edge] | None
    ) -> None:
        """Delete edges by id, counting them; read first into ``removed`` when given."""
        graph = self.semantic.graph
        wanted = list(ids)
        if removed is not None:
            removed.extend(e for e in map(graph.get, wanted) if e is not None)
        edges, nodes = self.semantic.remove_edges(wanted)
        counts.graph_edges += edges
        counts.graph_nodes += nodes

    def _delete_episodes(self, episodes: list[str], plan: ForgetPlan, counts: ForgetCounts) -> None:
        jbatch = self.journal_store.batch()
        sbatch = self.state.batch()
        headers = []
        for eid in episodes:
            key = eid.encode()
            header = plan.headers.get(eid) or self.journal.find(eid)
            if header is not None:
                counts.episodes += 1
                counts.episode_messages += self.journal.stored_messages(eid)
                self.journal.delete_into(jbatch, header)
                headers.append(header)
            for cf in CONSOLIDATION_CFS:
                raw = self.state.get(cf, key)
                if raw is not None:
                    counts.consolidation_records += 1
                    if cf == EXTRACTIONS_CF:
                        delete_extraction(sbatch, eid, raw)  # and its owner's entry
                    else:
                        sbatch.delete(cf, key)
                        delete_mark_owner(sbatch, eid, raw)  # (staged once per mark)
            if self.state.get(LIVE_CF, key) is not None:  # a live session's index mark
                sbatch.delete(LIVE_CF, key)  # (no tombstone for the many without one)
        self.journal.write_deletes(jbatch, headers)  # (counted out of the journal's count)
        self.state.write(sbatch)
