"""The graph channel: the entities a query mentions, Personalized PageRank around them, and
the facts (with their source chunks) on the strongest edges.

1. **Linking.** Query n-grams of 1-4 words (possessives stripped: "Caroline's" -> "caroline")
   are looked up among the normalized names and aliases of the entities of the query's scope;
   then the query embedding is compared with the embeddings of the entity names (computed
   lazily with ``encode_documents`` and cached by name) and the best few above a threshold
   join as weaker seeds.
2. **Expansion.** The ``hops``-hop neighbourhood of the seeds (undirected, inside the scope
   only: nodes are ``(user_id, agent_id, name)`` and every node outside the query's scope is
   skipped) is copied out under the graph's lock, and Personalized PageRank runs on it with
   the seeds as its personalization (:func:`personalized_pagerank`: the iteration of
   ``networkx.pagerank``, on numpy arrays). A superseded fact's edge weighs less in the walk.
3. **Result.** Each edge scores the PageRank mass of its two ends (normalised to the best
   edge), plus small bonuses for a current fact and for predicate/object words the query
   uses. The best edges' fact points come from the vector store (edge id == fact point id),
   each followed by the ``episode_chunk`` points of its episode that hold its source
   messages, all through the query's filter.

Scope is a hard filter: the entity index, the walk and every returned point are checked
against the query's ``user_id`` and, when it has one, its ``agent_id`` (an empty ``agent_id``
covers every agent of the user, as in :meth:`recall.Query.filter`).
"""

from __future__ import annotations

import functools
import heapq
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from recall import QueryContext
from tiers.embedding import Embedder
from tiers.graph import Edge, normalize
from tiers.graph.nxgraph import NetworkXGraph, Node
from tiers.records import Scope
from tiers.semantic import SemanticStore
from tiers.vectors import MemoryPoint, PointFilter, VectorStore

_TOKEN = re.compile(r"[\w'-]+")
_STOP_WORDS = """
a about above after again all am an and any are as at be been before being below between
both but by can could did do does doing done down during each ever few for from get got
had has have having he her here hers herself him himself his how i if in into is it its
itself just know let me more most my myself no nor not now of off on once only or other
our ours ourselves out over own please remember same she should so some such tell than
that the their theirs them themselves then there these they this those through to too
under until up us very was we were what when where which while who whom why will with
would you your yours yourself yourselves
"""
_STOP = frozenset(_STOP_WORDS.split())
_SUFFIXES = ("ing", "ed", "s")


def _words(text: str) -> list[tuple[str, bool]]:
    """The words of ``text`` as written (curly apostrophes made straight), each with whether
    it starts a sentence."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    out = []
    end = 0
    starts = True
    for match in _TOKEN.finditer(text):
        starts = starts or any(c in ".!?:;\n" for c in text[end : match.start()])
        end = match.end()
        word = match.group().strip("'-")
        if word:
            out.append((word, starts))
            starts = False
    return out


def _tokens(text: str) -> list[str]:
    return [w.lower() for w, _start in _words(text)]


def _unpossessive(token: str) -> str:
    if token.endswith("'s"):
        return token[:-2]
    return token.rstrip("'")


def _stem(word: str) -> str:
    """A crude stem, enough to match "works" with "work" and "lives_in" with "live"."""
    word = _unpossessive(word)
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _content_stems(words: Iterable[str]) -> set[str]:
    stems = set()
    for word in words:
        stem = _stem(word)
        if stem and stem not in _STOP and _unpossessive(word) not in _STOP:
            stems.add(stem)
    return stems


def mentions(text: str, max_words: int = 4) -> list[tuple[int, int, str]]:
    """Candidate entity keys in ``text``: ``(first token, end token, normalized key)`` for
    every n-gram of 1..``max_words`` tokens, longest first; the last word of an n-gram is
    tried as written and without a possessive. A single stop word is left out unless it is
    capitalised inside the sentence ("What did Will say?")."""
    written = _words(text)
    tokens = [w.lower() for w, _start in written]
    out: list[tuple[int, int, str]] = []
    for n in range(min(max_words, len(tokens)), 0, -1):
        for i in range(len(tokens) - n + 1):
            words = tokens[i : i + n]
            last = _unpossessive(words[-1])
            if n == 1 and (not last or last in _STOP) and not _named(written, i):
                continue
            keys = dict.fromkeys(
                (normalize(" ".join(words)), normalize(" ".join([*words[:-1], last])))
            )
            out.extend((i, i + n, key) for key in keys if key)
    return out


def _named(written: list[tuple[str, bool]], i: int) -> bool:
    """Whether word ``i`` looks like a name: capitalised, not starting a sentence, not "I"."""
    word, starts = written[i]
    return not starts and len(word) > 1 and word[0].isupper()


def _in_scope(node: Node, scope: Scope) -> bool:
    return node[0] == scope.user_id and (not scope.agent_id or node[1] == scope.agent_id)


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
    return flt.include_superseded or point.valid_to_us is None


@dataclass(slots=True)
class _ScopeIndex:
    """The entities of one scope at one graph version."""

    signature: tuple[int, int]
    keys: dict[str, list[Node]]  # normalized name or alias -> nodes
    names: list[str]  # distinct node names, the rows of ``matrix``
    by_name: dict[str, list[Node]]
    matrix: np.ndarray | None = None  # name embeddings, built on first use
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True, slots=True)
class Link:
    node: Node
    weight: float  # personalization weight: 1.0 for a name match, the cosine otherwise
    how: str  # "name" or "embedding"


class GraphChannel:
    """Entity linking + Personalized PageRank over the fact graph of the query's scope."""

    name = "graph"

    def __init__(
        self,
        semantic: SemanticStore,
        *,
        link_threshold: float = 0.5,
        link_top: int = 3,
        max_ngram: int = 4,
        hops: int = 2,
        alpha: float = 0.85,
        current_bonus: float = 0.1,
        overlap_bonus: float = 0.2,
        superseded_weight: float = 0.5,
        chunks_per_fact: int = 2,
        chunk_factor: float = 0.99,
        max_edges: int = 20_000,
        max_scopes: int = 256,
    ) -> None:
        self._semantic = semantic
        self.link_threshold = link_threshold
        self.link_top = link_top
        self.max_ngram = max_ngram
        self.hops = hops
        self.alpha = alpha
        self.current_bonus = current_bonus
        self.overlap_bonus = overlap_bonus
        self.superseded_weight = superseded_weight
        self.chunks_per_fact = chunks_per_fact
        self.chunk_factor = chunk_factor
        self.max_edges = max_edges
        self._max_scopes = max_scopes
        self._lock = threading.Lock()  # guards the caches below (never held with the graph's)
        self._snapshot: tuple[tuple[int, int], dict[str, list[tuple[Node, tuple[str, ...]]]]] = (
            (-1, -1),
            {},
        )
        self._indexes: OrderedDict[tuple[str, str], _ScopeIndex] = OrderedDict()
        self._name_vectors: dict[str, np.ndarray] = {}
        self._name_model = ""

    @property
    def _graph(self) -> NetworkXGraph:
        return self._semantic.graph

    # -- the channel -------------------------------------------------------------------------

    def search(self, ctx: QueryContext, limit: int) -> list[tuple[MemoryPoint, float]]:
        if limit <= 0:
            return []
        embedder, vectors = self._semantic.wait_ready(0)
        links = self._link(ctx, embedder)
        if not links:
            return []
        scope = ctx.query.scope
        edges = self._neighbourhood(links, scope)
        if not edges:
            return []
        ranked = self._rank(edges, links, ctx.query.text, 3 * limit)
        return self._assemble(ranked, ctx.query.filter(), vectors, limit)

    def link(self, ctx: QueryContext) -> list[Link]:
        """The entities the query links to, strongest first (for explanations and tests)."""
        embedder, _vectors = self._semantic.wait_ready(0)
        links = self._link(ctx, embedder)
        return sorted(links.values(), key=lambda lk: (-lk.weight, lk.node))

    # -- 1. linking --------------------------------------------------------------------------

    def _link(self, ctx: QueryContext, embedder: Embedder) -> dict[Node, Link]:
        index = self._scope_index(ctx.query.scope)
        if not index.names:
            return {}
        links: dict[Node, Link] = {}
        spans: list[tuple[int, int]] = []
        for start, end, key in mentions(ctx.query.text, self.max_ngram):
            nodes = index.keys.get(key)
            if not nodes or any(
                s <= start and end <= e and (s, e) != (start, end) for s, e in spans
            ):
                continue
            spans.append((start, end))
            for node in nodes:
                links[node] = Link(node, 1.0, "name")
        if self.link_top > 0 and ctx.vector is not None and ctx.vector.size:
            for name, sim in self._similar_names(index, ctx.vector, embedder):
                for node in index.by_name[name]:
                    if node not in links:
                        links[node] = Link(node, sim, "embedding")
        return links

    def _similar_names(
        self, index: _ScopeIndex, vector: np.ndarray, embedder: Embedder
    ) -> list[tuple[str, float]]:
        matrix = self._name_matrix(index, embedder)
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if matrix.shape[0] == 0 or matrix.shape[1] != query.shape[0]:
            return []
        norm = float(np.linalg.norm(query))
        if norm == 0.0:
            return []
        sims = matrix @ (query / norm)
        top = min(self.link_top, sims.shape[0])
        best = np.argpartition(-sims, top - 1)[:top]
        out = [(index.names[i], float(sims[i])) for i in best if sims[i] >= self.link_threshold]
        return sorted(out, key=lambda item: (-item[1], item[0]))

    def _name_matrix(self, index: _ScopeIndex, embedder: Embedder) -> np.ndarray:
        with index.lock:  # one builder per index; other scopes go on
            if index.matrix is not None:
                return index.matrix
            with self._lock:
                if self._name_model != embedder.model_name:
                    self._name_vectors.clear()
                    self._name_model = embedder.model_name
                missing = [n for n in index.names if n not in self._name_vectors]
            fresh: dict[str, np.ndarray] = {}
            for i in range(0, len(missing), 256):
                batch = missing[i : i + 256]
                rows = np.asarray(embedder.encode_documents(batch), dtype=np.float32)
                fresh.update(zip(batch, rows, strict=True))
            with self._lock:
                self._name_vectors.update(fresh)
                rows_all = [self._name_vectors.get(n) for n in index.names]
            dim = embedder.dim
            matrix = np.zeros((len(index.names), dim), dtype=np.float32)
            for i, row in enumerate(rows_all):
                if row is not None and row.shape == (dim,):
                    matrix[i] = row
            index.matrix = matrix
            return matrix

    def _scope_index(self, scope: Scope) -> _ScopeIndex:
        signature, by_user = self._entities()
        key = (scope.user_id, scope.agent_id)
        with self._lock:
            index = self._indexes.get(key)
            if index is not None and index.signature == signature:
                self._indexes.move_to_end(key)
                return index
        keys: dict[str, list[Node]] = {}
        by_name: dict[str, list[Node]] = {}
        for node, aliases in by_user.get(scope.user_id, []):
            if not _in_scope(node, scope):
                continue
            by_name.setdefault(node[2], []).append(node)
            for k in dict.fromkeys((node[2], *(normalize(a) for a in aliases))):
                if k:
                    keys.setdefault(k, []).append(node)
        index = _ScopeIndex(signature, keys, sorted(by_name), by_name)
        with self._lock:
            self._indexes[key] = index
            self._indexes.move_to_end(key)
            while len(self._indexes) > self._max_scopes:
                self._indexes.popitem(last=False)
        return index

    def _entities(self) -> tuple[tuple[int, int], dict[str, list[tuple[Node, tuple[str, ...]]]]]:
        """Every node with its aliases, grouped by user, at the graph's current version (one
        pass over the graph each time it changes, shared by every scope)."""
        graph = self._graph
        with graph._lock:
            ends = getattr(graph, "_ends", None)
            edges = len(ends) if ends is not None else graph.graph.number_of_edges()
            signature = (graph.graph.number_of_nodes(), edges)
            snapshot = self._snapshot
            if snapshot[0] == signature:
                return snapshot
            by_user: dict[str, list[tuple[Node, tuple[str, ...]]]] = {}
            for node, data in graph.graph.nodes(data=True):
                by_user.setdefault(node[0], []).append((node, tuple(data.get("aliases", ()))))
            self._snapshot = (signature, by_user)
            return self._snapshot

    # -- 2. expansion ------------------------------------------------------------------------

    def _neighbourhood(self, seeds: Iterable[Node], scope: Scope) -> list[tuple[Node, Node, Edge]]:
        """The edges within ``hops`` hops of the seeds (either direction), inside ``scope``,
        copied out under the graph's lock (the Edge records themselves are immutable)."""
        graph = self._graph
        found: dict[str, tuple[Node, Node, Edge]] = {}
        with graph._lock:
            g = graph.graph
            # networkx's own dict-of-dicts (its views cost ~10x more per step on hubs)
            succ, pred = g._succ, g._pred
            frontier = [n for n in seeds if _in_scope(n, scope) and n in succ]
            visited = set(frontier)
            for _hop in range(self.hops):
                following: list[Node] = []
                for node in frontier:
                    for adjacency, outgoing in ((succ[node], True), (pred[node], False)):
                        for other, keyed in adjacency.items():
                            if not _in_scope(other, scope):
                                continue
                            u, v = (node, other) if outgoing else (other, node)
                            for edge_id, data in keyed.items():
                                found[edge_id] = (u, v, data["edge"])
                            if other not in visited:
                                visited.add(other)
                                following.append(other)
                    if len(found) >= self.max_edges:
                        break
                frontier = following
                if len(found) >= self.max_edges:
                    break
        return list(found.values())

    # -- 3. result ---------------------------------------------------------------------------

    def _rank(
        self,
        edges: Sequence[tuple[Node, Node, Edge]],
        links: dict[Node, Link],
        text: str,
        top: int,
    ) -> list[tuple[Edge, float]]:
        """The ``top`` best edges with their scores, best first."""
        index: dict[Node, int] = {node: i for i, node in enumerate(links)}
        src = np.empty(len(edges), dtype=np.int64)
        dst = np.empty(len(edges), dtype=np.int64)
        weight = np.empty(len(edges), dtype=np.float64)
        for i, (u, v, edge) in enumerate(edges):
            src[i] = index.setdefault(u, len(index))
            dst[i] = index.setdefault(v, len(index))
            weight[i] = 1.0 if edge.current else self.superseded_weight
        seeds = np.zeros(len(index))
        for node, link in links.items():
            seeds[index[node]] = link.weight
        mass = personalized_pagerank(len(index), src, dst, weight, seeds, self.alpha)
        base = mass[src] + mass[dst]
        base /= base.max() or 1.0
        # The linked entities' own names are not "overlap": only what the query asks about.
        linked = {w for node in links for w in _content_stems(node[2].split())}
        asked = _content_stems(_tokens(text)) - linked
        scored: list[tuple[float, str, int]] = []
        for i, (_u, _v, edge) in enumerate(edges):
            score = float(base[i])
            if edge.current:
                score += self.current_bonus
            if asked and self.overlap_bonus:
                words = _edge_words(edge.predicate, edge.object)
                if words:
                    score += self.overlap_bonus * len(words & asked) / len(words)
            scored.append((-score, edge.id, i))
        best = heapq.nsmallest(top, scored)
        return [(edges[i][2], -neg) for neg, _id, i in best]

    def _assemble(
        self,
        ranked: list[tuple[Edge, float]],
        flt: PointFilter,
        vectors: VectorStore,
        limit: int,
    ) -> list[tuple[MemoryPoint, float]]:
        """Each edge's fact, then its source chunks, through the filter, up to ``limit``."""
        facts_ok = not flt.kinds or "fact" in flt.kinds
        chunks_ok = self.chunks_per_fact > 0 and (not flt.kinds or "episode_chunk" in flt.kinds)
        if not facts_ok and not chunks_ok:
            return []
        per_edge = int(facts_ok) + (self.chunks_per_fact if chunks_ok else 0)
        out: list[tuple[MemoryPoint, float]] = []
        seen: set[str] = set()
        facts: dict[str, MemoryPoint] = {}
        chunks: dict[str, list[MemoryPoint]] = {}
        pos = 0
        while len(out) < limit and pos < len(ranked):
            # the edges that may still fit (at least one point each), fetched together
            group = ranked[pos : pos + max(4, -(-(limit - len(out)) // per_edge))]
            pos += len(group)
            facts.update((p.id, p) for p in vectors.get([edge.id for edge, _ in group]))
            if chunks_ok:
                episodes = {e.episode_id for e, _ in group if e.episode_id not in chunks}
                chunks.update(self._chunks(vectors, flt, episodes))
            for edge, score in group:
                fact = facts.get(edge.id)
                if fact is None or fact.scope.user_id != flt.user_id:
                    continue  # forgotten since (the graph keeps the edge), or not ours
                if fact.id not in seen and admits(flt, fact):
                    seen.add(fact.id)
                    out.append((fact, score))
                for chunk in self._chunks_of(edge, chunks):
                    if len(out) >= limit:
                        break
                    if chunk.id not in seen:
                        seen.add(chunk.id)
                        out.append((chunk, score * self.chunk_factor))
                if len(out) >= limit:
                    break
        result: list[tuple[MemoryPoint, float]] = []
        floor = float("inf")
        for point, score in out:  # scores never rise: chunks rank just after their fact
            floor = min(floor, score)
            result.append((point, floor))
        return result

    def _chunks(
        self, vectors: VectorStore, flt: PointFilter, episodes: Iterable[str]
    ) -> dict[str, list[MemoryPoint]]:
        """The admitted ``episode_chunk`` points of these episodes, by episode."""
        wanted = tuple(sorted(e for e in episodes if e))
        if not wanted:
            return {}
        points = vectors.scroll(
            PointFilter(
                user_id=flt.user_id,
                agent_id=flt.agent_id,
                kinds=("episode_chunk",),
                episode_ids=wanted,
                created_from_us=flt.created_from_us,
                created_to_us=flt.created_to_us,
            ),
            limit=max(1000, 200 * len(wanted)),
        )
        by_episode: dict[str, list[MemoryPoint]] = {e: [] for e in wanted}
        for point in points:
            if point.kind == "episode_chunk" and admits(flt, point):
                by_episode.setdefault(point.episode_id, []).append(point)
        return by_episode

    def _chunks_of(self, edge: Edge, chunks: dict[str, list[MemoryPoint]]) -> list[MemoryPoint]:
        """The chunks of the edge's episode holding its source messages, best covering first."""
        seqs = {s.seq for s in edge.sources}
        if not seqs:
            return []
        found: list[tuple[int, int, str, MemoryPoint]] = []
        for chunk in chunks.get(edge.episode_id, []):
            if chunk.scope != edge.scope:
                continue
            chunk_seqs = {s.seq for s in chunk.sources}
            common = len(seqs & chunk_seqs)
            if common:
                found.append((-common, min(chunk_seqs), chunk.id, chunk))
        found.sort(key=lambda item: item[:3])
        return [item[3] for item in found[: self.chunks_per_fact]]


@functools.lru_cache(maxsize=65536)
def _edge_words(predicate: str, obj: str) -> frozenset[str]:
    return frozenset(_content_stems([*predicate.split("_"), *_tokens(obj)]))


def personalized_pagerank(
    size: int,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    seeds: np.ndarray,
    alpha: float = 0.85,
    tol: float = 1e-6,
    max_iter: int = 100,
) -> np.ndarray:
    """PageRank of the undirected weighted multigraph ``src[i] - dst[i]`` (``weight[i]``) over
    nodes ``0..size-1``, teleporting to (and dangling into) ``seeds`` (normalised).

    The same iteration as ``networkx.pagerank(G.to_undirected(), alpha, personalization)``
    (parallel edges add up, a self-loop counts once), on arrays: building a networkx graph
    and its scipy matrix per query costs ~10x more than the walk itself on a hub's
    neighbourhood. Returns the last iterate when ``max_iter`` is reached.
    """
    if size == 0:
        return np.zeros(0)
    loop = src == dst
    rows = np.concatenate([src, dst[~loop]])
    cols = np.concatenate([dst, src[~loop]])
    w = np.concatenate([weight, weight[~loop]]).astype(np.float64)
    out = np.bincount(rows, weights=w, minlength=size)
    total = float(seeds.sum())
    p = seeds / total if total > 0 else np.full(size, 1.0 / size)
    dangling = out == 0
    step = w / np.where(out[rows] > 0, out[rows], 1.0)
    x = np.full(size, 1.0 / size)
    for _ in range(max_iter):
        last = x
        spread = np.bincount(cols, weights=x[rows] * step, minlength=size)
        x = alpha * (spread + x[dangling].sum() * p) + (1.0 - alpha) * p
        if float(np.abs(x - last).sum()) < size * tol:
            break
    return x
