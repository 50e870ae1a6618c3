"""The graph channel on real parts: RocksDB + NetworkXGraph, an embedded Qdrant shard, and a
small hashing embedder instead of the model: entity linking, the entity <-> memory graph and
Personalized PageRank over it."""

from __future__ import annotations

import random

from recall import Query, QueryContext
from recall.graph.channel import GraphChannel
from recall.graph.memory import MemoryGraphs
from recall.graph.scope import ScopeGraph, build
from recall.recipe import Recipe
from tests.recall.world import A2, A, B, World
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, PointFilter


def ctx(w: World, text: str, scope: Scope = A, **kw: object) -> QueryContext:
    query = Query(text=text, scope=scope, k=10, recipe=Recipe(), **kw)  # type: ignore[arg-type]
    return QueryContext(query, w.embedder.encode_queries([text])[0])


def ids(hits: list[tuple[MemoryPoint, float]]) -> list[str]:
    return [p.id for p, _ in hits]


def test_entity_memory_graph_links(world: World):
    melanie = world.turn(A, "Melanie", "I signed up for a pottery class at Clay Corner.", seq=1)
    hey = world.turn(A, "Caroline", "Hey Melanie! Clay Corner sounds fun.", seq=2)
    hike = world.turn(A, "Caroline", "Hiking yesterday was great.", seq=3)
    fact = world.fact(A, "Melanie", "married_to", "Dave", seqs=(4,))
    mel = world.turn(A, "Caroline", "See you there, Mel.", seq=5)
    memories = (melanie, hey, hike, fact, mel)
    points = {p.id: p for p in world.vectors.get(list(memories))}
    edges = [(e.id, e.subject, e.object) for e in world.graph.edges_where(lambda e: True)]
    graph = build([points[i] for i in memories], edges)
    # "Mel", a short form of one speaker's name, is that speaker
    assert set(graph.entities) == {"melanie", "caroline", "clay corner", "dave", "mel"}
    assert graph.entities["mel"] == graph.entities["melanie"]
    assert graph.size == len(memories) + 4
    linked = {
        m: {
            k
            for k, n in graph.entities.items()
            if k != "mel"  # an alias of melanie's node
            and any(
                {graph.src[i], graph.dst[i]} == {graph.node(m), n} for i in range(len(graph.src))
            )
        }
        for m in memories
    }
    assert linked[melanie] == {"melanie", "clay corner"}  # speaker and a name inside
    # "Hey" starts the sentence and names nothing known; "Melanie" is known (a speaker)
    assert linked[hey] == {"caroline", "melanie", "clay corner"}
    assert linked[hike] == {"caroline"}  # "Hiking" starts a sentence and is no known name
    assert linked[fact] == {"melanie", "dave"}  # from its triplet
    assert linked[mel] == {"caroline", "melanie"}
    # a rarer entity weighs more: Clay Corner (2 memories) over Melanie (4)
    weight = {
        (int(u), int(v)): float(w)
        for u, v, w in zip(graph.src, graph.dst, graph.weight, strict=True)
    }
    assert (
        weight[(graph.node(hey), graph.entities["clay corner"])]
        > weight[(graph.node(hey), graph.entities["melanie"])]
    )
    # the triplet also joins its two entities
    assert weight[(graph.entities["melanie"], graph.entities["dave"])] == 1.0
    assert graph.link("Where did Melanie's class meet, Clay Corner?") == ["clay corner", "melanie"]
    assert graph.link("Did Mel, I mean Melanie, go?") == ["mel"]  # one link per entity


def test_a_graph_finds_the_nodes_of_many_ids_at_once(world: World):
    first = world.turn(A, "Caroline", "I like painting.", seq=1)
    second = world.turn(A, "Melanie", "I like pottery.", seq=2)
    graph = build(world.vectors.get([first, second]), [])
    nodes = graph.nodes([second, "no such point", first, first + "0", first[:-1]])
    assert nodes.tolist() == [graph.node(second), graph.node(first)]  # the others left out
    assert graph.nodes([]).size == 0
    assert build([], []).nodes([first]).size == 0


def test_a_question_turn_links_to_its_reply(world: World):
    ask = world.turn(A, "Caroline", "What did you paint last week?", seq=1)
    reply = world.turn(A, "Melanie", "A sunset over the lake.", seq=2)
    after = world.turn(A, "Caroline", "Lovely colours.", seq=3)  # follows no question
    other = world.turn(A, "Melanie", "A sunrise.", seq=2, episode="ep2")  # another session
    points = {p.id: p for p in world.vectors.get([ask, reply, after, other])}

    def pairs(g: ScopeGraph) -> dict[frozenset[str], float]:  # memory - memory links
        n, ids = g.count, g.memory_ids()
        links = zip(g.src, g.dst, g.weight, strict=True)
        return {frozenset((ids[u], ids[v])): w for u, v, w in links if max(u, v) < n}

    graph = build([points[i] for i in (ask, reply, after, other)], [], reply_weight=0.7)
    assert pairs(graph) == {frozenset((ask, reply)): 0.7}
    assert pairs(build([points[i] for i in (ask, reply, after)], [], reply_weight=0)) == {}
    # the walk from the question reaches its answer, which shares no word or name with it
    channel = GraphChannel(world.semantic, dense_seeds=1)
    assert ids(channel.search(ctx(world, "What did you paint last week?"), 2)) == [ask, reply]
    channel = GraphChannel(world.semantic, dense_seeds=1, reply_weight=0)
    assert reply not in ids(channel.search(ctx(world, "What did you paint last week?"), 2))


def test_named_entity_ranks_its_memories_and_reaches_one_hop_further(world: World):
    nate = [
        world.turn(A, "Nate", "I won the Street Fighter tournament last weekend!", seq=1),
        world.turn(A, "Nate", "My turtles love the new tank.", seq=3),
    ]
    draft = world.turn(A, "Joanna", "I finished my screenplay draft.", seq=2)
    # not about Nate, but about the tournament he named: one hop further
    cup = world.turn(A, "Joanna", "Is Street Fighter hard to learn?", seq=4, episode="ep2")
    channel = GraphChannel(world.semantic, dense_seeds=0)
    hits = channel.search(ctx(world, "What has Nate been up to?"), 10)
    order = ids(hits)
    # and two hops further, less: Joanna's other turn, through Joanna
    assert set(order[:2]) == set(nate) and order[2:] == [cup, draft]
    scores = [s for _p, s in hits]
    assert scores == sorted(scores, reverse=True) and scores[3] < scores[2] < scores[1]
    assert (
        ids(GraphChannel(world.semantic, dense_seeds=0).search(ctx(world, "Nate?"), 2))
        == ids(hits)[:2]
    )
    assert all(p.kind == "episode_turn" and p.scope == A for p, _ in hits)


def test_nearest_memories_seed_the_walk(world: World):
    pottery = world.turn(A, "Melanie", "pottery class with Clay Corner people", seq=1)
    also = world.turn(A, "Caroline", "Clay Corner closes early on weekdays", seq=2)
    world.turn(A, "Caroline", "Hiking was great", seq=3)
    # no entity named: the nearest memories seed the walk, which spreads through Clay Corner
    channel = GraphChannel(world.semantic, dense_seeds=1)
    order = ids(channel.search(ctx(world, "pottery class"), 10))
    assert order[:2] == [pottery, also]
    assert GraphChannel(world.semantic, dense_seeds=0).search(ctx(world, "pottery class"), 10) == []


def test_superseded_facts_leave_the_graph(world: World):
    old = world.fact(A, "Caroline", "lives_in", "Boston", at=10)
    new = world.fact(A, "Caroline", "lives_in", "Denver", at=20)
    now = [0.0]
    channel = GraphChannel(world.semantic, dense_seeds=0, clock=lambda: now[0])
    assert set(ids(channel.search(ctx(world, "Where does Caroline live?"), 5))) == {old, new}
    world.supersede(old, 20)
    world.semantic.notify_write({"alice"})
    now[0] += 2.0
    assert ids(channel.search(ctx(world, "Where does Caroline live?"), 5)) == [new]


def test_kinds_and_time_filters(world: World):
    fact = world.fact(A, "Caroline", "adopted", "a dog", seqs=(3,), at=100)
    turn = world.turn(A, "Caroline", "We adopted a dog!", seq=3, at=100)
    late = world.fact(A, "Caroline", "visited", "Paris", seqs=(9,), episode="ep2", at=500)
    channel = GraphChannel(world.semantic, dense_seeds=0)
    q = "Tell me about Caroline's dog"
    assert set(ids(channel.search(ctx(world, q, kinds=("fact",)), 10))) == {fact, late}
    assert ids(channel.search(ctx(world, q, kinds=("episode_turn",)), 10)) == [turn]
    assert channel.search(ctx(world, q, kinds=("summary",)), 10) == []
    assert ids(channel.search(ctx(world, q, start_us=200), 10)) == [late]
    assert set(ids(channel.search(ctx(world, q, end_us=200), 10))) == {fact, turn}
    # the recipe's kinds apply when the query names none
    recipe = Recipe(kinds=["episode_turn"])
    query = Query(text=q, scope=A, k=10, recipe=recipe)
    hits = channel.search(QueryContext(query, world.embedder.encode_queries([q])[0]), 10)
    assert ids(hits) == [turn]


def test_memories_the_filter_skips_are_read_past(world: World):
    # Caroline's facts outrank her one turn; asked for one turn, the channel reads past them all
    for i in range(9):
        world.fact(A, "Caroline", f"likes_{i}", f"thing {i}", seqs=(i,), at=100 + i)
    turn = world.turn(A, "Bob", "Caroline and I went hiking", seq=20, at=300)
    channel = GraphChannel(world.semantic, dense_seeds=0)
    q = "What does Caroline like?"
    ranked = ids(channel.search(ctx(world, q), 10))
    assert len(ranked) == 10 and ranked.index(turn) > 0
    assert ids(channel.search(ctx(world, q, kinds=("episode_turn",)), 1)) == [turn]
    facts = [i for i in ranked if i != turn]
    assert ids(channel.search(ctx(world, q, kinds=("fact",)), 3)) == facts[:3]


def test_a_narrowing_filter_reads_only_what_it_admits_in_the_walks_order(world: World, monkeypatch):
    """A time range (or kinds, or a thread's episodes) is asked of the store before the walk:
    the points it admits are read in the walk's order, and none when it admits no memory."""
    turns = [
        world.turn(A, "Caroline", f"Caroline and the hike number {i}", seq=i, at=100 + i)
        for i in range(80)
    ]
    for i in range(3):  # chunks, which the graph does not hold while there are turns
        world.chunk(A, (i,), text=f"Caroline hiked, part {i}", at=110 + i)
    channel = GraphChannel(world.semantic, dense_seeds=0)
    q = "Where did Caroline hike?"
    walked = ids(channel.search(ctx(world, q), 80))
    assert set(walked) == set(turns)
    read: list[str] = []
    get = world.vectors.get

    def reading(wanted: list[str], *args: str) -> list[MemoryPoint]:
        read.extend(wanted)
        return get(wanted, *args)

    monkeypatch.setattr(world.vectors, "get", reading)

    def within(start: int, end: int, among: list[str] = walked) -> list[str]:
        return [t for t in among if start <= turns.index(t) + 100 < end]

    # five of 80: fewer than an eighth (NARROW_SHARE), read by id
    assert ids(channel.search(ctx(world, q, start_us=110, end_us=115), 10)) == within(110, 115)
    assert sorted(read) == sorted(within(110, 115))  # no memory outside the range was read
    read.clear()
    assert channel.search(ctx(world, q, start_us=1_000), 10) == []
    assert read == []
    # most of them: the leading memories read in batches that grow while the filter skips some
    assert ids(channel.search(ctx(world, q, start_us=120), 10)) == within(120, 1_000)[:10]
    assert len(read) < 80
    read.clear()
    # kinds from the graph's features: a kind it does not hold reads nothing
    assert channel.search(ctx(world, q, kinds=("summary",)), 10) == []
    assert channel.search(ctx(world, q, kinds=("summary",), start_us=110, end_us=115), 10) == []
    assert read == []
    # past NARROW_IDS admitted points, NARROW_IDS of the leading memories are read at most
    monkeypatch.setattr("recall.graph.channel.NARROW_IDS", 8)
    assert ids(channel.search(ctx(world, q, start_us=110, end_us=120), 10)) == within(
        110, 120, walked[:8]
    )
    assert len(read) == 8
    read.clear()
    monkeypatch.setattr("recall.graph.channel.NARROW_IDS", 2)  # fewer than the chunks
    assert channel.search(ctx(world, q, kinds=("episode_chunk",)), 10) == []
    assert read == []


def test_chunks_stand_in_when_turns_are_not_indexed(world: World):
    chunk = world.chunk(A, (1, 2), text="a talk with Caroline about art")
    fact = world.fact(A, "Caroline", "likes", "painting", seqs=(1,))
    channel = GraphChannel(world.semantic, dense_seeds=1)
    hits = channel.search(ctx(world, "a talk about art"), 10)  # seeded by the nearest chunk
    assert ids(hits) == [chunk, fact]  # and through Caroline to her fact


def test_no_seed_returns_nothing(world: World):
    world.turn(A, "Caroline", "I like painting.")
    channel = GraphChannel(world.semantic, dense_seeds=0)
    assert channel.search(ctx(world, "How was the weather during that long trip?"), 10) == []
    assert channel.search(ctx(world, "Caroline", scope=Scope("nobody")), 10) == []
    assert channel.search(ctx(world, "Caroline"), 0) == []
    assert ids(channel.search(ctx(world, "Caroline"), 10))


def test_scope_isolation(world: World):
    people = ["Caroline", "Melanie", "Linda", "Boston", "Rex", "Mercy Hospital"]
    mine: set[str] = set()
    others: set[str] = set()
    rng = random.Random(7)
    for i in range(30):
        s, o = rng.sample(people, 2)
        p = rng.choice(["likes", "visited", "knows", "works_at", "has_pet"])
        mine.add(world.fact(A, s, p, o, seqs=(i,), episode=f"a{i % 3}"))
        mine.add(world.turn(A, s, f"I met {o} again", seq=i, episode=f"a{i % 3}"))
        # bob and alice's other agent share the names, and even the episode ids
        others.add(world.fact(B, s, p, o, seqs=(i,), episode=f"a{i % 3}"))
        others.add(world.turn(B, s, f"I met {o} again", seq=i, episode=f"a{i % 3}"))
        others.add(world.turn(A2, s, f"We saw {o}", seq=i, episode=f"b{i % 3}"))
    channel = GraphChannel(world.semantic)
    words = [*people, "what", "did", "her", "mom", "give", "where", "work", "Caroline's"]
    returned = 0
    for _ in range(50):
        text = " ".join(rng.choices(words, k=rng.randint(1, 6))) + "?"
        hits = channel.search(ctx(world, text), rng.choice([3, 10, 50]))
        returned += len(hits)
        assert all(p.scope == A and p.id in mine for p, _ in hits)
    assert returned > 100
    # an empty agent_id covers every agent of the user, and never another user
    hits = channel.search(ctx(world, "Caroline", scope=Scope("alice")), 200)
    agents = {p.scope.agent_id for p, _ in hits}
    assert agents == {"bot", "other-bot"} and all(p.scope.user_id == "alice" for p, _ in hits)


def test_a_write_is_seen_by_the_next_query(world: World):
    world.turn(A, "Caroline", "I like painting.")
    channel = GraphChannel(world.semantic, dense_seeds=0)
    assert channel.search(ctx(world, "What about Zed?"), 5) == []
    zed = world.turn(A, "Zed", "I play chess.", seq=2)  # notifies the write
    assert ids(channel.search(ctx(world, "What about Zed?"), 5)) == [zed]


def test_graph_follows_writes_and_forget(world: World):
    world.turn(A, "Caroline", "I like painting.")
    now = [0.0]
    channel = GraphChannel(world.semantic, dense_seeds=0, refresh_seconds=2.0, clock=lambda: now[0])
    assert channel.search(ctx(world, "What about Zed?"), 5) == []
    zed = world.turn(A, "Zed", "I play chess.", seq=2)  # notifies the write
    now[0] += 1.9
    assert ids(channel.search(ctx(world, "What about Zed?"), 5)) == []  # within refresh_seconds
    now[0] += 0.1
    assert ids(channel.search(ctx(world, "What about Zed?"), 5)) == [zed]
    world.vectors.delete(PointFilter(user_id="alice", ids=(zed,)))
    assert channel.search(ctx(world, "What about Zed?"), 5) == []  # gone points are skipped
    assert channel.forget_scope("alice") == 1
    assert channel.forget_scope("alice") == 0
    # unwritten, the build is kept however old it is
    channel.search(ctx(world, "What about Zed?"), 5)
    now[0] += 1e6
    assert channel.graphs.get(A, world.vectors) is channel.graphs.get(A, world.vectors)


def test_the_graphs_are_kept_within_their_memory_budget(world: World):
    """Least recently used out, the sizes summed right through rebuilds and Forget."""
    for scope in (A, A2, B):
        world.turn(scope, "Caroline", f"I like painting, says {scope.agent_id}.")
    one = build(world.vectors.scroll(PointFilter(user_id="alice", agent_id="bot"), 10), [])
    graphs = MemoryGraphs(world.semantic, max_bytes=2 * one.nbytes + one.nbytes * 3 // 5)
    a, a2 = graphs.get(A, world.vectors), graphs.get(A2, world.vectors)
    assert graphs.nbytes == a.nbytes + a2.nbytes <= graphs.max_bytes
    graphs.get(A, world.vectors)  # A is now the most recently used
    b = graphs.get(B, world.vectors)  # over budget: A2 goes
    assert graphs.nbytes == a.nbytes + b.nbytes
    assert graphs.get(A, world.vectors) is a  # kept
    assert graphs.get(A2, world.vectors) is not a2  # built again (and B goes)
    assert graphs.nbytes == a.nbytes + graphs.get(A2, world.vectors).nbytes
    world.turn(A, "Zed", "I play chess.", seq=2)  # a write: A is rebuilt, its old size out
    bigger = graphs.get(A, world.vectors)
    assert bigger is not a
    assert graphs.nbytes == bigger.nbytes + graphs.get(A2, world.vectors).nbytes
    assert graphs.forget_scope("alice") == 2 and graphs.nbytes == 0
    tiny = MemoryGraphs(world.semantic, max_bytes=1)  # one graph is kept even if larger
    assert tiny.get(B, world.vectors) is tiny.get(B, world.vectors) and tiny.nbytes > 1


def test_a_scope_walks_large_once_its_held_graph_is_large(world: World, monkeypatch):
    """What the engine asks before a query (its ``ahead``): nothing read, a graph held."""
    world.turn(A, "Nate", "I won the Street Fighter tournament last weekend!", seq=1)
    world.turn(A, "Joanna", "Is Street Fighter hard to learn?", seq=2)
    world.turn(B, "Nate", "My turtles love the new tank.", seq=1)
    channel = GraphChannel(world.semantic, dense_seeds=0)
    assert not channel.walks_large(A)  # no graph held: none is built for the question
    assert channel.graphs.held(A) is None
    channel.search(ctx(world, "What has Nate been up to?"), 5)
    assert channel.graphs.held(A) is not None and not channel.walks_large(A)  # a small walk
    monkeypatch.setattr("recall.graph.pagerank.LARGE_NONZEROS", 1)  # every walk large
    channel.search(ctx(world, "Nate?", B), 5)
    assert channel.walks_large(B) and not channel.walks_large(A)  # built before: as it was
    assert not channel.walks_large(Scope("nobody"))
