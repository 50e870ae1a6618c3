"""The MCP server's connection to stratad (:mod:`stratad_client.integrations.mcp.server`): its
configuration, the user each tool call acts for and how a daemon error becomes a tool error.
The tools (:mod:`.tools`, :mod:`.context_tools`) call
the daemon through :class:`Backend`; the server module builds it from the command line."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import grpc
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from starlette.datastructures import Headers

from stratad_client import MemoryClient, StrataClientError
from stratad_client.pb import memory_pb2 as pb

USER_HEADER = "X-Strata-User-Id"
PROBE_TOKEN = "stratad-mcp-probe-not-a-token"
MAX_FORWARDED_CLIENTS = 64
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Config:
    transport: str
    host: str
    port: int
    address: str
    user_id: str
    agent_id: str
    forward_token: bool
    timeout: float


def bearer(headers: Headers) -> str:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class DaemonError(ToolError):
    """A call to stratad failed: the tool's error, reading ``CODE: message``."""

    def __init__(self, code: grpc.StatusCode, text: str) -> None:
        super().__init__(text)
        self.code = code


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a tool call acts for: the client to use (its token) and the user's scope."""

    client: MemoryClient
    user_id: str
    agent_id: str

    @property
    def scope(self) -> dict[str, str]:
        """The keyword arguments naming the scope in the client's calls."""
        return {"user_id": self.user_id, "agent_id": self.agent_id}

    def owns(self, scope: pb.Scope) -> bool:
        """Whether something stored under ``scope`` is this caller's user's (and agent's)."""
        agent = self.agent_id
        return scope.user_id == self.user_id and (not agent or scope.agent_id == agent)


class Backend:
    """The connection to stratad, the user of each call and the errors of the tools."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._client = MemoryClient(config.address, timeout=config.timeout)
        self._forwarded: OrderedDict[str, MemoryClient] = OrderedDict()
        self._authenticates = False

    @property
    def client(self) -> MemoryClient:
        """The client of the configured user (the server's own token)."""
        return self._client

    def close(self) -> None:
        self._client.close()
        for client in self._forwarded.values():
            client.close()

    async def caller(self, ctx: Context) -> Caller:
        """The client and user of this call (the module docstring says which)."""
        request = ctx.request_context.request  # the HTTP request; None on stdio
        headers = request.headers if request is not None else Headers()
        header_user = headers.get(USER_HEADER, "")
        c = self.config
        if not c.forward_token:
            if header_user:
                raise ToolError(f"the {USER_HEADER} header needs a server run with --forward-token")
            return Caller(self._client, c.user_id, c.agent_id)
        token = bearer(headers)
        if not token:
            raise ToolError("this server needs 'Authorization: Bearer <stratad token>'")
        if not (header_user or c.user_id):
            raise ToolError(f"no user id: send the {USER_HEADER} header")
        await self._check_authenticates()
        client = self._forwarded.pop(token, None)
        if client is None:  # the oldest is dropped (its channel closes once unused)
            client = MemoryClient(c.address, timeout=c.timeout, token=token)
            if len(self._forwarded) >= MAX_FORWARDED_CLIENTS:
                self._forwarded.popitem(last=False)
        self._forwarded[token] = client
        return Caller(client, header_user or c.user_id, c.agent_id)

    async def _check_authenticates(self) -> None:
        if self._authenticates:
            return
        with MemoryClient(self.config.address, timeout=5, token=PROBE_TOKEN) as probe:
            try:
                await self.run(probe.admin.stats)
            except DaemonError as exc:
                if exc.code != grpc.StatusCode.UNAUTHENTICATED:
                    raise
                self._authenticates = True
                return
        raise ToolError(
            f"stratad at {self.config.address} accepts any token (no [[auth.tokens]]), so "
            "forwarding tokens would authenticate nobody: refusing to serve (--forward-token)"
        )

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, a blocking client call, in a worker thread; a daemon error
        raises :class:`DaemonError`."""
        try:
            return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))
        except StrataClientError as exc:
            code, details = exc.code, exc.message
        if code == grpc.StatusCode.UNAVAILABLE and not await self._reachable():
            text = f"cannot reach stratad at {self.config.address}: {details}"
            raise DaemonError(code, text) from None
        raise DaemonError(code, f"{code.name}: {details}") from None

    async def run_or_none(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """As :meth:`run`, but None for NOT_FOUND."""
        try:
            return await self.run(fn, *args, **kwargs)
        except DaemonError as exc:
            if exc.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    async def own_ids(
        self, caller: Caller, episode_ids: list[str], memory_ids: list[str]
    ) -> tuple[list[str], list[str], list[str]]:
        """The episode and memory ids that are the caller's, and the others (unknown or of
        another user or agent), looked up by GetEpisode and by GetNode within the scope."""
        own_eps: list[str] = []
        own_mems: list[str] = []
        others: list[str] = []
        for eid in episode_ids:
            got = await self.run_or_none(caller.client.get_episode, eid, page_size=1)
            (own_eps if got and caller.owns(got.episode.scope) else others).append(eid)
        for mid in memory_ids:
            node = await self.run_or_none(caller.client.get_node, mid, **caller.scope)
            (own_mems if node is not None else others).append(mid)
        return own_eps, own_mems, others

    def not_found(self, what: str) -> DaemonError:
        return DaemonError(grpc.StatusCode.NOT_FOUND, f"NOT_FOUND: {what}")

    async def _reachable(self) -> bool:
        """Whether stratad answers its health service (open: no token needed)."""
        try:
            await anyio.to_thread.run_sync(partial(self._client.health, timeout=3))
        except StrataClientError:
            return False
        return True
