"""The graph channel on real parts: RocksDB + NetworkXGraph, an embedded Qdrant shard, and a
small hashing embedder instead of the model."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from daemon.settings_sections import Recipe
from recall import Query, QueryContext
from recall.graph_channel import GraphChannel
from recall.pagerank import personalized_pagerank
from recall.words import mentions
from tiers.embedding import EmbeddingService
from tiers.graph import Edge
from tiers.graph.nxgraph import NetworkXGraph
from tiers.records import Scope
from tiers.rocks import RocksStore
from tiers.semantic import SemanticStore
from tiers.vectors import MemoryPoint, Source, point_id
from tiers.vectors.edge import EdgeVectorStore
from tiers.working import STATE_CFS

DIM = 32
A = Scope("alice", "bot")
A2 = Scope("alice", "other-bot")
B = Scope("bob", "bot")


class HashEmbedder:
    """Deterministic bag of words: each word adds 1 to a hashed column; rows L2-normalised."""

    model_name = "fake"
    dim = DIM

    def __init__(self) -> None:
        self.documents: list[str] = []

    def _encode(self, texts: list[str]) -> np.ndarray:
        rows = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                rows[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
            norm = np.linalg.norm(rows[i])
            if norm:
                rows[i] /= norm
        return rows

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.documents.extend(texts)
        return self._encode(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts)


class World:
    """A SemanticStore on real stores, with helpers to write facts and chunks."""

    def __init__(self, tmp_path: Path) -> None:
        self.state = RocksStore(tmp_path / "state", STATE_CFS)
        self.embedder = HashEmbedder()
        self.semantic = SemanticStore(
            self.state,
            EmbeddingService(lambda: self.embedder, "fake"),
            lambda: EdgeVectorStore(tmp_path / "vectors"),
        )
        self.semantic.start()
        _embedder, self.vectors = self.semantic.wait_ready(10)
        self.graph: NetworkXGraph = self.semantic.graph

    def _points(self, points: list[MemoryPoint]) -> None:
        dense = self.embedder.encode_documents([p.text for p in points])
        self.vectors.upsert(
            [
                replace(p, dense=row.tolist(), sparse=self.semantic.keywords.embed_document(p.text))
                for p, row in zip(points, dense, strict=True)
            ]
        )

    def fact(
        self,
        scope: Scope,
        s: str,
        p: str,
        o: str,
        *,
        seqs: tuple[int, ...] = (1,),
        episode: str = "ep1",
        at: int = 100,
    ) -> str:
        text = f"{s} {p.replace('_', ' ')} {o}"
        sources = [Source("sess-" + episode, q, f"m{q}") for q in seqs]
        pid = point_id(scope, "fact", text, sources)
        point = MemoryPoint(
            id=pid,
            kind="fact",
            text=text,
            scope=scope,
            episode_id=episode,
            session_id="sess-" + episode,
            sources=sources,
            created_at_us=at,
            extractor="test",
            valid_from_us=at,
            attrs={"subject": s, "predicate": p, "object": o},
        )
        self._points([point])
        self.graph.add_edges(
            [
                Edge(
                    id=pid,
                    scope=scope,
                    subject=s,
                    predicate=p,
                    object=o,
                    fact_text=text,
                    episode_id=episode,
                    sources=sources,
                    created_at_us=at,
                    valid_from_us=at,
                )
            ]
        )
        return pid

    def chunk(
        self, scope: Scope, seqs: tuple[int, ...], *, episode: str = "ep1", at: int = 100
    ) -> str:
        text = f"chunk of {episode} turns {' '.join(map(str, seqs))}"
        sources = [Source("sess-" + episode, q, f"m{q}", text=f"turn {q}") for q in seqs]
        pid = point_id(scope, "episode_chunk", text, sources)
        self._points(
            [
                MemoryPoint(
                    id=pid,
                    kind="episode_chunk",
                    text=text,
                    scope=scope,
                    episode_id=episode,
                    session_id="sess-" + episode,
                    sources=sources,
                    created_at_us=at,
                    extractor="index",
                )
            ]
        )
        return pid

    def supersede(self, fact_id: str, at: int) -> None:
        self.graph.close_edges([fact_id], at)
        self.vectors.set_valid_to([fact_id], at)

    def close(self) -> None:
        self.semantic.close()
        self.state.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.close()


def ctx(w: World, text: str, scope: Scope = A, **kw: object) -> QueryContext:
    query = Query(text=text, scope=scope, k=10, recipe=Recipe(), **kw)  # type: ignore[arg-type]
    return QueryContext(query, w.embedder.encode_queries([text])[0])


def ids(hits: list[tuple[MemoryPoint, float]]) -> list[str]:
    return [p.id for p, _ in hits]


def test_mentions_handle_possessives_and_stop_words():
    keys = {k for _s, _e, k in mentions("What did Caroline's mom give her?")}
    assert {"caroline", "caroline's", "caroline's mom", "mom give her"} <= keys
    assert not {"what", "did", "her"} & keys
    assert "new york" in {k for _s, _e, k in mentions("Trip to New York\u2019s museums")}
    assert "acme corp" in {k for _s, _e, k in mentions("Who founded the Acme Corp.?")}
    assert "will" in {k for _s, _e, k in mentions("What did Will say?")}
    assert "will" not in {k for _s, _e, k in mentions("What will I say? Will it rain?")}


def test_personalized_pagerank_matches_networkx():
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
    got = personalized_pagerank(size, src, dst, weight, vector, 0.85, tol=1e-10, max_iter=500)
    assert got == pytest.approx([expected[n] for n in range(size)], abs=1e-8)
    assert personalized_pagerank(0, src[:0], dst[:0], weight[:0], vector[:0]).size == 0


def test_exact_name_link_with_possessive(world: World):
    mom = world.fact(A, "Caroline", "has_mother", "Linda")
    paint = world.fact(A, "Caroline", "likes", "painting")
    world.fact(A, "Melanie", "likes", "running")
    channel = GraphChannel(world.semantic)
    links = channel.link(ctx(world, "What did Caroline's mom give her?"))
    assert [(lk.node[2], lk.how) for lk in links if lk.how == "name"] == [("caroline", "name")]
    hits = channel.search(ctx(world, "What did Caroline's mom give her?"), 10)
    assert set(ids(hits)) == {mom, paint}  # Melanie's fact is not connected
    scores = [s for _p, s in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(p.kind == "fact" and p.scope == A for p, _ in hits)


def test_alias_link(world: World):
    founded = world.fact(A, "Tom", "founded", "The Acme Corp.")
    likes = world.fact(A, "Melanie", "likes", "pottery")
    channel = GraphChannel(world.semantic)
    assert ids(channel.search(ctx(world, "Who started Acme Corp?"), 5)) == [founded]
    # an alias that does not normalize to the name (as an entity resolver would add)
    with world.graph._lock:
        world.graph.graph.nodes[NetworkXGraph.node(A, "melanie")]["aliases"].add("Mel")
    channel = GraphChannel(world.semantic)
    assert ids(channel.search(ctx(world, "What does Mel enjoy doing lately?"), 5)) == [likes]


def test_embedding_link(world: World):
    fact = world.fact(A, "Pottery workshop", "held_at", "community center")
    channel = GraphChannel(world.semantic)
    (link,) = channel.link(ctx(world, "pottery?"))
    assert link.how == "embedding" and link.node[2] == "pottery workshop"
    assert link.weight == pytest.approx(2**-0.5, abs=1e-4)
    assert ids(channel.search(ctx(world, "pottery?"), 5)) == [fact]
    assert GraphChannel(world.semantic, link_threshold=0.8).link(ctx(world, "pottery?")) == []
    # name embeddings are cached by name: a new entity embeds only its own name
    world.fact(A, "Caroline", "likes", "hiking")
    before = len(world.embedder.documents)
    channel.link(ctx(world, "pottery?"))
    assert world.embedder.documents[before:] == ["caroline", "hiking"]


def test_multi_hop_fact_ranks_below_direct_facts(world: World):
    direct = {
        world.fact(A, "Caroline", "has_mother", "Linda"),
        world.fact(A, "Caroline", "likes", "painting"),
        world.fact(A, "Caroline", "lives_in", "Boston"),
    }
    hop2 = world.fact(A, "Linda", "works_at", "Mercy Hospital")
    world.fact(A, "Mercy Hospital", "located_in", "Chicago")  # three hops: not reached
    hits = GraphChannel(world.semantic).search(ctx(world, "Tell me about Caroline"), 10)
    order = ids(hits)
    assert set(order[:3]) == direct
    assert order[3:] == [hop2]
    assert hits[3][1] < hits[2][1]


def test_superseded_fact_ranks_below_current(world: World):
    old = world.fact(A, "Caroline", "lives_in", "Boston", at=10)
    new = world.fact(A, "Caroline", "lives_in", "Denver", at=20)
    world.supersede(old, 20)
    hits = GraphChannel(world.semantic).search(ctx(world, "Where does Caroline live now?"), 5)
    assert ids(hits) == [new, old]
    assert hits[1][0].valid_to_us == 20 and hits[0][1] > hits[1][1]


def test_source_chunks_follow_their_fact(world: World):
    fact = world.fact(A, "Caroline", "adopted", "a dog named Rex", seqs=(3,))
    other = world.fact(A, "Caroline", "likes", "painting", seqs=(7,), episode="ep2")
    c1 = world.chunk(A, (1, 2, 3))
    c2 = world.chunk(A, (3, 4, 5))
    c3 = world.chunk(A, (6, 7, 8))  # same episode, not the fact's messages
    c4 = world.chunk(A, (3, 4), episode="ep9")  # the fact's seq, another episode
    c5 = world.chunk(A, (6, 7), episode="ep2")
    channel = GraphChannel(world.semantic)
    hits = channel.search(ctx(world, "Did Caroline adopt a dog?"), 10)
    order = ids(hits)
    assert order == [fact, c1, c2, other, c5]
    assert c3 not in order and c4 not in order
    scores = [s for _p, s in hits]
    assert scores == sorted(scores, reverse=True) and scores[1] < scores[0]
    assert len(set(order)) == len(order)
    assert ids(channel.search(ctx(world, "Did Caroline adopt a dog?"), 2)) == [fact, c1]
    one = GraphChannel(world.semantic, chunks_per_fact=1)
    assert ids(one.search(ctx(world, "Did Caroline adopt a dog?"), 10)) == [fact, c1, other, c5]


def test_kinds_and_time_filters(world: World):
    fact = world.fact(A, "Caroline", "adopted", "a dog", seqs=(3,), at=100)
    c1 = world.chunk(A, (2, 3), at=100)
    late = world.fact(A, "Caroline", "visited", "Paris", seqs=(9,), episode="ep2", at=500)
    channel = GraphChannel(world.semantic)
    q = "Tell me about Caroline's dog"
    assert ids(channel.search(ctx(world, q, kinds=("fact",)), 10)) == [fact, late]
    assert ids(channel.search(ctx(world, q, kinds=("episode_chunk",)), 10)) == [c1]
    assert channel.search(ctx(world, q, kinds=("summary",)), 10) == []
    assert ids(channel.search(ctx(world, q, start_us=200), 10)) == [late]
    assert ids(channel.search(ctx(world, q, end_us=200), 10)) == [fact, c1]
    # the recipe's kinds apply when the query names none
    recipe = Recipe(kinds=["episode_chunk"])
    query = Query(text=q, scope=A, k=10, recipe=recipe)
    hits = channel.search(QueryContext(query, world.embedder.encode_queries([q])[0]), 10)
    assert ids(hits) == [c1]


def test_no_linked_entity_returns_nothing(world: World):
    world.fact(A, "Caroline", "likes", "painting")
    channel = GraphChannel(world.semantic)
    text = "How was the weather during that long weekend trip?"
    assert channel.link(ctx(world, text)) == []
    assert channel.search(ctx(world, text), 10) == []
    assert channel.search(ctx(world, "Caroline", scope=Scope("nobody")), 10) == []
    assert channel.search(ctx(world, "Caroline"), 0) == []


def test_scope_isolation(world: World):
    names = ["Caroline", "Melanie", "Linda", "Boston", "painting", "Rex", "Mercy Hospital"]
    mine: set[str] = set()
    others: set[str] = set()
    rng = random.Random(7)
    for i in range(30):
        s, o = rng.sample(names, 2)
        p = rng.choice(["likes", "visited", "knows", "works_at", "has_pet"])
        mine.add(world.fact(A, s, p, o, seqs=(i,), episode=f"a{i % 3}"))
        mine.add(world.chunk(A, (i, i + 1), episode=f"a{i % 3}"))
        # bob and alice's other agent share the entity names, and even the episode ids
        others.add(world.fact(B, s, p, o, seqs=(i,), episode=f"a{i % 3}"))
        others.add(world.chunk(B, (i, i + 1), episode=f"a{i % 3}"))
        others.add(world.fact(A2, s, "met", o, seqs=(i,), episode=f"b{i % 3}"))
    channel = GraphChannel(world.semantic)
    words = [*names, "what", "did", "her", "mom", "give", "where", "work", "Caroline's"]
    returned = 0
    for _ in range(50):
        text = " ".join(rng.choices(words, k=rng.randint(1, 6))) + "?"
        hits = channel.search(ctx(world, text), rng.choice([3, 10, 50]))
        returned += len(hits)
        assert all(p.scope == A and p.id in mine for p, _ in hits)
        assert not {p.id for p, _ in hits} & others
        for link in channel.link(ctx(world, text)):
            assert link.node[:2] == ("alice", "bot")
    assert returned > 100
    # an empty agent_id covers every agent of the user, and never another user
    hits = channel.search(ctx(world, "Caroline", scope=Scope("alice")), 200)
    agents = {p.scope.agent_id for p, _ in hits}
    assert agents == {"bot", "other-bot"} and all(p.scope.user_id == "alice" for p, _ in hits)


def test_cache_follows_graph_growth(world: World):
    world.fact(A, "Caroline", "likes", "painting")
    channel = GraphChannel(world.semantic)
    assert channel.search(ctx(world, "What about Zed?"), 5) == []
    zed = world.fact(A, "Zed", "plays", "chess")
    assert ids(channel.search(ctx(world, "What about Zed?"), 5)) == [zed]
