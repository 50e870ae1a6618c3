"""Keyed documents in a real daemon: put, get, replace, delete, list; validation; Recall, Pack
and GetNode; deletes that race the indexer; rights and tenants."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from typing import Any

import grpc
import pytest

from daemon.auth import token_hash
from daemon.client import AsyncMemoryClient, MemoryClient
from daemon.pb import memory_pb2 as pb
from tests.support import ThreadDaemon, wait_until
from tiers.documents import document_id
from tiers.records import Scope
from tiers.tombstones import is_forgotten
from tiers.vectors import PointFilter
from weaver.index import DocumentIndexer
from weaver.markdown_tree import write_tree

QUIET = {"interval_seconds": 3600}
NOTE = "Alice's favourite colour is teal, like the sea at Sounion."


def code(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details() or ""


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
    ({"text": ""}, INVALID, "text is required"),
    ({"text": " \n\t"}, INVALID, "text is required"),
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


@pytest.mark.slow
def test_recall_finds_a_document_within_seconds_then_its_new_text_and_not_after_delete(
    start_daemon,
):
    d = start_daemon(weaver=QUIET)
    d.daemon.semantic.wait_ready(120)
    with d.client(timeout=60) as c:
        c.append("s1", "We talked about the weather in Athens.", user_id="alice", name="Alice")
        c.end_session("s1", user_id="alice")
        began = time.monotonic()
        doc = c.put_document(["notes", "prefs"], "colour", NOTE, user_id="alice").document

        def found(query: str, **kwargs: Any) -> list[pb.Hit]:
            hits = c.recall(query, user_id="alice", k=10, **kwargs).hits
            return [h for h in hits if h.kind == "document"]

        wait_until(lambda: found("favourite colour teal", kinds=["document"]), 15, "for recall")
        assert time.monotonic() - began < 15
        (hit,) = found("favourite colour teal", kinds=["document"])
        assert (hit.id, hit.text, hit.episode_id, hit.session_id) == (doc.id, NOTE, "", "")
        assert hit.created_at == doc.updated_at
        (source,) = hit.sources
        assert dict(source.metadata) == {"namespace": '["notes", "prefs"]', "key": "colour"}
        assert found("favourite colour teal")  # kinds unset: every kind, documents included
        assert not found("favourite colour teal", kinds=["episode_turn"])
        assert not c.recall("favourite colour teal", user_id="bob", k=10).hits
        packed = c.pack("favourite colour", user_id="alice", max_tokens=200, kinds=["document"])
        assert packed.text.startswith("[document · ") and "· notes/prefs/colour] " + NOTE in (
            packed.text
        )
        assert [i.id for i in packed.items] == [doc.id]
        capped = c.pack(
            "favourite colour", user_id="alice", max_tokens=200, per_kind_caps={"document": 0}
        )
        assert doc.id not in [i.id for i in capped.items]
        node = c.get_node(doc.id, user_id="alice")
        assert node.node.id == doc.id and node.node.kind == "document" and node.node.text == NOTE
        assert not node.messages and not node.HasField("episode") and not node.journal_expired
        code_, _ = code(lambda: c.get_node(doc.id, user_id="bob"))
        assert code_ == grpc.StatusCode.NOT_FOUND

        # A replace: the same id, the new text found, the old one not.
        c.put_document(["notes", "prefs"], "colour", "Alice now loves crimson.", user_id="alice")
        wait_until(lambda: found("crimson", kinds=["document"]), 15, "for the new text")
        assert [h.text for h in found("favourite colour teal crimson")] == [
            "Alice now loves crimson."
        ]
        assert not found("teal Sounion", kinds=["document"], channels=["keyword"])
        assert c.weaver_status().unindexed == 0

        # Delete: gone from Recall, Get, List, GetNode; a second delete finds nothing.
        assert c.delete_document(["notes", "prefs"], "colour", user_id="alice").deleted
        assert not found("crimson", kinds=["document"])
        assert code(lambda: c.get_document(["notes", "prefs"], "colour", user_id="alice"))[0] == (
            grpc.StatusCode.NOT_FOUND
        )
        assert c.list_documents(user_id="alice").documents == []
        assert code(lambda: c.get_node(doc.id))[0] == grpc.StatusCode.NOT_FOUND
        assert is_forgotten(d.daemon.state, memory_id=doc.id)
        assert not c.delete_document(["notes", "prefs"], "colour", user_id="alice").deleted

        # A put of the deleted key is a new document: found again, under the same id.
        again = c.put_document(["notes", "prefs"], "colour", "Alice likes ochre.", user_id="alice")
        assert again.created and again.document.id == doc.id
        assert not is_forgotten(d.daemon.state, memory_id=doc.id)
        wait_until(lambda: found("ochre", kinds=["document"]), 15, "for the document put again")
        # Recall's episode hits are untouched by all this.
        assert any(
            h.kind == "episode_turn" for h in c.recall("weather Athens", user_id="alice").hits
        )


@pytest.mark.slow
def test_a_document_deleted_or_replaced_while_being_indexed_never_comes_back(start_daemon):
    """The indexer read the document, then a delete (or a replace) ran before it wrote: what
    it read is never written (the indexer is driven by hand: the weaver is off)."""
    d = start_daemon(weaver={"enabled": False})
    semantic, documents = d.daemon.semantic, d.daemon.documents
    assert documents is not None and semantic is not None
    _embedder, vectors = semantic.wait_ready(120)
    indexer = DocumentIndexer(documents, semantic)
    with d.client(timeout=60) as c:
        doc = c.put_document(["n"], "k", "The vault code is Zebra-7781.", user_id="alice").document
        read = documents.unindexed(10)  # in flight: read, not written yet
        assert [x.id for x in read] == [doc.id]
        assert c.delete_document(["n"], "k", user_id="alice").deleted
        assert indexer.write(read) == 0 and vectors.get([doc.id]) == []
        assert documents.unindexed(10) == []

        # Deleted, then put again with new text, while the old text was in flight.
        c.put_document(["n"], "k", "The vault code is Zebra-7781.", user_id="alice")
        read = documents.unindexed(10)
        assert c.delete_document(["n"], "k", user_id="alice").deleted
        c.put_document(["n"], "k", "The vault is empty now.", user_id="alice")
        assert indexer.write(read) == 0 and vectors.get([doc.id]) == []
        result = indexer.index()
        assert (result.documents, result.points, result.more) == (1, 1, False)
        assert [p.text for p in vectors.get([doc.id])] == ["The vault is empty now."]

        # Replaced while in flight: the old text is not written, the mark stays for the new.
        read = documents.unindexed(10)
        assert read == []
        c.put_document(["n"], "k", "First text.", user_id="alice")
        read = documents.unindexed(10)
        c.put_document(["n"], "k", "Second text.", user_id="alice")
        assert indexer.write(read) == 0
        assert [p.text for p in vectors.get([doc.id])] == ["The vault is empty now."]
        assert indexer.index().points == 1
        assert [p.text for p in vectors.get([doc.id])] == ["Second text."]
        assert documents.unindexed_count() == 0


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


@pytest.mark.slow
def test_forget_removes_documents_by_scope_and_by_id_and_leaves_no_bytes(start_daemon, tmp_path):
    from tests.test_forget import _gone_within, _on_disk

    secret, coach_secret, bob_word = "Axolotl-5521", "Narwhal-8832", "Okapi-9943"
    d = start_daemon(weaver=QUIET, recall={"cache_ttl_seconds": 60})
    d.daemon.semantic.wait_ready(120)
    with d.client(timeout=120) as c:
        mine = c.put_document(["n"], "a", f"My locker code is {secret}.", user_id="alice")
        other = c.put_document(["n"], "b", "Alice likes tea.", user_id="alice").document
        coach = c.put_document(
            ["n"], "a", f"Coach code {coach_secret}.", user_id="alice", agent_id="coach"
        )
        c.put_document(["n"], "a", f"Bob's word is {bob_word}.", user_id="bob")
        wait_until(lambda: c.weaver_status().unindexed == 0, 30, "for the documents to be indexed")
        assert c.recall(secret, user_id="alice", kinds=["document"]).hits  # fills the cache

        # By id: the document's record and point.
        data = d.settings.data_dir
        assert any(p.startswith("state/") for p in _on_disk(data, [secret]))
        r = c.forget(memory_ids=[mine.document.id])
        assert (r.documents, r.vector_points) == (1, 1) and r.cache_entries >= 1
        # RocksDB's files hold none of it when Forget returns (the vector store's follow).
        assert all(p.startswith("vectors/") for p in _on_disk(data, [secret]))
        assert code(lambda: c.get_document(["n"], "a", user_id="alice"))[0] == (
            grpc.StatusCode.NOT_FOUND
        )
        hits = c.recall(secret, user_id="alice", kinds=["document"]).hits
        assert hits and not any(secret in h.text for h in hits)  # the coach's, nearest
        # By scope: one agent's, then every agent's of the user.
        r = c.forget(user_id="alice", agent_id="coach")
        assert (r.documents, r.vector_points) == (1, 1)
        assert c.get_document(["n"], "b", user_id="alice").document.id == other.id
        r = c.forget(user_id="alice")
        assert r.documents == 1 and r.episodes == 0
        assert c.list_documents(user_id="alice").documents == []
        assert not c.recall("tea", user_id="alice").hits
        assert c.recall(bob_word, user_id="bob", kinds=["document"]).hits
        assert is_forgotten(d.daemon.state, memory_id=coach.document.id)
        # No byte of the forgotten texts is left in the data directory; Bob's is there.
        _gone_within(data, [secret, coach_secret, "Alice likes tea"])
        assert _on_disk(data, [bob_word])


@pytest.mark.slow
def test_a_put_survives_sigkill_and_is_indexed_after_the_restart(spawn, tmp_path):
    data = tmp_path / "data"
    d = spawn(data, weaver__enabled="false")  # nothing indexes it before the kill
    with d.client() as c:
        put = c.put_document(["n"], "k", "Durable note about Quokka-3141.", user_id="alice")
    d.kill()
    d = spawn(data)
    with d.client(timeout=60) as c:
        assert c.get_document(["n"], "k", user_id="alice").document == put.document

        def recalled() -> bool:
            try:
                hits = c.recall("Quokka-3141", user_id="alice", kinds=["document"]).hits
            except grpc.RpcError as exc:  # the model is loading
                assert exc.code() == grpc.StatusCode.UNAVAILABLE
                return False
            return [h.id for h in hits] == [put.document.id]

        wait_until(recalled, 120, "for the document to be indexed after the restart")
        assert c.weaver_status().unindexed == 0
    assert d.terminate() == 0


def test_timestamps_are_the_daemons_clock(client: MemoryClient):
    before = dt.datetime.now(dt.UTC)
    doc = client.put_document(["n"], "k", "Now.", user_id="alice").document
    after = dt.datetime.now(dt.UTC)
    assert before - dt.timedelta(seconds=1) <= doc.created_at.ToDatetime(dt.UTC) <= after


def _exported(c: MemoryClient, user: str, agent: str = "") -> bytes:
    return b"".join(ch.data for ch in c.export(user, agent_id=agent, timeout=120))


def _records(data: bytes, kind: str) -> list[dict[str, Any]]:
    return [r for r in map(json.loads, data.splitlines()) if r["type"] == kind]


@pytest.mark.slow
def test_export_import_round_trip_and_rebuild(start_daemon, tmp_path):
    a = start_daemon(weaver=QUIET)
    b = start_daemon(data_dir=tmp_path / "target", weaver=QUIET)
    a.daemon.semantic.wait_ready(120)
    with a.client(timeout=120) as ca, b.client(timeout=120) as cb:
        one = ca.put_document(
            ["n"], "one", "Alice keeps bees.", value='{"hives": 3}', user_id="alice"
        )
        ca.put_document(["n", "deep"], "two", "Alice rows on Sundays.", user_id="alice")
        ca.put_document(["n"], "gone", "Alice's old locker code.", user_id="alice")
        ca.put_document(["n"], "coach", "Coach: more squats.", user_id="alice", agent_id="coach")
        ca.put_document(["n"], "bob", "Bob keeps goats.", user_id="bob")
        assert ca.delete_document(["n"], "gone", user_id="alice").deleted
        wait_until(lambda: ca.weaver_status().unindexed == 0, 30, "for the documents")
        data = _exported(ca, "alice")
        docs = _records(data, "document")
        assert [(r["agent_id"], r["namespace"], r["key"]) for r in docs] == [
            ("", ["n"], "one"),
            ("", ["n", "deep"], "two"),
            ("coach", ["n"], "coach"),
        ]
        assert docs[0] == {
            "type": "document",
            "id": one.document.id,
            "user_id": "alice",
            "agent_id": "",
            "namespace": ["n"],
            "key": "one",
            "text": "Alice keeps bees.",
            "value": '{"hives": 3}',
            "created_at_us": one.document.created_at.ToMicroseconds(),
            "updated_at_us": one.document.updated_at.ToMicroseconds(),
        }
        assert not _records(data, "point") or all(
            r["kind"] != "document" for r in _records(data, "point")
        )
        (footer,) = _records(data, "footer")
        assert footer["records"]["document"] == 3 and "document" not in footer["kinds"]
        assert [r["key"] for r in _records(_exported(ca, "alice", "coach"), "document")] == [
            "coach"
        ]
        assert b"Bob keeps goats" not in data and b"old locker" not in data

        # weaverctl's readable tree lists them too.
        (tmp_path / "alice.jsonl").write_bytes(data)
        write_tree(tmp_path / "alice.jsonl", tmp_path / "tree")
        page = (tmp_path / "tree" / "documents.md").read_text()
        assert "## `n` / `deep` · `two`" in page and "> Alice rows on Sundays." in page
        assert '```json\n{"hives": 3}\n```' in page and "agent `coach`" in page
        assert "](documents.md)" in (tmp_path / "tree" / "index.md").read_text()

        response = cb.import_([data[i : i + 100] for i in range(0, len(data), 100)])
        assert response.read.records["document"] == response.written.records["document"] == 3
        for agent in ("", "coach"):  # the same documents: times, values and ids
            want = list(ca.iter_documents(user_id="alice", agent_id=agent))
            assert list(cb.iter_documents(user_id="alice", agent_id=agent)) == want
        # Recallable at once: the import wrote their points.
        hits = cb.recall("bees", user_id="alice", kinds=["document"], k=1).hits
        assert [h.id for h in hits] == [one.document.id]
        again = cb.import_([data])  # twice: nothing duplicated
        assert again.written.records["document"] == 3
        assert len(list(cb.iter_documents(user_id="alice"))) == 2
        assert cb.weaver_status().unindexed == 0

        # A bad document record is refused with its line, and nothing is written.
        lines = data.splitlines(keepends=True)
        i = next(n for n, line in enumerate(lines) if b'"type":"document"' in line)
        bad = json.loads(lines[i]) | {"value": "{oops"}
        lines[i] = json.dumps(bad).encode() + b"\n"
        got, details = code(lambda: cb.import_([b"".join(lines)]))
        assert got == INVALID and details.startswith(f"line {i + 1}: value is not valid JSON")

        # Rebuild writes the documents' points again from their records.
        _embedder, vectors = b.daemon.semantic.wait_ready(0)
        documents = PointFilter(user_id="alice", kinds=("document",))
        vectors.delete(documents)
        assert not cb.recall("bees", user_id="alice", kinds=["document"]).hits
        report = cb.rebuild("alice")
        assert report.vector_points >= 3 and vectors.count(documents) == 3
        assert [h.id for h in cb.recall("bees", user_id="alice", kinds=["document"], k=1).hits] == [
            one.document.id
        ]


def test_document_is_a_kind_of_recipes(make_settings):
    recipe = {"kinds": ["document", "fact"], "kind_weights": {"document": 2.0}}
    settings = make_settings(recall={"recipes": {"notes": recipe}})
    assert settings.recall.recipes["notes"].kind_weights == {"document": 2.0}
    with pytest.raises(ValueError, match="documents"):
        make_settings(recall={"kinds": ["documents"]})
