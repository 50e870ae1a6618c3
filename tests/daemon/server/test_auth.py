"""Bearer tokens: authentication, rights, tenants, open local mode, `stratad token`, secrets."""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest

from daemon.codec.status import ConfigError
from daemon.server.auth import token_hash
from daemon.settings import Settings, load_settings
from stratad_client import MemoryClient, StrataClientError, message
from tests.support import QUIET, QUIET_ENV, daemon_env, wait_until
from tests.support.daemons import python
from tests.support.llm_server import FakeOpenAI
from tests.support.weaving import EchoLLM

TOKENS = {
    "writer": ("tok-writer-alice", ["alice"], ["append"]),
    "reader": ("tok-reader-alice", ["alice"], ["recall"]),
    "agent": ("tok-agent-alice", ["alice"], ["append", "recall"]),
    "pair": ("tok-pair", ["alice", "bob"], ["append", "recall"]),
    "ops": ("tok-ops-all", ["*"], ["admin"]),
    "bob-admin": ("tok-admin-bob", ["bob"], ["admin"]),
}


def entries(names: Any = TOKENS) -> list[dict[str, Any]]:
    return [
        {"name": n, "sha256": token_hash(TOKENS[n][0]), "tenants": TOKENS[n][1], "rights": r}
        for n in names
        for r in [TOKENS[n][2]]
    ]


def code(call: Any) -> grpc.StatusCode:
    with pytest.raises(StrataClientError) as err:
        call()
    return err.value.code


@pytest.fixture
def secured(start_daemon):
    return start_daemon(auth={"tokens": entries()}, weaver=QUIET)


def as_(daemon: Any, name: str | None) -> MemoryClient:
    return MemoryClient(daemon.address, token=TOKENS[name][0] if name else None)


def test_no_or_a_wrong_token_is_unauthenticated_and_probes_stay_open(secured):
    with as_(secured, None) as c:
        assert code(lambda: c.append("s", "hi", user_id="alice")) == grpc.StatusCode.UNAUTHENTICATED
        assert code(c.admin.stats) == grpc.StatusCode.UNAUTHENTICATED
        assert c.health("strata.v1.MemoryService") == "SERVING"  # health needs no token
    with MemoryClient(secured.address, token="tok-writer-alicE") as c:
        assert code(lambda: c.get_working_memory("s")) == grpc.StatusCode.UNAUTHENTICATED
    # A malformed header is refused the same way.
    with MemoryClient(secured.address) as c, pytest.raises(grpc.RpcError) as raw:
        c._memory.Stats(  # the raw stub: the client sends no such header
            __import__("stratad_client.pb.memory_pb2", fromlist=["x"]).StatsRequest(),
            metadata=[("authorization", "Basic tok-ops-all")],
            timeout=5,
        )
    assert raw.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_rights_decide_what_a_token_may_call(secured, tmp_path):
    denied = grpc.StatusCode.PERMISSION_DENIED
    with as_(secured, "writer") as w, as_(secured, "reader") as r, as_(secured, "ops") as ops:
        assert w.append("s1", "Alice lives in Paris.", user_id="alice").seq == 1
        assert code(lambda: w.get_working_memory("s1")) == denied  # append only
        w.append("s1", "a typo", user_id="alice")
        assert w.remove_messages("s1", last=1).log_messages == 1  # an append right too
        assert code(lambda: w.recall("Paris", user_id="alice")) == denied
        assert code(w.admin.stats) == denied and code(w.admin.weaver_status) == denied
        assert code(lambda: r.append("s1", "more", user_id="alice")) == denied
        assert code(lambda: r.end_session("s1")) == denied
        assert [m.message.content for m in r.get_working_memory("s1").messages] == [
            "Alice lives in Paris."
        ]
        assert code(r.admin.stats) == denied
        assert code(lambda: r.admin.backup(str(tmp_path / "b1"))) == denied
        # admin implies every other right, and reaches every tenant with ["*"]
        assert ops.admin.stats().working_memory.live_sessions == 1
        assert ops.get_working_memory("s1").scope.user_id == "alice"
        assert ops.append("s2", "ops writes for bob", user_id="bob").seq == 1
        assert ops.admin.backup(str(tmp_path / "b2"), timeout=120).stores
    with as_(secured, "bob-admin") as bob:
        # admin of one tenant: no backup of everyone, and alice's session does not exist
        assert code(lambda: bob.admin.backup(str(tmp_path / "b3"))) == denied
        assert code(lambda: bob.get_working_memory("s1")) == grpc.StatusCode.NOT_FOUND
        assert bob.admin.weaver_status().extractor


def test_tenants_come_from_the_token(secured):
    with as_(secured, "agent") as a, as_(secured, "pair") as p, as_(secured, "ops") as ops:
        # no user_id: the token's only tenant
        a.append_batch("mine", [message("hello"), message("again")])
        assert a.get_working_memory("mine").scope.user_id == "alice"
        assert code(lambda: a.append("x", "hi", user_id="bob")) == grpc.StatusCode.PERMISSION_DENIED
        assert code(lambda: a.list_episodes(user_id="bob")) == grpc.StatusCode.PERMISSION_DENIED
        assert code(lambda: a.recall("hi", user_id="bob")) == grpc.StatusCode.PERMISSION_DENIED
        # a token of two tenants must say which one
        assert code(lambda: p.append("y", "hi")) == grpc.StatusCode.INVALID_ARGUMENT
        assert code(p.list_episodes) == grpc.StatusCode.INVALID_ARGUMENT
        p.append("bobs", "Bob here", user_id="bob")
        assert code(lambda: a.get_working_memory("bobs")) == grpc.StatusCode.NOT_FOUND
        assert code(lambda: a.end_session("bobs")) == grpc.StatusCode.NOT_FOUND
        assert code(lambda: a.remove_messages("bobs", all=True)) == grpc.StatusCode.NOT_FOUND
        # sessions are per tenant: the same id is another session, and nothing shows bob's
        assert a.append("bobs", "mine too").seq == 1
        assert a.append("bobs", "and this", user_id="alice").seq == 2
        texts = lambda view: [m.message.content for m in view.messages]  # noqa: E731
        assert texts(a.get_working_memory("bobs")) == ["mine too", "and this"]
        assert texts(p.get_working_memory("bobs", user_id="bob")) == ["Bob here"]
        # a token of both tenants names the user when both have a session of that id
        assert code(lambda: p.end_session("bobs")) == grpc.StatusCode.INVALID_ARGUMENT
        # an empty scope on an existing own session still means the session's scope
        a.append("agented", "first", user_id="alice", agent_id="planner")
        assert a.append("agented", "second").seq == 2
        ended = a.end_session("mine")
        assert a.get_episode(ended.episode_id).episode.scope.user_id == "alice"
        assert p.get_episode(ended.episode_id).episode.message_count == 2
        assert [e.episode_id for e in ops.list_episodes().episodes] == [ended.episode_id]
        p.end_session("bobs", user_id="bob")
        bob_episode = ops.list_episodes(user_id="bob").episodes[0].episode_id
        assert code(lambda: a.get_episode(bob_episode)) == grpc.StatusCode.NOT_FOUND
        assert [e.episode_id for e in a.list_episodes().episodes] == [ended.episode_id]
    # an admin of one tenant runs the weaver for that tenant only
    with as_(secured, "bob-admin") as bob:
        run = lambda **kw: list(bob.admin.run_weaver(timeout=30, **kw))  # noqa: E731
        assert code(lambda: run(episode_ids=[ended.episode_id])) == grpc.StatusCode.NOT_FOUND
        assert code(lambda: run(user_id="alice")) == grpc.StatusCode.PERMISSION_DENIED
        assert run(episode_ids=[bob_episode])[-1].report.episodes == 1


@pytest.mark.daemon
def test_open_local_mode_is_loopback_only(make_settings, monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="authentication is off"):
        make_settings(listen="0.0.0.0:0")
    monkeypatch.setenv("STRATA_LISTEN", "0.0.0.0:50051")
    with pytest.raises(ConfigError, match="beyond loopback but authentication is off"):
        load_settings()
    monkeypatch.setenv("STRATA_LISTEN", "[::1]:50051")
    assert load_settings().listen == "[::1]:50051"
    # with tokens, any address is fine
    s = Settings(listen="0.0.0.0:0", auth={"tokens": entries(["ops"])}, data_dir=tmp_path)
    assert s.auth.enabled
    out = python(
        "-m", "daemon", "serve", env=daemon_env(tmp_path / "data") | {"STRATA_LISTEN": "0.0.0.0:0"}
    )
    assert out.returncode == 78
    assert out.stderr.count("\n") == 1 and "authentication is off" in out.stderr


def test_bad_token_entries_are_config_errors(monkeypatch):
    bad = [
        '[{"name": "x", "sha256": "abc", "tenants": ["a"], "rights": ["recall"]}]',
        '[{"name": "x", "sha256": "' + "a" * 64 + '", "tenants": ["a"], "rights": ["root"]}]',
        '[{"name": "x", "sha256": "' + "a" * 64 + '", "tenants": ["*", "a"], "rights": ["admin"]}]',
    ]
    for value in bad:
        monkeypatch.setenv("STRATA_AUTH__TOKENS", value)
        with pytest.raises(ConfigError) as err:
            load_settings()
        assert "\n" not in str(err.value) and "auth.tokens" in str(err.value)


@pytest.mark.slow
def test_stratad_token_prints_a_working_token_and_its_entry(spawn, tmp_path):
    out = python(
        "-m",
        "daemon",
        "token",
        "--name",
        "ci",
        "--tenant",
        "carol",
        "--right",
        "append",
        "--right",
        "recall",
        env=daemon_env(tmp_path / "unused"),
    )
    assert out.returncode == 0, out.stderr
    token = re.search(r"^(strata_\S{40,})$", out.stdout, re.MULTILINE)
    assert token is not None
    toml = out.stdout[out.stdout.index("[[auth.tokens]]") :]
    assert token.group(1) not in toml and token_hash(token.group(1)) in toml
    config = tmp_path / "strata.toml"
    config.write_text(toml)
    proc = spawn(tmp_path / "data", config=str(config))
    with MemoryClient(proc.address, token=token.group(1)) as c:
        assert c.append("t", "hello").seq == 1
        assert c.get_working_memory("t").scope.user_id == "carol"
        assert code(c.admin.stats) == grpc.StatusCode.PERMISSION_DENIED
    # weaverctl (through the client) reads STRATA_TOKEN / STRATA_TOKEN_FILE
    token_file = tmp_path / "token"
    token_file.write_text(token.group(1) + "\n")
    env = daemon_env(tmp_path / "unused")
    ctl = ("-m", "daemon.cli.weaverctl", "--address", proc.address, "stats")
    run = python(*ctl, env=env)
    assert run.returncode == 1 and "UNAUTHENTICATED" in run.stderr
    env["STRATA_TOKEN_FILE"] = str(token_file)
    run = python(*ctl, env=env)
    assert run.returncode == 1 and "PERMISSION_DENIED" in run.stderr
    assert proc.terminate() == 0


class BrokenQdrant:
    """An HTTP server answering 500 to everything; records the api-key headers it gets."""

    def __init__(self) -> None:
        keys: list[str] = []
        self.keys = keys

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _fail(self) -> None:
                keys.append(self.headers.get("api-key", ""))
                body = b'{"status": {"error": "broken"}}'
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = _fail

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> BrokenQdrant:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.slow
def test_secrets_from_files_are_used_and_never_logged(spawn, tmp_path: Path):
    client_token = "tok-" + "s3cret-client-token"
    llm_key = "sk-llm-" + "very-secret-key-123"
    qdrant_key = "qd-" + "very-secret-key-456"
    (tmp_path / "llm.key").write_text(llm_key + "\n")
    (tmp_path / "qdrant.key").write_text(qdrant_key)
    tokens = (
        '[{"name": "ops", "sha256": "' + token_hash(client_token) + '", '
        '"tenants": ["*"], "rights": ["admin"]}]'
    )
    echo = EchoLLM()
    with FakeOpenAI(responder=echo) as fake:
        proc = spawn(
            tmp_path / "data",
            auth__tokens=tokens,
            log_level="debug",
            llm__model="openai/test",
            llm__api_base=fake.base_url,
            llm__api_key_file=str(tmp_path / "llm.key"),
            **QUIET_ENV,
        )
        with MemoryClient(proc.address, token=client_token, timeout=120) as c:
            c.append_batch("s", [message("Alice lives in Paris.", name="Alice")], user_id="alice")
            c.end_session("s")
            wait_until(lambda: c.admin.weaver_status().embedding_ready, 60)
            report = list(c.admin.run_weaver())[-1].report
            assert report.ok and report.llm_calls == 1
        assert fake.headers[0].get("Authorization") == f"Bearer {llm_key}"
        assert proc.terminate() == 0
    # Qdrant: a "server" that fails every request; it gets the key from the file, and the
    # failure the daemon logs does not show it.
    with BrokenQdrant() as qdrant:
        proc = spawn(
            tmp_path / "data2",
            auth__tokens=tokens,
            log_level="debug",
            qdrant_url=qdrant.url,
            qdrant_api_key_file=str(tmp_path / "qdrant.key"),
        )
        with MemoryClient(proc.address, token=client_token) as c:
            wait_until(lambda: qdrant.keys and "level=error" in proc.log(), 60)
            assert c.health() == "NOT_SERVING"
        assert set(qdrant.keys) == {qdrant_key}
        assert proc.terminate() == 0
    logs = (tmp_path / "data.log").read_text() + (tmp_path / "data2.log").read_text()
    assert "server.started" in logs and "auth=on tokens=1" in logs
    for secret in (client_token, llm_key, qdrant_key):
        assert secret not in logs
