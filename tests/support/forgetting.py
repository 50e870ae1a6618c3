"""What the forget tests share (``tests/tiers/rights/test_forget*.py``,
``tests/tiers/keyed/test_documents_tier3.py``, ``tests/tiers/test_kinds.py``): conversations
written through a client, recall texts, the files under a data dir that still hold given
words, and the closing of stores a test opened around a Forgetter."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from stratad_client import MemoryClient, message
from tests.support import MAY, wait_until
from tiers.rights.forget.cascade import Forgetter
from tiers.rocks import RocksStore
from tiers.semantic.store import SemanticStore

SECRET = "Zebra-7781-Quartz"


def talk(
    c: MemoryClient, user: str, sid: str, *turns: str, agent: str = "", end: bool = True
) -> str:
    c.append_batch(
        sid,
        [
            message(text, name=("Alice", "Bob")[i % 2], created_at=MAY, message_id=f"{sid}-{i}")
            for i, text in enumerate(turns)
        ],
        user_id=user,
        agent_id=agent,
    )
    return c.end_session(sid, user_id=user).episode_id if end else ""


def texts(c: MemoryClient, user: str, query: str, **kwargs: Any) -> list[tuple[str, str, str]]:
    hits = c.recall(query, user_id=user, k=50, **kwargs).hits
    return [(h.id, h.episode_id, h.text) for h in hits]


def _on_disk(root: Path, needles: list[str]) -> dict[str, list[str]]:
    """Every file under ``root`` that holds one of ``needles``, with the ones it holds."""
    found: dict[str, list[str]] = {}
    for folder, _dirs, files in os.walk(root):  # files a purge removes meanwhile are skipped
        for name in files:
            path = Path(folder) / name
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            hits = [n for n in needles if n.encode() in data]
            if hits:
                found[str(path.relative_to(root))] = hits
    return found


PURGE_BOUND = 60.0  # docs/operations.md, Forget: the bytes leave the disk within this


def _gone_within(root: Path, needles: list[str], seconds: float = PURGE_BOUND) -> None:
    """Every byte of ``needles`` leaves the files under ``root`` within ``seconds``."""
    left: dict[str, list[str]] = {}

    def gone() -> bool:
        left.clear()
        left.update(_on_disk(root, needles))
        return not left

    try:
        wait_until(gone, seconds, interval=0.2)
    except AssertionError:
        raise AssertionError(f"still on disk after {seconds:g} s: {left}") from None


def close_stores(forgetter: Forgetter, semantic: SemanticStore, *stores: RocksStore) -> None:
    """Close what a test opened around ``forgetter``, as the daemon does: the purger told to
    stop, Tier 3 closed (which ends its purge), the purger joined, then the RocksDB stores."""
    forgetter.purger.close()
    semantic.close()
    assert forgetter.purger.join(60)
    for store in stores:
        store.close()
