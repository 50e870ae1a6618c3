"""The embedded engine's shard as Tier 3 lays it out: made, opened and copied with its config
(:mod:`tiers.semantic.vectors.edge.config`), its payload indexes, point conversion, the sidecar
that names the embedding model, and a copy of the live points.

The sidecar ``strata_vectors.json`` (``{"model", "dim", "format": 1}``; a sharded store's has
``"format": 2`` and ``"shards"``) records the embedding model the vectors came from: the engine only
knows the vector size. The model's name includes the back-end where its vectors differ
(``<model>@onnx-int8``, :attr:`tiers.semantic.embedding.SentenceTransformerEmbedder.model_name`), so
a store is never filled with vectors of two kinds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from qdrant_edge import (
    EdgeShard,
    Filter,
    IntegerIndexParams,
    KeywordIndexParams,
    PayloadSchemaType,
    Point,
    ScrollRequest,
    UpdateOperation,
)
from qdrant_edge import SparseVector as EdgeSparseVector

from tiers.core.errors import StrataError
from tiers.core.sparse import data_ranges
from tiers.semantic.vectors import (
    DENSE,
    SPARSE,
    MemoryPoint,
    VectorStoreMismatch,
    VectorStoreUnavailable,
)
from tiers.semantic.vectors.edge import config as edge_config
from tiers.semantic.vectors.storage import FLOAT32, DenseStorage

if TYPE_CHECKING:
    from qdrant_edge import NamedVector, PayloadIndexInfo, PayloadSchemaParams, Record

SIDECAR = "strata_vectors.json"
FORMAT = 1  # one shard's sidecar
SHARDED_FORMAT = 2  # a sharded store's (tiers.semantic.vectors.edge.layout)
# Points per page when a copy is made: a scroll's cost is mostly per call (a page of 2,048
# scrolls 3x faster per point than one of 512), and a page is a few MB at most.
COPY_PAGE = 2048
# Points per page when the points of a filter are read in pages (their payloads or sparse
# vectors): the engine holds the GIL through a call, and a page of 512 holds it a quarter as
# long as one of 2,048 for the same total (a 200,000-point user, read ahead: payloads 1.8 s,
# pages at most 19 ms against 48; sparse vectors 0.4 s, pages at most 2 ms; 2026-11-30).
READ_PAGE = 512
# Points in one write of the engine (an upsert is split into writes of this many at most): the
# engine holds the GIL through a write (1,000 points: 72-81 ms, 128: 9-12 ms, at the same total
# speed), and each load of a shard decodes its log's last acknowledged record again (a shard
# whose last write was 1,000 points loaded in 117-123 ms, 72-74 ms after one more small write;
# 2026-12-01).
WRITE_POINTS = 128
# Pages of a large delete between two flushes of the shard: the engine holds the GIL through a
# flush too, and the flush after a 200,000-point user's delete (the purge's) held it 340 ms at
# 1M points; one every 16 pages holds it about 15 ms (the first, about 45), for 20-45 % more
# flush time in all (a 60,000-point user: the longest hold 48-56 ms against 99; 2026-11-30).
DELETE_FLUSH_PAGES = 16


def to_point(p: MemoryPoint) -> Point:
    if p.dense is None:
        raise ValueError(f"memory point {p.id} has no dense vector")
    vector: dict[str, NamedVector] = {DENSE: [float(x) for x in p.dense]}
    if p.sparse is not None:
        vector[SPARSE] = EdgeSparseVector(p.sparse.indices, p.sparse.values)
    return Point(id=p.id, vector=vector, payload=p.payload())


def upserts(points: Sequence[Point]) -> Iterator[UpdateOperation]:
    """The engine's writes of ``points``, :data:`WRITE_POINTS` at most each."""
    for start in range(0, len(points), WRITE_POINTS):
        yield UpdateOperation.upsert_points(list(points[start : start + WRITE_POINTS]))


def create_shard(dest: Path, dim: int, storage: DenseStorage = FLOAT32) -> EdgeShard:
    """A new, empty shard at ``dest`` with Strata's config and payload indexes, keeping its
    dense vectors as ``storage`` says."""
    made = edge_config.config(dim, storage=storage)
    EdgeShard.create(str(dest), made).close()
    # The engine made its log in segments of its default size: the log is made again with
    # ours while the shard is empty. Only then: the engine numbers its writes on from its
    # log, so a shard holding points whose log is emptied numbers its next writes below its
    # points' versions, and skips them (tried 2026-12-01: an update of a point was lost so).
    # A crash in between leaves an empty shard with either log, which opens.
    edge_config.set_wal_options(dest)
    shutil.rmtree(dest / "wal")
    shard = EdgeShard.load(str(dest), made)
    try:
        ensure_payload_indexes(shard)
    except Exception:
        shard.close()
        raise
    return shard


def ensure_payload_indexes(shard: EdgeShard, *, placement: bool = True) -> int:
    """Create the payload indexes of :func:`payload_indexes` that ``shard`` lacks, or holds
    with other settings; returns how many. Asked for an index it has, the engine builds it
    again over every point, holding the GIL: 15 s for the seven at 200,000 points (measured
    2026-11-29), at every open of the shard before. So those it has are left alone. Without
    ``placement`` an index kept in memory where the config says on disk (or the other way)
    counts as had: the daemon's open leaves it so (seconds of GIL at 10M), and the build child
    makes it again, in its own process (:mod:`~tiers.semantic.vectors.edge.generations`)."""
    have = shard.info().payload_schema
    made = 0
    for name, schema in edge_config.payload_indexes().items():
        if not _indexed_as(have.get(name), schema, placement):
            shard.update(UpdateOperation.create_field_index(name, schema))
            made += 1
    return made


def _indexed_as(
    index: PayloadIndexInfo | None,
    schema: PayloadSchemaType | PayloadSchemaParams,
    placement: bool,
) -> bool:
    if index is None:
        return False
    params = index.params
    if isinstance(schema, KeywordIndexParams):
        tenant = getattr(params, "is_tenant", None)
        if index.data_type != PayloadSchemaType.Keyword or tenant != schema.is_tenant:
            return False
    elif isinstance(schema, IntegerIndexParams):
        if index.data_type != PayloadSchemaType.Integer:
            return False
        # Made without params (an earlier release): both lookups and ranges, as asked.
        for flag in ("lookup", "range"):
            if getattr(params, flag, None) not in (None, getattr(schema, flag)):
                return False
    else:
        return index.data_type == schema and params is None
    return not placement or getattr(params, "memory", None) == schema.memory


def live_points(shard: EdgeShard) -> Iterator[list[Point]]:
    """The live points of ``shard`` (vectors and payloads), a page at a time."""
    offset: Any = None
    while True:
        request = ScrollRequest(offset=offset, limit=COPY_PAGE, with_payload=True, with_vector=True)
        records, offset = shard.scroll(request)
        points = [
            Point(id=r.id, vector=r.vector, payload=r.payload)
            for r in records
            if r.vector is not None
        ]
        if points:
            yield points
        if offset is None:
            return


def sparse_pages(shard: EdgeShard, flt: Filter | None = None) -> Iterator[list[Record]]:
    """The live points of ``shard`` (matching ``flt``) with their ids and sparse vectors (no
    payloads), a page at a time: to count their terms
    (:mod:`tiers.semantic.vectors.term_frequencies`)
    and to know what a delete removes."""
    offset: Any = None
    while True:
        records, offset = sparse_page(shard, flt, offset)
        if records:
            yield records
        if offset is None:
            return


def sparse_page(shard: EdgeShard, flt: Filter | None, offset: Any) -> tuple[list[Record], Any]:
    """One page of :func:`sparse_pages` from ``offset`` (None: the first), and the next
    page's offset (None after the last)."""
    request = ScrollRequest(
        offset=offset, limit=READ_PAGE, filter=flt, with_payload=False, with_vector=[SPARSE]
    )
    return shard.scroll(request)


def records_terms(records: Iterable[Record]) -> Iterator[EdgeSparseVector]:
    """The sparse vectors of retrieved or scrolled ``records`` as the engine returns them (a
    point without one yields nothing): for their terms (``indices``), read without building
    a :class:`~tiers.semantic.vectors.SparseVector` per point, which took four times as long
    as counting the terms (25k points: 245 ms against 60 ms, 2026-11-29)."""
    for r in records:
        vector = r.vector.get(SPARSE) if isinstance(r.vector, dict) else None
        if vector is not None and not isinstance(vector, list):
            yield vector


def copy_points(shard: EdgeShard, dest: Path, dim: int, storage: DenseStorage = FLOAT32) -> None:
    """Write the live points (vectors and payloads) of ``shard`` into a new shard at ``dest``,
    made with ``storage``: the copy holds none of the bytes of deleted points that the engine's
    files keep."""
    copy = create_shard(dest, dim, storage)
    try:
        for points in live_points(shard):
            for op in upserts(points):
                copy.update(op)
        copy.flush()
    finally:
        copy.close()


def check_model(path: Path, have_model: str, have_dim: int, model: str, dim: int) -> None:
    if (have_model, have_dim) != (model, dim):
        raise VectorStoreMismatch(
            f"the vectors in {path} are of {have_model} ({have_dim} dims), this daemon's of"
            f" {model} ({dim} dims): set that model again, or stop, move the directory aside,"
            " restart and run `weaverctl rebuild`"
        )


def load_sidecar(store: Path, formats: tuple[int, ...] = (FORMAT,)) -> dict[str, Any] | None:
    """The sidecar of ``store`` (None: there is none), of one of ``formats``; raises
    :class:`VectorStoreMismatch` when it is not JSON, of another format, or names no model
    and dim."""
    path = store / SIDECAR
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise VectorStoreMismatch(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") not in formats:
        found = doc.get("format") if isinstance(doc, dict) else None
        readable = " and ".join(map(str, formats))
        raise VectorStoreMismatch(
            f"{path} has format {found!r}; this daemon reads format {readable}"
        )
    if not isinstance(doc.get("model"), str) or not isinstance(doc.get("dim"), int):
        raise VectorStoreMismatch(f"{path} does not name a model and a dim: {doc}")
    return cast(dict[str, Any], doc)


def read_sidecar(store: Path) -> dict[str, Any] | None:
    """The sidecar of one shard's store (format 1)."""
    return load_sidecar(store)


def write_sidecar(store: Path, model: str, dim: int, shards: int = 0) -> None:
    """Atomically, before the shard exists: a shard is never left without its sidecar. With
    ``shards``, the sidecar of a sharded store (format 2,
    :mod:`tiers.semantic.vectors.edge.layout`)."""
    store.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"model": model, "dim": dim, "format": FORMAT}
    if shards:
        doc.update(format=SHARDED_FORMAT, shards=shards)
    replace_durably(store / SIDECAR, (json.dumps(doc) + "\n").encode())


def replace_durably(path: Path, data: bytes) -> None:
    """Replace the file at ``path`` with ``data``, atomically and durably: written to
    ``<name>.tmp`` beside it and fsynced, renamed over it, and the directory fsynced. Raises
    ``OSError`` (the temporary file removed)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a rename, a new or deleted file) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def engine_errors(path: Path, what: str) -> Iterator[None]:
    """Engine (and file system) failures become :class:`VectorStoreUnavailable`."""
    try:
        yield
    except StrataError:
        raise
    except Exception as exc:
        if "WouldBlock" in str(exc):
            raise VectorStoreUnavailable(
                f"the vector store at {path} is in use by another process"
            ) from exc
        raise VectorStoreUnavailable(f"vector store {what} failed at {path}: {exc}") from exc


def warm(gen: Path) -> int:
    """Read what the engine reads whole while it loads the generation ``gen``, holding the GIL,
    into the page cache first (the GIL released between reads), and return the bytes read: the
    int8 copies of the dense vectors (``quantized.*``) and the payload indexes
    (``payload_index``) of its segments. From a cold cache the engine takes their pages one
    fault at a time. At ten million points a shard of 78,000 points held the GIL for 1.2-1.8 s
    and for 0.55 s after a read of its int8 copies (40 MB, 0.04 s; 2026-11-29). At one million
    points, on a machine whose kernel pages out a file's pages soon after their last use, the
    loads of 68 shards from a cold cache held it 293 ms each at the median with the int8
    copies read first, and 47 ms with the payload indexes read too (94 ms of reads; 139 ms in
    all against 297); reading every file of theirs held it 39 ms, for 150 ms of reads
    (2026-12-05). Files that vanish or cannot be read are skipped: the load reports them."""
    copies = _read_into_cache((gen / "segments").glob(f"*/vector_storage-{DENSE}/quantized.*"))
    return copies + read_ahead(gen, ("payload_index",))


def read_ahead(gen: Path, parts: Iterable[str], between: Callable[[], None] | None = None) -> int:
    """Read the files of the generation ``gen``'s segments under ``parts`` (such as
    ``payload_storage``) into the page cache, and return the bytes read: before a read of a
    large share of a shard's points, which from a cold cache takes its pages one fault at a
    time, holding the GIL. A 200,000-point user of a 280,000-point shard at ten million
    points: its episode ids read in 5.7 s cold and 1.6 s after this read of 404 MiB (0.4 s,
    the GIL released between reads), its sparse vectors in 2.2 and 0.6 s, and the longest page
    fell from 311 ms to 48 (2026-11-30). Files that vanish or cannot be read are skipped.
    ``between`` is called before each MiB read (a reader that paces itself; what it raises
    ends the read)."""
    segments = gen / "segments"
    return _read_into_cache(
        (file for part in parts for file in segments.glob(f"*/{part}/**/*") if file.is_file()),
        between,
    )


def _read_into_cache(files: Iterable[Path], between: Callable[[], None] | None = None) -> int:
    """Read the data ranges of ``files`` (:func:`~tiers.core.sparse.data_ranges`), a MiB at a
    time: their holes, most of the engine's preallocated files, are passed over (a shard's
    int8 copies and payload indexes at 1M: 68 MiB apparent, 5.7 of data; read whole in 36 ms
    cold and 16 warm, in copying zeros, 2026-12-07). Returns the bytes read."""
    buffer = memoryview(bytearray(1 << 20))
    done = 0
    for file in files:
        with contextlib.suppress(OSError), open(file, "rb", buffering=0) as f:
            for start, end in data_ranges(f.fileno()):
                f.seek(start)
                while start < end:
                    if between is not None:
                        between()
                    n = f.readinto(buffer[: min(len(buffer), end - start)])
                    if not n:
                        break
                    start += n
                    done += n
    return done


def load_shard(path: Path, gen: Path, dim: int, storage: DenseStorage = FLOAT32) -> EdgeShard:
    """Open the generation ``gen`` of the store at ``path``, checking it against ``dim`` (and
    against what it was made with: :func:`~tiers.semantic.vectors.edge.config.made_with`, whose
    originals it keeps, whatever ``storage.originals`` says); with ``storage.quantization`` "int8",
    the segments indexed from now on are quantized too. Its int8 copies and payload indexes are
    read first (:func:`warm`), so the engine's load holds the GIL for less."""
    warm(gen)
    made = edge_config.made_with(gen)
    kept = replace(storage, originals=made.originals)
    opened = edge_config.config(dim, idf=made.idf, storage=kept)
    try:
        return EdgeShard.load(str(gen), opened)
    except Exception as exc:
        if "incompatible" not in str(exc).lower():
            raise
        raise VectorStoreMismatch(
            f"the vector store at {path} does not match its {SIDECAR} ({dim} dims): {exc};"
            " rebuild it"
        ) from exc
