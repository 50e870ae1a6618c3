"""The one settings object: defaults, then a ``strata.toml`` file, then ``STRATA_*`` variables.

Nested sections use ``__`` in environment variables: ``[journal] ttl_seconds`` in TOML is
``STRATA_JOURNAL__TTL_SECONDS`` in the environment. ``docs/configuration.md`` lists every
setting; ``deploy/strata.example.toml`` is a commented example. This module composes the
sections, each owned by the package that reads it: :mod:`tiers.settings` (``[working_memory]``,
``[journal]``, ``[embedding]``, ``[vectors]``), :mod:`weaver.settings` (``[weaver]``,
``[llm]``), :mod:`recall.recipe` (``[recall]``), and the daemon's own
:mod:`daemon.settings.sections` (``[limits]``, ``[metrics]``), :mod:`daemon.settings.context`
(``[context]``) and :mod:`daemon.settings.security` (``[auth]``, ``[tls]``).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from daemon.settings.context import ContextSettings
from daemon.settings.sections import LimitsSettings, MetricsSettings, check_listen
from daemon.settings.security import AuthSettings, TLSSettings
from recall.recipe import RecallSettings
from tiers.core.errors import ConfigError
from tiers.settings import (
    ChangesSettings,
    EmbeddingSettings,
    GraphSettings,
    JournalSettings,
    StorageSettings,
    VectorsSettings,
    WorkersSettings,
    WorkingMemorySettings,
)
from weaver.settings import LLMSettings, WeaverSettings

ENV_PREFIX = "STRATA_"
CONFIG_ENV = "STRATA_CONFIG"
# Variables for the clients (stratad_client, weaverctl), not settings of the daemon.
CLIENT_VARS = {"ADDRESS", "TOKEN", "TOKEN_FILE", "TLS_CA", "TLS_CERT", "TLS_KEY"}


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
    qdrant_api_key_file: Path | None = Field(
        None, description="A file holding the Qdrant API key (instead of qdrant_api_key)."
    )
    working_memory: WorkingMemorySettings = WorkingMemorySettings()
    journal: JournalSettings = JournalSettings()
    changes: ChangesSettings = ChangesSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    workers: WorkersSettings = WorkersSettings()
    vectors: VectorsSettings = VectorsSettings()
    graph: GraphSettings = GraphSettings()
    storage: StorageSettings = StorageSettings()
    weaver: WeaverSettings = WeaverSettings()
    llm: LLMSettings = LLMSettings()
    recall: RecallSettings = RecallSettings()
    context: ContextSettings = ContextSettings()
    limits: LimitsSettings = LimitsSettings()
    metrics: MetricsSettings = MetricsSettings()
    auth: AuthSettings = AuthSettings()
    tls: TLSSettings = TLSSettings()

    _toml_file: ClassVar[Path | None] = None

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        return check_listen(value)

    @model_validator(mode="after")
    def _secure(self) -> Settings:
        if not self.auth.enabled and not is_loopback(self.listen):
            raise ValueError(
                f"listen {self.listen} is beyond loopback but authentication is off: "
                "configure [[auth.tokens]] (see docs/security.md) or listen on 127.0.0.1"
            )
        if self.qdrant_api_key is not None and self.qdrant_api_key_file is not None:
            raise ValueError("set qdrant_api_key or qdrant_api_key_file, not both")
        if self.llm.api_key_env and self.llm.api_key_file is not None:
            raise ValueError("set llm.api_key_env or llm.api_key_file, not both")
        for name, path in (
            ("qdrant_api_key_file", self.qdrant_api_key_file),
            ("llm.api_key_file", self.llm.api_key_file),
            ("embedding.api_key_file", self.embedding.api_key_file),
        ):
            if path is not None and not path.is_file():
                raise ValueError(f"{name}: {str(path)!r} is not a readable file")
        return self

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


def is_loopback(listen: str) -> bool:
    """Whether ``listen`` (host:port) binds a loopback address only."""
    host = listen.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
