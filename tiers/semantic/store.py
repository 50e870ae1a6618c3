"""Tier 3 as one object: the embedding model, the vector store and the fact graph.

It is the one door into Tier 3: every writer (the weaver's indexing and consolidation, a
rebuild, entity profiles, Forget, Import, keyed documents) changes vector points and graph
edges through the methods here, never through the stores themselves:

- :meth:`SemanticStore.write`: points in (tombstones, embedding, keyword vectors, upsert, cache
  notification, in that order); :meth:`SemanticStore.stage`: a live session's turns before
  their embedding, for the keyword channel alone (:mod:`tiers.semantic.pending`);
  :meth:`SemanticStore.embed`: before :attr:`SemanticStore.write_lock` (a long embedding holds
  up no Forget);
- :meth:`SemanticStore.write_edges`: graph edges in (tombstones, insert, cache notification);
- :meth:`SemanticStore.close_facts`: a fact's validity end, in the graph and on its point;
- :meth:`SemanticStore.delete`, :meth:`SemanticStore.remove_edges`,
  :meth:`SemanticStore.remove_episode_edges`: points and edges out;
- :meth:`SemanticStore.refresh_profiles`: a scope's entity profiles in line with its facts;
- :meth:`SemanticStore.refresh_stories`: a scope's digests and story threads in line with its
  summaries, and :meth:`SemanticStore.rewrite_digest`: a digest's text from a writer (an LLM).

Every writer holds :attr:`SemanticStore.write_lock` around a consistent step, so a Forget (which
writes its tombstones under the same lock) never falls between a writer's tombstone check and
its write: a forgotten id cannot come back through any of them.

The graph opens at once (in the state store, a user's graph read when first asked for). The
vector store opens once the model has loaded (its size comes from the model), in the loader's
thread; until then :meth:`SemanticStore.wait_ready` raises :class:`EmbeddingUnavailable`. It
is handed out without the users being erased (:mod:`tiers.semantic.erasures`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from tiers.core import collector
from tiers.core.errors import one_line
from tiers.core.events import Events
from tiers.core.priority import RECALL_NICE, lower_this_thread
from tiers.core.records import Scope
from tiers.rocks import RocksStore
from tiers.semantic.digests import KIND as DIGEST
from tiers.semantic.digests import DigestPolicy, build_digests
from tiers.semantic.embedding import Embedder, EmbeddingService, EmbeddingUnavailable
from tiers.semantic.embedding.slices import encode_sliced
from tiers.semantic.erasures import ErasingVectors, Erasures, Quiet
from tiers.semantic.events import Tier3Opened, Tier3Written
from tiers.semantic.graph import CACHE_EDGES, Edge
from tiers.semantic.graph.nxgraph import NetworkXGraph
from tiers.semantic.pending import PendingPoints
from tiers.semantic.profiles import KIND as PROFILE
from tiers.semantic.profiles import build_profiles
from tiers.semantic.threads import KIND as THREAD
from tiers.semantic.threads import build_threads
from tiers.semantic.tombstones import Tombstones
from tiers.semantic.vectors import MemoryPoint, PointFilter, Validity, VectorStore
from tiers.semantic.vectors.bm25 import KeywordEncoder

log = logging.getLogger("strata.semantic")
_ALL = 10_000_000


class SemanticStore:
    def __init__(
        self,
        state: RocksStore,
        embeddings: EmbeddingService,
        open_vectors: Callable[[], VectorStore],
        digest_policy: DigestPolicy | None = None,
        graph_cache_edges: int = CACHE_EDGES,
    ) -> None:
        self.graph = NetworkXGraph(state, graph_cache_edges)
        self._space = state.space
        # Checked (under its lock) before every Tier 3 write: see tiers.semantic.tombstones.
        self.tombstones = Tombstones(state)
        self.erasures = Erasures(state)  # users whose points are hidden and being deleted
        self.embeddings = embeddings
        self.keywords = KeywordEncoder()
        self.pending = PendingPoints()  # live sessions' turns before their dense vectors
        self._open_vectors = open_vectors
        self._vectors: ErasingVectors | None = None
        self._opening: VectorStore | None = None  # from its making on (:meth:`interrupt`)
        self._interrupted = False
        self._ready = threading.Event()
        self.error: str | None = None
        self._lock = threading.Lock()
        self._closed = False
        # Tier3Written after every write to Tier 3 in a scope (cache invalidation), Tier3Opened
        # once from the loader thread when Tier 3 is open or failed to open.
        self.events = Events("tier3")
        # Held by every multi-step Tier 3 writer (the weaver's index and consolidation steps,
        # rebuild, forget) for one consistent step; a backup holds it, with no erasure going
        # on (``quiet``), while it copies the vector store, so it never sees half a step.
        self.write_lock = threading.RLock()
        self.quiet = Quiet(self.write_lock, self.erasures)
        self.digest_policy = digest_policy or DigestPolicy()  # the weaver's settings

    def check_space(self, what: str) -> None:
        """Raise DiskFull when the data dir's disk is below its reserve (the state store's
        :class:`tiers.space.DiskSpace`; the vector store lives on the same data dir)."""
        if self._space is not None:
            self._space.check(what)

    def notify_write(
        self,
        user_ids: set[str],
        *,
        staged: bool = False,
        ids: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        """Tell the scopes' caches that ``user_ids`` were written: with ``ids``, the point ids
        the write may have changed for each user (:class:`Tier3Written`)."""
        for user_id in user_ids:
            touched = None if ids is None else frozenset(ids.get(user_id, ()))
            self.events.publish(Tier3Written(user_id, staged, touched))

    def embed(
        self, points: Sequence[MemoryPoint], stopping: threading.Event | None = None
    ) -> list[MemoryPoint]:
        """The points, each without a dense vector given its document embedding; a text two
        points share is embedded once (a one-turn chunk and its turn). Needs no lock:
        writers call it before taking :attr:`write_lock`. With ``stopping``, the texts go a
        slice at a time and a set event stops the work between two slices
        (:mod:`tiers.semantic.embedding.slices`). Raises EmbeddingUnavailable, Stopped."""
        embedder, _vectors = self.wait_ready(timeout=None)
        out = list(points)
        bare = [i for i, p in enumerate(out) if p.dense is None]
        if bare:
            texts = list(dict.fromkeys(out[i].text for i in bare))
            if stopping is None:
                dense = dict(zip(texts, embedder.encode_documents(texts), strict=True))
            else:
                dense = encode_sliced(embedder, texts, stopping)
            for i in bare:
                out[i] = replace(out[i], dense=dense[out[i].text].tolist())
        return out

    def write(self, points: Sequence[MemoryPoint]) -> list[MemoryPoint]:
        """Write points to Tier 3, the one way in: forgotten ids and episodes are dropped
        (tombstones), points without a dense vector are embedded, every point gets its
        keyword vector, then one upsert and the scopes' caches are told. Returns the points
        written. The caller holds :attr:`write_lock` (the tombstone check and the upsert
        must not be split by a Forget; the points of a user being erased wait for its end:
        :mod:`tiers.semantic.erasures`). Raises EmbeddingUnavailable, VectorStoreUnavailable,
        DiskFull.
        """
        _embedder, vectors = self.wait_ready(timeout=None)
        self.erasures.wait_for({p.scope.user_id for p in points})
        kept = self.embed(self.tombstones.keep(list(points)))
        if not kept:
            return []
        self.check_space("a write to the vector store")
        kept = [replace(p, sparse=self.keywords.embed_document(p.text)) for p in kept]
        vectors.upsert(kept)
        self.pending.discard(p.id for p in kept)
        by_user: dict[str, list[str]] = {}
        for p in kept:
            by_user.setdefault(p.scope.user_id, []).append(p.id)
        self.notify_write(set(by_user), ids=by_user)
        return kept

    def stage(
        self, points: Sequence[MemoryPoint], still: Callable[[], bool] = lambda: True
    ) -> list[MemoryPoint]:
        """Stage points that are not embedded yet (a live session's turns), for the keyword
        channel alone (:mod:`tiers.semantic.pending`): they get their keyword vectors, and,
        unless ``still()`` says no or they are forgotten, are staged; :meth:`write` of the
        same ids replaces them. Nothing is durable and no model runs. Returns the points
        staged. Needs no :attr:`write_lock`: ``still`` and the tombstones are checked under
        the pending points' own lock, which :meth:`delete` (Forget's, after its tombstones)
        takes too."""
        bare = [replace(p, sparse=self.keywords.embed_document(p.text), dense=None) for p in points]
        staged = self.pending.add(bare, lambda ps: self.tombstones.keep(ps) if still() else [])
        self.notify_write({p.scope.user_id for p in staged}, staged=True)
        return staged

    def delete(self, flt: PointFilter, users: Iterable[str]) -> int:
        """Take the points matching ``flt`` out of Tier 3 with no tombstone (Forget writes
        its own first) and tell the caches of ``users`` (Forget, which empties and counts
        the caches itself, passes none). Returns the points removed. The caller holds
        :attr:`write_lock`. Raises EmbeddingUnavailable, VectorStoreUnavailable, and
        ValueError for a filter that names no user, episode or id (it would match every
        point)."""
        if not (flt.user_id or flt.episode_ids or flt.ids):
            raise ValueError("a Tier 3 delete names a user, episodes or point ids")
        staged = self.pending.delete(flt)
        _embedder, vectors = self.wait_ready(timeout=None)
        removed = vectors.delete(flt)  # staged points are not stored: not counted
        if removed or staged:
            named = {u: flt.ids for u in users} if flt.ids else None  # a delete by id
            self.notify_write(set(users), ids=named)
        return removed

    def write_edges(self, edges: Sequence[Edge]) -> list[Edge]:
        """Write graph edges, the graph's door beside :meth:`write`: edges of forgotten
        episodes or facts are dropped (tombstones), the rest inserted or replaced by id, and
        the scopes' caches told. Returns the edges written. The caller holds
        :attr:`write_lock`. Raises StoreUnavailable."""
        kept = self.tombstones.keep(list(edges))
        if kept:
            self.graph.add_edges(kept)
            self.notify_write({e.scope.user_id for e in kept}, ids={})  # no point changed
        return kept

    def close_facts(
        self,
        valid_to: Mapping[str, int | None],
        *,
        replaced_by: Mapping[str, str] | None = None,
        owners: Mapping[str, str] | None = None,
        notify: bool = True,
    ) -> None:
        """Set the end of validity of facts by id (None: current again), on their graph edge
        (when they have one) and on their point together, with the id of the fact that
        replaced each (``replaced_by``; none for a fact made current again): supersession,
        an update the extractor reported, and Forget undoing either. Each fact's user is
        its edge's, else ``owners``' (the caller's knowledge), else read from every shard;
        its point is changed in that user's shard alone. With ``notify``, the scopes'
        caches are told (Forget tells them itself). The caller holds :attr:`write_lock`.
        Raises StoreUnavailable, VectorStoreUnavailable, DiskFull."""
        if not valid_to:
            return
        _embedder, vectors = self.wait_ready(timeout=None)
        self.check_space("a change of the facts' validity")
        user_of = dict(owners or {})
        for fact_id in valid_to:
            edge = self.graph.get(fact_id)
            if edge is not None:
                user_of[fact_id] = edge.scope.user_id
        alone = [i for i in valid_to if i not in user_of]  # no triplet, no owner given
        if alone:
            user_of |= {p.id: p.scope.user_id for p in vectors.get(alone)}
        by = replaced_by or {}
        for fact_id, end in valid_to.items():
            self.graph.close_edges([fact_id], end)
            validity = Validity(end, by.get(fact_id))
            vectors.set_valid_to([fact_id], validity, user_of.get(fact_id, ""))
        if notify:
            touched: dict[str, list[str]] = {}
            for fact_id in valid_to:
                touched.setdefault(user_of.get(fact_id, ""), []).append(fact_id)
            self.notify_write(set(user_of.values()), ids=touched)

    def remove_edges(self, ids: Sequence[str] = (), scope: Scope | None = None) -> tuple[int, int]:
        """Delete graph edges by id, or every edge of ``scope`` (a scope's Forget), and the
        nodes left without edges; returns (edges, nodes) deleted. No cache is told: the only
        caller, Forget, empties them itself. The caller holds :attr:`write_lock`. Raises
        StoreUnavailable."""
        return self.graph.remove_scope(scope) if scope else self.graph.remove_edges(ids)

    def remove_episode_edges(self, episode_ids: set[str], user_id: str = "") -> int:
        """Delete the graph edges derived from these episodes (of ``user_id``, or of any
        user), before a rebuild derives them again (its writes tell the caches); returns how
        many. The caller holds :attr:`write_lock`. Raises StoreUnavailable."""
        return self.graph.remove_episodes(episode_ids, user_id)

    def refresh_profiles(self, scope: Scope) -> tuple[int, int]:
        """Bring the entity profiles of ``scope`` in line with its current facts
        (:mod:`tiers.semantic.profiles`): write the new and changed ones, delete the ones left
        without
        facts. Returns (written, deleted). The caller holds :attr:`write_lock`."""
        _embedder, vectors = self.wait_ready(timeout=None)
        own = PointFilter(user_id=scope.user_id, agent_id=scope.agent_id)
        with collector.quiet():  # every fact of the scope, decoded: a burst (tiers.core)
            facts = vectors.scroll(replace(own, kinds=("fact",), include_superseded=False), _ALL)
            old = {
                p.id: p
                for p in vectors.scroll(replace(own, kinds=(PROFILE,)), _ALL)
                if p.scope == scope
            }
            new = build_profiles(scope, facts)
        changed = [p for p in new if _differs(old.get(p.id), p)]
        stale = sorted(set(old) - {p.id for p in new})
        written = self.write(changed) if changed else []
        if stale:
            self.delete(PointFilter(user_id=scope.user_id, ids=tuple(stale)), {scope.user_id})
        return len(written), len(stale)

    def refresh_stories(self, scope: Scope) -> tuple[list[MemoryPoint], int]:
        """Bring the digests (:mod:`tiers.semantic.digests`) and story threads
        (:mod:`tiers.semantic.threads`) of ``scope`` in line with its summaries (and the story
        with the current facts it keeps in mind): write the new
        and changed ones (an unchanged basis keeps a writer's text), delete the ones left
        without summaries. Returns (the points written, how many deleted). The caller holds
        :attr:`write_lock`."""
        _embedder, vectors = self.wait_ready(timeout=None)
        own = PointFilter(user_id=scope.user_id, agent_id=scope.agent_id)
        with collector.quiet():  # every summary of the scope, decoded: a burst (tiers.core)
            summaries = vectors.scroll(replace(own, kinds=("summary",)), _ALL)
            facts = vectors.scroll(replace(own, kinds=("fact",), include_superseded=False), _ALL)
            old = {
                p.id: p
                for p in vectors.scroll(replace(own, kinds=(DIGEST, THREAD)), _ALL)
                if p.scope == scope
            }
        new = build_digests(scope, summaries, self.digest_policy, old, facts)
        new += build_threads(scope, summaries)
        changed = [p for p in new if _differs(old.get(p.id), p) or p.attrs != old[p.id].attrs]
        stale = sorted(set(old) - {p.id for p in new})
        written = self.write(changed) if changed else []
        if stale:
            self.delete(PointFilter(user_id=scope.user_id, ids=tuple(stale)), {scope.user_id})
        return written, len(stale)

    def rewrite_digest(self, digest: MemoryPoint, text: str, extractor: str) -> bool:
        """Replace the text of a stored digest by ``text`` (a writer's, from the children
        ``digest`` had), unless the digest changed meanwhile (its basis: a new episode, a
        Forget), so a text from forgotten children is never written. Returns whether it was
        written. The caller holds :attr:`write_lock`."""
        _embedder, vectors = self.wait_ready(timeout=None)
        stored = vectors.get([digest.id], digest.scope.user_id)
        if not stored or stored[0].attrs.get("basis") != digest.attrs.get("basis"):
            return False
        return bool(self.write([replace(stored[0], text=text, extractor=extractor)]))

    def start(self) -> None:
        """Load the model and open the vector store in the background."""
        self.embeddings.start()
        threading.Thread(target=self._open, name="tier3-open", daemon=True).start()

    def _open(self) -> None:
        lower_this_thread(RECALL_NICE)  # the engine's threads started here serve queries
        try:
            embedder = self.embeddings.wait()
            vectors = self._open_vectors()
            with self._lock:
                self._opening, interrupted = vectors, self._interrupted
            if interrupted:
                vectors.interrupt()
            vectors.ensure(embedder.model_name, embedder.dim)
            with self._lock:
                if self._closed:
                    vectors.close()
                    return
                self._vectors = ErasingVectors(vectors, self.erasures)
        except Exception as exc:
            # One line, for the log, `weaverctl status` and the health check's metadata.
            self.error = one_line(exc)
            if self._closed or self._interrupted:  # stopped as Tier 3 opened: not a fault
                log.info("tier3.open_stopped", extra={"fields": {"error": self.error}})
            else:
                log.error("tier3.unavailable", extra={"fields": {"error": self.error}})
        finally:
            self._ready.set()
            self.events.publish(Tier3Opened(self._vectors is not None))

    @property
    def ready(self) -> bool:
        return self._vectors is not None

    def wait_ready(self, timeout: float | None = None) -> tuple[Embedder, ErasingVectors]:
        if not self._ready.wait(timeout):
            model = f"loading {self.embeddings.description}"  # the largest shards open after it
            doing = "opening the vector store" if self.embeddings.ready else model
            raise EmbeddingUnavailable(
                self.embeddings.error  # e.g. a remote embedding endpoint that is down
                or f"Tier 3 is still starting ({doing}); try again shortly"
            )
        if self._vectors is None:
            raise EmbeddingUnavailable(self.error or "Tier 3 failed to start")
        return self.embeddings.wait(0), self._vectors

    def interrupt(self) -> None:
        """The daemon is stopping: the vector store's work that can wait for the next start
        stops (:meth:`VectorStore.interrupt`), so that no stop waits for it (a shard's term
        count after a crash, under a weaver's write: minutes on a slow disk at 10M points).
        Idempotent; :meth:`close` follows."""
        with self._lock:
            self._interrupted, vectors = True, self._opening
        if vectors is not None:
            vectors.interrupt()

    def close(self) -> None:
        """Flush and close the vector store (idempotent)."""
        with self._lock:  # first: a load cut short by the model's close below is a stop
            self._closed = True
        self.erasures.close()
        self.embeddings.close()
        with self._lock:
            vectors, self._vectors = self._vectors, None
        if vectors is not None:
            try:
                vectors.flush()
            finally:
                vectors.close()
        self.graph.close()


def edge_store_path(data_dir: Path) -> Path:
    return data_dir / "vectors"


def _differs(old: MemoryPoint | None, new: MemoryPoint) -> bool:
    if old is None:
        return True
    keys = [(s.session_id, s.seq, s.text) for s in old.sources]
    return old.text != new.text or keys != [(s.session_id, s.seq, s.text) for s in new.sources]
