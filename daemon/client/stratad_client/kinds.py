"""The kinds of memory a Recall hit can be (``RecallHit.kind``, ``RecallRequest.kinds``): the
client's one list, which the integrations import (the MCP tools' ``kinds`` argument). The
daemon's own list is ``tiers.semantic.vectors.KINDS``; ``tests/client/test_client.py``
checks that the two agree."""

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
