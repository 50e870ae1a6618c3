"""stratad-mcp (:mod:`stratad_client.integrations.mcp.server`) through the MCP SDK's own
clients, over stdio and streamable HTTP, against real daemons: the tools, their errors, whose
memory they act on, and the client configurations of docs/integrations.md (the CLI's own checks:
``tests/client/integrations/test_adapter_mcp_config.py``)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from daemon.server.auth import token_hash
from stratad_client import MemoryClient
from stratad_client.integrations.mcp.backend import Backend
from stratad_client.integrations.mcp.server import parse_config
from tests.support import ROOT, ThreadDaemon, wait_until
from tests.support.mcp_sessions import (
    MAX_K,
    MODULE,
    call,
    env,
    error,
    free_port,
    http,
    indexed,
    run,
    settings,
    stdio,
)

TOOLS = {
    "remember", "note", "end_session", "recall", "pack", "list_episodes", "get_episode",
    "get_sources", "forget", "weaver_status", "get_context", "set_anchor", "pin",
}  # fmt: skip
TOKENS = {"alice": "tok-mcp-alice", "ops": "tok-mcp-ops"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadDaemon]:
    d = ThreadDaemon(settings(tmp_path_factory.mktemp("mcp") / "data"))
    try:
        yield d
    finally:
        d.stop()


@pytest.mark.slow
def test_stdio_end_to_end(daemon: ThreadDaemon) -> None:
    async def body() -> None:
        async with stdio(daemon.address, "--user-id", "alice") as s:
            tools = (await s.list_tools()).tools
            assert {t.name for t in tools} == TOOLS
            for t in tools:
                assert t.description and len(t.description) > 60, t.name
                assert "user_id" not in json.dumps(t.input_schema), t.name
                assert t.output_schema, t.name
                for name, prop in t.input_schema.get("properties", {}).items():
                    assert prop.get("description"), (t.name, name)
            described = {t.name: t.description or "" for t in tools}
            assert "does not wait" in described["remember"]
            assert "before answering in a conversation" in described["get_context"]
            assert "before answering" not in described["pack"]  # for questions outside one

            said = [
                ("I moved to Lisbon last spring and my cat is called Miso.", "user", "Alice"),
                ("Lisbon is lovely. How is Miso settling in?", "assistant", ""),
                ("He sleeps on the balcony all day.", "user", "Alice"),
            ]
            for i, (text, role, who) in enumerate(said, 1):
                args = {"role": role, "message_id": f"m{i}", "metadata": {"n": str(i)}}
                r = await call(s, "remember", session_id="chat-1", content=text, speaker=who,
                               **args)  # fmt: skip
                assert r == {"session_id": "chat-1", "seq": i, "duplicate": False}
            again = await call(s, "remember", session_id="chat-1", content="x", message_id="m1")
            assert (again["seq"], again["duplicate"]) == (1, True)
            ended = await call(s, "end_session", session_id="chat-1")
            assert ended["message_count"] == 3
            episode = ended["episode_id"]
            await indexed(s, daemon.address)

            found = await call(s, "recall", query="What is the name of my cat?", k=5)
            hit = next(h for h in found["hits"] if "Miso" in h["text"] and h["sources"])
            assert hit["kind"] in {"episode_turn", "episode_chunk"} and hit["score"] > 0
            assert hit["episode_id"] == episode and hit["session_id"] == "chat-1"
            source = next(src for src in hit["sources"] if src["seq"] == 1)
            assert (source["session_id"], source["speaker"]) == ("chat-1", "Alice")
            assert source["message_id"] == "m1" and source["metadata"] == {"n": "1"}
            assert source["created_at"] and source["episode_id"] == episode
            text = (await s.call_tool("recall", {"query": "my cat", "k": 3})).content[0].text
            assert "Miso" in text and "id " in text

            packed = await call(s, "pack", query="What is my cat called?", max_tokens=300)
            assert "Miso" in packed["text"] and 0 < packed["tokens"] <= 300
            assert packed["items"] and all(i["sources"] for i in packed["items"])

            listed = await call(s, "list_episodes")
            assert [e["episode_id"] for e in listed["episodes"]] == [episode]
            assert listed["episodes"][0]["message_count"] == 3
            read = await call(s, "get_episode", episode_id=episode, page_size=2)
            assert [m["content"] for m in read["messages"]] == [said[0][0], said[1][0]]
            assert [m["role"] for m in read["messages"]] == ["user", "assistant"]
            assert read["messages"][0]["speaker"] == "Alice" and read["next_page_token"]
            rest = await call(s, "get_episode", episode_id=episode,
                              page_token=read["next_page_token"])  # fmt: skip
            assert [m["seq"] for m in rest["messages"]] == [3]

            sources = await call(s, "get_sources", id=hit["id"])
            assert sources["node"]["id"] == hit["id"]
            assert sources["episode"]["episode_id"] == episode
            assert said[0][0] in [m["content"] for m in sources["messages"]]

            gone = await call(s, "forget", episode_ids=[episode])
            assert gone["counts"]["episodes"] == 1 and gone["counts"]["episode_messages"] == 3
            assert gone["skipped_ids"] == []
            after = await call(s, "recall", query="What is the name of my cat?", k=5)
            assert not any("Miso" in h["text"] for h in after["hits"])
            assert (await call(s, "list_episodes"))["episodes"] == []

            # Notes: keyed documents, replaced by key, recalled, forgotten by their id.
            kept = await call(s, "note", text="Alice prefers metric units.", key="units")
            assert kept["created"] and kept["key"] == "units"
            again = await call(s, "note", text="Alice prefers imperial units now.", key="units")
            assert not again["created"] and again["id"] == kept["id"]
            fresh = await call(s, "note", text="Alice is vegetarian.")
            assert fresh["created"] and len(fresh["key"]) == 32
            await indexed(s, daemon.address)
            notes = await call(s, "recall", query="Which units does Alice like?",
                               kinds=["document"])  # fmt: skip
            assert notes["hits"][0]["id"] == kept["id"]
            assert notes["hits"][0]["text"] == "Alice prefers imperial units now."
            await call(s, "forget", memory_ids=[kept["id"]])
            left = await call(s, "recall", query="units", kinds=["document"])
            assert kept["id"] not in [h["id"] for h in left["hits"]]

    run(body)


@pytest.mark.slow
def test_the_context_tools(daemon: ThreadDaemon) -> None:
    async def body() -> None:
        async with stdio(daemon.address, "--user-id", "kim") as s:
            await call(s, "remember", session_id="kim-old", content="My dog Bruno loves the "
                       "beach in Nazaré.", speaker="Kim")  # fmt: skip
            await call(s, "end_session", session_id="kim-old")
            await indexed(s, daemon.address)
            hit = (await call(s, "recall", query="dog Bruno beach", k=3))["hits"][0]["id"]
            question = "Who can look after my dog next week?"
            await call(s, "remember", session_id="kim-chat", content=question, speaker="Kim")
            anchored = await call(s, "set_anchor", session_id="kim-chat",
                                  text="Task: find a dog sitter. Next: ask for dates.")  # fmt: skip
            assert anchored == {"session_id": "kim-chat", "cleared": False, "replaced": False}
            assert await call(s, "pin", id=hit) == {"id": hit, "pinned": True, "changed": True}

            ctx = await call(s, "get_context", session_id="kim-chat", max_tokens=400)
            assert ctx["anchor"] == "Task: find a dog sitter. Next: ask for dates."
            assert (ctx["state"], ctx["query"]) == ("open", question)
            assert ctx["memories"][0]["id"] == hit and ctx["memories"][0]["pinned"]
            assert ctx["memories"][0]["sources"][0]["session_id"] == "kim-old"
            assert [m["content"] for m in ctx["messages"]] == [question]
            assert 0 < ctx["tokens"] <= 400 and ctx["text"].startswith("Session anchor")
            args = {"session_id": "kim-chat", "max_tokens": 400}
            block = (await s.call_tool("get_context", args)).content[0]
            assert block.type == "text" and block.text == ctx["text"]  # the readable text

            unpinned = await call(s, "pin", id=hit, pinned=False)
            assert (unpinned["pinned"], unpinned["changed"]) == (False, True)
            cleared = await call(s, "set_anchor", session_id="kim-chat", text="")
            assert cleared["cleared"] and cleared["replaced"]
            after = await call(s, "get_context", session_id="kim-chat", max_tokens=400)
            assert after["anchor"] is None and not any(m["pinned"] for m in after["memories"])
            assert "NOT_FOUND" in await error(s, "pin", id="00000000-0000-4000-8000-000000000000")

    run(body)


@pytest.mark.slow
def test_daemon_errors_become_tool_errors(daemon: ThreadDaemon) -> None:
    async def body() -> None:
        async with stdio(daemon.address, "--user-id", "bob") as s:
            await indexed(s, daemon.address)  # Tier 3 open: its errors, not "still starting"
            text = await error(s, "recall", query="anything", k=MAX_K + 10)
            assert f"INVALID_ARGUMENT: k must be between 1 and {MAX_K}" in text
            assert "less than or equal to 100" in await error(s, "recall", query="q", k=101)
            text = await error(s, "pack", query="q", thread="knitting")
            assert "NOT_FOUND: no story thread 'knitting' in this scope" in text
            text = await error(s, "forget")  # neither ids nor everything=true
            assert "INVALID_ARGUMENT: exactly one of scope, episode_ids or memory_ids" in text
            assert "INVALID_ARGUMENT" in await error(s, "get_sources", id="no such id")
            text = await error(s, "get_episode", episode_id="0" * 32)
            assert text.endswith(f"NOT_FOUND: episode {'0' * 32!r} not found")
            text = await error(s, "end_session", session_id="never-seen")
            assert "NOT_FOUND" in text
        with socket.socket() as sock:  # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            down = f"127.0.0.1:{sock.getsockname()[1]}"
            async with stdio(down, "--user-id", "bob") as s:
                text = await error(s, "remember", session_id="s", content="hello")
                assert f"cannot reach stratad at {down}" in text
                assert f"cannot reach stratad at {down}" in await error(s, "weaver_status")
                assert {t.name for t in (await s.list_tools()).tools} == TOOLS  # still serving

    run(body)


@pytest.mark.slow
def test_each_server_acts_for_its_configured_user_only(daemon: ThreadDaemon) -> None:
    async def body() -> None:
        async with (
            stdio(daemon.address, "--user-id", "carol") as carol,
            stdio(daemon.address, STRATA_MCP_USER_ID="dave") as dave,
        ):
            await call(dave, "remember", session_id="s", content="My locker code is 4711.")
            # A user_id argument is not in the schema: ignored, so this is carol's own message.
            await call(carol, "remember", session_id="s", content="Locker 9 is mine.",
                       user_id="dave")  # fmt: skip
            dave_episode = (await call(dave, "end_session", session_id="s"))["episode_id"]
            await call(carol, "end_session", session_id="s")  # the same session id: her own
            await indexed(dave, daemon.address)

            theirs = await call(dave, "recall", query="What is the locker code?", k=10)
            texts = [h["text"] for h in theirs["hits"]]
            assert any("4711" in t for t in texts) and not any("Locker 9" in t for t in texts)
            dave_hit = next(h for h in theirs["hits"] if "4711" in h["text"])
            mine = await call(carol, "recall", query="What is the locker code?", k=10)
            assert mine["hits"] and not any("4711" in h["text"] for h in mine["hits"])
            assert "4711" not in (await call(carol, "pack", query="locker code"))["text"]
            listed = (await call(carol, "list_episodes"))["episodes"]
            assert dave_episode not in [e["episode_id"] for e in listed] and len(listed) == 1
            assert "NOT_FOUND" in await error(carol, "get_episode", episode_id=dave_episode)
            assert "NOT_FOUND" in await error(carol, "get_sources", id=dave_hit["id"])
            gone = await call(carol, "forget", episode_ids=[dave_episode],
                              memory_ids=[dave_hit["id"]])  # fmt: skip
            assert gone["skipped_ids"] == [dave_episode, dave_hit["id"]]
            assert not any(gone["counts"].values())
            still = await call(dave, "recall", query="What is the locker code?", k=10)
            assert any("4711" in h["text"] for h in still["hits"])

    run(body)


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start ``stratad-mcp --transport http`` subprocesses; returns their URLs."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(address: str, *args: str) -> str:
        port = free_port()
        log = open(tmp_path / f"mcp-{port}.log", "wb")  # noqa: SIM115 - the process keeps it
        proc = subprocess.Popen(
            [sys.executable, *MODULE, "--transport", "http", "--port", str(port), *args],
            env=env(address), cwd=ROOT, stdout=log, stderr=log,
        )  # fmt: skip
        procs.append(proc)

        def listening() -> bool:
            assert proc.poll() is None, (tmp_path / f"mcp-{port}.log").read_text()
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        wait_until(listening, timeout=30, what="for stratad-mcp to listen")
        return f"http://127.0.0.1:{port}/mcp"

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_streamable_http_for_the_configured_user(daemon: ThreadDaemon, http_server: Any) -> None:
    url = http_server(daemon.address, "--user-id", "erin")

    async def body() -> None:
        async with http(url) as s:
            assert {t.name for t in (await s.list_tools()).tools} == TOOLS
            r = await call(s, "remember", session_id="web", content="I prefer window seats.")
            assert r["seq"] == 1
            assert (await call(s, "end_session", session_id="web"))["message_count"] == 1
            [episode] = (await call(s, "list_episodes"))["episodes"]
            assert episode["session_id"] == "web"
        async with http(url, **{"X-Strata-User-Id": "alice"}) as s:  # not without tokens
            assert "--forward-token" in await error(s, "list_episodes")

    run(body)


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[ThreadDaemon]:
    tokens = [
        {"name": "alice", "sha256": token_hash(TOKENS["alice"]), "tenants": ["alice"],
         "rights": ["append", "recall", "forget"]},
        {"name": "ops", "sha256": token_hash(TOKENS["ops"]), "tenants": ["*"], "rights": ["admin"]},
    ]  # fmt: skip
    d = ThreadDaemon(settings(tmp_path / "secured", auth={"tokens": tokens}))
    try:
        yield d
    finally:
        d.stop()


@pytest.mark.slow
def test_streamable_http_forwards_each_requests_token(
    secured: ThreadDaemon, http_server: Any
) -> None:
    url = http_server(secured.address, "--forward-token")

    def bearer(name: str, user: str | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {TOKENS.get(name, name)}"}
        return headers | ({"X-Strata-User-Id": user} if user else {})

    async def body() -> None:
        async with httpx2.AsyncClient() as client:  # no token: refused before MCP
            r = await client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        async with http(url, **bearer("alice", "alice")) as s:
            assert (await call(s, "remember", session_id="s", content="hi"))["seq"] == 1
            assert (await call(s, "end_session", session_id="s"))["message_count"] == 1
            [episode] = (await call(s, "list_episodes"))["episodes"]
            assert "PERMISSION_DENIED" in await error(s, "weaver_status")  # no admin right
        async with http(url, **bearer("alice", "bob")) as s:  # her token, another user
            text = await error(s, "remember", session_id="s", content="hi")
            assert text.endswith("PERMISSION_DENIED: this token may not act for user_id 'bob'")
        async with http(url, **bearer("ops", "alice")) as s:
            assert (await call(s, "get_episode", episode_id=episode["episode_id"]))["messages"]
        async with http(url, **bearer("alice")) as s:
            assert "no user id" in await error(s, "list_episodes")
        async with http(url, **bearer("not-a-token", "alice")) as s:
            assert "UNAUTHENTICATED" in await error(s, "list_episodes")

    run(body)


def test_forward_token_refuses_a_daemon_that_accepts_any_token(daemon: ThreadDaemon) -> None:
    config = parse_config(
        ["--transport", "http", "--forward-token", "--address", daemon.address], environ={}
    )
    backend = Backend(config)
    try:
        with pytest.raises(ToolError) as refused:
            anyio.run(backend._check_authenticates)  # what the first forwarded call does
        assert "accepts any token" in str(refused.value)
    finally:
        backend.close()


def snippets() -> list[tuple[str, dict[str, Any]]]:
    """The JSON client configurations of docs/integrations.md, each with the file it goes
    in: the last `*.json` file named before the block."""
    text = (ROOT / "docs" / "integrations.md").read_text()
    found = []
    for block in re.finditer(r"```json\n(.*?)```", text, re.S):
        named = re.findall(r"`([^`\s]*\.json)`", text[: block.start()])
        found.append((named[-1].removeprefix("~/"), json.loads(block.group(1))))
    return found


def test_docs_client_configurations_name_a_command_the_cli_accepts() -> None:
    configs = snippets()
    assert {"claude_desktop_config.json", ".cursor/mcp.json"} <= {name for name, _ in configs}
    client = tomllib.loads((ROOT / "daemon" / "client" / "pyproject.toml").read_text())
    scripts = client["project"]["scripts"]
    assert scripts["stratad-mcp"] == "stratad_client.integrations.mcp.server:main"
    http = parse_config(["--transport", "http", "--user-id", "u"], {})
    for name, config in configs:
        for server in config["mcpServers"].values():
            if "url" in server:  # a server started with --transport http and the defaults
                assert server["url"] == f"http://{http.host}:{http.port}/mcp", name
                continue
            assert server["command"] == "stratad-mcp", name
            parsed = parse_config(server["args"], server.get("env", {}))
            assert parsed.user_id and parsed.transport == "stdio", name
            assert set(server.get("env", {})) <= {
                "STRATA_ADDRESS", "STRATA_TOKEN", "STRATA_TOKEN_FILE", "STRATA_TLS_CA",
                "STRATA_TLS_CERT", "STRATA_TLS_KEY", "STRATA_MCP_USER_ID", "STRATA_MCP_AGENT_ID",
            }, name  # fmt: skip


@pytest.mark.slow
def test_the_claude_desktop_configuration_starts(daemon: ThreadDaemon) -> None:
    [config] = [c for name, c in snippets() if name == "claude_desktop_config.json"]
    [server] = config["mcpServers"].values()
    extra = {**server.get("env", {}), "STRATA_ADDRESS": daemon.address}

    async def body() -> None:
        async with stdio(daemon.address, *server["args"], **extra) as s:
            assert {t.name for t in (await s.list_tools()).tools} == TOOLS
            assert (await call(s, "list_episodes"))["episodes"] == []

    run(body)


@pytest.mark.slow
def test_the_changes_resource_and_its_subscription(daemon: ThreadDaemon) -> None:
    import mcp.types as types

    updated: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))

    async def body() -> None:
        async with stdio(daemon.address, "--user-id", "gwen", on_message=on_message) as s:
            assert s.initialize_result.capabilities.resources.subscribe  # type: ignore[union-attr]
            listed = {str(r.uri) for r in (await s.list_resources()).resources}
            assert listed == {"strata://changes"}
            await s.subscribe_resource("strata://changes")
            await call(s, "remember", session_id="g1", content="I keep bees.")
            await call(s, "remember", session_id="g1", content="Three hives.")
            with anyio.fail_after(30):
                while len(updated) < 2:  # started and appended, then appended
                    await anyio.sleep(0.05)
            read = await s.read_resource("strata://changes")
            changes = json.loads(read.contents[0].text)  # type: ignore[union-attr]
            assert [c["type"] for c in changes] == [
                "session.started",
                "session.appended",
                "session.appended",
            ]
            assert {c["session_id"] for c in changes} == {"g1"}
            assert "bees" not in read.contents[0].text  # type: ignore[union-attr]
            # another user's changes are not this server's
            with MemoryClient(daemon.address) as c:
                c.append("f1", "Not gwen's.", user_id="frank")
            await s.unsubscribe_resource("strata://changes")
            seen = len(updated)
            await call(s, "remember", session_id="g1", content="A fourth hive.")
            await anyio.sleep(1.0)
            assert len(updated) == seen  # unsubscribed: no more notifications
        assert set(updated) == {"strata://changes"}

    anyio.run(body)
