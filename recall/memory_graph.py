"""The entity <-> memory graph of one scope, which the graph channel walks (as in HippoRAG).

Memory nodes are the scope's current ``episode_turn`` and ``fact`` points (``episode_chunk``
points stand in when turns are not indexed). Entity nodes are keyed by normalized name
(:func:`tiers.graph.normalize`), and a memory links to:

- the speakers of its source turns;
- the names its text mentions: runs of capitalised words inside a sentence, and those that
  start one when the scope knows them as a name (:func:`recall.words.names`); a short form
  of one speaker's first name ("Mel" for "Melanie") is that speaker;
- the subject and object of its triplet, for a fact in the fact graph, whose triplets also
  join entity to entity.

An edge weighs ``1 / log(1 + memories of the entity)``, so a rare name carries more than a
speaker who says half of everything.

The graph is derived, never stored: it is built from the vector store's points and the fact
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

from recall.words import mentions, names
from tiers.core import collector
from tiers.graph import normalize
from tiers.records import Scope
from tiers.semantic import SemanticStore
from tiers.vectors import MemoryPoint, PointFilter, VectorStore

log = logging.getLogger("strata.recall")

MEMORY_KINDS = ("episode_turn", "fact")
FALLBACK_KINDS = ("episode_chunk", "fact")


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

    @property
    def nbytes(self) -> int:
        """About what the graph holds in memory: its arrays, and per memory and entity the
        id or key with its list slot and dict entry (measured with ``tracemalloc``: about
        150 bytes a memory id, 120 an entity key)."""
        arrays = self.src.nbytes + self.dst.nbytes + self.weight.nbytes
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


def build(points: list[MemoryPoint], triplets: list[tuple[str, str, str]]) -> ScopeGraph:
    """The graph of these memories; ``triplets`` are ``(fact point id, subject, object)``."""
    mentioned = [names(p.text) for p in points]
    speakers = {normalize(s.speaker) for p in points for s in p.sources if s.speaker}
    known = speakers | {k for inside, _initial in mentioned for k in inside}
    known |= {normalize(x) for _id, s, o in triplets for x in (s, o)}
    alias = short_names(speakers, known)
    links: list[set[str]] = []
    for point, (inside, initial) in zip(points, mentioned, strict=True):
        keys = {normalize(s.speaker) for s in point.sources if s.speaker}
        keys |= inside | (initial & known)
        links.append(keys)
    memories = [p.id for p in points]
    index = {m: i for i, m in enumerate(memories)}
    for point_id, subject, obj in triplets:
        i = index.get(point_id)
        if i is not None:
            links[i] |= {normalize(subject), normalize(obj)}
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
        subject, obj = normalize(subject), normalize(obj)
        u, v = entities.get(alias.get(subject, subject)), entities.get(alias.get(obj, obj))
        if u is not None and v is not None and u != v:
            src.append(len(memories) + u)
            dst.append(len(memories) + v)
            weight.append(1.0)
    nodes = {key: len(memories) + n for key, n in entities.items()}
    nodes.update({short: nodes[full] for short, full in alias.items() if full in nodes})
    return ScopeGraph(
        memories,
        nodes,
        np.asarray(src, dtype=np.int64),
        np.asarray(dst, dtype=np.int64),
        np.asarray(weight, dtype=np.float64),
        index,
        len(memories) + len(entities),
    )


@dataclass(frozen=True, slots=True)
class _Entry:
    graph: ScopeGraph
    version: int  # the user's write count when the build began
    built_at: float
    seconds: float  # how long the build took


class MemoryGraphs:
    """The per-scope graphs, built on demand, rebuilt after writes (a :class:`ScopeCache`).
    They are kept within ``max_bytes`` (:attr:`ScopeGraph.nbytes`), the least recently used
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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._semantic = semantic
        self.kinds = kinds
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
        semantic.on_write.append(self._written)

    def _written(self, user_id: str) -> None:
        with self._lock:
            self._versions[user_id] = self._versions.get(user_id, 0) + 1

    def forget_scope(self, user_id: str) -> int:
        """Drop the user's graphs (Forget's hook); returns how many."""
        with self._lock:
            doomed = [k for k in self._entries if k[0] == user_id]
            for key in doomed:
                self.nbytes -= self._entries.pop(key).graph.nbytes
                self._builds.pop(key, None)
            self._versions[user_id] = self._versions.get(user_id, 0) + 1
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
            with collector.quiet():  # a burst of decoded points: no full collection walks it
                graph = self._build(scope, vectors)
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
            return graph

    def _build(self, scope: Scope, vectors: VectorStore) -> ScopeGraph:
        flt = PointFilter(
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            kinds=self.kinds,
            include_superseded=False,
        )
        points = vectors.scroll(flt, limit=self.max_points)
        if "episode_turn" in self.kinds and not any(p.kind == "episode_turn" for p in points):
            flt = replace(flt, kinds=FALLBACK_KINDS)
            points = vectors.scroll(flt, limit=self.max_points)
        if len(points) >= self.max_points:
            log.warning(
                "recall.graph_truncated",
                extra={"fields": {"user_id": scope.user_id, "max_points": self.max_points}},
            )
        graph = self._semantic.graph
        triplets = [
            (e.id, e.subject, e.object)
            for e in graph.edges_where(
                lambda e: (
                    e.scope.user_id == scope.user_id
                    and (not scope.agent_id or e.scope.agent_id == scope.agent_id)
                    and e.current
                )
            )
        ]
        return build(points, triplets)
