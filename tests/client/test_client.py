"""The client as a product: its exported names, its one exception family, the admin client
beside the agent's, and the blocking and asyncio clients made from one definition."""

from __future__ import annotations

import asyncio
import inspect
import re
import socket

import grpc
import pytest

import stratad_client
from daemon.codec import status
from stratad_client import (
    AdminClient,
    AsyncAdminClient,
    AsyncMemoryClient,
    DeadlineExceededError,
    InvalidArgumentError,
    MemoryClient,
    NotFoundError,
    StrataClientError,
    UnavailableError,
)
from stratad_client.admin import AdminApi
from stratad_client.errors import error_from
from stratad_client.memory import MemoryApi
from tests.support import ROOT
from tiers.semantic.vectors import KINDS


def _documented_names() -> list[str]:
    """The names docs/api.md's "Names" list (under "Python client") says the package exports:
    in each item, those in backticks after its colon, what stands in parentheses left out."""
    text = (ROOT / "docs" / "api.md").read_text()
    start = text.index("**Names.**", text.index("## Python client"))
    listing = text[text.index("\n- ", start) : text.index("\n\n", start)]
    names = []
    for item in listing.split("\n- "):
        _what, _, exported = re.sub(r"\([^()]*\)", "", item).partition(":")
        names += re.findall(r"`(\w+)`", exported)
    return names


def test_the_exported_names_are_those_the_api_docs_list():
    documented = _documented_names()
    assert len(documented) == len(set(documented)), "docs/api.md names one twice"
    exported = stratad_client.__all__
    assert set(documented) == set(exported) and len(exported) == len(set(exported))
    assert all(hasattr(stratad_client, name) for name in documented)


def test_the_clients_kinds_of_memory_are_the_daemons():
    """The client's list (which the MCP tools take) names the kinds Tier 3 stores: it is
    written from Tier 3's (``python -m daemon.dev.protogen``)."""
    assert stratad_client.MEMORY_KINDS == KINDS


def _methods(cls: type) -> dict[str, inspect.Signature]:
    """The public methods of a client, as bound on an instance. Made on an event loop (an
    asyncio channel needs one; which loop an earlier test left set must not matter) and
    closed again."""

    async def signatures() -> dict[str, inspect.Signature]:
        client = cls(address="127.0.0.1:1")
        try:
            return {
                name: inspect.signature(getattr(client, name))
                for name in dir(cls)
                if not name.startswith("_") and callable(getattr(cls, name, None))
            }
        finally:
            closed = client.close()
            if inspect.isawaitable(closed):
                await closed

    return asyncio.run(signatures())


@pytest.mark.parametrize(("api", "blocking", "aio"), [
    (MemoryApi, MemoryClient, AsyncMemoryClient),
    (AdminApi, AdminClient, AsyncAdminClient),
])  # fmt: skip
def test_every_public_parameter_is_documented_and_both_clients_share_the_signatures(
    api: type, blocking: type, aio: type
):
    methods = _methods(blocking)
    assert methods == _methods(aio)
    for name, signature in methods.items():
        doc = " ".join(
            (getattr(blocking, name).__doc__ or "", api.__doc__ or "", api.__init__.__doc__ or "")
        )
        for param in signature.parameters:
            assert f"``{param}``" in doc, f"{blocking.__name__}.{name}: {param} undocumented"


def test_agent_calls_and_admin_calls_are_on_their_own_clients():
    admin_only = {"stats", "backup", "rebuild", "export", "import_", "run_weaver", "weaver_status"}
    assert not admin_only & set(dir(MemoryClient))
    assert admin_only <= set(dir(AdminClient))
    assert not {"append", "recall", "get_context", "forget"} & set(dir(AdminClient))


def test_a_refused_call_raises_its_kind_with_the_rpc_error_as_cause(client: MemoryClient):
    with pytest.raises(NotFoundError) as err:
        client.end_session("never-seen", user_id="alice")
    assert isinstance(err.value, StrataClientError) and err.value.kind == "NotFound"
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    assert err.value.message and str(err.value) == f"NOT_FOUND: {err.value.message}"
    assert isinstance(err.value.__cause__, grpc.RpcError)
    with pytest.raises(InvalidArgumentError) as bad:
        client.recall("x", user_id="")
    assert bad.value.kind == "InvalidArgument"


def test_an_unreachable_daemon_and_a_deadline():
    with MemoryClient("127.0.0.1:1", timeout=2) as nowhere, pytest.raises(UnavailableError):
        nowhere.get_working_memory("s", user_id="alice")
    # A peer that takes the connection and never answers: the deadline passes, however busy
    # the machine (a daemon may answer within a tiny deadline when the call is slow to start).
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        with AdminClient(address) as admin, pytest.raises(DeadlineExceededError) as late:
            admin.stats(timeout=0.3)
    assert late.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


def test_the_admin_client_alone_and_on_a_memory_clients_connection(client: MemoryClient, daemon):
    client.append("s1", "Hello there.", user_id="alice")
    client.end_session("s1", user_id="alice")
    with AdminClient(daemon.address) as admin:
        assert admin.stats().version
        assert admin.health() in ("SERVING", "NOT_SERVING")  # NOT_SERVING: Tier 3 opening
    assert client.admin is client.admin
    assert client.admin.weaver_status().pending >= 0
    assert any(chunk.done for chunk in client.admin.export("alice"))


def test_the_async_clients_stream_page_and_raise_the_same_family(daemon):
    async def run() -> tuple[int, int, str]:
        async with AsyncMemoryClient(daemon.address) as c:
            for i in range(3):
                await c.append(f"a{i}", "Hi.", user_id="alice")
                await c.end_session(f"a{i}", user_id="alice")
            episodes = [e async for e in c.iter_episodes(user_id="alice", page_size=2)]
            chunks = [x async for x in c.admin.export("alice")]
            with pytest.raises(NotFoundError) as err:
                await c.get_document(["n"], "missing", user_id="alice")
            assert isinstance(err.value.__cause__, grpc.RpcError)
        async with AsyncAdminClient(daemon.address) as admin:
            status = await admin.health()
            assert (await admin.stats()).version
        return len(episodes), sum(1 for x in chunks if x.done), status

    episodes, done, status = asyncio.run(run())
    assert (episodes, done) == (3, 1) and status in ("SERVING", "NOT_SERVING")


def test_the_client_reads_back_every_kind_the_daemon_sends() -> None:
    """The client cannot import the daemon's mapping (daemon/codec/status.py); its own must name
    each kind as the daemon does, from the code the daemon sends for it."""
    for kind, code in status._CODES:
        assert error_from(_Failed(code)).kind == kind.__name__, code


class _Failed(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "refused"
