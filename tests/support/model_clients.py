"""A model client (:class:`tiers.core.models.ModelClient`) of the fake OpenAI server
(:mod:`tests.support.llm_server`) as the model tests make one (``tests/tiers/core/test_models.py``,
``tests/weaver/extractors/test_llm.py``): its settings, with the pauses between retries recorded
instead of slept, and what those pauses must be."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.support.llm_server import FakeOpenAI

# A refusal's retry headers, and the pause they ask for (None: none, the backoff applies) with
# a client's max_backoff_seconds at 30.
RETRY_AFTER = [
    ({}, None),
    ({"Retry-After": "3"}, 3.0),
    ({"retry-after-ms": "1500", "Retry-After": "2"}, 1.5),
    ({"Retry-After": "3600"}, 30.0),  # capped at max_backoff_seconds
]


def client_settings(
    fake: FakeOpenAI,
    key: tuple[str, str],
    sleeps: list[float],
    monkeypatch: pytest.MonkeyPatch,
    **overrides: Any,
) -> dict[str, Any]:
    """The arguments of a model client of ``fake``: its key ``key[1]`` in the environment
    variable ``key[0]`` (set here, for the test), a 5 s timeout, three retries from a 1 s pause,
    each pause appended to ``sleeps`` instead of slept, a seeded jitter; ``overrides`` over
    them."""
    key_env, value = key
    monkeypatch.setenv(key_env, value)
    return {
        "model": "openai/test",
        "api_base": fake.base_url,
        "api_key_env": key_env,
        "timeout_seconds": 5.0,
        "max_retries": 3,
        "backoff_seconds": 1.0,
        "sleep": sleeps.append,
        "random": random.Random(7).random,
        **overrides,
    }


def one_pause(sleeps: list[float], expected: float | None) -> None:
    """One pause was taken: ``expected`` (a Retry-After's), or the first backoff."""
    assert len(sleeps) == 1
    if expected is None:
        assert 0.5 <= sleeps[0] <= 1.0  # first backoff: [backoff/2, backoff]
    else:
        assert sleeps[0] == pytest.approx(expected)


def growing_backoff(sleeps: list[float]) -> None:
    """Three retries paused a growing backoff each (none after the last attempt)."""
    assert len(sleeps) == 3  # none after the last attempt
    for i, pause in enumerate(sleeps):  # equal jitter: [c/2, c] with c = 1, 2, 4
        assert 2**i / 2 <= pause <= 2**i
