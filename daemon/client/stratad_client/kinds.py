"""The kinds of memory a Recall hit can be (``RecallHit.kind``,
``RecallRequest.kinds``): the client's list, which the integrations import (the MCP tools'
``kinds`` argument). Generated from the daemon's one list, ``tiers.semantic.vectors.Kind``, by
``python -m daemon.dev.protogen``: do not edit."""

from __future__ import annotations

from typing import Literal, get_args

MemoryKind = Literal[
    "episode_chunk",
    "episode_turn",
    "summary",
    "fact",
    "profile",
    "document",
    "digest",
    "thread",
]
MEMORY_KINDS: tuple[str, ...] = get_args(MemoryKind)

__all__ = ["MEMORY_KINDS", "MemoryKind"]
