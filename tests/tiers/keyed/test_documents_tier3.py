"""Keyed documents with Tier 3: Recall, Pack and GetNode find them within seconds; deletes
that race the indexer; Forget; a put that survives SIGKILL; export, import and rebuild."""

from __future__ import annotations

import json
import time
from typing import Any

import grpc
import pytest

from stratad_client import MemoryClient, StrataClientError
from stratad_client.pb import memory_pb2 as pb
from tests.support import QUIET, code, wait_until
from tests.support.disk import gone_within, in_logs, on_disk
from tiers.semantic.tombstones import is_forgotten
from tiers.semantic.vectors import PointFilter
from weaver.index import DocumentIndexer
from weaver.markdown_tree import write_tree

pytestmark = pytest.mark.slow
NOTE = "Alice's favourite colour is teal, like the sea at Sounion."


def test_recall_finds_a_document_within_seconds_then_its_new_text_and_not_after_delete(
    start_daemon,
):
    d = start_daemon(weaver=QUIET)
    d.daemon.parts.semantic.wait_ready(120)
    with d.client(timeout=60) as c:
        c.append("s1", "We talked about the weather in Athens.", user_id="alice", name="Alice")
        c.end_session("s1", user_id="alice")
        began = time.monotonic()
        doc = c.put_document(["notes", "prefs"], "colour", NOTE, user_id="alice").document

        def found(query: str, **kwargs: Any) -> list[pb.Hit]:
            hits = c.recall(query, user_id="alice", k=10, **kwargs).hits
            return [h for h in hits if h.kind == "document"]

        def texts(query: str) -> list[str]:
            """The texts of the document hits. The vector channel returns the scope's only
            document for any query, so a wait must name the text it waits for: a hit alone
            would be the document's previous text, before the weaver indexed the new one."""
            return [h.text for h in found(query, kinds=["document"])]

        wait_until(lambda: texts("favourite colour teal") == [NOTE], 15, "for recall")
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
        wait_until(lambda: texts("crimson") == ["Alice now loves crimson."], 15, "for the new text")
        assert [h.text for h in found("favourite colour teal crimson")] == [
            "Alice now loves crimson."
        ]
        assert not found("teal Sounion", kinds=["document"], channels=["keyword"])
        # The mark goes right after the point is written (Recall can see the point first).
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 15, "for the mark to be cleared")

        # Delete: gone from Recall, Get, List, GetNode; a second delete finds nothing.
        assert c.delete_document(["notes", "prefs"], "colour", user_id="alice").deleted
        assert not found("crimson", kinds=["document"])
        assert code(lambda: c.get_document(["notes", "prefs"], "colour", user_id="alice"))[0] == (
            grpc.StatusCode.NOT_FOUND
        )
        assert c.list_documents(user_id="alice").documents == []
        assert code(lambda: c.get_node(doc.id))[0] == grpc.StatusCode.NOT_FOUND
        assert is_forgotten(d.daemon.parts.state, memory_id=doc.id)
        assert not c.delete_document(["notes", "prefs"], "colour", user_id="alice").deleted

        # A put of the deleted key is a new document: found again, under the same id.
        again = c.put_document(["notes", "prefs"], "colour", "Alice likes ochre.", user_id="alice")
        assert again.created and again.document.id == doc.id
        assert not is_forgotten(d.daemon.parts.state, memory_id=doc.id)
        wait_until(lambda: texts("ochre") == ["Alice likes ochre."], 15, "for the text put again")
        # Recall's episode hits are untouched by all this.
        assert any(
            h.kind == "episode_turn" for h in c.recall("weather Athens", user_id="alice").hits
        )


def test_a_document_without_text_is_got_but_not_recalled(start_daemon):
    d = start_daemon(weaver=QUIET)
    d.daemon.parts.semantic.wait_ready(120)
    with d.client(timeout=60) as c:

        def documents(query: str) -> list[tuple[str, str]]:
            hits = c.recall(query, user_id="alice", kinds=["document"]).hits
            return [(h.id, h.text) for h in hits]

        quiet = c.put_document(["n"], "q", "", value='{"code": 1234}', user_id="alice").document
        loud = c.put_document(["n"], "l", "Alice keeps a violet umbrella.", user_id="alice")
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 15, "for the weaver")
        assert documents("violet umbrella") == [
            (loud.document.id, "Alice keeps a violet umbrella.")
        ]
        assert c.get_document(["n"], "q", user_id="alice").document.value == '{"code": 1234}'
        # Put again without text: got and listed, but its point leaves Tier 3.
        c.put_document(["n"], "l", "", value='{"umbrella": "violet"}', user_id="alice")
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 15, "for the weaver")
        assert documents("violet umbrella") == []
        assert d.daemon.parts.semantic.wait_ready(5)[1].get([loud.document.id, quiet.id]) == []
        assert [x.key for x in c.list_documents(user_id="alice").documents] == ["l", "q"]
        # ...and with text again, recalled again.
        c.put_document(["n"], "l", "Alice lost the violet umbrella.", user_id="alice")
        lost = [(loud.document.id, "Alice lost the violet umbrella.")]
        wait_until(lambda: documents("violet umbrella") == lost, 15, "for the text put again")


def test_a_document_deleted_or_replaced_while_being_indexed_never_comes_back(start_daemon):
    """The indexer read the document, then a delete (or a replace) ran before it wrote: what
    it read is never written (the indexer is driven by hand: the weaver is off)."""
    d = start_daemon(weaver={"enabled": False})
    semantic, documents = d.daemon.parts.semantic, d.daemon.parts.documents
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


def test_forget_removes_documents_by_scope_and_by_id_and_leaves_no_bytes(start_daemon, tmp_path):
    secret, coach_secret, bob_word = "Axolotl-5521", "Narwhal-8832", "Okapi-9943"
    d = start_daemon(weaver=QUIET, recall={"cache_ttl_seconds": 60})
    d.daemon.parts.semantic.wait_ready(120)
    with d.client(timeout=120) as c:
        mine = c.put_document(["n"], "a", f"My locker code is {secret}.", user_id="alice")
        other = c.put_document(["n"], "b", "Alice likes tea.", user_id="alice").document
        coach = c.put_document(
            ["n"], "a", f"Coach code {coach_secret}.", user_id="alice", agent_id="coach"
        )
        c.put_document(["n"], "a", f"Bob's word is {bob_word}.", user_id="bob")
        wait_until(
            lambda: c.admin.weaver_status().unindexed == 0, 30, "for the documents to be indexed"
        )
        assert c.recall(secret, user_id="alice", kinds=["document"]).hits  # fills the cache

        # By id: the document's record and point.
        data = d.settings.data_dir
        assert any(p.startswith("state/") for p in on_disk(data, [secret]))
        r = c.forget(memory_ids=[mine.document.id])
        assert (r.documents, r.vector_points) == (1, 1) and r.cache_entries >= 1
        # RocksDB's logs hold none of it when Forget returns (its files and the vector
        # store's follow within the bound).
        assert in_logs(data, [secret]) == []
        gone_within(data, [secret])
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
        assert is_forgotten(d.daemon.parts.state, memory_id=coach.document.id)
        # No byte of the forgotten texts is left in the data directory; Bob's is there.
        gone_within(data, [secret, coach_secret, "Alice likes tea"])
        assert on_disk(data, [bob_word])


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
            except StrataClientError as exc:  # the model is loading
                assert exc.code == grpc.StatusCode.UNAVAILABLE
                return False
            return [h.id for h in hits] == [put.document.id]

        wait_until(recalled, 120, "for the document to be indexed after the restart")
        # Its mark goes right after its point is written (Recall can see the point first).
        wait_until(lambda: c.admin.weaver_status().unindexed == 0, 15, "for the mark to be cleared")
    assert d.terminate() == 0


def _exported(c: MemoryClient, user: str, agent: str = "") -> bytes:
    return b"".join(ch.data for ch in c.admin.export(user, agent_id=agent, timeout=120))


def _records(data: bytes, kind: str) -> list[dict[str, Any]]:
    return [r for r in map(json.loads, data.splitlines()) if r["type"] == kind]


def test_export_import_round_trip_and_rebuild(start_daemon, tmp_path):
    a = start_daemon(weaver=QUIET)
    b = start_daemon(data_dir=tmp_path / "target", weaver=QUIET)
    a.daemon.parts.semantic.wait_ready(120)
    with a.client(timeout=120) as ca, b.client(timeout=120) as cb:
        one = ca.put_document(
            ["n"], "one", "Alice keeps bees.", value='{"hives": 3}', user_id="alice"
        )
        ca.put_document(["n", "deep"], "two", "Alice rows on Sundays.", user_id="alice")
        ca.put_document(["n"], "gone", "Alice's old locker code.", user_id="alice")
        ca.put_document(["n"], "coach", "Coach: more squats.", user_id="alice", agent_id="coach")
        ca.put_document(["n"], "bob", "Bob keeps goats.", user_id="bob")
        assert ca.delete_document(["n"], "gone", user_id="alice").deleted
        wait_until(lambda: ca.admin.weaver_status().unindexed == 0, 30, "for the documents")
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

        response = cb.admin.import_([data[i : i + 100] for i in range(0, len(data), 100)])
        assert response.read.records["document"] == response.written.records["document"] == 3
        for agent in ("", "coach"):  # the same documents: times, values and ids
            want = list(ca.iter_documents(user_id="alice", agent_id=agent))
            assert list(cb.iter_documents(user_id="alice", agent_id=agent)) == want
        # Recallable at once: the import wrote their points.
        hits = cb.recall("bees", user_id="alice", kinds=["document"], k=1).hits
        assert [h.id for h in hits] == [one.document.id]
        again = cb.admin.import_([data])  # twice: nothing duplicated
        assert again.written.records["document"] == 3
        assert len(list(cb.iter_documents(user_id="alice"))) == 2
        assert cb.admin.weaver_status().unindexed == 0

        # A bad document record is refused with its line, and nothing is written.
        lines = data.splitlines(keepends=True)
        i = next(n for n, line in enumerate(lines) if b'"type":"document"' in line)
        bad = json.loads(lines[i]) | {"value": "{oops"}
        lines[i] = json.dumps(bad).encode() + b"\n"
        got, details = code(lambda: cb.admin.import_([b"".join(lines)]))
        assert got == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(
            f"line {i + 1}: value is not valid JSON"
        )

        # Rebuild writes the documents' points again from their records.
        _embedder, vectors = b.daemon.parts.semantic.wait_ready(0)
        documents = PointFilter(user_id="alice", kinds=("document",))
        vectors.delete(documents)
        assert not cb.recall("bees", user_id="alice", kinds=["document"]).hits
        report = cb.admin.rebuild("alice")
        assert report.vector_points >= 3 and vectors.count(documents) == 3
        assert [h.id for h in cb.recall("bees", user_id="alice", kinds=["document"], k=1).hits] == [
            one.document.id
        ]
