"""The parts the daemon builds from its settings, and the table of the settings that choose
an implementation (:data:`EMBEDDERS` by ``embedding.provider``, :data:`VECTOR_STORES` by
where the vectors are): the recall engine with its channels, rerankers and cache, the
embedders, the vector store, and the LLM extractor. :func:`daemon.wiring.open_parts`, the
composition root, wires them to the stores."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from daemon.settings import Settings
from daemon.settings.security import read_secret_file
from recall import Channel, Reranker
from recall.cache import SemanticCache
from recall.channels import KeywordChannel, VectorChannel
from recall.engine import RecallEngine
from recall.graph.channel import GraphChannel
from recall.graph.files import FeatureFiles, graph_features_path
from recall.rerank import LLMReranker, LocalReranker
from tiers.core.models import ModelClient, preload_litellm
from tiers.keyed.access import AccessCounts
from tiers.semantic.digests import DigestWriter
from tiers.semantic.embedding import (
    Embedder,
    EmbeddingService,
    EmbeddingUnavailable,
    SentenceTransformerEmbedder,
)
from tiers.semantic.embedding.priority import PriorityEmbedder
from tiers.semantic.events import Tier3Written
from tiers.semantic.store import SemanticStore, edge_store_path
from tiers.semantic.vectors import VectorStore
from tiers.settings import EmbeddingSettings
from tiers.workers.embedder import describe, start_background
from tiers.workers.pool import WorkerStatus, WorkerUnavailable
from tiers.working.memory import WorkingMemory
from tiers.working.progress import LiveProgress
from weaver.extractors import Extractor
from weaver.extractors.local import LocalExtractor
from weaver.index import Indexer
from weaver.live import LiveIndexer
from weaver.settings import LLMSettings, WeaverSettings

log = logging.getLogger("strata.daemon")


def embedding_description(e: EmbeddingSettings) -> str:
    """How logs, errors and ``weaverctl status`` name the embedding model."""
    if e.provider == "litellm":
        return f"litellm:{e.model} at {e.api_base}" if e.api_base else f"litellm:{e.model}"
    return f"{e.model} ({e.backend})"


def recall_engine(
    s: Settings, semantic: SemanticStore, access: AccessCounts | None = None
) -> RecallEngine:
    rerankers: dict[str, Reranker] = {
        "local": LocalReranker(
            lambda texts: semantic.embeddings.wait().encode_documents(texts),
            stored=lambda ids, user_id: semantic.wait_ready(0)[1].dense(ids, user_id),
        )
    }
    model = s.recall.rerank_model or s.llm.model
    if model:
        # Recall is waiting: its own timeout, no retry, short pauses if retries are added.
        client = llm_client(
            s.llm,
            model=model,
            timeout_seconds=s.recall.rerank_timeout_seconds,
            max_retries=0,
            backoff_seconds=0.2,
            max_backoff_seconds=1.0,
            name=f"llm ({model})",
        )
        rerankers["llm"] = LLMReranker(client)
    cache = None
    if s.recall.cache_ttl_seconds > 0:
        cache = SemanticCache(
            s.recall.cache_ttl_seconds, s.recall.cache_size, s.recall.cache_similarity
        )
        semantic.events.subscribe(Tier3Written, lambda event: cache.invalidate(event.user_id))
    files = FeatureFiles(
        graph_features_path(s.data_dir),
        min_memories=s.recall.graph_files_min_memories,
        check=semantic.check_space,
    )
    graph = GraphChannel(
        semantic,
        cache_bytes=s.recall.graph_cache_mb * 2**20,
        large_scope=s.recall.graph_large_scope,
        inline_reads=s.recall.graph_inline_reads,
        wait_seconds=s.recall.graph_wait_seconds,
        files=files,
        warm_bytes=s.recall.graph_warm_mb * 2**20,
    )
    channels: dict[str, Channel] = {
        "vector": VectorChannel(semantic),
        "keyword": KeywordChannel(semantic),
        "graph": graph,
    }
    return RecallEngine(
        semantic,
        channels,
        rerankers,
        cache,
        access=access,
        query_vectors=s.recall.query_vector_cache,
        speakers=graph.speakers,
        threads=s.recall.threads,
        ahead=graph.walks_large,
    )


def embedding_client(e: EmbeddingSettings) -> ModelClient:
    """The model client of ``embedding.provider = "litellm"`` (litellm loads in the
    background)."""
    preload_litellm()
    return ModelClient(
        model=e.model,
        api_base=e.api_base or None,
        api_key_env=e.api_key_env or None,
        api_key_file=e.api_key_file,
        timeout_seconds=e.timeout_seconds,
        max_retries=e.max_retries,
        batch_size=e.batch_size,
        max_in_flight=e.max_in_flight,
        name=f"embedding {embedding_description(e)}",
    )


def litellm_embedder(e: EmbeddingSettings, client: ModelClient) -> Embedder:
    """The remote embedder; with ``embedding.dim = 0`` this asks the endpoint for the vector
    size, and the loader retries it while the endpoint is down."""
    from tiers.semantic.embedding.remote import LiteLLMEmbedder

    return LiteLLMEmbedder(
        client, dim=e.dim, query_prefix=e.query_prefix, document_prefix=e.document_prefix
    )


def model_cache(data_dir: Path) -> Path:
    """Where ONNX exports of the model are kept by default: the user's cache
    (``$XDG_CACHE_HOME/strata/models``, else ``~/.cache/strata/models``), shared by every data
    dir of the user, so a data dir does not carry its own copy of the model (174 MB for
    all-MiniLM-L6-v2 with its int8 variant); ``<data_dir>/models`` where that cannot be made."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    cache = Path(base) / "strata" / "models"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return data_dir / "models"
    return cache if os.access(cache, os.W_OK) else data_dir / "models"


def local_embedder(e: EmbeddingSettings, data_dir: Path) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(
        e.model,
        backend=e.backend,
        threads=e.threads,
        batch_size=e.batch_size,
        cache_dir=e.cache_dir or model_cache(data_dir),
    )


def local_extractor(w: WeaverSettings, semantic: SemanticStore) -> LocalExtractor:
    """The local extractor, embedding with Tier 3's model."""
    return LocalExtractor(
        embed=lambda texts: semantic.embeddings.wait().encode_documents(texts),
        summary_turns=w.summary_turns,
    )


def llm_extractor(llm: LLMSettings) -> Extractor | None:
    if not llm.model:
        return None
    from weaver.extractors.llm import LLMExtractor

    return LLMExtractor(weaver_client(llm))


def digest_writer(llm: LLMSettings) -> DigestWriter | None:
    """The LLM that writes digests abstractively (the extractor's endpoint and model), or
    None: extractive digests."""
    if not (llm.model and llm.digests):
        return None
    from weaver.digests import LLMDigestWriter

    return LLMDigestWriter(weaver_client(llm))


def weaver_client(llm: LLMSettings) -> ModelClient:
    """A model client of ``llm.model`` with the ``[llm]`` timeout and retries: the
    extractor's, and the digest writer's."""
    return llm_client(
        llm,
        model=llm.model,
        timeout_seconds=llm.timeout_seconds,
        max_retries=llm.max_retries,
        name=f"llm:{llm.model}",
    )


def llm_client(llm: LLMSettings, *, model: str, **options: Any) -> ModelClient:
    """A model client of the ``[llm]`` endpoint and key (the extractor's, the reranker's);
    ``options`` are the caller's timeout, retries and name. litellm starts to load in the
    background: its first call is not the one to wait for the import."""
    preload_litellm()
    return ModelClient(
        model=model,
        api_base=llm.api_base or None,
        api_key_env=llm.api_key_env or None,
        api_key_file=llm.api_key_file,
        **options,
    )


def live_indexer(
    weaver: WeaverSettings,
    working: WorkingMemory,
    progress: LiveProgress,
    semantic: SemanticStore,
    indexer: Indexer,
) -> LiveIndexer | None:
    """The live index stage (``weaver.live_index``, which needs ``weaver.index_turns``: its
    staged turns are what its batches replace); None: sessions are indexed when they end."""
    if not (weaver.live_index and weaver.index_turns):
        return None
    batch = weaver.live_batch_messages, weaver.live_batch_seconds
    return LiveIndexer(working, progress, semantic, indexer, *batch)


def qdrant_vectors(s: Settings) -> VectorStore:
    """The Qdrant server at ``qdrant_url``: a new collection with ``vectors.shard_keys`` shard
    keys."""
    from tiers.semantic.vectors.qdrant.store import QdrantVectorStore

    key = s.qdrant_api_key.get_secret_value() if s.qdrant_api_key else None
    if s.qdrant_api_key_file is not None:
        key = read_secret_file(s.qdrant_api_key_file)
    return QdrantVectorStore.from_url(
        s.qdrant_url,
        key,
        s.vectors.collection,
        shards=s.vectors.shard_keys,
        storage=s.vectors.storage,
    )


def embedded_vectors(s: Settings) -> VectorStore:
    """The embedded engine under the data directory, in ``vectors.shards`` shards; in a
    process of its own with ``vectors.process``."""
    v = s.vectors
    args = edge_store_path(s.data_dir), v.shards, v.point_cache, v.storage
    options: dict[str, Any] = {"preload": v.preload, "open_first": v.open_first_mb << 20}
    if v.process:
        from tiers.semantic.vectors.child import ChildVectorStore

        return ChildVectorStore("sharded", *args, **options)
    from tiers.semantic.vectors.shards.store import ShardedVectorStore

    return ShardedVectorStore(*args, **options)


def local_model(settings: Settings, client: ModelClient | None) -> Embedder:
    """The local model: queries in this process, documents in ``workers.count`` worker
    processes at a lower CPU priority (:mod:`tiers.workers`); with no workers, or when they
    cannot start, in this process, the weaver's documents waiting while a query is embedded."""
    local = local_embedder(settings.embedding, settings.data_dir)
    w = settings.workers
    if not w.count:
        return PriorityEmbedder(local, note="in the daemon's process (workers.count = 0)")
    try:
        return start_background(local, local.worker_spec(w.threads), count=w.count, nice=w.nice)
    except WorkerUnavailable as exc:
        log.error(
            "workers.disabled",
            extra={"fields": {"error": str(exc), "detail": "documents are embedded here"}},
        )
        return PriorityEmbedder(
            local, note=f"in the daemon's process: the workers were refused ({exc})"
        )


def remote_model(settings: Settings, client: ModelClient | None) -> Embedder:
    """A model served elsewhere through litellm; a slice of documents fills the requests in
    flight."""
    e = settings.embedding
    assert client is not None, "embedding.provider = litellm has its model client"
    slice_ = e.batch_size * e.max_in_flight
    return PriorityEmbedder(litellm_embedder(e, client), document_slice=slice_)


# The settings that choose an implementation, each value with what it makes.
# ``embedding.provider``: the embedder (its ``client`` is the model client of "litellm").
EMBEDDERS: Mapping[str, Callable[[Settings, ModelClient | None], Embedder]] = {
    "local": local_model,
    "litellm": remote_model,
}
# Where the vectors are: "qdrant" when ``qdrant_url`` is set, else "embedded".
VECTOR_STORES: Mapping[str, Callable[[Settings], VectorStore]] = {
    "embedded": embedded_vectors,
    "qdrant": qdrant_vectors,
}


def vectors_backend(settings: Settings) -> str:
    return "qdrant" if settings.qdrant_url else "embedded"


def configured_vectors(settings: Settings) -> VectorStore:
    """The vector store the settings name (:data:`VECTOR_STORES`)."""
    return VECTOR_STORES[vectors_backend(settings)](settings)


def configured_embedder(settings: Settings, client: ModelClient | None) -> Embedder:
    """Load the embedding model the settings name (:data:`EMBEDDERS`; slow: on the loader
    thread). ``client``: the model client of ``embedding.provider = "litellm"``, None for a
    local model."""
    return EMBEDDERS[settings.embedding.provider](settings, client)


def configured_embeddings(settings: Settings, client: ModelClient | None) -> EmbeddingService:
    """The embedding model the settings name, loaded in the background by
    :func:`configured_embedder`."""
    return EmbeddingService(
        lambda: configured_embedder(settings, client), embedding_description(settings.embedding)
    )


def workers_of(embeddings: EmbeddingService) -> tuple[list[WorkerStatus], str]:
    """The worker processes behind the loaded embedder, and the note on where documents are
    embedded (``weaverctl status``); none while the model loads."""
    try:
        embedder = embeddings.wait(0)
    except EmbeddingUnavailable:
        return [], "the embedding model is loading"
    return describe(embedder)
