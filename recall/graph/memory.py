"""The graphs of the scopes (:class:`MemoryGraphs`), kept per scope in memory within a
budget, their memories' features kept with them and on disk (:mod:`recall.graph.files`).

The graph (:mod:`recall.graph.scope`) is derived, never stored: it is built from the vector
store's points and the fact graph on a scope's first query, and again on the first query
after that scope was written: a query sees every write made before it. A build reads the
scope's current ids and only the points whose features it lacks. Only a large scope
(``large_scope`` memories or more) keeps a build younger than ten times its own duration, so
that under steady writes it spends at most a tenth of its time rebuilding (a query in that
window sees the previous build); ``refresh_seconds`` (0 by default) sets such a window for
every scope. So it is as durable as the points and edges it comes from; Forget, rebuild and
restore need nothing more than dropping the cached build (:meth:`MemoryGraphs.forget_scope`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from recall.graph.features import ID, Features, FeatureTable
from recall.graph.files import FeatureFiles
from recall.graph.scope import REPLY_WEIGHT, ScopeGraph, assemble
from tiers.core import collector
from tiers.core.records import Scope
from tiers.semantic.store import SemanticStore, Tier3Written
from tiers.semantic.vectors import PointFilter, VectorStore

log = logging.getLogger("strata.recall")

MEMORY_KINDS = ("episode_turn", "fact")
FALLBACK_KINDS = ("episode_chunk", "fact")


@dataclass(frozen=True, slots=True)
class _Entry:
    graph: ScopeGraph
    version: int  # the user's write count when the build began
    built_at: float
    seconds: float  # how long the build took


class MemoryGraphs:
    """The per-scope graphs, built on demand, rebuilt after writes (a :class:`ScopeCache`).
    They are kept within ``max_bytes`` (:attr:`ScopeGraph.nbytes`: a graph with its
    memories' features), the least recently used evicted first; the graph just built is kept
    even when it alone is larger. A kept graph's features serve its scope's next build."""

    def __init__(
        self,
        semantic: SemanticStore,
        *,
        refresh_seconds: float = 0.0,
        large_scope: int = 20_000,
        max_bytes: int = 256 * 2**20,
        max_points: int = 200_000,
        kinds: tuple[str, ...] = MEMORY_KINDS,
        reply_weight: float = REPLY_WEIGHT,
        files: FeatureFiles | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._semantic = semantic
        self.files = files  # the features on disk, for a scope not kept here (or none)
        self.kinds = kinds
        self.reply_weight = reply_weight
        self.refresh_seconds = refresh_seconds
        self.large_scope = large_scope
        self.max_bytes = max_bytes
        self.nbytes = 0  # what the kept graphs hold (ScopeGraph.nbytes)
        self.max_points = max_points
        self._clock = clock
        self._lock = threading.Lock()
        self._versions: dict[str, int] = {}  # user -> writes seen
        self._builds: dict[tuple[str, str], threading.Lock] = {}
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._saved: dict[tuple[str, str], int] = {}  # features in the scope's file (files)
        # Staged points are not in the vector store: the graph is built from its points.
        semantic.events.subscribe(Tier3Written, self._written)

    def _written(self, event: Tier3Written) -> None:
        if event.staged:
            return
        with self._lock:
            self._versions[event.user_id] = self._versions.get(event.user_id, 0) + 1

    def forget_scope(self, user_id: str) -> int:
        """Drop the user's graphs (Forget's hook); returns how many."""
        with self._lock:
            doomed = [k for k in self._entries if k[0] == user_id]
            for key in doomed:
                self.nbytes -= self._entries.pop(key).graph.nbytes
                self._builds.pop(key, None)
                self._saved.pop(key, None)
            self._versions[user_id] = self._versions.get(user_id, 0) + 1
        if self.files is not None:
            self.files.forget(user_id)
        return len(doomed)

    def _usable(self, entry: _Entry | None, user_id: str) -> bool:
        return entry is not None and (
            entry.version == self._versions.get(user_id, 0)
            or self._clock() - entry.built_at < max(self.refresh_seconds, self._window(entry))
        )

    def _window(self, entry: _Entry) -> float:
        large = entry.graph.count >= self.large_scope
        return 10 * entry.seconds if large else 0.0

    def get(self, scope: Scope, vectors: VectorStore) -> ScopeGraph:
        """The scope's graph: the cached build while it is current (or young: see the
        module's text), else a new one (one build per scope at a time)."""
        key = (scope.user_id, scope.agent_id)
        with self._lock:
            entry = self._entries.get(key)
            if self._usable(entry, scope.user_id):
                self._entries.move_to_end(key)
                return entry.graph  # type: ignore[union-attr]
            build_lock = self._builds.setdefault(key, threading.Lock())
        with build_lock:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None and entry.version == self._versions.get(scope.user_id, 0):
                    return entry.graph  # built while this thread waited
                version = self._versions.get(scope.user_id, 0)
                began = self._clock()
                known = entry.graph.features if entry is not None else None
            generation = self.files.generation(scope.user_id) if self.files is not None else 0
            if known is None:
                known = self.files.load(scope) if self.files is not None else FeatureTable.empty()
                with self._lock:
                    self._saved[key] = len(known)
            with collector.quiet():  # a burst of decoded points: no full collection walks it
                graph, removed = self._build(scope, vectors, known)
            files = self.files if self._to_save(key, graph.count, removed) else None
            if files is not None and files.save(scope, graph.features, generation):
                with self._lock:
                    self._saved[key] = graph.count
            with self._lock:
                old = self._entries.pop(key, None)
                if old is not None:
                    self.nbytes -= old.graph.nbytes
                self._entries[key] = _Entry(graph, version, began, self._clock() - began)
                self.nbytes += graph.nbytes
                while self.nbytes > self.max_bytes and len(self._entries) > 1:
                    evicted, entry = self._entries.popitem(last=False)
                    self.nbytes -= entry.graph.nbytes
                    self._builds.pop(evicted, None)
                    self._saved.pop(evicted, None)
            return graph

    def _to_save(self, key: tuple[str, str], size: int, removed: int) -> bool:
        """Whether a build's features go to their file: after a memory went (its names leave
        the disk at once), or once a tenth more memories than the file holds came (so a
        scope under steady writes does not write its whole file at every build)."""
        with self._lock:
            saved = self._saved.get(key)
        return removed > 0 or saved is None or size - saved >= max(1, saved // 10)

    def _build(
        self, scope: Scope, vectors: VectorStore, known: FeatureTable
    ) -> tuple[ScopeGraph, int]:
        """The scope's graph from its current memories: their ids from the store, the
        features of those ``known`` lacks read from their points (those of memories gone are
        left out); and how many were left out."""
        flt = PointFilter(
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            kinds=self.kinds,
            include_superseded=False,
        )
        table, seen = self._memories(flt, vectors, known)
        if "episode_turn" in self.kinds and not table.has_kind("episode_turn"):
            flt = replace(flt, kinds=FALLBACK_KINDS)
            table, _seen = self._memories(flt, vectors, seen)  # the facts are not read again
        removed = len(known) - int(np.isin(known.ids, table.ids).sum()) if len(known) else 0
        if len(table) >= self.max_points:
            log.warning(
                "recall.graph_truncated",
                extra={"fields": {"user_id": scope.user_id, "max_points": self.max_points}},
            )
        graph = self._semantic.graph
        triplets = [
            (e.id, e.subject, e.object)
            for e in graph.edges_where(
                lambda e: (not scope.agent_id or e.scope.agent_id == scope.agent_id) and e.current,
                scope.user_id,
            )
        ]
        return assemble(table, triplets, self.reply_weight), removed

    def _memories(
        self, flt: PointFilter, vectors: VectorStore, known: FeatureTable
    ) -> tuple[FeatureTable, FeatureTable]:
        """The features of the memories matching ``flt``, in the store's order: ``known``'s
        rows, and those of the new ones read from their points (a point deleted between the
        two reads is left out); and ``known`` with the rows read."""
        ids = np.array(vectors.ids(flt, limit=self.max_points), dtype=ID)
        at = known.positions(ids)
        new = [bytes(i).decode() for i in ids[at < 0]]
        if new:
            read = vectors.get(new, flt.user_id)
            known = known.append(FeatureTable.of([(p.id, Features.of(p)) for p in read]))
            at = known.positions(ids)
        return known.take(at[at >= 0]), known
