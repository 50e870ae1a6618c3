"""A fake OpenAI-compatible HTTP server for tests (loopback, stdlib only).

    with FakeOpenAI() as fake:
        fake.error(500).reply_json({"summary": "..."})
        ...  # point the client at fake.base_url ("http://127.0.0.1:PORT/v1")
        assert len(fake.requests) == 2

Each request takes the next scripted :class:`Reply`; when the script is empty the server
answers with :attr:`FakeOpenAI.default` (a 500 naming the problem unless configured), so an
unexpected extra request is visible in ``requests`` and fails loudly. ``POST
/v1/chat/completions`` replies are wrapped in a ``chat.completion`` body with ``usage``;
:meth:`FakeOpenAI.reply_raw` sends any JSON body (for other endpoints, e.g. rerank).

Closing is clean even while a handler hangs: :meth:`FakeOpenAI.hang` waits on an event that
:meth:`FakeOpenAI.close` sets, and ``close`` joins every handler thread.

Each request is handled on its own thread; :attr:`FakeOpenAI.peak` is the most requests the
server held at once (from reading a request to starting its reply): the server's own view of
requests in flight together.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["FakeOpenAI", "Reply", "embedding_body", "free_port_refuses"]


def embedding_body(vectors: list[list[float]], model: str, base64_floats: bool = False) -> Any:
    """An OpenAI ``/v1/embeddings`` reply for ``vectors`` (float32 base64 if asked)."""
    data = []
    for i, vector in enumerate(vectors):
        value: Any = [float(x) for x in vector]
        if base64_floats:
            value = base64.b64encode(struct.pack(f"<{len(value)}f", *value)).decode()
        data.append({"object": "embedding", "index": i, "embedding": value})
    tokens = max(1, sum(len(v) for v in vectors) // 64)
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with the class methods."""

    kind: str  # "chat" | "raw" | "hang"
    status: int = 200
    content: str | None = None
    finish_reason: str = "stop"
    usage: dict[str, int] | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    then: Reply | None = None

    @classmethod
    def json(
        cls, obj: Any, finish_reason: str = "stop", usage: dict[str, int] | None = None
    ) -> Reply:
        """A chat completion whose message content is ``json.dumps(obj)``."""
        return cls("chat", content=json.dumps(obj), finish_reason=finish_reason, usage=usage)

    @classmethod
    def text(
        cls, text: str | None, finish_reason: str = "stop", usage: dict[str, int] | None = None
    ) -> Reply:
        """A chat completion whose message content is ``text`` as is."""
        return cls("chat", content=text, finish_reason=finish_reason, usage=usage)

    @classmethod
    def error(cls, status: int, body: Any = None, headers: dict[str, str] | None = None) -> Reply:
        """An HTTP error; ``body`` (dict → JSON, str → as is) defaults to an OpenAI error."""
        if body is None:
            body = {
                "error": {
                    "message": f"fake error {status}",
                    "type": "server_error" if status >= 500 else "invalid_request_error",
                    "param": None,
                    "code": str(status),
                }
            }
        return cls("raw", status=status, body=body, headers=dict(headers or {}))

    @classmethod
    def raw(cls, body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        """Any body with any status (dict/list → JSON, str → as is)."""
        return cls("raw", status=status, body=body, headers=dict(headers or {}))

    @classmethod
    def embeddings(cls, vectors: list[list[float]], model: str = "test") -> Reply:
        """An embedding list holding ``vectors`` (whatever was asked)."""
        return cls.raw(embedding_body(vectors, model))

    @classmethod
    def hang(cls, seconds: float, then: Reply | None = None) -> Reply:
        """Say nothing for ``seconds`` (cut short by close), then send ``then`` or drop the
        connection without a response."""
        return cls("hang", seconds=seconds, then=then)


_NO_SCRIPT = Reply.error(
    500,
    {"error": {"message": "fake server: no scripted response left", "type": "server_error"}},
)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handler threads
    block_on_close = True
    fake: FakeOpenAI


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: no idle keep-alive threads
    timeout = 10  # a client that connects and never sends cannot block close() for long
    _held = False  # a POST counted in FakeOpenAI.active, not yet answered

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send(404, {"error": {"message": f"no route GET {self.path}"}}, {})

    def do_POST(self) -> None:
        fake = self.server.fake
        fake._arrived()
        self._held = True
        try:
            self._post(fake)
        finally:
            self._leave()

    def _leave(self) -> None:
        """The request leaves the server's count once, before its reply's first byte is sent:
        a client that sends its next request on reading this reply must never find this one
        still counted (under load, this thread may run again only after the next arrived)."""
        if self._held:
            self._held = False
            self.server.fake._left()

    def _post(self, fake: FakeOpenAI) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        reply = fake._record(self.path, dict(self.headers.items()), body)
        self._play(reply, body)

    def _play(self, reply: Reply, request: Any) -> None:
        fake = self.server.fake
        if reply.kind == "hang":
            closed = fake._closing.wait(reply.seconds)
            if closed or reply.then is None:
                self.close_connection = True
                return  # the connection drops without a response
            reply = reply.then
        if reply.kind == "chat":
            self._send(200, fake._completion(reply, request), {})
        else:
            self._send(reply.status, reply.body, reply.headers)

    def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self._leave()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (timeout) and closed its end


class FakeOpenAI:
    """An OpenAI-compatible server on 127.0.0.1 (random port) in a background thread."""

    def __init__(
        self,
        default: Reply | None = None,
        model: str = "test",
        responder: Callable[[Any], Reply] | None = None,
        port: int = 0,
        embed: Callable[[list[str]], list[list[float]]] | None = None,
    ) -> None:
        self.default: Reply = default or _NO_SCRIPT
        # Answers POST /v1/embeddings when the script is empty: texts in, vectors out.
        self.embed = embed
        # When set, every request gets this reply: the endpoint is down.
        self.outage: Reply | None = None
        # Answers from the request itself when the script is empty (before ``default``).
        self.responder = responder
        self.model = model
        self.requests: list[Any] = []  # every received JSON body, in order
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []  # time.monotonic() of each request's arrival
        self.active = 0  # requests held now (read, not answered yet)
        self.peak = 0  # the most held at once
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = _Server(("127.0.0.1", port), _Handler)  # port 0: any free one
        self._server.fake = self
        self.port: int = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-openai",
            daemon=True,
        )
        self._thread.start()

    # -- scripting --------------------------------------------------------------------------

    def script(self, *replies: Reply) -> FakeOpenAI:
        with self._lock:
            self._script.extend(replies)
        return self

    def reply_json(
        self, obj: Any, finish_reason: str = "stop", usage: dict[str, int] | None = None
    ) -> FakeOpenAI:
        return self.script(Reply.json(obj, finish_reason, usage))

    def reply_text(
        self, text: str | None, finish_reason: str = "stop", usage: dict[str, int] | None = None
    ) -> FakeOpenAI:
        return self.script(Reply.text(text, finish_reason, usage))

    def reply_raw(
        self, body: Any, status: int = 200, headers: dict[str, str] | None = None
    ) -> FakeOpenAI:
        return self.script(Reply.raw(body, status, headers))

    def error(
        self, status: int, body: Any = None, headers: dict[str, str] | None = None
    ) -> FakeOpenAI:
        return self.script(Reply.error(status, body, headers))

    def hang(self, seconds: float, then: Reply | None = None) -> FakeOpenAI:
        return self.script(Reply.hang(seconds, then))

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        with self._lock:
            return len(self._script)

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop serving; hanging handlers return at once; every handler thread is joined."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._server.shutdown()
        self._thread.join(5)
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------

    def _arrived(self) -> None:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)

    def _left(self) -> None:
        with self._lock:
            self.active -= 1

    def _record(self, path: str, headers: dict[str, str], body: Any) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.paths.append(path)
            self.headers.append(headers)
            self.times.append(time.monotonic())
            if self.outage is not None:
                return self.outage
            if self._script:
                return self._script.popleft()
        if self.embed is not None and path.rstrip("/").endswith("/embeddings"):
            return self._embeddings(body)
        if self.responder is not None:
            return self.responder(body)
        return self.default

    def _embeddings(self, request: Any) -> Reply:
        assert self.embed is not None
        if not _is_dict(request) or "input" not in request:
            return Reply.error(400, {"error": {"message": "no input", "type": "invalid_request"}})
        texts = request["input"]
        texts = [texts] if isinstance(texts, str) else list(texts)
        try:
            vectors = self.embed(texts)
        except Exception as exc:  # the test's hook failed: say so instead of hanging up
            return Reply.error(500, {"error": {"message": f"embed hook: {exc!r}"}})
        base64_floats = request.get("encoding_format") == "base64"
        model = request.get("model", self.model)
        return Reply.raw(embedding_body([list(v) for v in vectors], model, base64_floats))

    def _completion(self, reply: Reply, request: Any) -> dict[str, Any]:
        usage = reply.usage
        if usage is None:
            prompt_chars = len(json.dumps(request.get("messages", ""))) if _is_dict(request) else 0
            prompt = max(1, prompt_chars // 4)
            completion = max(1, len(reply.content or "") // 4)
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        model = request.get("model", self.model) if _is_dict(request) else self.model
        return {
            "id": f"chatcmpl-fake{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": usage,
        }


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)


def free_port_refuses() -> int:
    """A loopback port with nothing listening (for connection-refused tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
