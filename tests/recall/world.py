"""The Tier 3 that the recall tests run on: a SemanticStore on real RocksDB, NetworkXGraph and an
embedded Qdrant shard, with a small hashing embedder instead of the model, and helpers that
write facts, chunks and turns (the ``world`` fixture of ``tests/recall/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from tests.support.fakes import HashEmbedder
from tiers.core.records import Scope
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.embedding import EmbeddingService
from tiers.semantic.graph import Edge
from tiers.semantic.graph.nxgraph import NetworkXGraph
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint, Source, Validity, point_id
from tiers.semantic.vectors.edge.store import EdgeVectorStore

DIM = 32
A = Scope("alice", "bot")
A2 = Scope("alice", "other-bot")
B = Scope("bob", "bot")


class World:
    """A SemanticStore on real stores, with helpers to write facts and chunks."""

    def __init__(self, tmp_path: Path) -> None:
        self.state = RocksStore(tmp_path / "state", STATE_CFS)
        self.embedder = HashEmbedder(DIM)
        self.semantic = SemanticStore(
            self.state,
            EmbeddingService(lambda: self.embedder, "fake"),
            lambda: EdgeVectorStore(tmp_path / "vectors"),
        )
        self.semantic.start()
        _embedder, self.vectors = self.semantic.wait_ready(10)
        self.graph: NetworkXGraph = self.semantic.graph
        # Whether writes tell the caches the ids they wrote, as SemanticStore.write does; by
        # default they do not, as a delete by episode does not.
        self.tell_ids = False
        self._held: dict[str, list[str]] | None = None  # the writes of a together() block

    def told(self, user_ids: set[str], ids: list[str]) -> None:
        """Tell the caches that ``ids`` were written in the scopes of ``user_ids`` (at the end
        of a :meth:`together` block, in one notice)."""
        if self._held is not None:
            for user in user_ids:
                self._held.setdefault(user, []).extend(ids)
            return
        self.semantic.notify_write(
            user_ids, ids={u: ids for u in user_ids} if self.tell_ids else None
        )

    @contextmanager
    def together(self) -> Iterator[None]:
        """The writes within the block told as one, as one SemanticStore.write of several
        points tells them."""
        self._held = {}
        try:
            yield
        finally:
            held, self._held = self._held, None
            if held:
                self.semantic.notify_write(set(held), ids=held if self.tell_ids else None)

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
        self.told({scope.user_id}, [pid])
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

    def _indexed(
        self, scope: Scope, kind: str, text: str, sources: list[Source], episode: str, at: int
    ) -> str:
        pid = point_id(scope, kind, text, sources)
        session = "sess-" + episode
        self._points([MemoryPoint(pid, kind, text, scope, episode, session, sources, at, "index")])
        self.told({scope.user_id}, [pid])
        return pid

    def chunk(
        self,
        scope: Scope,
        seqs: tuple[int, ...],
        *,
        episode: str = "ep1",
        at: int = 100,
        text: str = "",
    ) -> str:
        text = text or f"chunk of {episode} turns {' '.join(map(str, seqs))}"
        sources = [Source("sess-" + episode, q, f"m{q}", text=f"turn {q}") for q in seqs]
        return self._indexed(scope, "episode_chunk", text, sources, episode, at)

    def turn(
        self,
        scope: Scope,
        speaker: str,
        text: str,
        *,
        seq: int = 1,
        episode: str = "ep1",
        at: int = 100,
    ) -> str:
        sources = [Source("sess-" + episode, seq, f"m{seq}", speaker=speaker, text=text)]
        return self._indexed(scope, "episode_turn", f"{speaker}: {text}", sources, episode, at)

    def supersede(self, fact_id: str, at: int) -> None:
        self.graph.close_edges([fact_id], at)
        self.vectors.set_valid_to([fact_id], Validity(at))

    def close(self) -> None:
        self.semantic.close()
        self.state.close()
