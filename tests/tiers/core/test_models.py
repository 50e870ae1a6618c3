"""ModelClient (tiers.core.models) against a real HTTP server on loopback, through the real litellm:
batching, retries and their pauses, timeouts, errors, keys, counters."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from daemon.codec.status import Unavailable, grpc_status
from tests.support.llm_server import FakeOpenAI, Reply, free_port_refuses
from tests.support.model_clients import RETRY_AFTER, client_settings, growing_backoff, one_pause
from tiers.core.errors import ModelRequestFailed, ModelUnavailable
from tiers.core.models import CallStats, ModelClient
from tiers.core.models.retry import RetryReply

KEY_ENV = "TEST_MODEL_API_KEY"
KEY = "sk-model-0123456789-secret"


def word_vectors(texts: list[str]) -> list[list[float]]:
    """A deterministic 4-dimensional vector per text (no model): its length and vowels."""
    return [
        [float(len(t)), float(sum(c in "aeiou" for c in t)), 1.0, float(i)]
        for i, t in enumerate(texts)
    ]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(embed=word_vectors) as server:
        yield server


@pytest.fixture
def make(
    fake: FakeOpenAI, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., ModelClient]:
    key = KEY_ENV, KEY
    return lambda **overrides: ModelClient(
        **client_settings(fake, key, sleeps, monkeypatch, **overrides)
    )


# -- embeddings ------------------------------------------------------------------------------


def test_embed_sends_batches_and_keeps_the_order(
    fake: FakeOpenAI, make: Callable[..., ModelClient]
) -> None:
    client = make(batch_size=3)
    texts = [f"text number {i}" + "a" * i for i in range(7)]
    vectors = client.embed(texts)
    assert fake.paths == ["/v1/embeddings"] * 3
    assert [r["input"] for r in fake.requests] == [texts[0:3], texts[3:6], texts[6:7]]
    assert all(r["model"] == "test" for r in fake.requests)
    assert fake.headers[0]["Authorization"] == f"Bearer {KEY}"
    expected = word_vectors(texts[0:3]) + word_vectors(texts[3:6]) + word_vectors(texts[6:7])
    assert vectors == expected
    t = client.totals
    assert (t.llm_calls, t.failed_calls, t.embedded_texts) == (3, 0, 7)
    assert t.prompt_tokens > 0


def test_embed_reply_out_of_order_is_put_back_in_order(
    fake: FakeOpenAI, make: Callable[..., ModelClient]
) -> None:
    body: dict[str, Any] = Reply.embeddings([[1.0, 0.0], [0.0, 1.0]]).body
    body["data"].reverse()
    fake.reply_raw(body)
    assert make().embed(["first", "second"]) == [[1.0, 0.0], [0.0, 1.0]]


def test_one_request_per_attempt_litellm_and_the_sdk_do_not_retry(
    fake: FakeOpenAI, make: Callable[..., ModelClient], sleeps: list[float]
) -> None:
    fake.outage = Reply.error(503)
    with pytest.raises(ModelUnavailable) as err:
        make(max_retries=0).embed(["hello"])
    assert len(fake.requests) == 1  # litellm 1.106 would let the OpenAI SDK send 3
    assert sleeps == []
    assert "failed after 1 attempt; last cause: ServiceUnavailableError 503" in str(err.value)


@pytest.mark.parametrize(("headers", "expected"), RETRY_AFTER)
@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_honoured(
    fake: FakeOpenAI,
    make: Callable[..., ModelClient],
    sleeps: list[float],
    headers: dict[str, str],
    expected: float | None,
    status: int,
) -> None:
    fake.error(status, headers=headers)
    stats = CallStats()
    client = make(max_backoff_seconds=30.0)
    assert client.embed(["hello"], stats) == word_vectors(["hello"])
    assert len(fake.requests) == 2
    one_pause(sleeps, expected)
    assert stats.attempts == 2 and stats.ok and stats.slept_seconds == sleeps[0]
    assert stats.failures[0].startswith(("RateLimitError 429", "ServiceUnavailableError 503"))
    assert (client.totals.llm_calls, client.totals.failed_calls) == (2, 1)


def test_down_endpoint_fails_after_max_retries_with_growing_backoff(
    fake: FakeOpenAI, make: Callable[..., ModelClient], sleeps: list[float]
) -> None:
    fake.outage = Reply.error(500)
    client = make(max_retries=3, name="embedding litellm:openai/test")
    with pytest.raises(ModelUnavailable) as err:
        client.embed(["a", "b"])
    assert len(fake.requests) == 4
    message = str(err.value)
    assert message.startswith("embedding litellm:openai/test: embedding 2 texts failed after 4")
    assert "last cause: InternalServerError 500" in message
    assert err.value.cause.startswith("InternalServerError 500")
    growing_backoff(sleeps)
    assert (client.totals.llm_calls, client.totals.failed_calls) == (4, 4)
    # Down is UNAVAILABLE for a gRPC caller.
    assert isinstance(err.value, Unavailable)
    assert grpc_status(err.value) == grpc.StatusCode.UNAVAILABLE


def test_connection_refused_is_unavailable(
    make: Callable[..., ModelClient], sleeps: list[float]
) -> None:
    client = make(api_base=f"http://127.0.0.1:{free_port_refuses()}/v1", max_retries=1)
    with pytest.raises(ModelUnavailable, match=r"failed after 2 attempts.*Connection error"):
        client.embed(["hello"])
    assert len(sleeps) == 1


def test_timeout_is_retried_then_unavailable(
    fake: FakeOpenAI, make: Callable[..., ModelClient]
) -> None:
    fake.hang(10).hang(10)
    client = make(timeout_seconds=0.5, max_retries=1, sleep=lambda s: None)
    started = time.monotonic()
    with pytest.raises(ModelUnavailable, match="last cause: Timeout"):
        client.embed(["hello"])
    assert time.monotonic() - started < 4
    assert len(fake.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried_and_the_key_is_redacted(
    fake: FakeOpenAI, make: Callable[..., ModelClient], sleeps: list[float], status: int
) -> None:
    # A careless server echoing the key must not get it into our message.
    fake.outage = Reply.error(status, {"error": {"message": f"Incorrect API key: {KEY}"}})
    client = make()
    with pytest.raises(ModelRequestFailed) as err:
        client.embed(["hello"])
    assert len(fake.requests) == 1
    assert sleeps == []
    message = str(err.value)
    assert "failed on attempt 1 of 4, not retryable: " in message
    assert f"Error {status}: " in message
    assert KEY not in message and "***" in message
    assert not isinstance(err.value, Unavailable)
    assert grpc_status(err.value) == grpc.StatusCode.FAILED_PRECONDITION


def test_unusable_reply_is_retried_at_once_then_fails(
    fake: FakeOpenAI, make: Callable[..., ModelClient], sleeps: list[float]
) -> None:
    fake.script(Reply.embeddings([[1.0, 2.0]]), Reply.embeddings([[1.0], [2.0, 3.0]]))
    with pytest.raises(ModelRequestFailed) as err:
        make(max_retries=1).embed(["one", "two"])
    assert sleeps == []  # a bad reply is not a server in trouble: no backoff
    assert "failed after 2 attempts; last cause: bad reply: vectors of sizes [1, 2]" in str(
        err.value
    )
    fake.reply_raw({"object": "list", "data": [{"index": 0}]})
    assert make(max_retries=1).embed(["one"]) == word_vectors(["one"])


# -- keys ------------------------------------------------------------------------------------


def test_missing_key_fails_without_a_request(
    fake: FakeOpenAI, make: Callable[..., ModelClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make()
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ModelRequestFailed, match=f"environment variable {KEY_ENV}"):
        client.embed(["hello"])
    assert fake.requests == []
    assert KEY_ENV in repr(client) and KEY not in repr(client)


def test_key_file_is_read_per_call_and_never_shown(
    fake: FakeOpenAI, make: Callable[..., ModelClient], tmp_path: Path
) -> None:
    key_file = tmp_path / "embedding.key"
    key_file.write_text("sk-first-key\n")
    client = make(api_key_env=None, api_key_file=key_file)
    client.embed(["a"])
    key_file.write_text("sk-rotated-key\n")
    client.embed(["b"])
    assert [h["Authorization"] for h in fake.headers] == [
        "Bearer sk-first-key",
        "Bearer sk-rotated-key",
    ]
    assert "sk-rotated-key" not in repr(client) and str(key_file) in repr(client)
    key_file.unlink()
    with pytest.raises(ModelRequestFailed, match="cannot read the API key file"):
        client.embed(["c"])
    assert len(fake.requests) == 2


def test_no_key_for_a_self_hosted_server(fake: FakeOpenAI, make: Callable[..., ModelClient]):
    make(api_key_env=None).embed(["a"])
    assert fake.headers[0]["Authorization"] == "Bearer no-key"


# -- completions -----------------------------------------------------------------------------


def test_complete_retries_a_rejected_reply_with_changed_arguments(
    fake: FakeOpenAI, make: Callable[..., ModelClient], sleeps: list[float]
) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    fake.reply_text("nope", usage=usage).reply_text("42", usage=usage)

    def check(response: Any) -> int:
        content = response.choices[0].message.content
        if not content.isdigit():
            raise RetryReply("bad reply: not a number", max_tokens=20)
        return int(content)

    client = make()
    stats = CallStats()
    answer = client.complete(
        check, stats=stats, messages=[{"role": "user", "content": "?"}], max_tokens=10
    )
    assert answer == 42
    assert [r["max_tokens"] for r in fake.requests] == [10, 20]
    assert fake.paths == ["/v1/chat/completions"] * 2
    assert sleeps == []
    assert (stats.attempts, stats.failures, stats.ok) == (2, ["bad reply: not a number"], True)
    assert (stats.prompt_tokens, stats.completion_tokens) == (20, 4)
    t = client.totals
    assert (t.llm_calls, t.failed_calls, t.prompt_tokens, t.completion_tokens) == (2, 1, 20, 4)


def test_constructor_rejects_nonsense() -> None:
    for bad in (
        {"model": ""},
        {"timeout_seconds": 0},
        {"max_retries": -1},
        {"backoff_seconds": -1},
        {"batch_size": 0},
    ):
        with pytest.raises(ValueError):
            ModelClient(**{"model": "openai/x", **bad})
