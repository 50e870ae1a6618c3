"""The kinds of memory a Recall hit can be (``RecallHit.kind``, ``RecallRequest.kinds``): the
one list, of the wire, which the integrations import (the MCP tools' ``kinds`` argument) and the
daemon too (``tiers.semantic.vectors.KINDS``, the kinds of its points): a new kind of memory is
one edit, here."""

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
