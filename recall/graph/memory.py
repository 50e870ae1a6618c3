"""The entity <-> memory graph of one scope, which the graph channel walks (as in HippoRAG).

Memory nodes are the scope's current ``episode_turn`` and ``fact`` points (``episode_chunk``
points stand in when turns are not indexed). Entity nodes are keyed by normalized name
(:func:`tiers.semantic.graph.normalize`), and a memory links to:

- the speakers of its source turns;
- the names its text mentions: runs of capitalised words inside a sentence, and those that
  start one when the scope knows them as a name (:func:`recall.words.names`); a short form
  of one speaker's first name ("Mel" for "Melanie") is that speaker;
- the subject and object of its triplet, for a fact in the fact graph, whose triplets also
  join entity to entity.

An edge weighs ``1 / log(1 + memories of the entity)``, so a rare name carries more than a
speaker who says half of everything. A turn that asks something (its text holds a question
mark) is also linked to the next turn of its session, the reply, at ``reply_weight``: a
question finds the turn that asks it (which echoes its words), and the answer is the turn
after it, often by the other speaker and without those words.

The graph is derived, never stored (its memories' features may be:
:mod:`recall.graph.features`): it is built from the vector store's points and the fact
graph on a scope's first query, and again on the first query after that scope was written:
a query sees every write made before it. Only a large scope (``large_scope`` memories or
more) keeps a build younger than ten times its own duration, so that under steady writes it
spends at most a tenth of its time rebuilding (a query in that window sees the previous
build); ``refresh_seconds`` (0 by default) sets such a window for every scope. So it is as
durable as the points and edges it comes from; Forget, rebuild and restore need nothing more
than dropping the cached build (:meth:`MemoryGraphs.forget_scope`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from recall.graph.features import FEATURE_BYTES, FeatureFiles, Features
from recall.graph.pagerank import Walk
from recall.words import mentions
from tiers.core import collector
from tiers.core.records import Scope
from tiers.semantic.graph import normalize
from tiers.semantic.store import SemanticStore, Tier3Written
from tiers.semantic.vectors import MemoryPoint, PointFilter, VectorStore

log = logging.getLogger("strata.recall")

MEMORY_KINDS = ("episode_turn", "fact")
FALLBACK_KINDS = ("episode_chunk", "fact")
# The weight of a question turn's link to its reply: about that of a name four memories
# share (1 / log 5 = 0.62). Chosen on the LoCoMo dev split from 0.5, 1 and 2, which measured
# alike (docs/benchmarks.md, leave-one-conversation-out).
REPLY_WEIGHT = 0.5


@dataclass(frozen=True, slots=True)
class ScopeGraph:
    """Nodes ``0..len(memories)-1`` are memories (point ids); entity ``key`` is node
    ``entities[key]``. Edges ``src[i] - dst[i]`` (undirected) weigh ``weight[i]``."""

    memories: list[str]
    entities: dict[str, int]  # entity key or alias -> node
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    index: dict[str, int]  # point id -> node
    size: int  # nodes
    walk: Walk  # the random walk over the edges (its sparse transition matrix)
    speakers: frozenset[str] = frozenset()  # the speakers' keys, short forms included

    @property
    def nbytes(self) -> int:
        """About what the graph holds in memory: its arrays, and per memory and entity the
        id or key with its list slot and dict entry (measured with ``tracemalloc``: about
        150 bytes a memory id, 120 an entity key)."""
        arrays = self.src.nbytes + self.dst.nbytes + self.weight.nbytes + self.walk.nbytes
        return arrays + 150 * len(self.memories) + 120 * len(self.entities) + 1024

    def link(self, text: str, max_words: int = 4) -> list[str]:
        """The entity keys ``text`` names, longest match first, one per node; an n-gram inside
        a longer match is not linked again ("Street Fighter" does not also link "Fighter")."""
        found: list[str] = []
        nodes: set[int] = set()
        spans: list[tuple[int, int]] = []
        for start, end, key in mentions(text, max_words):
            if key not in self.entities or self.entities[key] in nodes:
                continue
            if any(s <= start and end <= e and (s, e) != (start, end) for s, e in spans):
                continue
            spans.append((start, end))
            nodes.add(self.entities[key])
            found.append(key)
        return found


def short_names(speakers: set[str], keys: set[str]) -> dict[str, str]:
    """Keys that are a short form of exactly one speaker's first name ("mel" for "melanie",
    at least 3 letters), mapped to that speaker."""
    firsts: dict[str, list[str]] = {}
    for speaker in speakers:
        if speaker:
            firsts.setdefault(speaker.split()[0], []).append(speaker)
    out: dict[str, str] = {}
    for key in keys:
        if len(key) < 3 or " " in key or key in speakers:
            continue
        owners = [s for first, names in firsts.items() if first.startswith(key) for s in names]
        if len(owners) == 1:
            out[key] = owners[0]
    return out


def build(
    points: list[MemoryPoint],
    triplets: list[tuple[str, str, str]],
    reply_weight: float = REPLY_WEIGHT,
) -> ScopeGraph:
    """The graph of these memories; ``triplets`` are ``(fact point id, subject, object)``."""
    return assemble([(p.id, Features.of(p)) for p in points], triplets, reply_weight)


def assemble(
    memories_: list[tuple[str, Features]],
    triplets: list[tuple[str, str, str]],
    reply_weight: float = REPLY_WEIGHT,
) -> ScopeGraph:
    """The graph of the memories ``(point id, features)``, in that order; ``triplets`` are
    ``(fact point id, subject, object)``, in any order (they are sorted); ``reply_weight``:
    a question turn's link to its reply (0: none)."""
    named: dict[str, str] = {}  # each name of a triplet normalized once
    triplets = sorted(
        (
            pid,
            named.get(s) or named.setdefault(s, normalize(s)),
            named.get(o) or named.setdefault(o, normalize(o)),
        )
        for pid, s, o in triplets
    )
    speakers = {k for _id, f in memories_ for k in f.speakers if k}
    known = speakers | {k for _id, f in memories_ for k in f.inside}
    known |= {x for _id, s, o in triplets for x in (s, o)}
    alias = short_names(speakers, known)
    links: list[set[str]] = []
    for _id, f in memories_:
        links.append({k for k in f.speakers if k} | f.inside | (f.initial & known))
    memories = [pid for pid, _f in memories_]
    index = {m: i for i, m in enumerate(memories)}
    for point_id, subject, obj in triplets:
        i = index.get(point_id)
        if i is not None:
            links[i] |= {subject, obj}
    links = [{alias.get(k, k) for k in keys if k} for keys in links]
    entities: dict[str, int] = {}
    src: list[int] = []
    dst: list[int] = []
    for i, keys in enumerate(links):
        for key in sorted(keys):
            src.append(i)
            dst.append(len(memories) + entities.setdefault(key, len(entities)))
    degree = np.bincount(np.asarray(dst, dtype=np.int64), minlength=len(memories) + len(entities))
    weight = [1.0 / math.log1p(float(degree[d])) for d in dst]
    for _id, subject, obj in triplets:  # entity - entity
        u, v = entities.get(alias.get(subject, subject)), entities.get(alias.get(obj, obj))
        if u is not None and v is not None and u != v:
            src.append(len(memories) + u)
            dst.append(len(memories) + v)
            weight.append(1.0)
    if reply_weight > 0:  # a question turn - the next turn of its session
        turns = {f.turn: i for i, (_id, f) in enumerate(memories_) if f.turn is not None}
        for i, (_id, f) in enumerate(memories_):
            reply = turns.get((f.turn[0], f.turn[1] + 1)) if f.asks and f.turn else None
            if reply is not None:
                src.append(i)
                dst.append(reply)
                weight.append(reply_weight)
    nodes = {key: len(memories) + n for key, n in entities.items()}
    nodes.update({short: nodes[full] for short, full in alias.items() if full in nodes})
    size = len(memories) + len(entities)
    src_, dst_ = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    weight_ = np.asarray(weight, dtype=np.float64)
    walk = Walk.of(size, src_, dst_, weight_)
    spoken = frozenset(speakers) | frozenset(alias)  # a short form names one speaker
    return ScopeGraph(memories, nodes, src_, dst_, weight_, index, size, walk, spoken)


def kept_bytes(graph: ScopeGraph) -> int:
    """What a scope's graph and the features kept for its memories hold in memory."""
    return graph.nbytes + FEATURE_BYTES * len(graph.memories)


@dataclass(frozen=True, slots=True)
class _Entry:
    graph: ScopeGraph
    version: int  # the user's write count when the build began
    built_at: float
    seconds: float  # how long the build took


class MemoryGraphs:
    """The per-scope graphs, built on demand, rebuilt after writes (a :class:`ScopeCache`).
    They are kept within ``max_bytes`` (:func:`kept_bytes`), the least recently used
    evicted first; the graph just built is kept even when it alone is larger."""

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
        self.nbytes = 0  # what the kept graphs and their features hold (kept_bytes)
        self.max_points = max_points
        self._clock = clock
        self._lock = threading.Lock()
        self._versions: dict[str, int] = {}  # user -> writes seen
        self._builds: dict[tuple[str, str], threading.Lock] = {}
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        # Per scope, the features of its current memories, kept between builds: a build after
        # a write reads the ids and only the new points (Features).
        self._features: dict[tuple[str, str], dict[str, Features]] = {}
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
                self.nbytes -= kept_bytes(self._entries.pop(key).graph)
                self._builds.pop(key, None)
            for key in [k for k in self._features if k[0] == user_id]:
                del self._features[key]
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
        large = len(entry.graph.memories) >= self.large_scope
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
                cold = key not in self._features
                features = self._features.setdefault(key, {})
            generation = self.files.generation(scope.user_id) if self.files is not None else 0
            if cold and self.files is not None:
                features.update(self.files.load(scope))
                with self._lock:
                    self._saved[key] = len(features)
            with collector.quiet():  # a burst of decoded points: no full collection walks it
                graph, removed = self._build(scope, vectors, features)
            files = self.files if self._to_save(key, len(features), removed) else None
            if files is not None and files.save(scope, features, generation):
                with self._lock:
                    self._saved[key] = len(features)
            with self._lock:
                old = self._entries.pop(key, None)
                if old is not None:
                    self.nbytes -= kept_bytes(old.graph)
                self._entries[key] = _Entry(graph, version, began, self._clock() - began)
                self.nbytes += kept_bytes(graph)
                while self.nbytes > self.max_bytes and len(self._entries) > 1:
                    evicted, entry = self._entries.popitem(last=False)
                    self.nbytes -= kept_bytes(entry.graph)
                    self._builds.pop(evicted, None)
                    self._features.pop(evicted, None)
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
        self, scope: Scope, vectors: VectorStore, features: dict[str, Features]
    ) -> tuple[ScopeGraph, int]:
        """The scope's graph from its current memories: their ids from the store, the
        features of those not in ``features`` from their points (kept there; those of
        memories gone are dropped), and how many were dropped."""
        flt = PointFilter(
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            kinds=self.kinds,
            include_superseded=False,
        )
        memories = self._memories(flt, vectors, features)
        if "episode_turn" in self.kinds and not any(f.kind == "episode_turn" for _i, f in memories):
            flt = replace(flt, kinds=FALLBACK_KINDS)
            memories = self._memories(flt, vectors, features)
        current = {pid for pid, _f in memories}
        gone = [pid for pid in features if pid not in current]
        for pid in gone:
            del features[pid]
        if len(memories) >= self.max_points:
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
        return assemble(memories, triplets, self.reply_weight), len(gone)

    def _memories(
        self, flt: PointFilter, vectors: VectorStore, features: dict[str, Features]
    ) -> list[tuple[str, Features]]:
        """The memories matching ``flt`` with their features, read for the new ones (a point
        deleted between the two reads is left out)."""
        ids = vectors.ids(flt, limit=self.max_points)
        new = [pid for pid in ids if pid not in features]
        for point in vectors.get(new, flt.user_id) if new else []:
            features[point.id] = Features.of(point)
        return [(pid, features[pid]) for pid in ids if pid in features]
