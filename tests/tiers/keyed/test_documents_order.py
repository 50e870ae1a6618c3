"""Keyed documents in Tier 3 under every interleaving of a put or a delete with the weaver's
documents job (``weaver/index.py``: ``DocumentIndexer``; ``weaver/jobs/indexing.py``) and with the
making of the vector store's next generation (an index build, a Forget's purge:
``tiers/semantic/vectors/edge/builds.py``). The guarantees (``docs/architecture.md``, The Memory
Weaver):

- the end state is the newest put's text, or nothing after a delete;
- Recall never goes back: once it has returned a text it never returns an older one, nor any
  after a delete.

Each case holds a thread at a chosen point (:mod:`tests.support.gates`: the job embedding the
old text, between its check of the record and its write, between its write and clearing the
mark; the child making the next generation; the daemon loading it) and lands the put or the
delete there, through gRPC on a real daemon (model, RocksDB, embedded engine). Meanwhile a
second client recalls the document over and over, and its answers must keep the order too."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from stratad_client import MemoryClient
from stratad_client.pb import memory_pb2 as pb
from tests.support import QUIET, code, wait_until
from tests.support.builds import gated_child, held_load, index_small_stores
from tests.support.gates import DEADLINE, Gated, Pause, gated_daemon, holding, settled, when
from tiers.semantic.store import edge_store_path
from tiers.semantic.tombstones import is_forgotten
from tiers.semantic.vectors import shard_of
from tiers.semantic.vectors.shards.store import ShardedVectorStore

pytestmark = pytest.mark.slow
NAMESPACE, KEY = ["notes"], "colour"
V0 = "Alice's favourite colour was amber."
V1 = "Alice's favourite colour is teal."
V2 = "Alice now loves crimson."
GONE = "(nothing)"  # what Recall finds of a deleted document
QUERY = "Which colour does Alice like?"
# Where the documents job indexing V1 is held.
EMBEDDING, BEFORE_WRITE, AFTER_WRITE = "embedding", "before its write", "after its write"


class Recalls:
    """Recall of the document by one client, each answer kept in order (its text, or GONE)."""

    def __init__(self, c: MemoryClient, doc_id: str) -> None:
        self._c = c
        self._id = doc_id
        self.seen: list[str] = []

    def __call__(self) -> str:
        hits = self._c.recall(QUERY, user_id="alice", k=5, kinds=["document"]).hits
        texts = [h.text for h in hits if h.id == self._id]
        assert len(texts) <= 1, texts
        self.seen.append(texts[0] if texts else GONE)
        return self.seen[-1]


def in_order(seen: list[str], order: list[str]) -> None:
    ranks = [order.index(text) for text in seen]
    assert ranks == sorted(ranks), f"Recall went back: {seen}"


@contextlib.contextmanager
def watching(address: str, doc_id: str, order: list[str]) -> Iterator[None]:
    """Another client recalls the document over and over meanwhile; its answers keep order."""
    stop = threading.Event()
    errors: list[BaseException] = []
    with MemoryClient(address, timeout=60) as c:
        recalls = Recalls(c, doc_id)

        def loop() -> None:
            try:
                while not stop.is_set():
                    recalls()
            except BaseException as exc:  # reported below
                errors.append(exc)

        thread = threading.Thread(target=loop)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(DEADLINE)
    assert not errors, errors
    assert recalls.seen
    in_order(recalls.seen, order)


def put(c: MemoryClient, text: str) -> pb.PutDocumentResponse:
    return c.put_document(NAMESPACE, KEY, text, user_id="alice")


def delete(c: MemoryClient) -> bool:
    return bool(c.delete_document(NAMESPACE, KEY, user_id="alice").deleted)


@dataclass
class Alice(Gated):
    """A daemon of :func:`gated_daemon` with alice's document indexed with V0 (``recalls``
    returned it)."""

    doc_id: str
    recalls: Recalls

    def tier3(self) -> list[str]:
        """The texts of the document's point in the vector store."""
        _embedder, vectors = self.d.daemon.parts.semantic.wait_ready(0)  # type: ignore[union-attr]
        return [p.text for p in vectors.get([self.doc_id])]

    def written(self) -> list[str]:
        """What the writes to the document's point left in it, in the order they landed."""
        assert self.hooks.vectors is not None
        return [GONE if t is None else t for t in self.hooks.vectors.history(self.doc_id)]

    def hold(self, where: str) -> Pause:
        """Hold the documents job that indexes V1 at ``where``."""
        assert self.hooks.embedder is not None and self.hooks.vectors is not None
        pause = self.hooks.pause(f"the documents job {where} of V1")
        if where == EMBEDDING:
            self.hooks.embedder.before_documents.append(when(lambda texts: V1 in texts, pause))
        elif where == BEFORE_WRITE:
            self.hooks.vectors.before_upsert.append(when(holding(self.doc_id, V1), pause))
        else:
            self.hooks.vectors.after_upsert.append(when(holding(self.doc_id, V1), pause))
        return pause

    @contextlib.contextmanager
    def v1_held(self, where: str, order: list[str]) -> Iterator[Pause]:
        """V1 put and the documents job that indexes it held at ``where`` (:meth:`hold`),
        while another client recalls the document (:func:`watching`: in ``order``)."""
        pause = self.hold(where)
        with watching(self.d.address, self.doc_id, order):
            put(self.c, V1)  # queues the job, which stops at the pause
            pause.reached()
            yield pause


@pytest.fixture
def alice(start_daemon) -> Iterator[Alice]:
    with gated_daemon(start_daemon) as g:
        doc_id = put(g.c, V0).document.id
        settled(g.weaver)
        a = Alice(**vars(g), doc_id=doc_id, recalls=Recalls(g.c, doc_id))
        assert a.recalls() == V0
        yield a


@pytest.mark.parametrize("where", [EMBEDDING, BEFORE_WRITE, AFTER_WRITE])
def test_a_replace_anywhere_in_the_job_ends_with_the_newest_text(alice: Alice, where: str):
    a = alice
    seen_held = V1 if where == AFTER_WRITE else V0
    with a.v1_held(where, [V0, V1, V2]) as pause:
        assert a.recalls() == seen_held
        assert put(a.c, V2).document.id == a.doc_id  # a put never waits for the job
        assert a.recalls() == seen_held
        pause.release()
        settled(a.weaver)  # the held job, then the one the put of V2 queued
        assert a.recalls() == V2
    assert a.tier3() == [V2]
    assert a.d.daemon.parts.documents.unindexed_count() == 0  # type: ignore[union-attr]
    in_order(a.recalls.seen, [V0, V1, V2])
    # Replaced before the job's check, V1 is never written; after it, V1 is written (one
    # text behind: its mark stays) and V2 right after it, by the job the put queued.
    assert a.written() == ([V0, V2] if where == EMBEDDING else [V0, V1, V2])


@pytest.mark.parametrize("where", [EMBEDDING, BEFORE_WRITE, AFTER_WRITE])
def test_a_delete_anywhere_in_the_job_leaves_nothing(alice: Alice, where: str):
    a = alice
    order = [V0, V1, GONE, V2]
    with a.v1_held(where, order) as pause:
        held = a.recalls()
        assert held == (V1 if where == AFTER_WRITE else V0)
        if where == EMBEDDING:  # the job holds no lock while it embeds: the delete goes on
            assert delete(a.c)
        else:  # from its check to its marks the job holds Tier 3's write lock: Forget waits
            deleted: list[bool] = []
            deleting = threading.Thread(target=lambda: deleted.append(delete(a.c)))
            deleting.start()
            a.lock.waited_for()
            assert deleting.is_alive() and a.recalls() == held
            pause.release()
            deleting.join(DEADLINE)
            assert deleted == [True]
        assert a.recalls() == GONE
        pause.release()
        settled(a.weaver)
        assert a.recalls() == GONE  # the held job wrote nothing back
        assert a.tier3() == []
        documents = a.d.daemon.parts.documents
        assert documents is not None and documents.unindexed_count() == 0
        got = code(lambda: a.c.get_document(NAMESPACE, KEY, user_id="alice"))[0]
        assert got == grpc.StatusCode.NOT_FOUND
        assert is_forgotten(a.d.daemon.parts.state, memory_id=a.doc_id)  # type: ignore[arg-type]
        # The key put again is a new document under the same id: indexed as usual.
        assert put(a.c, V2).created
        settled(a.weaver)
        assert a.recalls() == V2
    in_order(a.recalls.seen, order)
    assert a.written() == ([V0, GONE, V2] if where == EMBEDDING else [V0, V1, GONE, V2])


def test_a_delete_and_a_put_again_while_the_job_embeds_never_bring_the_old_text_back(
    alice: Alice,
):
    """The key deleted and put again (a new document, the same point id, its tombstone
    cleared) while the job embeds V1: V1 is never written, not even between the two."""
    a = alice
    order = [V0, V1, GONE, V2]
    with a.v1_held(EMBEDDING, order) as pause:
        assert delete(a.c)
        assert put(a.c, V2).created
        assert a.recalls() == GONE  # V2 waits for the job the put queued
        pause.release()
        settled(a.weaver)
        assert a.recalls() == V2
    in_order(a.recalls.seen, order)
    assert a.written() == [V0, GONE, V2]


@pytest.mark.parametrize("making", ["build", "purge"])
def test_puts_while_the_next_generation_is_made_are_in_it(
    start_daemon, tmp_path, monkeypatch, making: str
):
    """Writes while the child builds (or purges) a copy, and while the daemon loads it, are
    recorded and replayed into it before it becomes current; Recall sees each at once."""
    gate = tmp_path / "go"
    gated_child(monkeypatch, gate, purge=making == "purge")
    index_small_stores(monkeypatch)  # a build of these few points makes a new generation
    loading = Pause("loading the new generation")
    held_load(monkeypatch, loading)  # a new store: its first load is the new generation's
    d = start_daemon(weaver=QUIET)
    semantic, weaver = d.daemon.parts.semantic, d.daemon.parts.weaver
    embedder, seen = semantic.wait_ready(120)
    vectors = seen.inner  # the store itself, under the erasures' view
    made = (lambda: vectors.builds) if making == "build" else (lambda: vectors.purges)
    with d.client(timeout=60) as c:
        doc = put(c, V0).document
        other = c.put_document(NAMESPACE, "locker", "Locker code Okapi-4471.", user_id="alice")
        settled(weaver)
        assert isinstance(vectors, ShardedVectorStore)
        shard = vectors.open_shards()[shard_of("alice", vectors.shards)]  # alice's alone
        recalls = Recalls(c, doc.id)
        assert recalls() == V0
        with watching(d.address, doc.id, [V0, V1, V2]):
            if making == "build":
                weaver.request_optimize()
            else:  # a Forget of the other document: its purge rewrites alice's shard
                assert c.delete_document(NAMESPACE, "locker", user_id="alice").deleted
            wait_until(lambda: shard.live._child is not None, DEADLINE, f"the {making}", 0.01)
            put(c, V1)
            settled(weaver)  # written to the live generation, and recorded
            assert recalls() == V1
            gate.touch()
            loading.reached()  # the child is done; the daemon loads what it made
            put(c, V2)
            settled(weaver)
            assert recalls() == V2 and made() == 0
            loading.release()
            wait_until(lambda: made() == 1, DEADLINE, f"for the {making} to be swapped in")
            assert recalls() == V2
        kept = [V2] if making == "purge" else [V2, "Locker code Okapi-4471."]
        assert [p.text for p in vectors.get([doc.id, other.document.id])] == kept
    in_order(recalls.seen, [V0, V1, V2])
    d.stop()
    again = ShardedVectorStore(edge_store_path(d.settings.data_dir), vectors.shards)  # the files
    again.ensure(embedder.model_name, embedder.dim)
    try:
        assert [p.text for p in again.get([doc.id, other.document.id])] == kept
    finally:
        again.close()
