"""The entity <-> memory graph of one scope, which the graph channel walks (as in HippoRAG):
:class:`ScopeGraph`, made by :func:`assemble` from the scope's feature table.

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

A graph holds no Python object per memory: its ids, edges and walk are arrays, and only its
entities (names, far fewer than memories) are keys of a dict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recall.graph.features import ID, NAME_BYTES, Features, FeatureTable
from recall.graph.pagerank import Walk
from recall.words import mentions
from tiers.semantic.graph import normalize
from tiers.semantic.vectors import MemoryPoint

# The weight of a question turn's link to its reply: about that of a name four memories
# share (1 / log 5 = 0.62). Chosen on the LoCoMo dev split from 0.5, 1 and 2, which measured
# alike (docs/benchmarks.md, leave-one-conversation-out).
REPLY_WEIGHT = 0.5


@dataclass(frozen=True, slots=True)
class ScopeGraph:
    """Nodes ``0..count-1`` are memories (point ``ids[i]``, with the features of row ``i``);
    entity ``key`` is node ``entities[key]``. Edges ``src[i] - dst[i]`` (undirected) weigh
    ``weight[i]``. A memory is no Python object: its id is a row of ``ids``, found by
    :meth:`node`."""

    features: FeatureTable  # its memories', row i for node i
    entities: dict[str, int]  # entity key or alias -> node
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    size: int  # nodes
    walk: Walk  # the random walk over the edges (its sparse transition matrix)
    order: np.ndarray  # the memories' rows by id (for node)
    sorted_ids: np.ndarray  # ids[order]
    speakers: frozenset[str] = frozenset()  # the speakers' keys, short forms included

    @property
    def ids(self) -> np.ndarray:
        """The memories' point ids (``features.ID``), in node order."""
        return self.features.ids

    @property
    def count(self) -> int:
        """How many memories (the first nodes)."""
        return len(self.ids)

    def point_id(self, node: int) -> str:
        return bytes(self.ids[node]).decode()

    def memory_ids(self) -> list[str]:
        """Every memory's point id, in node order."""
        return [bytes(i).decode() for i in self.ids]

    def node(self, point_id: str) -> int | None:
        """The node of a memory, or None when the graph has none."""
        if not self.count:
            return None
        key = point_id.encode()
        at = int(np.searchsorted(self.sorted_ids, key))
        if at < self.count and self.sorted_ids[at] == key:
            return int(self.order[at])
        return None

    def nodes(self, point_ids: Sequence[str]) -> np.ndarray:
        """The nodes of those of ``point_ids`` the graph holds (the others left out), found
        at once as :meth:`node` finds one."""
        if not self.count or not point_ids:
            return np.zeros(0, dtype=np.int64)
        keys = np.array([p.encode() for p in point_ids])  # sized to the longest: never cut
        at = np.minimum(np.searchsorted(self.sorted_ids, keys), self.count - 1)
        return self.order[at[self.sorted_ids[at] == keys]].astype(np.int64)

    @property
    def nbytes(self) -> int:
        """About what the graph holds in memory: its arrays, its features, and per entity its
        key with its dict entry (measured with ``tracemalloc``: about 120 bytes)."""
        arrays = self.src.nbytes + self.dst.nbytes + self.weight.nbytes + self.walk.nbytes
        arrays += self.order.nbytes + self.sorted_ids.nbytes + self.features.nbytes
        return arrays + NAME_BYTES * len(self.entities) + 1024

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
    table = FeatureTable.of([(p.id, Features.of(p)) for p in points])
    return assemble(table, triplets, reply_weight)


def assemble(
    table: FeatureTable,
    triplets: list[tuple[str, str, str]],
    reply_weight: float = REPLY_WEIGHT,
) -> ScopeGraph:
    """The graph of the memories of ``table``, in its order; ``triplets`` are ``(fact point
    id, subject, object)``, in any order (they are sorted); ``reply_weight``: a question
    turn's link to its reply (0: none).

    In arrays, whatever the scope's size: a memory links to its speakers, the names inside its
    sentences, those of its sentence-initial candidates that the scope knows (a speaker, a
    name inside, a triplet's end) and its triplet's ends, each through the short-name aliases;
    memory ``i``'s links come in the order of their keys, and entities are numbered in the
    order they are first linked."""
    n = len(table)
    named: dict[str, str] = {}  # each name of a triplet normalized once
    triplets = sorted(
        (
            pid,
            named.get(s) or named.setdefault(s, normalize(s)),
            named.get(o) or named.setdefault(o, normalize(o)),
        )
        for pid, s, o in triplets
    )
    code = {w: i for i, w in enumerate(table.words)}
    t_subject = np.array([code.setdefault(s, len(code)) for _p, s, _o in triplets], np.int64)
    t_object = np.array([code.setdefault(o, len(code)) for _p, _s, o in triplets], np.int64)
    t_memory = table.positions(np.array([p for p, _s, _o in triplets], dtype=ID))
    words = list(code)
    size_v = len(words)
    blank = np.array([not w for w in words] or [False], dtype=bool)[:size_v]
    spoken = np.zeros(size_v, dtype=bool)
    spoken[table.speakers.codes] = True
    spoken &= ~blank
    known = spoken.copy()
    known[table.inside.codes] = True
    known[t_subject] = known[t_object] = True
    speakers = {words[c] for c in np.flatnonzero(spoken)}
    alias = short_names(speakers, {words[c] for c in np.flatnonzero(known)})
    to = np.arange(size_v, dtype=np.int64)  # a code -> the code it stands for
    for short, full in alias.items():
        to[code[short]] = code[full]
    initial_known = known[table.initial.codes]
    mem = np.concatenate(
        [
            table.speakers.rows,
            table.inside.rows,
            table.initial.rows[initial_known],
            t_memory[t_memory >= 0],
            t_memory[t_memory >= 0],
        ]
    )
    key = to[
        np.concatenate(
            [
                table.speakers.codes,
                table.inside.codes,
                table.initial.codes[initial_known],
                t_subject[t_memory >= 0],
                t_object[t_memory >= 0],
            ]
        ).astype(np.int64)
    ]
    keep = ~blank[key]
    mem, key = mem[keep], key[keep]
    rank = np.empty(size_v, dtype=np.int64)  # a code's place in the words' sorted order
    rank[np.argsort(np.array(words or [""], dtype=np.str_)[:size_v], kind="stable")] = np.arange(
        size_v
    )
    by_rank = np.argsort(rank)
    pairs = np.sort(mem * max(1, size_v) + rank[key])  # (memory, key) once, keys sorted
    pairs = pairs[np.concatenate([[True], pairs[1:] != pairs[:-1]])] if len(pairs) else pairs
    mem, key = pairs // max(1, size_v), by_rank[pairs % max(1, size_v)]
    linked, first = np.unique(key, return_index=True)
    entity = np.full(size_v, -1, dtype=np.int64)  # code -> entity number, first linked first
    entity[linked[np.argsort(first, kind="stable")]] = np.arange(len(linked))
    src_parts, dst_parts = [mem], [n + entity[key]]
    degree = np.bincount(dst_parts[0] - n, minlength=len(linked))
    weight_parts = [1.0 / np.log1p(degree[dst_parts[0] - n].astype(np.float64))]
    u, v = entity[to[t_subject]], entity[to[t_object]]  # entity - entity, by its triplet
    joined = (u >= 0) & (v >= 0) & (u != v)
    src_parts.append(n + u[joined])
    dst_parts.append(n + v[joined])
    weight_parts.append(np.ones(int(joined.sum())))
    if reply_weight > 0:  # a question turn - the next turn of its session
        asking, replying = replies(table)
        src_parts.append(asking)
        dst_parts.append(replying)
        weight_parts.append(np.full(len(asking), reply_weight))
    nodes = {words[c]: n + int(entity[c]) for c in linked}
    nodes.update({short: nodes[full] for short, full in alias.items() if full in nodes})
    size = n + len(linked)
    src_ = np.concatenate(src_parts).astype(np.int32)
    dst_ = np.concatenate(dst_parts).astype(np.int32)
    weight_ = np.concatenate(weight_parts).astype(np.float64)
    walk = Walk.of(size, src_, dst_, weight_, hubs_from=n)  # the entities: the hubs
    spoken_keys = frozenset(speakers) | frozenset(alias)  # a short form names one speaker
    order = np.argsort(table.ids, kind="stable")
    return ScopeGraph(
        table, nodes, src_, dst_, weight_, size, walk, order, table.ids[order], spoken_keys
    )


def replies(table: FeatureTable) -> tuple[np.ndarray, np.ndarray]:
    """The question turns of ``table`` and the rows of their replies: the turn of the same
    session whose seq is one more (of two rows of one turn, the later)."""
    turns = np.flatnonzero(table.session >= 0)
    if not len(turns):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    low = int(table.seq[turns].min())
    span = int(table.seq[turns].max()) - low + 2
    keys = table.session[turns].astype(np.int64) * span + table.seq[turns] - low
    last = len(turns) - 1 - np.unique(keys[::-1], return_index=True)[1]  # later rows win
    known_keys, known_rows = keys[last], turns[last]
    asking = turns[table.asks[turns]]
    wanted = table.session[asking].astype(np.int64) * span + table.seq[asking] - low + 1
    at = np.minimum(np.searchsorted(known_keys, wanted), len(known_keys) - 1)
    found = known_keys[at] == wanted
    return asking[found], known_rows[at[found]]
