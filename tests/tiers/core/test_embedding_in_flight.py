"""An embedding call's batches with several requests in flight (``embedding.max_in_flight``:
``tiers/core/models/batches.py``, ``ModelClient.embed``), against the loopback OpenAI-compatible
server over real HTTP: the server itself sees the requests overlap (a barrier that only
concurrent requests pass), the vectors keep the texts' order whatever order the replies come
in, a failed request is retried on its own, a failing batch fails the call with the error a
call sending its batches one by one raises, and the counters add up under concurrency."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from pydantic import ValidationError

from daemon.components import configured_embedder
from daemon.settings import Settings
from stratad_client import message
from tests.support import wait_until
from tests.support.llm_server import FakeOpenAI, Reply
from tiers.core.errors import ModelError, ModelRequestFailed, ModelUnavailable
from tiers.core.models import CallStats, ModelClient
from tiers.core.models.batches import Abandoned, PoolClosed, in_flight
from tiers.settings import EmbeddingSettings

DEADLINE = 30.0


def text(i: int) -> str:
    return f"text {i}"


def vector(t: str) -> list[float]:
    """A vector that says which text it is for."""
    return [float(t.split()[-1]), 1.0, 0.0]


def batch_of(request: Any) -> int:
    """The batch a request carries (batches of 2 texts: text 2b, text 2b+1)."""
    return int(request["input"][0].split()[-1]) // 2


class Server:
    """A loopback embeddings endpoint whose answers the test decides per batch."""

    def __init__(self, answer: Callable[[int, Any], Reply | None] | None = None) -> None:
        self.answer = answer or (lambda batch, request: None)
        self.fake = FakeOpenAI(responder=self._respond)
        self.lock = threading.Lock()
        self.seen: list[int] = []  # the batch of each request, in arrival order

    def _respond(self, request: Any) -> Reply:
        batch = batch_of(request)
        with self.lock:
            self.seen.append(batch)
        reply = self.answer(batch, request)
        return reply or Reply.embeddings([vector(t) for t in request["input"]])

    def client(self, **overrides: Any) -> ModelClient:
        kwargs: dict[str, Any] = {
            "model": "openai/test",
            "api_base": self.fake.base_url,
            "batch_size": 2,
            "max_in_flight": 4,
            "max_retries": 0,
            "timeout_seconds": DEADLINE,
            "sleep": lambda seconds: None,  # no real pause before a retry
        }
        return ModelClient(**kwargs | overrides)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.fake.close()


TEXTS = [text(i) for i in range(16)]  # 8 batches of 2
WANT = [vector(t) for t in TEXTS]


def test_requests_are_in_flight_together_and_vectors_keep_the_texts_order(server: Server):
    together = threading.Barrier(4, timeout=DEADLINE)  # passed only by 4 requests at once
    answered = [threading.Event() for _ in range(8)]

    def answer(batch: int, request: Any) -> None:
        if batch < 4:
            together.wait()
        if batch == 0:  # the first batch is answered last of its round
            assert answered[3].wait(DEADLINE)
        answered[batch].set()
        return None

    server.answer = answer
    client = server.client()
    stats = CallStats()
    try:
        assert client.embed(TEXTS, stats) == WANT
    finally:
        client.close()
    assert server.fake.peak == 4  # the server held 4 requests at once, never more
    assert sorted(server.seen) == list(range(8))  # each batch sent once
    assert (stats.attempts, stats.failures, stats.ok) == (8, [], True)
    t = client.totals
    assert (t.llm_calls, t.failed_calls, t.embedded_texts) == (8, 0, 16)


def test_one_at_a_time_when_max_in_flight_is_1(server: Server):
    client = server.client(max_in_flight=1)
    assert client.embed(TEXTS) == WANT
    assert server.fake.peak == 1 and server.seen == list(range(8))  # in order, one by one
    assert client._pool is None  # no thread pool was made


def test_a_failed_request_is_retried_on_its_own(server: Server):
    failed = threading.Event()

    def answer(batch: int, request: Any) -> Reply | None:
        if batch == 5 and not failed.is_set():
            failed.set()
            return Reply.error(503)
        return None

    server.answer = answer
    client = server.client(max_retries=2)
    stats = CallStats()
    assert client.embed(TEXTS, stats) == WANT
    assert sorted(server.seen) == [0, 1, 2, 3, 4, 5, 5, 6, 7]  # batch 5 twice, the rest once
    assert stats.attempts == 9 and len(stats.failures) == 1 and "503" in stats.failures[0]
    t = client.totals
    assert (t.llm_calls, t.failed_calls, t.embedded_texts) == (9, 1, 16)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [(Reply.error(400), ModelRequestFailed), (Reply.error(503), ModelUnavailable)],
)
def test_a_failing_batch_fails_the_call_as_one_by_one_would(
    server: Server, reply: Reply, kind: type[ModelError]
):
    server.answer = lambda batch, request: reply if batch == 3 else None
    errors = []
    for in_flight_ in (1, 4):  # one by one, then four at once
        client = server.client(max_in_flight=in_flight_, max_retries=2)
        with pytest.raises(kind) as info:
            client.embed(TEXTS)
        errors.append(info.value)
        client.close()
    one_by_one, together = errors
    assert together.detail == one_by_one.detail and str(together) == str(one_by_one)
    assert "embedding 2 texts" in str(together)


def test_counters_add_up_with_calls_in_flight_together(server: Server):
    client = server.client(max_in_flight=8, batch_size=1)
    results: dict[int, list[list[float]]] = {}

    def call(n: int) -> None:
        texts = [text(i) for i in range(n)]
        results[n] = client.embed(texts)

    threads = [threading.Thread(target=call, args=(n,)) for n in (16, 9, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    client.close()
    for n in (16, 9, 5):
        assert results[n] == [vector(text(i)) for i in range(n)]
    assert server.fake.peak <= 8  # one pool per client: 8 in flight at most, all calls together
    t = client.totals
    assert (t.llm_calls, t.failed_calls, t.embedded_texts) == (30, 0, 30)


def test_a_closed_client_ends_its_retries_and_refuses_calls(server: Server):
    server.answer = lambda batch, request: Reply.error(503)
    client: ModelClient

    def pause(seconds: float) -> None:  # the client closes while a call waits to retry
        client.close()

    client = server.client(max_retries=5, sleep=pause)
    with pytest.raises(ModelUnavailable, match="the client is closed"):
        client.embed(TEXTS[:2])
    assert server.seen == [0]  # the retry was not sent
    with pytest.raises(ModelUnavailable, match="the client is closed"):
        client.embed(TEXTS)


def test_the_daemons_remote_embedder_fills_the_requests_in_flight(server: Server):
    """The weaver's documents reach the remote model in slices of batch_size *
    max_in_flight texts (the queries-first wrapper: tiers/semantic/embedding/priority.py)."""
    together = threading.Barrier(4, timeout=DEADLINE)

    def answer(batch: int, request: Any) -> None:
        if batch < 4:  # the first slice: 4 requests at once
            together.wait()

    server.answer = answer
    settings = Settings(
        embedding={
            "provider": "litellm",
            "model": "openai/test",
            "api_base": server.fake.base_url,
            "dim": 3,
            "batch_size": 2,
            "max_in_flight": 4,
        }
    )
    client = server.client()
    embedder = configured_embedder(settings, client)
    try:
        rows = embedder.encode_documents(TEXTS)
    finally:
        client.close()
    assert rows.shape == (16, 3) and server.fake.peak == 4
    assert [round(float(r[0] / r[1])) for r in rows] == list(range(16))  # in order


@pytest.mark.slow
def test_the_daemons_weaver_indexes_with_requests_in_flight_and_stop_closes_the_pool(
    start_daemon,
):
    together = threading.Barrier(4, timeout=DEADLINE)
    lock, requests = threading.Lock(), [0]

    def embed(texts: list[str]) -> list[list[float]]:
        with lock:  # one handler thread per request
            requests[0] += 1
            first = requests[0] <= 4
        if first:  # the weaver's first slice: 4 requests at once
            together.wait()
        return [[float(len(t)), 1.0, 0.5] for t in texts]

    with FakeOpenAI(embed=embed) as fake:
        remote = {"provider": "litellm", "model": "openai/test", "api_base": fake.base_url}
        d = start_daemon(embedding={**remote, "dim": 3, "batch_size": 2, "max_in_flight": 4})
        d.daemon.parts.semantic.wait_ready(60)
        with d.client(timeout=60) as c:
            turns = [f"Turn {i}: Alice planted {i + 3} tomato plants." for i in range(8)]
            c.append_batch("s1", [message(t, name="Alice") for t in turns], user_id="alice")
            c.end_session("s1")
            wait_until(lambda: c.admin.weaver_status().unindexed == 0, DEADLINE, "for the index")
            assert fake.peak == 4  # the server held the weaver's 4 requests at once
            assert c.recall("tomato plants", user_id="alice", k=3).hits
        client = d.daemon.parts.embedding_client
        d.stop()
        assert client is not None and client._pool is None  # the daemon closed it
        with pytest.raises(ModelUnavailable, match="the client is closed"):
            client.embed(["after the stop"])


# -- the batches alone (tiers/core/models/batches.py)
# -----------------------------------------------


def test_after_a_failure_no_batch_starts_and_running_ones_stop():
    """Job 1 fails while job 0 runs; job 0 sees the call's stop and ends (Abandoned); no
    other job starts; the error raised is job 1's."""
    ran: list[int] = []

    def job(i: int) -> Callable[[threading.Event], list[int]]:
        def run(stop: threading.Event) -> list[int]:
            ran.append(i)
            if i == 1:
                raise ValueError("batch 1 refused")
            if i == 0:  # in flight when batch 1 fails: it stops at its next retry
                assert stop.wait(DEADLINE)
                raise Abandoned
            return [i]

        return run

    with ThreadPoolExecutor(2) as pool, pytest.raises(ValueError, match="batch 1 refused"):
        in_flight([job(i) for i in range(6)], lambda: pool, 2)
    assert sorted(ran) == [0, 1]


def test_the_first_failing_batch_in_order_is_the_error():
    gate = threading.Barrier(2, timeout=DEADLINE)

    def run(i: int, stop: threading.Event) -> list[int]:
        gate.wait()  # both fail, batch 1 first in time
        if i == 0:
            assert stop.wait(DEADLINE)
        raise ValueError(f"batch {i}")

    with ThreadPoolExecutor(2) as pool, pytest.raises(ValueError, match="batch 0"):
        in_flight([lambda s, i=i: run(i, s) for i in range(2)], lambda: pool, 2)


def test_a_pool_shut_down_before_the_batches_ran_says_so():
    closed = ThreadPoolExecutor(1)
    closed.shutdown()
    with pytest.raises(PoolClosed):
        in_flight([lambda stop: [1]], lambda: closed, 1)

    class Recording:  # tells when the call's worker is queued
        def __init__(self) -> None:
            self.inner = ThreadPoolExecutor(1)
            self.queued = threading.Event()

        def submit(self, fn: Callable[[], None]) -> Future[None]:
            future = self.inner.submit(fn)
            self.queued.set()
            return future

    pool, busy = Recording(), threading.Event()
    pool.inner.submit(busy.wait, DEADLINE)  # its one thread is taken: the worker waits
    raised: list[BaseException] = []

    def call() -> None:
        try:
            in_flight([lambda stop: [1]], lambda: pool, 1)  # type: ignore[arg-type, return-value]
        except BaseException as exc:
            raised.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    assert pool.queued.wait(DEADLINE)
    pool.inner.shutdown(wait=False, cancel_futures=True)  # the client closes
    busy.set()
    caller.join(DEADLINE)
    assert len(raised) == 1 and isinstance(raised[0], PoolClosed)


def test_max_in_flight_is_a_remote_setting_between_1_and_64():
    remote = {"provider": "litellm", "model": "openai/x"}
    assert EmbeddingSettings(**remote).max_in_flight == 4
    assert EmbeddingSettings(**remote, max_in_flight=1).max_in_flight == 1
    for bad in (0, 65):
        with pytest.raises(ValidationError, match="max_in_flight"):
            EmbeddingSettings(**remote, max_in_flight=bad)
    with pytest.raises(ValidationError, match=r"embedding\.max_in_flight applies to"):
        EmbeddingSettings(max_in_flight=8)
    with pytest.raises(ValueError, match="max_in_flight must be >= 1"):
        ModelClient(model="openai/x", max_in_flight=0)
