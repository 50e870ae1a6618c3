"""stratad-mcp from the tests' side (``tests/client/integrations/test_adapter_mcp*.py``): its
daemons' settings, the environment it runs in, MCP client sessions over stdio and streamable HTTP,
tool calls and tool errors."""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from daemon.settings import Settings
from stratad_client import MemoryClient
from tests.support import MODEL_CACHE, QUIET, ROOT, wait_indexed

MODULE = ["-m", "stratad_client.integrations.mcp.server"]
MAX_K = 50  # the daemons' recall.max_k: below the tool's own bound (100)


def settings(data_dir: Path, **overrides: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        listen="127.0.0.1:0",
        shutdown_grace_seconds=2.0,
        embedding={"cache_dir": MODEL_CACHE},
        weaver=QUIET,  # indexing only: no consolidation run
        recall={"max_k": MAX_K},
        **overrides,
    )


def env(address: str, **extra: str) -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT), "STRATA_ADDRESS": address, "HF_HUB_OFFLINE": "1", **extra}


@asynccontextmanager
async def stdio(
    address: str, *args: str, on_message: Any = None, **extra: str
) -> AsyncIterator[ClientSession]:
    """A session with ``stratad-mcp ARGS`` started by the SDK's stdio client; ``on_message``:
    the session's handler of the server's notifications."""
    params = StdioServerParameters(
        command=sys.executable, args=[*MODULE, *args], env=env(address, **extra), cwd=ROOT
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def http(url: str, **headers: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **args: Any) -> Any:
    """The tool's structured result; fails on a tool error."""
    result = await session.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.content and result.content[0].type == "text" and result.content[0].text
    return result.structured_content


async def error(session: ClientSession, tool: str, **args: Any) -> str:
    """The text of the tool error the call must give."""
    result = await session.call_tool(tool, args)
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert isinstance(text, str)
    return text


async def indexed(session: ClientSession, address: str) -> None:
    """Wait until the daemon at ``address`` has indexed every ended episode
    (:func:`tests.support.wait_indexed`, off the event loop); then the session's
    ``weaver_status`` tool must say so too."""
    with MemoryClient(address) as client:
        await anyio.to_thread.run_sync(lambda: wait_indexed(client, 90))
    status = await call(session, "weaver_status")
    assert not status["unindexed"] and status["embedding_ready"], status


def run(body: Callable[[], Awaitable[None]]) -> None:
    anyio.run(body)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
