"""What the forget tests share (``tests/tiers/rights/test_forget*.py``,
``tests/tiers/keyed/test_documents_tier3.py``, ``tests/tiers/test_kinds.py``): conversations
written through a client, recall texts, and the closing of stores a test opened around a
Forgetter. The files that still hold given words: :mod:`tests.support.disk`."""

from __future__ import annotations

from typing import Any

from stratad_client import MemoryClient, message
from tests.support import MAY
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


def close_stores(forgetter: Forgetter, semantic: SemanticStore, *stores: RocksStore) -> None:
    """Close what a test opened around ``forgetter``, as the daemon does: the purger told to
    stop, Tier 3 closed (which ends its purge), the purger joined, then the RocksDB stores."""
    forgetter.purger.close()
    semantic.close()
    assert forgetter.purger.join(60)
    for store in stores:
        store.close()
