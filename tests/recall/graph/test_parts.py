"""The graph channel's parts that need no stores: entity mentions and names in text, and
Personalized PageRank against networkx (the channel itself:
``tests/recall/graph/test_channel.py``)."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest

from recall.graph.features import FeatureTable
from recall.graph.pagerank import (
    HUB_DTYPE,
    LARGE_NONZEROS,
    SAMPLE_STRIDE,
    Hubs,
    Walk,
    leading,
)
from recall.graph.scope import assemble
from recall.words import mentions, names
from tests.recall.graph.test_scope import random_scope
from tiers.semantic.vectors.ranking import tie_keys


def test_mentions_handle_possessives_and_stop_words():
    keys = {k for _s, _e, k in mentions("What did Caroline's mom give her?")}
    assert {"caroline", "caroline's", "caroline's mom", "mom give her"} <= keys
    assert not {"what", "did", "her"} & keys
    assert "new york" in {k for _s, _e, k in mentions("Trip to New York\u2019s museums")}
    assert "acme corp" in {k for _s, _e, k in mentions("Who founded the Acme Corp.?")}
    assert "will" in {k for _s, _e, k in mentions("What did Will say?")}
    assert "will" not in {k for _s, _e, k in mentions("What will I say? Will it rain?")}


def test_the_walks_pagerank_matches_networkx():
    rng = random.Random(3)
    size = 40
    pairs = [(rng.randrange(size - 2), rng.randrange(size - 2)) for _ in range(90)]
    edges = [(u, v, rng.choice([0.5, 1.0])) for u, v in pairs]
    edges += [(5, 5, 1.0), (1, 2, 1.0), (1, 2, 0.5)]  # a self-loop and parallel edges
    seeds = {1: 1.0, 7: 0.6, size - 1: 0.3}  # the last one is isolated (dangling)
    walk = nx.Graph()
    walk.add_nodes_from(range(size))
    for u, v, w in edges:
        if walk.has_edge(u, v):
            walk[u][v]["weight"] += w
        else:
            walk.add_edge(u, v, weight=w)
    expected = nx.pagerank(walk, alpha=0.85, personalization=seeds, weight="weight", tol=1e-10)
    src, dst, weight = (np.array(col) for col in zip(*edges, strict=True))
    vector = np.zeros(size)
    for node, w in seeds.items():
        vector[node] = w
    got = Walk.of(size, src, dst, weight).rank(vector, 0.85, tol=1e-10, max_iter=500)
    assert got == pytest.approx([expected[n] for n in range(size)], abs=1e-8)
    assert Walk.of(0, src[:0], dst[:0], weight[:0]).rank(vector[:0]).size == 0


def large_edges(hub: bool = False) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The nodes, edges (``src - dst``, ``weight``) and seeds of a walk of
    :data:`LARGE_NONZEROS` and more; the last 10 nodes dangle. With ``hub``, one node linked to
    a third of the others (a speaker's entity): a row far longer than the rest."""
    rng = np.random.default_rng(11)
    size, edges = 20_000, LARGE_NONZEROS // 2 + 1_000
    src, dst = rng.integers(0, size - 10, edges), rng.integers(0, size - 10, edges)
    if hub:
        src[: size // 3], dst[: size // 3] = size - 11, np.arange(size // 3)
    seeds = np.zeros(size)
    seeds[rng.integers(0, size - 10, 5)] = 1.0
    return size, src, dst, rng.choice([0.5, 1.0, 2.0], edges), seeds


def a_scope_like_walk(among: bool) -> tuple[Walk, np.ndarray, tuple[int, int]]:
    """A large walk shaped as a scope's graph: 40,000 memories, each linked to one to three of
    50 entities (the last nodes, the first a speaker of half of them) and two entities linked;
    with ``among``, some memories linked in pairs (a question and its reply). The last memory
    dangles, and the twins are two memories linked alike. Returns the walk, seeds (entities and
    memories) and the twins."""
    rng = np.random.default_rng(5)
    n, hubs = 40_000, 50
    memories = np.arange(n - 3)  # and the twins, and the one that dangles
    m = len(memories)
    src = [memories, memories[::2], memories[::3]]
    dst = [n + (memories % 2) * rng.integers(1, hubs, m), n + rng.integers(0, hubs, m // 2 + 1)]
    dst.append(n + rng.integers(0, hubs, len(memories[::3])))
    if among:
        asking = memories[: n // 2 : 4]
        src.append(asking)
        dst.append(asking + 1)
    twins = (n - 3, n - 2)
    src.append(np.array([n + 1, twins[0], twins[1]]))
    dst.append(np.array([n + 2, n + 7, n + 7]))
    src_, dst_ = np.concatenate(src), np.concatenate(dst)
    weight = rng.choice([0.5, 1.0, 2.0], len(src_))
    weight[-2:] = 1.0  # the twins'
    walk = Walk.of(n + hubs, src_, dst_, weight, hubs_from=n)
    seeds = np.zeros(n + hubs)
    seeds[[n + 7, n + 3, 11, 4_000, 20_001]] = [1.0, 0.5, 0.2, 0.3, 0.1]
    return walk, seeds, twins


@pytest.mark.parametrize("among", [False, True])
def test_a_large_walks_products_by_hub_are_its_matrixs(among):
    walk, seeds, twins = a_scope_like_walk(among)
    assert walk.large and walk.hubs is not None
    assert (walk.hubs.among is not None) == among
    x = np.random.default_rng(2).random(walk.size)
    # in single precision, each node's steps from the others, then from the hubs
    product = walk.product(x.astype(HUB_DTYPE))
    assert walk.dtype == HUB_DTYPE == product.dtype
    assert product == pytest.approx(walk.matrix @ x, rel=1e-5, abs=1e-30)
    by_rows = Walk(walk.matrix, walk.degree, walk.size, large=True)  # by rows, not hubs
    assert by_rows.dtype == np.float64
    got, rows = walk.rank(seeds, 0.5), by_rows.rank(seeds, 0.5)
    assert got.dtype == HUB_DTYPE and rows.dtype == np.float64
    assert got == pytest.approx(rows, rel=1e-4, abs=1e-30)  # a hub sums many steps
    assert got[twins[0]] == got[twins[1]] > 0  # two memories linked alike: the same mass
    ids = np.arange(walk.size)  # ties by node
    assert leading(got, 50, ids).tolist() == leading(rows, 50, ids).tolist()
    assert walk.nbytes == by_rows.nbytes + walk.hubs.nbytes > by_rows.nbytes


@pytest.mark.parametrize("among", [False, True])
def test_a_large_walks_first_step_by_hub_is_its_product(among):
    """The seeds' edges by hub: a hub's column as kept (its memories, the hubs it is linked
    to), a memory's from its own row."""
    walk, seeds, twins = a_scope_like_walk(among)
    assert walk.hubs is not None
    seeds[walk.hubs.first + 1] = 0.4  # a hub linked to another
    at = np.flatnonzero(seeds)
    assert walk._few(at)
    assert (at >= walk.hubs.first).sum() == 3 and (at < walk.hubs.first).sum() == 3
    x = (seeds / seeds.sum()).astype(HUB_DTYPE)
    got = walk.spread(at, x[at])
    assert got.dtype == HUB_DTYPE
    assert got == pytest.approx(walk.matrix @ x.astype(np.float64), rel=1e-5, abs=1e-30)
    assert got[twins[0]] == got[twins[1]] > 0  # linked alike to a seed


def test_only_a_large_walk_with_named_hubs_goes_by_hub():
    size, src, dst, weight, _seeds = large_edges(hub=True)
    assert Walk.of(size, src, dst, weight).hubs is None  # none named
    assert Walk.of(size, src, dst, weight, hubs_from=size - 11).hubs is not None
    assert Walk.of(size, src, dst, weight, hubs_from=size).hubs is None  # no node is one
    small = Walk.of(3, np.array([0, 1]), np.array([1, 2]), np.array([1.0, 1.0]), hubs_from=2)
    assert not small.large and small.hubs is None  # a small graph's product is quick


@pytest.mark.parametrize("hub", [False, True])
def test_a_large_walks_first_step_from_its_seeds_edges_is_the_products(hub):
    size, src, dst, weight, seeds = large_edges(hub)
    twins = size - 3, size - 2  # two nodes linked alike, to a seed only
    seed = int(np.flatnonzero(seeds)[0])
    # the twins' edges, a parallel edge and a self-loop at a seed, a self-loop elsewhere
    src = np.concatenate([src, [twins[0], twins[1], seed, seed, 7]])
    dst = np.concatenate([dst, [seed, seed, seed, 3, 7]])
    weight = np.concatenate([weight, [1.0, 1.0, 2.0, 0.5, 1.0]])
    walk = Walk.of(size, src, dst, weight)
    seeds[[7, size - 1]] = 0.5  # and a dangling seed
    at = np.flatnonzero(seeds)
    assert walk.large and walk._few(at)  # its first step is taken from the seeds
    x = seeds / seeds.sum()
    assert walk.spread(at, x[at]) == pytest.approx(walk.matrix @ x, rel=1e-12, abs=1e-18)
    by_products = Walk(walk.matrix, walk.degree, walk.size)  # products only
    got, products = walk.rank(seeds, 0.85), by_products.rank(seeds, 0.85)
    assert got == pytest.approx(products, rel=1e-9, abs=1e-18)
    assert got[twins[0]] == got[twins[1]] > 0
    ids = np.arange(walk.size)  # ties by node
    assert leading(got, 50, ids).tolist() == leading(products, 50, ids).tolist()


def test_the_leading_nodes_are_a_full_sorts_first_less_the_zeros():
    rng = np.random.default_rng(7)
    for size in (0, 1, 5, 60, 1_000):
        # few distinct values: ties everywhere, at the cut too; a third of the nodes at 0
        mass = rng.integers(0, 4, size).astype(float) * rng.choice([0.0, 1.0], size, p=[0.3, 0.7])
        order = [int(i) for i in np.argsort(-mass, kind="stable") if mass[i] > 0]
        for n in (0, 1, 2, 3, 7, size // 2, size, size + 5):
            assert leading(mass, n, np.arange(size)).tolist() == order[:n], (size, n)


@pytest.mark.parametrize("shape", ["spread", "ties", "mostly zero"])
def test_a_large_arrays_leading_nodes_from_a_sampled_bound_are_a_full_sorts(shape):
    """Past a few thousand entries the bound is sampled (every SAMPLE_STRIDE-th): the same
    nodes, whether the bound falls among ties, above the cut's ties, or finds too few."""
    rng = np.random.default_rng(3)
    size = 50_000
    if shape == "spread":  # a walk's masses: a long tail
        mass = rng.pareto(1.5, size).astype(HUB_DTYPE)
    elif shape == "ties":  # ties at the cut, and masses tying within five digits below it
        mass = rng.integers(1, 6, size).astype(HUB_DTYPE) * HUB_DTYPE(1e-3)
        mass[rng.integers(0, size, 500)] *= HUB_DTYPE(1 - 3e-5)
    else:  # the sample sees none of the few positive nodes
        mass = np.zeros(size, HUB_DTYPE)
        mass[rng.integers(0, size // SAMPLE_STRIDE, 40) * SAMPLE_STRIDE + 1] = 1.0
    ids = np.arange(size)
    keys = tie_keys(np.where(mass > 0, mass, 1.0))
    order = [int(i) for i in np.lexsort((ids, -keys)) if mass[i] > 0]
    for n in (1, 7, 50, 500, 5_000):
        assert leading(mass, n, ids).tolist() == order[:n], n


def test_with_ids_the_leading_nodes_tie_by_id_to_five_significant_digits():
    rng = np.random.default_rng(11)
    for size in (1, 5, 60, 1_000):
        ids = np.array([f"{i:08x}-{int(rng.integers(1 << 30)):x}" for i in range(size)], "S")
        rng.shuffle(ids)  # the nodes numbered in any order of their ids
        base = rng.integers(1, 4, size) * rng.choice([0.0, 1.0], size, p=[0.3, 0.7]) * 1e-3
        # a build's sums in another order: the last bits differ
        mass = base * (1.0 + rng.uniform(-1e-12, 1e-12, size))
        expected = sorted((i for i in range(size) if base[i] > 0), key=lambda i: (-base[i], ids[i]))
        for n in (1, 2, 3, 7, size // 2, size, size + 5):
            assert leading(mass, n, ids).tolist() == expected[:n], (size, n)


def test_two_builds_of_one_scope_lead_with_the_same_memories():
    """The same memories read in two orders (a scope's nodes are numbered as its memories
    were read): the same leading memories, in the same order."""
    rng = random.Random(5)
    drawn, triplets = random_scope(rng, 300)
    turns = {f.turn: (pid, f) for pid, f in reversed(drawn) if f.turn is not None}
    # one row a turn (of two rows of one turn, the graph links the later read to its question)
    memories = [(pid, f) for pid, f in drawn if f.turn is None or turns[f.turn][0] == pid]
    shuffled = list(memories)
    random.Random(6).shuffle(shuffled)
    led = []
    for rows in (memories, shuffled):
        graph = assemble(FeatureTable.of(rows), triplets)
        seeds = np.zeros(graph.size)
        seeds[[graph.node(pid) for pid, _f in memories[:3]]] = 1.0
        mass = graph.walk.rank(seeds, 0.5, wanted=graph.count)[: graph.count]
        led.append([graph.point_id(int(i)) for i in leading(mass, 40, graph.features.ids)])
    assert led[0] == led[1]


def test_names_in_memories():
    inside, initial = names(
        "Hey Joanna! I usually play CS:GO, but I tried the Street Fighter cup with Nate's team."
    )
    assert inside == {"street fighter", "nate"}  # "CS" is all capitals; "I" is a stop word
    assert {"hey", "joanna", "hey joanna"} <= initial  # for the caller to keep known names
    assert names("Thanks, Melanie. Here it is.") == ({"melanie"}, {"thanks"})  # "here": a stop word
    assert names("I went to London \u2013 like in Harry Potter!")[0] == {"london", "harry potter"}
    assert names("no names here at all") == (set(), set())
    assert names("I'm sure. Here's the Louvre, I've been.") == ({"louvre"}, set())
    # a sentence ends at ".!?:;" or a new line; spaces alone do not end a run
    met = {"met", "met anna smith", "anna smith", "bob", "bob jones", "jones"}
    assert names("Met Anna Smith;\nBob Jones came too") == (set(), met)
    assert names("we saw  New  York and Paris: Rome was next") == ({"new york", "paris"}, {"rome"})
    assert names("see \u2018Nate\u2019 and the Acme Corp team") == ({"nate", "acme corp"}, set())


class Counted:
    """A walk's hubs, counting their products and their other nodes' parts."""

    def __init__(self, hubs: Hubs) -> None:
        self.hubs, self.first = hubs, hubs.first
        self.products = self.others_taken = 0

    def product(self, x: np.ndarray) -> np.ndarray:
        self.products += 1
        return self.hubs.product(x)

    def others(self, x: np.ndarray) -> np.ndarray:
        self.others_taken += 1
        return self.hubs.others(x)

    def spread(self, y: np.ndarray, at: np.ndarray, values: np.ndarray) -> None:
        self.hubs.spread(y, at, values)


@pytest.mark.parametrize("among", [False, True])
@pytest.mark.parametrize("tol", [1e-6, 1e-10])
def test_a_walk_for_its_memories_alone_skips_the_hubs_rows_in_its_last_step(among, tol):
    scope, seeds, twins = a_scope_like_walk(among)
    assert scope.hubs is not None
    n, counted = scope.hubs.first, Counted(scope.hubs)
    walk = Walk(scope.matrix, scope.degree, scope.size, counted, scope.large)  # type: ignore[arg-type]
    whole = walk.rank(seeds, 0.5, tol)
    steps = counted.products + 1  # the first step is taken from the seeds' edges
    counted.products = counted.others_taken = 0
    got = walk.rank(seeds, 0.5, tol, wanted=n)
    # the memories' mass: the same bits
    assert np.array_equal(got[:n], whole[:n])
    if tol == 1e-10:  # alpha times the change before the last is under the bound: known sooner
        assert (counted.products, counted.others_taken) == (steps - 2, 1)
        # the hubs keep the mass of the step before
        assert np.array_equal(got[n:], walk.rank(seeds, 0.5, tol, max_iter=steps - 1)[n:])
    else:  # the last change fell faster than alpha: every step whole, as without
        assert (counted.products, counted.others_taken) == (steps - 1, 0)
        assert np.array_equal(got, whole)
    assert got[twins[0]] == got[twins[1]] > 0
    ids = np.arange(n)  # ties by node
    assert leading(got[:n], 50, ids).tolist() == leading(whole[:n], 50, ids).tolist()
    # a caller that reads the hubs too gets every step whole
    assert np.array_equal(walk.rank(seeds, 0.5, tol, wanted=n + 1), whole)
