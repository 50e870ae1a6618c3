"""Tier 3 on ``qdrant-client``: a Qdrant server or cluster by URL, or the client's pure-Python
``:memory:`` mode (for tests; it brute-forces every query and ignores payload indexes).

One collection (:data:`~tiers.semantic.vectors.COLLECTION` by default) with the same layout and
payload schema as :mod:`tiers.semantic.vectors.edge.store`; the embedding model is recorded in a
reserved metadata point, which no search, scroll, count or delete sees
(:mod:`tiers.semantic.vectors.qdrant.collection`).

Shards are Qdrant's own: a new collection has user-defined sharding with one shard key per shard
(``vectors.shards`` of the daemon that creates it; the collection records the count and every daemon
routes by it). A point is upserted under the shard key of its user
(:func:`~tiers.semantic.vectors.shard_of`), and every search, and every read, count, scroll or
delete that names a user, passes that key (``shard_key_selector``): it reaches that shard alone.
Reads and deletes without a user, and ``set_valid_to``, pass none: they reach every shard. A
collection without shard keys (made before) is used without selectors, as before.

Every write waits for the server to apply it (``wait=True``); ``optimize()`` and ``flush()`` do
nothing (the server optimizes and persists in the background). Writes are serialized by a lock
(``delete``'s count-then-delete is atomic with respect to this process's writes); in local mode
reads take it too: the local engine is plain Python dicts.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from qdrant_client import QdrantClient, models

from tiers.core.errors import StrataError, VectorStoreMismatch, VectorStoreUnavailable
from tiers.semantic.vectors import (
    COLLECTION,
    DENSE,
    SPARSE,
    Hit,
    MemoryPoint,
    PointFilter,
    SparseVector,
    Validity,
    canonical_id,
    episodes_of,
    shard_of,
)
from tiers.semantic.vectors.qdrant.collection import (
    build_filter,
    check_layout,
    create_collection,
    ensure_quantization,
    ensure_shard_keys,
    owned_by,
    read_meta,
    require_scope,
    search_params,
    shard_key,
    to_point,
    wanted_ids,
    write_meta,
)
from tiers.semantic.vectors.ranking import best
from tiers.semantic.vectors.storage import FLOAT32, DenseStorage

log = logging.getLogger("strata.vectors")


class QdrantVectorStore:
    """A :class:`~tiers.semantic.vectors.VectorStore` in one collection of a Qdrant server (or of
    ``qdrant-client``'s local mode). The store owns ``client``: :meth:`close` closes it."""

    def __init__(
        self,
        client: QdrantClient,
        collection: str = COLLECTION,
        shards: int = 1,
        storage: DenseStorage = FLOAT32,  # its originals: those of a collection it creates
    ) -> None:
        if shards < 1:
            raise ValueError(f"a collection has at least one shard key, not {shards}")
        self.client = client
        self.collection = collection
        self.shards = shards  # the shard keys of a collection this store creates
        self.storage = storage
        self._search = search_params(storage)  # a dense search's parameters
        self._keys = 0  # the collection's shard keys (0: none, a collection made before)
        options = client.init_options
        self._local = options.get("location") == ":memory:" or options.get("path") is not None
        self._lock = threading.RLock()
        self._ready = self._closed = False
        self._model = ""
        self._dim = 0

    @classmethod
    def from_url(
        cls,
        url: str,
        api_key: str | None = None,
        collection: str = COLLECTION,
        *,
        timeout: int = 10,
        shards: int = 1,
        storage: DenseStorage = FLOAT32,
    ) -> QdrantVectorStore:
        """A store on the Qdrant server or cluster at ``url`` (nothing sent before ensure)."""
        client = QdrantClient(url=url, api_key=api_key, timeout=timeout, check_compatibility=False)
        return cls(client, collection, shards, storage)

    # -- lifecycle ---------------------------------------------------------------------------

    def ensure(self, model: str, dim: int) -> None:
        with self._lock:
            if self._closed:
                raise VectorStoreUnavailable(f"{self._where()} is closed")
            if self._ready:
                self._check(self._model, self._dim, model, dim)
                return
            with self._errors("ensure"):
                if not self.client.collection_exists(self.collection):
                    create_collection(
                        self.client,
                        self.collection,
                        model,
                        dim,
                        self.shards,
                        local=self._local,
                        storage=self.storage,
                    )
                ensure_quantization(self.client, self.collection, self.storage)
                params = self.client.get_collection(self.collection).config.params
                meta = read_meta(self.client, self.collection)
                vectors = params.vectors if isinstance(params.vectors, dict) else {}
                dense = vectors.get(DENSE)
                sparse = (params.sparse_vectors or {}).get(SPARSE)
                if meta is None and dense is not None and sparse is not None:
                    empty = self.client.count(self.collection, exact=True).count == 0
                    if empty and dense.size == dim:  # created, but the meta point never made it
                        custom = params.sharding_method == models.ShardingMethod.CUSTOM
                        keys = self.shards if custom else 0
                        if keys and not self._local:
                            ensure_shard_keys(self.client, self.collection, keys)
                        write_meta(self.client, self.collection, model, dim, keys)
                        meta = {"model": model, "dim": dim, "shards": keys}
            dense = check_layout(dense, sparse, self._where())
            if meta is None:
                raise VectorStoreMismatch(
                    f"{self._where()} has no metadata point, so the embedding model of its"
                    " vectors is unknown: use another collection or rebuild"
                )
            self._check(str(meta.get("model")), dense.size, model, dim)
            keys = meta.get("shards") or 0
            if not isinstance(keys, int) or keys < 0:
                raise VectorStoreMismatch(f"{self._where()} names {keys!r} shard keys")
            if keys and keys != self.shards:
                log.info(  # the collection's own count routes: every daemon agrees
                    "vectors.collection_keys",
                    extra={"fields": {"collection": self.collection, "keys": keys}},
                )
            self._ready, self._model, self._dim, self._keys = True, model, dim, keys

    def optimize(self) -> None:
        """Nothing to do: the server builds its indexes in the background."""
        self._check_open()

    def purge(self) -> None:
        """Nothing here: a server's optimizer vacuums its segments; ``:memory:`` has no files."""

    def flush(self) -> None:
        """Nothing to do: every write waited for the server (``wait=True``)."""
        self._check_open()

    def interrupt(self) -> None:
        """Nothing to stop: no work here can wait for a daemon's next start."""

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._ready = False
            with self._errors("close"):
                self.client.close()

    # -- writes ------------------------------------------------------------------------------

    def upsert(self, points: Sequence[MemoryPoint]) -> None:
        if not points:
            return
        groups: dict[str, list[models.PointStruct]] = {}
        for p in points:
            groups.setdefault(self._key(p.scope.user_id), []).append(to_point(p))
        with self._lock, self._errors("upsert"):
            self._check_open()
            for key, structs in groups.items():
                self.client.upsert(
                    self.collection, points=structs, wait=True, shard_key_selector=key or None
                )

    def set_valid_to(self, ids: Sequence[str], validity: Validity, user_id: str = "") -> None:
        wanted = wanted_ids(ids)
        if not wanted:
            return
        # By filter, so ids that no longer exist are skipped instead of failing the batch.
        qfilter = build_filter(PointFilter(user_id=user_id, ids=tuple(wanted)))
        with self._lock, self._errors("set_valid_to"):
            self._check_open()
            self.client.set_payload(
                self.collection,
                validity.payload(),
                points=models.FilterSelector(filter=qfilter),
                wait=True,
                shard_key_selector=self._route(user_id),
            )

    def delete(self, flt: PointFilter) -> int:
        qfilter = build_filter(flt)
        with self._lock, self._errors("delete"):
            self._check_open()
            route = self._route(flt.user_id)
            n = self.client.count(
                self.collection, count_filter=qfilter, exact=True, shard_key_selector=route
            ).count
            if n:
                self.client.delete(
                    self.collection,
                    points_selector=models.FilterSelector(filter=qfilter),
                    wait=True,
                    shard_key_selector=route,
                )
            return n

    # -- reads -------------------------------------------------------------------------------

    def search_dense(self, vector: Sequence[float], flt: PointFilter, limit: int) -> list[Hit]:
        require_scope(flt)
        return self._query([float(x) for x in vector], DENSE, flt, limit)

    def weigh(self, vector: SparseVector) -> SparseVector:
        return vector  # the server's IDF modifier weighs the stored points' terms itself

    def search_sparse(self, vector: SparseVector, flt: PointFilter, limit: int) -> list[Hit]:
        require_scope(flt)
        if not vector.indices:
            return []
        query = models.SparseVector(indices=list(vector.indices), values=list(vector.values))
        return self._query(query, SPARSE, flt, limit)

    def get(self, ids: Sequence[str], user_id: str = "") -> list[MemoryPoint]:
        wanted = wanted_ids(ids)
        if not wanted:
            return []
        with self._reading(), self._errors("get"):
            records = self.client.retrieve(
                self.collection,
                ids=list(wanted),
                with_payload=True,
                with_vectors=False,
                shard_key_selector=self._route(user_id),
            )
        found = {
            canonical_id(r.id): r.payload
            for r in records
            if r.payload is not None and owned_by(r.payload, user_id)
        }
        return [MemoryPoint.from_payload(i, found[i]) for i in wanted if i in found]

    def dense(self, ids: Sequence[str], user_id: str = "") -> dict[str, list[float]]:
        wanted = wanted_ids(ids)
        if not wanted:
            return {}
        with self._reading(), self._errors("dense"):
            records = self.client.retrieve(
                self.collection,
                ids=list(wanted),
                with_payload=["user_id"] if user_id else False,
                with_vectors=[DENSE],
                shard_key_selector=self._route(user_id),
            )
        out: dict[str, list[float]] = {}
        for r in records:
            vector = r.vector.get(DENSE) if isinstance(r.vector, dict) else None
            key = canonical_id(r.id)
            if key is not None and isinstance(vector, list) and owned_by(r.payload, user_id):
                out[key] = [float(x) for x in vector]  # type: ignore[arg-type]
        return out

    def scroll(self, flt: PointFilter, limit: int = 1000) -> list[MemoryPoint]:
        found = self._scrolled(flt, limit, payload=True)
        return [MemoryPoint.from_payload(str(r.id), r.payload) for r in found if r.payload]

    def ids(self, flt: PointFilter, limit: int = 1000) -> list[str]:
        return [str(r.id) for r in self._scrolled(flt, limit, payload=False)]

    def episode_ids(self, flt: PointFilter, limit: int = 1000) -> set[str]:
        return episodes_of(r.payload for r in self._scrolled(flt, limit, payload=["episode_id"]))

    def _scrolled(self, flt: PointFilter, limit: int, *, payload: Any) -> list[models.Record]:
        """Up to ``limit`` records matching ``flt``, with their payloads (or these fields)."""
        if limit <= 0:
            return []
        with self._reading(), self._errors("scroll"):
            records, _ = self.client.scroll(
                self.collection,
                scroll_filter=build_filter(flt),
                limit=limit,
                with_payload=payload,
                with_vectors=False,
                shard_key_selector=self._route(flt.user_id),
            )
        return records

    def count(self, flt: PointFilter, *, exact: bool = True) -> int:
        with self._reading(), self._errors("count"):
            return self.client.count(
                self.collection,
                count_filter=build_filter(flt),
                exact=exact,
                shard_key_selector=self._route(flt.user_id),
            ).count

    # -- internals ---------------------------------------------------------------------------

    def _query(
        self, query: list[float] | models.SparseVector, using: str, flt: PointFilter, limit: int
    ) -> list[Hit]:
        points: dict[str, MemoryPoint] = {}

        def search(n: int) -> list[tuple[str, float]]:
            scored = self.client.query_points(
                self.collection,
                query=query,
                using=using,
                query_filter=build_filter(flt),
                limit=n,
                search_params=self._search if using == DENSE else None,
                with_payload=True,
                with_vectors=False,
                shard_key_selector=self._route(flt.user_id),
            ).points
            for s in scored:
                if s.payload is not None:
                    points[str(s.id)] = MemoryPoint.from_payload(str(s.id), s.payload)
            return [(str(s.id), s.score) for s in scored]

        with self._reading(), self._errors("search"):
            best_scored = best(search, limit, using)
        return [Hit(points[pid], score) for pid, score in best_scored if pid in points]

    def _check(self, have_model: str, have_dim: int, model: str, dim: int) -> None:
        if (have_model, have_dim) != (model, dim):
            raise VectorStoreMismatch(
                f"{self._where()} was created with model {have_model} ({have_dim} dims);"
                f" this daemon uses model {model} ({dim} dims):"
                " use another collection or rebuild"
            )

    def _key(self, user_id: str) -> str:
        """The shard key of ``user_id``'s points ("" in a collection without shard keys)."""
        return shard_key(shard_of(user_id, self._keys)) if self._keys else ""

    def _route(self, user_id: str) -> str | None:
        """The ``shard_key_selector`` that sends a request to ``user_id``'s shard alone
        (None: every shard, without a user or shard keys)."""
        return (self._key(user_id) or None) if user_id else None

    def _check_open(self) -> None:
        if self._closed:
            raise VectorStoreUnavailable(f"{self._where()} is closed")
        if not self._ready:
            raise VectorStoreUnavailable(f"{self._where()} is not open (call ensure() first)")

    def _reading(self) -> contextlib.AbstractContextManager[Any]:
        """The lock for a read: only in local mode, whose engine is not thread-safe."""
        self._check_open()
        return self._lock if self._local else contextlib.nullcontext()

    def _where(self) -> str:
        return f"the Qdrant collection {self.collection!r}"

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Client, transport and server failures become :class:`VectorStoreUnavailable`."""
        try:
            yield
        except StrataError:
            raise
        except Exception as exc:
            raise VectorStoreUnavailable(
                f"vector store {what} failed on {self._where()}: {exc}"
            ) from exc
