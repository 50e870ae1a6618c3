"""Keyed documents in a real daemon: put, get, replace, delete, list; validation; rights and
tenants; the document kind in recipes (with Tier 3:
``tests/tiers/keyed/test_documents_tier3.py``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from typing import Any

import grpc
import pytest

from daemon.server.auth import token_hash
from stratad_client import AsyncMemoryClient, MemoryClient
from tests.support import QUIET, ThreadDaemon, code
from tiers.core.records import Scope
from tiers.keyed.document import document_id

NOTE = "Alice's favourite colour is teal, like the sea at Sounion."


def keys(docs: Any) -> list[tuple[list[str], str]]:
    return [(list(d.namespace), d.key) for d in docs]


def test_put_get_replace_and_list_by_namespace(client: MemoryClient):
    put = client.put_document(
        ("notes",), "colour", NOTE, value='{"colour": "teal"}', user_id="alice"
    )
    doc = put.document
    assert put.created and doc.text == NOTE and json.loads(doc.value) == {"colour": "teal"}
    assert (doc.scope.user_id, doc.scope.agent_id, list(doc.namespace), doc.key) == (
        "alice",
        "",
        ["notes"],
        "colour",
    )
    assert doc.id == document_id(Scope("alice"), ("notes",), "colour")
    assert doc.created_at == doc.updated_at and doc.created_at.seconds > 0
    assert client.get_document(["notes"], "colour", user_id="alice").document == doc

    time.sleep(0.01)
    again = client.put_document("notes", "colour", "Alice now prefers red.", user_id="alice")
    new = again.document
    assert not again.created and new.id == doc.id and new.value == ""  # a string: one label
    assert new.created_at == doc.created_at and new.updated_at.ToMicroseconds() > (
        doc.updated_at.ToMicroseconds()
    )
    assert client.get_document("notes", "colour", user_id="alice").document == new

    # Another agent, another user: other documents, other ids.
    coach = client.put_document(
        "notes", "colour", "Coach's note.", user_id="alice", agent_id="coach"
    )
    bobs = client.put_document("notes", "colour", "Bob's note.", user_id="bob")
    assert len({doc.id, coach.document.id, bobs.document.id}) == 3
    assert client.get_document("notes", "colour", user_id="bob").document.text == "Bob's note."

    for ns, key in [
        (["prefs"], "b"),
        (["notes", "work"], "z"),
        (["notes", "work"], "a"),
        (["notesx"], "a"),
        ([], "root"),
        (["notes", "work", "deep"], "a"),
        (["notes"], "a"),
    ]:
        client.put_document(ns, key, f"{'/'.join(ns)}:{key}", user_id="alice")
    everything = [
        ([], "root"),
        (["notes"], "a"),
        (["notes"], "colour"),
        (["notes", "work"], "a"),
        (["notes", "work"], "z"),
        (["notes", "work", "deep"], "a"),
        (["notesx"], "a"),
        (["prefs"], "b"),
    ]
    assert keys(client.list_documents(user_id="alice").documents) == everything
    # Pages of two, by namespace then key, and the iterator over all of them.
    pages, token = [], ""
    while True:
        page = client.list_documents(user_id="alice", page_size=2, page_token=token)
        pages.append(keys(page.documents))
        token = page.next_page_token
        if not token:
            break
    assert pages == [everything[i : i + 2] for i in range(0, 8, 2)]
    assert keys(client.iter_documents(user_id="alice", page_size=3)) == everything
    # A prefix is label by label: "notes" is not "notesx".
    assert (
        keys(client.iter_documents(user_id="alice", namespace_prefix=["notes"])) == everything[1:6]
    )
    prefix = ["notes", "work"]
    assert keys(client.iter_documents(user_id="alice", namespace_prefix=prefix)) == everything[3:6]
    assert client.list_documents(user_id="alice", namespace_prefix=["nope"]).documents == []
    # An empty agent_id lists the documents put without one; the coach's are its own.
    assert keys(client.iter_documents(user_id="alice", agent_id="coach")) == [(["notes"], "colour")]
    assert keys(client.iter_documents(user_id="bob")) == [(["notes"], "colour")]


def test_async_client_documents(daemon: ThreadDaemon):
    async def go() -> None:
        async with AsyncMemoryClient(daemon.address) as c:
            put = await c.put_document(["a", "b"], "k", "Some text.", value="[1, 2]", user_id="u")
            assert put.created
            got = await c.get_document(["a", "b"], "k", user_id="u")
            assert got.document == put.document
            await c.put_document(["a"], "k2", "More text.", user_id="u")
            listed = [d async for d in c.iter_documents(user_id="u", page_size=1)]
            assert keys(listed) == [(["a"], "k2"), (["a", "b"], "k")]
            page = await c.list_documents(user_id="u", namespace_prefix=["a", "b"])
            assert keys(page.documents) == [(["a", "b"], "k")]
            assert (await c.delete_document(["a", "b"], "k", user_id="u", timeout=120)).deleted
            assert not (await c.delete_document(["a", "b"], "k", user_id="u", timeout=120)).deleted

    asyncio.run(go())
    with daemon.client() as c:
        assert code(lambda: c.get_document(["a", "b"], "k", user_id="u"))[0] == (
            grpc.StatusCode.NOT_FOUND
        )


INVALID = grpc.StatusCode.INVALID_ARGUMENT
PUTS: list[tuple[dict[str, Any], grpc.StatusCode, str]] = [
    ({"user_id": ""}, INVALID, "scope.user_id is required"),
    ({"key": ""}, INVALID, "key is required"),
    ({"key": "a\x00b"}, INVALID, "key must not contain control characters"),
    ({"key": "k" * 257}, INVALID, "key is 257 bytes; the limit is 256"),
    ({"namespace": ["a", ""]}, INVALID, "namespace[1] is empty"),
    ({"namespace": ["a\nb"]}, INVALID, "namespace[0] must not contain control characters"),
    ({"namespace": ["é" * 129]}, INVALID, "namespace[0] is 258 bytes; the limit is 256"),
    ({"namespace": list("abcdefghi")}, INVALID, "limits.max_namespace_labels"),
    ({"text": ""}, INVALID, "needs text (what Recall indexes) or a value"),
    ({"text": " \n\t"}, INVALID, "text is only white space"),
    ({"value": "{not json"}, INVALID, "value is not valid JSON"),
    ({"user_id": "a\x7fb"}, INVALID, "scope.user_id must not contain control characters"),
    ({"agent_id": "x" * 300}, INVALID, "scope.agent_id is 300 bytes"),
    (
        {"text": "x" * 100_000, "value": json.dumps("y" * 40_000)},
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "the limit is 131072 (limits.max_message_bytes)",
    ),
]


@pytest.mark.parametrize(("change", "status", "fragment"), PUTS)
def test_put_validation(client: MemoryClient, change, status, fragment):
    args = {"namespace": ["notes"], "key": "k", "text": "Hello.", "value": ""}
    args |= change
    scope = {"user_id": change.get("user_id", "alice"), "agent_id": change.get("agent_id", "")}
    call = lambda: client.put_document(  # noqa: E731
        args["namespace"], args["key"], args["text"], value=args["value"], **scope
    )
    got, details = code(call)
    assert got == status and fragment in details, (got, details)
    assert client.list_documents(user_id="alice").documents == []  # nothing was stored


def test_get_list_and_delete_validation(client: MemoryClient):
    client.put_document(["notes"], "k", "Hello.", user_id="alice")
    got, details = code(lambda: client.get_document(["notes"], "nope", user_id="alice"))
    assert got == grpc.StatusCode.NOT_FOUND
    assert (
        details == """no document with key 'nope' in namespace ["notes"] (user 'alice', no agent)"""
    )
    got, details = code(lambda: client.get_document(["notes"], "k", user_id="alice", agent_id="a"))
    assert got == grpc.StatusCode.NOT_FOUND and "agent 'a'" in details
    for call, fragment in [
        (lambda: client.get_document(["notes"], "", user_id="alice"), "key is required"),
        (lambda: client.get_document(["notes"], "k"), "scope.user_id is required"),
        (lambda: client.delete_document([""], "k", user_id="alice"), "namespace[0] is empty"),
        (lambda: client.list_documents(), "scope.user_id is required"),
        (lambda: client.list_documents(user_id="alice", page_size=-1), "page_size"),
        (lambda: client.list_documents(user_id="alice", page_size=1001), "page_size is 1001"),
        (lambda: client.list_documents(user_id="alice", page_token="!!"), "page_token"),
        (
            lambda: client.list_documents(user_id="alice", namespace_prefix=list("abcdefghi")),
            "namespace_prefix has 9 labels",
        ),
    ]:
        got, details = code(call)
        assert got == INVALID and fragment in details, (fragment, details)
    # A token of another listing (another prefix) is refused, not misread.
    client.put_document(["notes"], "k2", "Hello again.", user_id="alice")
    token = client.list_documents(user_id="alice", page_size=1).next_page_token
    got, details = code(
        lambda: client.list_documents(user_id="alice", namespace_prefix=["x"], page_token=token)
    )
    assert got == INVALID and "page_token does not belong to this listing" in details


TOKENS = {
    "writer": ("tok-w", ["alice"], ["append"]),
    "reader": ("tok-r", ["alice"], ["recall"]),
    "bob": ("tok-b", ["bob"], ["append", "recall"]),
}


def test_rights_and_tenants(start_daemon):
    entries = [
        {"name": n, "sha256": token_hash(t), "tenants": ten, "rights": r}
        for n, (t, ten, r) in TOKENS.items()
    ]
    d = start_daemon(auth={"tokens": entries}, weaver=QUIET)
    denied, missing = grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND

    def as_(name: str) -> MemoryClient:
        return MemoryClient(d.address, token=TOKENS[name][0], timeout=120)

    with as_("writer") as w, as_("reader") as r, as_("bob") as b:
        # The token's one tenant is the user when none is named.
        doc = w.put_document(["n"], "k", "Alice's secret note.").document
        assert doc.scope.user_id == "alice"
        assert code(lambda: w.get_document(["n"], "k"))[0] == denied  # append only
        assert r.get_document(["n"], "k").document == doc
        assert keys(r.iter_documents()) == [(["n"], "k")]
        assert code(lambda: r.put_document(["n"], "k", "Overwritten."))[0] == denied
        assert code(lambda: r.delete_document(["n"], "k"))[0] == denied
        # Another tenant: refused by name, and its own namespace is its own.
        got, details = code(lambda: b.get_document(["n"], "k", user_id="alice"))
        assert got == denied and "user_id 'alice'" in details
        assert code(lambda: b.list_documents(user_id="alice"))[0] == denied
        assert code(lambda: b.delete_document(["n"], "k", user_id="alice"))[0] == denied
        assert code(lambda: b.put_document(["n"], "k", "Mine.", user_id="alice"))[0] == denied
        assert code(lambda: b.get_document(["n"], "k"))[0] == missing
        assert b.list_documents().documents == []
        assert not b.delete_document(["n"], "k").deleted
        assert r.get_document(["n"], "k").document.text == "Alice's secret note."
        # The writer may delete what it may write.
        assert w.delete_document(["n"], "k").deleted
        assert code(lambda: r.get_document(["n"], "k"))[0] == missing


def test_timestamps_are_the_daemons_clock(client: MemoryClient):
    before = dt.datetime.now(dt.UTC)
    doc = client.put_document(["n"], "k", "Now.", user_id="alice").document
    after = dt.datetime.now(dt.UTC)
    assert before - dt.timedelta(seconds=1) <= doc.created_at.ToDatetime(dt.UTC) <= after


def test_document_is_a_kind_of_recipes(make_settings):
    recipe = {"kinds": ["document", "fact"], "kind_weights": {"document": 2.0}}
    settings = make_settings(recall={"recipes": {"notes": recipe}})
    assert settings.recall.recipes["notes"].kind_weights == {"document": 2.0}
    with pytest.raises(ValueError, match="documents"):
        make_settings(recall={"kinds": ["documents"]})
