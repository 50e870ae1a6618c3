"""The daemon's own sections of the settings: ``[limits]`` (request validation) and
``[metrics]``.

They are part of the one :class:`daemon.settings.Settings` object, which holds the top-level
settings and loads them all. The other sections are owned by the packages that read them:
``tiers.settings`` (``[working_memory]``, ``[journal]``, ``[embedding]``, ``[vectors]``, and
the base class ``Section``), ``weaver.settings`` (``[weaver]``, ``[llm]``), ``recall.recipe``
(``[recall]`` and its recipes); ``[context]`` is in :mod:`daemon.settings.context`, ``[auth]``
and ``[tls]`` in :mod:`daemon.settings.security`.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from tiers.core.settings import Section


class LimitsSettings(Section):
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


class MetricsSettings(Section):
    """Prometheus metrics over HTTP (GET /metrics); see docs/operations.md."""

    enabled: bool = Field(False, description="Serve the metrics endpoint.")
    listen: str = Field(
        "127.0.0.1:9464", description="host:port of the metrics endpoint (no authentication)."
    )

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        return check_listen(value, "metrics.listen")
