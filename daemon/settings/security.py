"""The security sections of the settings: ``[auth]`` (bearer tokens) and ``[tls]``.

They are part of the one :class:`daemon.settings.Settings` object; they live here so that
``daemon/settings/__init__.py`` stays about everything else. ``docs/security.md`` explains them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tiers.core.models import read_secret_file

__all__ = ["AuthSettings", "TLSSettings", "TokenEntry", "read_secret_file"]

RIGHTS = ("append", "recall", "forget", "admin")
Right = Literal["append", "recall", "forget", "admin"]
ALL_TENANTS = "*"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class TokenEntry(BaseModel):
    """One bearer token: its SHA-256 (never the token itself), its tenants and rights."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="A label for logs; never the token.")
    sha256: str = Field(description="The token's SHA-256, 64 lower-case hex digits.")
    tenants: list[str] = Field(min_length=1, description='user_ids it may use; ["*"]: all.')
    rights: list[Right] = Field(min_length=1, description="append, recall, forget, admin.")

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: str) -> str:
        value = value.strip().lower()
        if not _SHA256.match(value):
            raise ValueError("sha256 must be 64 hex digits (stratad token prints it)")
        return value

    @field_validator("tenants")
    @classmethod
    def _tenants(cls, value: list[str]) -> list[str]:
        if any(not t for t in value):
            raise ValueError("tenants must not contain an empty user_id")
        if ALL_TENANTS in value and len(value) > 1:
            raise ValueError('tenants is either ["*"] or a list of user_ids')
        return value


class AuthSettings(BaseModel):
    """Authentication: on as soon as one token is configured (docs/security.md)."""

    model_config = ConfigDict(extra="forbid")

    tokens: list[TokenEntry] = Field(
        [], description="Bearer tokens ([[auth.tokens]]: name, sha256, tenants, rights)."
    )

    @property
    def enabled(self) -> bool:
        return bool(self.tokens)

    @model_validator(mode="after")
    def _unique(self) -> AuthSettings:
        hashes = [t.sha256 for t in self.tokens]
        if len(set(hashes)) != len(hashes):
            raise ValueError("auth.tokens: the same sha256 appears twice")
        return self


class TLSSettings(BaseModel):
    """TLS of the gRPC server. A client CA makes client certificates mandatory."""

    model_config = ConfigDict(extra="forbid")

    cert_file: Path | None = Field(None, description="PEM server certificate (chain).")
    key_file: Path | None = Field(None, description="PEM private key of cert_file.")
    client_ca_file: Path | None = Field(
        None, description="PEM CA bundle; set: clients must present a certificate it signed."
    )

    @property
    def enabled(self) -> bool:
        return self.cert_file is not None

    @model_validator(mode="after")
    def _complete(self) -> TLSSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("tls.cert_file and tls.key_file go together")
        if self.client_ca_file is not None and self.cert_file is None:
            raise ValueError("tls.client_ca_file needs tls.cert_file and tls.key_file")
        for name in ("cert_file", "key_file", "client_ca_file"):
            path = getattr(self, name)
            if path is not None and not path.is_file():
                raise ValueError(f"tls.{name}: {str(path)!r} is not a readable file")
        return self
