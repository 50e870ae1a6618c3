"""The weaver's worker on real stores, without a daemon (the tests of :mod:`weaver.jobs`):
RocksDB state and journal, working memory, the embedded vector engine and a small hashing
embedder instead of the model; the local extractor consolidates."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tiers.core.records import Message, Scope
from tiers.journal.store import JOURNAL_CFS, Journal
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.embedding import EmbeddingService
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.working.memory import WorkingMemory
from tiers.working.session import SessionFlushed, WindowLimits
from weaver.consolidate import Consolidator
from weaver.extractors.local import LocalExtractor
from weaver.index import Indexer
from weaver.jobs.runner import Weaver
from weaver.settings import WeaverSettings

DIM = 32
TTL = 3600
ALICE = Scope("alice", "bot")


class HashEmbedder:
    """Deterministic bag of words: each word adds 1 to a hashed column; rows L2-normalised."""

    model_name = "hash"
    dim = DIM

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        rows = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                rows[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
            norm = np.linalg.norm(rows[i])
            if norm:
                rows[i] /= norm
        return rows

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode_documents(texts)


@dataclass
class World:
    working: WorkingMemory
    weaver: Weaver
    indexer: Indexer


@contextmanager
def worker_world(tmp_path: Path) -> Iterator[World]:
    """A weaver on fresh stores under ``tmp_path``, stopped and closed on exit."""
    state = RocksStore(tmp_path / "state", STATE_CFS)
    jstore = RocksStore(tmp_path / "journal", JOURNAL_CFS, ttl_seconds=TTL)
    journal = Journal(jstore, state, TTL)
    working = WorkingMemory(state, journal, WindowLimits())
    working.recover()
    embedder = HashEmbedder()
    semantic = SemanticStore(
        state, EmbeddingService(lambda: embedder, "hash"), lambda: EdgeVectorStore(tmp_path / "v")
    )
    semantic.start()
    semantic.wait_ready(30)
    indexer = Indexer(journal, semantic, WeaverSettings())
    local = LocalExtractor(embed=embedder.encode_documents)
    consolidator = Consolidator(journal, state, semantic, local, local, set())
    weaver = Weaver(journal, semantic, indexer, consolidator)
    working.events.subscribe(
        SessionFlushed, lambda event: weaver.notify_flushed(event.result.episode_id)
    )
    try:
        yield World(working, weaver, indexer)
    finally:
        weaver.stop()
        semantic.close()
        jstore.close()
        state.close()


def end_session(working: WorkingMemory, session_id: str) -> str:
    turns = ["I moved to Lisbon last spring.", "Nice! Do you like the trams there?"]
    messages = [Message("user", t, name="Alice") for t in turns]
    working.append(session_id, ALICE, messages)
    return working.end_session(session_id, user_id=ALICE.user_id).episode_id
