"""``stratad-mcp``: a running ``stratad`` behind the Model Context Protocol (stdio, HTTP).

Needs the ``[mcp]`` extra (the official ``mcp`` SDK, version 2). The server talks to the
daemon only through :class:`stratad_client.MemoryClient`, with the client's connection
settings: ``--address`` (else ``STRATA_ADDRESS``, else 127.0.0.1:50051), ``STRATA_TOKEN`` or
``STRATA_TOKEN_FILE``, ``STRATA_TLS_CA``, ``STRATA_TLS_CERT`` and ``STRATA_TLS_KEY``. The tools
(:mod:`.tools`, :mod:`.context_tools`) only map
arguments and results; a daemon error becomes a tool error reading ``CODE: message``
(``INVALID_ARGUMENT: k must be ...``), and a daemon that does not answer becomes ``cannot
reach stratad at ADDRESS``.

Whose memory: the user id never comes from the model. No tool has a user id argument:

- By default (stdio, and HTTP) every call acts for the configured user, ``--user-id`` (or
  ``STRATA_MCP_USER_ID``; required), and agent, ``--agent-id`` (or ``STRATA_MCP_AGENT_ID``;
  optional: empty means every agent of the user for reads and forget), with the server's own
  token (``STRATA_TOKEN``). Over HTTP whoever reaches the port acts as that user, so the
  server listens on loopback only; an ``X-Strata-User-Id`` header is refused.
- ``--forward-token`` (HTTP only) serves several users: every HTTP request must carry
  ``Authorization: Bearer <a stratad token>`` (401 otherwise), which the server forwards to
  stratad for that request's calls, so the daemon's rights and tenant checks apply. The user
  is the request's ``X-Strata-User-Id`` header, else ``--user-id``; a token that may not act
  for that user gets ``PERMISSION_DENIED``. The daemon must authenticate tokens: before the
  first forwarded call the server checks that stratad refuses a made-up token, and refuses to
  serve otherwise. This mode may listen beyond loopback (put TLS in front of it).

``GetEpisode`` and ``Forget`` by ids take no scope in the daemon's API, and a daemon without
tokens checks no tenant: so ``get_episode`` answers NOT_FOUND for an episode of another user
(or agent), and ``forget`` by ids first looks each id up for the user (GetEpisode, or GetNode
within the user's scope) and skips the others, as the daemon skips another tenant's ids.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from stratad_client import ADDRESS_ENV, DEFAULT_ADDRESS
from stratad_client.integrations.mcp import changes as mcp_changes
from stratad_client.integrations.mcp import context_tools as mcp_context_tools
from stratad_client.integrations.mcp import tools as mcp_tools
from stratad_client.integrations.mcp.backend import USER_HEADER, Backend, Config, bearer

USER_ENV = "STRATA_MCP_USER_ID"
AGENT_ENV = "STRATA_MCP_AGENT_ID"
INSTRUCTIONS = (
    "Strata is the user's long-term memory. In a conversation, store each turn with remember "
    "(one session_id per conversation) and call get_context before answering: read its "
    "block. For a question outside any conversation, call pack with the question. Call "
    "end_session when the conversation is over. The user is fixed by the server: never pass "
    "a user id."
)


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port (1 to 65535): {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stratad-mcp",
        description="Serve a running stratad's memory to MCP clients (Claude Desktop, Claude "
        "Code, Cursor, agent frameworks) over stdio or streamable HTTP.",
        epilog=f"The connection to stratad: --address, {ADDRESS_ENV}, STRATA_TOKEN or "
        "STRATA_TOKEN_FILE, STRATA_TLS_CA, STRATA_TLS_CERT, STRATA_TLS_KEY. The user id "
        "never comes from the model; see docs/integrations.md.",
    )
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                   help="stdio (default: the MCP client starts this process) or HTTP")  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on")
    p.add_argument("--port", type=_port, default=8765, help="HTTP: the port (default 8765)")
    p.add_argument("--address", help=f"stratad's address (default: ${ADDRESS_ENV}, else "
                   f"{DEFAULT_ADDRESS})")  # fmt: skip
    p.add_argument("--user-id", help=f"the user whose memory this is (default: ${USER_ENV})")
    p.add_argument("--agent-id", help=f"the agent within the user (default: ${AGENT_ENV})")
    p.add_argument("--forward-token", action="store_true",
                   help="HTTP: forward each request's 'Authorization: Bearer' token to "
                   f"stratad; the user is its {USER_HEADER} header, else --user-id")  # fmt: skip
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds per call to stratad (default 10)")  # fmt: skip
    return p


def parse_config(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """The configuration from ``argv`` and ``environ``; exits 2 with a message on a bad one."""
    env = os.environ if environ is None else environ
    parser = build_parser()
    a = parser.parse_args(argv)
    config = Config(
        transport=a.transport,
        host=a.host,
        port=a.port,
        address=a.address or env.get(ADDRESS_ENV) or DEFAULT_ADDRESS,
        user_id=a.user_id or env.get(USER_ENV, ""),
        agent_id=a.agent_id or env.get(AGENT_ENV, ""),
        forward_token=a.forward_token,
        timeout=a.timeout,
    )
    if config.forward_token and config.transport != "http":
        parser.error("--forward-token needs --transport http")
    if not config.user_id and not config.forward_token:
        parser.error(f"a user id is required: --user-id or {USER_ENV} (never from the model)")
    if config.transport == "http" and not config.forward_token and not _loopback(config.host):
        parser.error(f"--host {config.host} is not loopback: without --forward-token anyone "
                     "who reaches the port would act as the configured user")  # fmt: skip
    if not config.timeout > 0:
        parser.error("--timeout must be positive")
    return config


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RequireBearer:
    """ASGI middleware for --forward-token: an HTTP request without a bearer token is 401."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not bearer(Headers(scope=scope)):
            response = JSONResponse(
                {"error": "invalid_token", "error_description": "Authorization: Bearer <token>"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_server(backend: Backend) -> MCPServer[Any]:
    subscriptions: list[mcp_changes.Subscriptions] = []

    @asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {}
        finally:  # the Watch stream of the subscriptions ends with the server
            for s in subscriptions:
                await s.close()

    server: MCPServer[Any] = MCPServer(
        "strata", instructions=INSTRUCTIONS, log_level="WARNING", lifespan=lifespan
    )
    mcp_tools.register(server, backend)
    mcp_context_tools.register(server, backend)
    changes = mcp_changes.register(server, backend)
    if changes is not None:
        subscriptions.append(changes)
    return server


async def serve_http(server: MCPServer[Any], config: Config) -> None:
    import uvicorn

    app: ASGIApp = server.streamable_http_app(host=config.host)
    if config.forward_token:
        app = RequireBearer(app)
    host = f"[{config.host}]" if ":" in config.host else config.host
    print(f"stratad-mcp: starting on http://{host}:{config.port}/mcp", file=sys.stderr, flush=True)
    uv = uvicorn.Config(app, host=config.host, port=config.port, log_level="warning")
    await uvicorn.Server(uv).serve()


def main(argv: Sequence[str] | None = None) -> None:
    config = parse_config(argv)
    try:
        backend = Backend(config)
    except (OSError, ValueError) as exc:  # a token file or certificate that cannot be read
        sys.exit(f"stratad-mcp: cannot set up the connection to stratad: {exc}")
    server = build_server(backend)
    try:
        if config.transport == "stdio":
            server.run("stdio")
        else:
            anyio.run(serve_http, server, config)
    except KeyboardInterrupt:
        pass
    finally:
        backend.close()


def main_deprecated() -> None:
    """``strata-mcp``: the command's name until 0.1 (another project holds it on the
    package index); runs :func:`main` after a warning on stderr."""
    print("strata-mcp is deprecated: run stratad-mcp (the same server)", file=sys.stderr)
    main()


if __name__ == "__main__":
    main()
