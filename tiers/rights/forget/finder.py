"""What a Forget covers (:class:`Finder`): the episodes and memory ids its target names, with
their owners, found in every store, for :class:`tiers.rights.forget.cascade.Forgetter`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from tiers.core.records import Scope, unpack
from tiers.journal.consolidation import (
    EXTRACTIONS_CF,
    PENDING_CF,
    UNINDEXED_CF,
    extraction_owner,
    extractions_of,
    mark_owner,
)
from tiers.journal.store import BY_USER_CF, Journal
from tiers.rights.forget.plan import ForgetPlan, ForgetTarget
from tiers.rocks import RocksStore
from tiers.scoped import ScopedKind
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import PointFilter
from tiers.working.memory import WorkingMemory

_scope_order = attrgetter("user_id", "agent_id")  # a scope as (user, agent)
# Tier 3 readiness: a Forget waits this long for the model and vector store at start-up.
READY_TIMEOUT = 60.0
_SCROLL_ALL = 10_000_000


def covers(scope: Scope, user_id: str, agent_id: str) -> bool:
    """Whether data of ``(user_id, agent_id)`` is ``scope``'s (an empty agent: every agent)."""
    return user_id == scope.user_id and (not scope.agent_id or agent_id == scope.agent_id)


@dataclass(frozen=True)
class Finder:
    """Reads only; its callers hold the locks its methods name."""

    working: WorkingMemory
    journal: Journal
    journal_store: RocksStore
    state: RocksStore
    semantic: SemanticStore
    kinds: Sequence[ScopedKind] = ()

    def plan(self, target: ForgetTarget) -> ForgetPlan:
        """What ``target`` covers, and whose it is. Raises EmbeddingUnavailable while Tier 3
        is still starting (nothing is deleted then)."""
        _embedder, vectors = self.semantic.wait_ready(READY_TIMEOUT)
        plan = ForgetPlan(target)
        if target.scope is not None:  # its episodes are found by run(), under the locks
            plan.owners.add(target.scope)
        elif target.episode_ids:
            for eid in target.episode_ids:
                owner = self._owner(eid, plan)
                if owner is not None:
                    plan.episode_ids.add(eid)
                    plan.owner_of[eid] = owner
                    plan.owners.add(owner)
        else:
            found = {p.id: p.scope for p in vectors.get(list(target.memory_ids))}
            for mid in target.memory_ids:
                edge = self.semantic.graph.get(mid)
                owner = found.get(mid) or (edge.scope if edge is not None else None)
                for kind in self.kinds:  # a document not indexed yet
                    owner = owner or kind.owner(mid)
                if owner is not None:
                    plan.memory_ids.add(mid)
                    plan.owner_of[mid] = owner
                    plan.owners.add(owner)
        plan.episode_ids.discard("")
        return plan

    def stored(self, scope: Scope, plan: ForgetPlan, *, points: bool = True) -> None:
        """The episodes of ``scope`` that Tier 3 and the stored extractions name: what only
        writers holding ``SemanticStore.write_lock`` write, so the caller holds it, and not the
        working memory's lock (a large user's take seconds; no append waits for them).
        Without ``points``, not those of its vector points (a user erased after the Forget:
        the erasure tombstones them, :mod:`tiers.semantic.erasures`)."""
        _embedder, vectors = self.semantic.wait_ready(0)
        if points:
            flt = PointFilter(user_id=scope.user_id, agent_id=scope.agent_id)
            plan.episode_ids.update(vectors.episode_ids(flt, _SCROLL_ALL))
        plan.episode_ids.update(self.semantic.graph.episodes_of(scope))
        # Stored extractions name their episode's scope: one whose episode expired and that
        # produced no point (or whose points were deleted) is found here, by its owner.
        for episode_id, owner in extractions_of(self.state, scope.user_id):
            if covers(scope, owner.user_id, owner.agent_id):
                plan.episode_ids.add(episode_id)

    def open(self, scope: Scope, plan: ForgetPlan) -> None:
        """The episodes of ``scope`` that the journal, the consolidation marks and the open
        sessions name: what a session's end writes (a few keys of one user and the marks still
        pending). Its caller looks once more holding the working memory's lock too, right
        before it drops the scope's sessions."""
        prefix = scope.user_id.encode() + b"\x00"
        for key, value in self.journal_store.scan_prefix(BY_USER_CF, prefix):
            _flushed, user_id, agent_id = unpack(value)
            if covers(scope, user_id, agent_id):
                plan.episode_ids.add(key[-32:].decode())
        for episode_id, owner in self.journal.marked(scope.user_id):  # by owner: its own only
            if covers(scope, owner.user_id, owner.agent_id):
                plan.episode_ids.add(episode_id)
        live = self.working.live_sessions()  # their points too, staged or not yet written
        plan.episode_ids.update(s.episode_id for s in live if covers(scope, *_scope_order(s.scope)))

    def _owner(self, episode_id: str, plan: ForgetPlan) -> Scope | None:
        header = self.journal.find(episode_id)
        if header is not None:
            plan.headers[episode_id] = header
            return header.scope
        for cf in (PENDING_CF, UNINDEXED_CF):
            raw = self.state.get(cf, episode_id.encode())
            if raw is not None:
                return mark_owner(raw)
        raw = self.state.get(EXTRACTIONS_CF, episode_id.encode())
        owner = extraction_owner(raw) if raw is not None else None
        if owner is not None:
            return owner
        _embedder, vectors = self.semantic.wait_ready(0)
        points = vectors.scroll(PointFilter(episode_ids=(episode_id,)), 1)
        if points:
            return points[0].scope
        edges = self.semantic.graph.edges_where(lambda e: e.episode_id == episode_id)
        return edges[0].scope if edges else None
