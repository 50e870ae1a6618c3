"""The graphs of the scopes (:class:`MemoryGraphs`), kept per scope in memory within a
budget, their memories' features kept with them and on disk (:mod:`recall.graph.files`).

The graph (:mod:`recall.graph.scope`) is derived, never stored: it is built from the vector
store's points and the fact graph on a scope's first query, and again on the first query
after that scope was written: a query sees every write made before it. A build of a kept
graph reads only the points the writes since touched, when each write told them
(:mod:`recall.graph.writes`); a first build, or one after a write that did not (a delete by
episode, a Forget), lists the scope's current ids and reads the points whose features it
lacks (:mod:`recall.graph.reads`). So it is as durable as the points and edges it comes from;
Forget, rebuild and restore need nothing more than dropping the cached build
(:meth:`MemoryGraphs.forget_scope`).

A large scope (``large_scope`` memories or more) is built in the background, one build at a
time, the smallest first (:mod:`recall.graph.builds`), so that no query waits seconds for it
(200,000 memories read from a cold store: 5-25 s).
So is a scope's first build here over more than ``inline_reads`` memories: reading and
parsing a point costs 0.1-0.3 ms, so a user of 5,000 memories never asked before would wait
about a second (:mod:`recall.graph.behind`). With no feature file, the query that starts such
a first build waits for it ``wait_seconds`` at most (with none, the build starts once that
query has answered: :meth:`MemoryGraphs.deferred`); until it is done the graph is not ready
for the scope (:class:`recall.ChannelNotReady`: the query goes on with the other channels).
With one (and fewer than ``large_scope`` memories), its graph is assembled from the file as
last saved, with no listing of its memories (:meth:`MemoryGraphs._from_file`), unless the
warm-up at the start loaded it already (:mod:`recall.graph.warm`, any size); until the build
is done its queries use that graph: a memory gone since is skipped as its hit is read, and
one written since is found by the other channels alone.
A scope built here and written since is rebuilt by its next query, with no count of its
memories, unless more than ``inline_reads`` points came since: then behind, the query taking
the last build.
After a large scope's write its queries use the previous build while the next one runs, and
a build younger than ten times its own duration is not redone, so that under steady writes a
scope spends at most a tenth of its time rebuilding. ``refresh_seconds`` (0 by
default) sets such a window for every scope.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import KW_ONLY, dataclass, field
from typing import TypeGuard

from recall import ChannelNotReady
from recall.graph.behind import Behind
from recall.graph.features import FeatureTable
from recall.graph.files import FeatureFiles
from recall.graph.reads import TooManyReads, counted, current
from recall.graph.scope import REPLY_WEIGHT, ScopeGraph, assemble
from recall.graph.warm import warm_up
from recall.graph.writes import WriteLog
from tiers.core import collector
from tiers.core.priority import REQUESTS
from tiers.core.records import Scope
from tiers.semantic.events import Tier3Opened, Tier3Written
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import PointFilter, VectorStore

log = logging.getLogger("strata.recall")

MEMORY_KINDS = ("episode_turn", "fact")
WARMING = ("", "")  # the warm-up's key among the builds behind: no scope's (no user id is "")


@dataclass(frozen=True, slots=True)
class _Entry:
    graph: ScopeGraph
    version: int  # the user's write count when the build began
    built_at: float
    seconds: float  # how long the build took
    loaded: bool = False  # its memories as its feature file last saved them, not yet listed


@dataclass(eq=False, repr=False, slots=True)  # the default repr: no graph in it
class MemoryGraphs:
    """The per-scope graphs, built on demand, rebuilt after writes (a :class:`ScopeCache`).
    They are kept within ``max_bytes`` (:attr:`ScopeGraph.nbytes`: a graph with its
    memories' features), the least recently used evicted first; the graph just built is kept
    even when it alone is larger. A kept graph's features serve its scope's next build.
    :meth:`close` stops the background builds. With ``files`` and ``warm_bytes``, the graphs
    of the files are loaded as Tier 3 opens, within ``warm_bytes`` (:mod:`recall.graph.warm`)."""

    semantic: SemanticStore
    _: KW_ONLY
    refresh_seconds: float = 0.0
    large_scope: int = 20_000
    inline_reads: int = 1_000
    wait_seconds: float = 0.0
    max_bytes: int = 256 * 2**20
    max_points: int = 200_000
    kinds: tuple[str, ...] = MEMORY_KINDS
    reply_weight: float = REPLY_WEIGHT
    files: FeatureFiles | None = None  # the features on disk, for a scope not kept here (or none)
    warm_bytes: int = 0  # the graphs of the files loaded at a start, within this (class text)
    clock: Callable[[], float] = time.monotonic
    nbytes: int = field(init=False, default=0)  # what the kept graphs hold (ScopeGraph.nbytes)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _versions: dict[str, int] = field(init=False, default_factory=dict)  # user -> writes seen
    _forgets: dict[str, int] = field(init=False, default_factory=dict)  # user -> Forgets seen
    _writes: WriteLog = field(init=False)  # the ids each write touched, for the kept graphs
    _builds: dict[tuple[str, str], threading.Lock] = field(init=False, default_factory=dict)
    _entries: OrderedDict[tuple[str, str], _Entry] = field(init=False, default_factory=OrderedDict)
    # features in the scope's file (files)
    _saved: dict[tuple[str, str], int] = field(init=False, default_factory=dict)
    _behind: Behind = field(init=False)  # the builds in the background

    def __post_init__(self) -> None:
        self._behind = Behind(self._lock)
        self._writes = WriteLog(self.inline_reads)
        # Staged points are not in the vector store: the graph is built from its points.
        self.semantic.events.subscribe(Tier3Written, self._written)
        self.semantic.events.subscribe(Tier3Opened, self._opened)

    def _written(self, event: Tier3Written) -> None:
        if event.staged:
            return
        with self._lock:
            version = self._versions[event.user_id] = self._versions.get(event.user_id, 0) + 1
            self._writes.written(event.user_id, version, event.ids)

    def forget_scope(self, user_id: str) -> int:
        """Drop the user's graphs (Forget's hook); returns how many. A build under way for
        the user is not kept."""
        with self._lock:
            doomed = [k for k in self._entries if k[0] == user_id]
            for key in doomed:
                gone = self._entries.pop(key)
                self.nbytes -= gone.graph.nbytes
                self._writes.release(user_id, gone.version)
                self._builds.pop(key, None)
                self._saved.pop(key, None)
            version = self._versions[user_id] = self._versions.get(user_id, 0) + 1
            self._writes.written(user_id, version, None)
            self._forgets[user_id] = self._forgets.get(user_id, 0) + 1
        if self.files is not None:
            self.files.forget(user_id)
        return len(doomed)

    def close(self) -> None:
        """Start no more builds; those waiting their turn are dropped, the one under way
        stops at its next page. Idempotent."""
        self._behind.close()

    def deferred(self) -> AbstractContextManager[None]:
        """Within the block (one query, on its thread), a build this thread asks for behind
        starts at the block's end, so that its reads (which hold the interpreter) do not slow
        the query's. It is pending meanwhile: a query of the scope is not ready. Nested blocks
        start them at the outermost one's end. Not with ``wait_seconds`` (the query waits)."""
        return self._behind.deferred(self.wait_seconds <= 0)

    def held(self, scope: Scope) -> ScopeGraph | None:
        """The scope's graph held in memory, current or not; nothing is read or built."""
        with self._lock:
            entry = self._entries.get((scope.user_id, scope.agent_id))
        return None if entry is None else entry.graph

    def _usable(self, entry: _Entry | None, user_id: str) -> TypeGuard[_Entry]:
        if entry is None:
            return False
        window = 10 * entry.seconds if entry.graph.count >= self.large_scope else 0.0
        young = self.clock() - entry.built_at < max(self.refresh_seconds, window)
        return entry.version == self._versions.get(user_id, 0) or young

    def get(self, scope: Scope, vectors: VectorStore) -> ScopeGraph:
        """The scope's graph: the cached build while it is current (or young: see the
        module's text), else a new one (one build per scope at a time). Raises
        :class:`recall.ChannelNotReady` while a large scope's first build runs (after
        ``wait_seconds`` for the query that started it), and so while a first build over more
        than ``inline_reads`` memories runs when the scope has no feature file."""
        key = (scope.user_id, scope.agent_id)
        with self._lock:
            entry = self._entries.get(key)
            if self._usable(entry, scope.user_id) and not entry.loaded:
                self._entries.move_to_end(key)
                return entry.graph
            if entry is not None and (entry.loaded or entry.graph.count >= self.large_scope):
                self._entries.move_to_end(key)
                self._build_behind(key, scope, vectors, entry.graph.count)  # if not queued
                return entry.graph  # the previous build (or its file's) until the next is done
            if self._behind.pending(key):
                raise ChannelNotReady(f"the graph of user {scope.user_id!r} is being built")
        if entry is None:
            memories = counted(scope, vectors, self.kinds, self.inline_reads, self.large_scope)
            if self.inline_reads < memories < self.large_scope:
                graph = self._from_file(key, scope)
                if graph is not None:  # its listing behind it, unless built meanwhile
                    with self._lock:
                        if (entry := self._entries.get(key)) is not None and entry.loaded:
                            self._build_behind(key, scope, vectors, memories)
                    return graph
            behind = memories >= self.large_scope or memories > self.inline_reads
            size = memories if behind else 0  # else built here
        else:  # written since its build, which holds the features it had
            try:
                return self._built(key, scope, vectors, most=self.inline_reads)
            except TooManyReads as many:  # many points came at once: built behind, as below
                size = many.args[0]
        if size:
            with self._lock:
                self._build_behind(key, scope, vectors, size)
                if self.wait_seconds > 0:  # with none, the lock is never let go: the last build
                    with REQUESTS.waiting():  # the build does not step aside for this query
                        self._behind.wait(key, self.wait_seconds)
                entry = self._entries.get(key)
            if entry is not None:  # built within the wait
                return entry.graph
            raise ChannelNotReady(f"the graph of user {scope.user_id!r} is being built")
        return self._built(key, scope, vectors)

    def _build_behind(
        self, key: tuple[str, str], scope: Scope, vectors: VectorStore, size: int
    ) -> None:
        """Queue the scope's build (of ``size`` memories) in the background (self._lock
        held), unless one is under way or the graphs are closed; within a :meth:`deferred`
        block, at the block's end."""
        self._behind.start(key, size, functools.partial(self._run_behind, key, scope, vectors))

    def _build_lock(self, key: tuple[str, str]) -> threading.Lock:
        """The lock of the scope's builds: one at a time, a load from its file included."""
        with self._lock:
            return self._builds.setdefault(key, threading.Lock())

    def _from_file(
        self, key: tuple[str, str], scope: Scope, budget: int | None = None
    ) -> ScopeGraph | None:
        """The graph of the scope's feature file (its memories as last saved), kept as
        loaded: its listing still to do. The scope's graph when it has one already; with a
        ``budget`` (the warm-up), None then, and when the kept graphs would exceed ``budget``
        bytes with it, which is kept first out. None when there is no file to read."""
        if self.files is None:
            return None
        user = scope.user_id
        with self._build_lock(key):
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:  # loaded or built by another thread meanwhile
                    return entry.graph if budget is None else None
                version, forgets = self._versions.get(user, 0), self._forgets.get(user, 0)
                began = self.clock()
            table = self.files.load(scope)  # after ``forgets``: a Forget since deleted it
            if not len(table) or (budget is not None and self.nbytes + table.nbytes > budget):
                return None  # (the graph holds its table, and more)
            graph = assemble(table, self.semantic.graph.triplets(scope), self.reply_weight)
            with self._lock:
                if self._forgets.get(user, 0) != forgets:
                    return graph if budget is None else None  # answers the query, not kept
                if budget is not None and self.nbytes + graph.nbytes > budget:
                    return None  # (it evicts nothing)
                self._saved[key] = len(table)
                self._keep(key, _Entry(graph, version, began, self.clock() - began, True))
                self._entries.move_to_end(key, last=budget is None)  # the warm-up's first out
            return graph

    def _opened(self, event: Tier3Opened) -> None:
        if event.ok and self.files is not None and self.warm_bytes > 0:
            with self._lock:
                self._behind.start(WARMING, sys.maxsize, self._warm)

    def _warm(self) -> None:
        """The warm-up at a start (:mod:`recall.graph.warm`), on the build thread."""
        budget = min(self.warm_bytes, self.max_bytes)
        try:
            warm_up(
                self.files.saved() if self.files is not None else (),
                lambda s: self._from_file((s.user_id, s.agent_id), s, budget) is not None,
                lambda: self.nbytes,
                budget,
                self._between,
            )
        except Exception as exc:  # closed (ChannelNotReady), or Tier 3 closing: only a cache
            if not self._behind.closed:
                log.warning("recall.graphs_warm_failed", extra={"fields": {"error": repr(exc)}})
        finally:
            with self._lock:
                self._behind.done(WARMING)

    def _run_behind(self, key: tuple[str, str], scope: Scope, vectors: VectorStore) -> None:
        began = time.perf_counter()
        try:
            graph = self._built(key, scope, vectors)
            ms = round((time.perf_counter() - began) * 1000, 1)  # with smaller builds run between
            fields = {"user_id": scope.user_id, "memories": graph.count, "ms": ms}
            log.info("recall.graph_built", extra={"fields": fields})
        except Exception as exc:  # the next query of the scope starts another
            if not self._behind.closed:
                log.warning(
                    "recall.graph_build_failed",
                    extra={"fields": {"user_id": scope.user_id, "error": repr(exc)}},
                )
        finally:
            with self._lock:
                self._behind.done(key)

    def idle(self, timeout: float) -> bool:
        """Wait until no build runs in the background; False if one still does after
        ``timeout`` seconds."""
        return self._behind.idle(timeout)

    def _built(
        self, key: tuple[str, str], scope: Scope, vectors: VectorStore, most: int | None = None
    ) -> ScopeGraph:
        """A new build of the scope's graph, kept (unless its user was forgotten meanwhile);
        a build finished by another thread while this one waited is taken instead. Raises
        :class:`TooManyReads` when it would read more than ``most`` points (None: any)."""
        user = scope.user_id
        with self._build_lock(key):
            with self._lock:
                entry = self._entries.get(key)
                version = self._versions.get(user, 0)
                kept = entry if entry is not None and not entry.loaded else None
                if kept is not None and kept.version == version:
                    return kept.graph  # built while this thread waited
                forgets = self._forgets.get(user, 0)
                began = self.clock()
                known = entry.graph.features if entry is not None else None
                # a loaded graph's memories are listed: no write told it the ids they lack
                touched = None if kept is None else self._writes.since(user, kept.version)
                self._writes.hold(user, version)  # the writes from now on, for the next build
            try:
                generation = self.files.generation(user) if self.files is not None else 0
                if known is None:
                    known = FeatureTable.empty() if self.files is None else self.files.load(scope)
                    with self._lock:
                        self._saved[key] = len(known)
                with collector.quiet():  # a burst of decoded points: no full collection walks it
                    graph, removed = self._build(scope, vectors, known, most, touched)
                files = self.files if self._to_save(key, graph.count, removed) else None
                if files is not None and files.save(scope, graph.features, generation):
                    with self._lock:
                        self._saved[key] = graph.count
                with self._lock:
                    if self._forgets.get(user, 0) == forgets:
                        self._keep(key, _Entry(graph, version, began, self.clock() - began))
                return graph
            finally:
                with self._lock:
                    self._writes.release(user, version)

    def _keep(self, key: tuple[str, str], entry: _Entry) -> None:
        """Keep ``entry`` within the budget, the least recently used out (self._lock held)."""
        old = self._entries.pop(key, None)
        if old is not None:
            self.nbytes -= old.graph.nbytes
            self._writes.release(key[0], old.version)
        self._entries[key] = entry
        self.nbytes += entry.graph.nbytes
        self._writes.hold(key[0], entry.version)
        while self.nbytes > self.max_bytes and len(self._entries) > 1:
            evicted, gone = self._entries.popitem(last=False)
            self.nbytes -= gone.graph.nbytes
            self._writes.release(evicted[0], gone.version)
            self._builds.pop(evicted, None)
            self._saved.pop(evicted, None)

    def _to_save(self, key: tuple[str, str], size: int, removed: int) -> bool:
        """Whether a build's features go to their file: after a memory went (its names leave
        the disk at once), or once a tenth more memories than the file holds came (so a
        scope under steady writes does not write its whole file at every build)."""
        with self._lock:
            saved = self._saved.get(key)
        return removed > 0 or saved is None or size - saved >= max(1, saved // 10)

    def _build(
        self,
        scope: Scope,
        vectors: VectorStore,
        known: FeatureTable,
        most: int | None = None,
        touched: frozenset[str] | None = None,
    ) -> tuple[ScopeGraph, int]:
        """The scope's graph from its current memories (:func:`~recall.graph.reads.current`),
        and how many of ``known``'s are left out."""
        flt = PointFilter(
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            kinds=self.kinds,
            include_superseded=False,
        )
        table, removed = current(
            flt,
            vectors,
            known,
            touched,
            most=most,
            max_points=self.max_points,
            between=self._between,
        )
        return assemble(table, self.semantic.graph.triplets(scope), self.reply_weight), removed

    def _between(self) -> None:
        """Before each page a build reads: stop if closed; smaller builds waiting go first."""
        if self._behind.closed:
            raise ChannelNotReady("the graphs are closed")
        self._behind.between()
