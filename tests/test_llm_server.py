"""The loopback OpenAI server of the tests (``tests/support/llm_server.py``) itself."""

from __future__ import annotations

import threading
import time
import urllib.request

from tests.support import wait_until
from tests.support.llm_server import FakeOpenAI


def test_fake_server_closes_promptly_while_a_handler_hangs():
    outcome: list[str] = []

    def client(url: str) -> None:
        req = urllib.request.Request(url, data=b"{}", method="POST")
        try:
            urllib.request.urlopen(req, timeout=10).read()
            outcome.append("answered")
        except Exception as exc:
            outcome.append(type(exc).__name__)

    fake = FakeOpenAI()
    fake.hang(30)
    thread = threading.Thread(target=client, args=(fake.base_url + "/chat/completions",))
    thread.start()
    wait_until(lambda: fake.requests, 5, "for the request", interval=0.01)
    assert len(fake.requests) == 1
    started = time.monotonic()
    fake.close()
    assert time.monotonic() - started < 2
    thread.join(5)
    assert outcome and outcome[0] != "answered"
