"""The LoCoMo benchmark's context mode (:mod:`tests.bench.locomo`): GetContext as an agent
calls it, set beside Pack at the same budget."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from stratad_client import MemoryClient
from tests.bench.locomo import metrics as m

# GetContext with no query, in a new session holding the question, at this budget.
CONTEXT_BUDGET = 1500


class ContextMode:
    """GetContext as an agent calls it: for each question a new session of the conversation's
    user holds the question as the user's message, and GetContext (no query: it formulates
    its own from the window) fills :data:`CONTEXT_BUDGET` tokens. Scored as Pack is: the
    fraction of gold turn ids among the sources of the memories in the block. The session is
    then emptied (RemoveMessages), so it never becomes an episode the next questions find."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict[str, float]]] = []
        self.latency: list[float] = []
        self.by_conv: dict[str, list[float]] = {}
        self.pack_by_conv: dict[str, list[float]] = {}
        self.tokens: list[int] = []
        # The same GetContext led by the story so far (GetContextRequest.story).
        self.story_rows: list[tuple[int, dict[str, float]]] = []
        self.story_by_conv: dict[str, list[float]] = {}

    def ask(
        self, client: MemoryClient, user: str, qid: str, text: str, category: int, gold: Any
    ) -> None:
        sid = f"bench-question-{qid}"
        client.append(sid, text, user_id=user)
        began = time.perf_counter()
        ctx = client.get_context(sid, CONTEXT_BUDGET, user_id=user, story=False)
        self.latency.append((time.perf_counter() - began) * 1000)
        led = client.get_context(sid, CONTEXT_BUDGET, user_id=user, story=True)
        client.remove_messages(sid, all=True, user_id=user)
        found = m.dia_ids([s.metadata for s in i.sources] for i in ctx.memories)
        score = m.coverage(found, gold)
        self.rows.append((category, {"recall": score}))
        self.by_conv.setdefault(user, []).append(score)
        self.tokens.append(ctx.tokens)
        found = m.dia_ids([s.metadata for s in i.sources] for i in led.memories)
        score = m.coverage(found, gold)
        self.story_rows.append((category, {"recall": score}))
        self.story_by_conv.setdefault(user, []).append(score)

    def report(self) -> dict[str, Any]:
        def mean(xs: Sequence[float]) -> float:
            return round(100 * sum(xs) / max(1, len(xs)), 1)

        return {
            "budget": CONTEXT_BUDGET,
            "scores": m.by_category(self.rows),
            "latency": m.latency(self.latency),
            "tokens": round(sum(self.tokens) / max(1, len(self.tokens)), 1),
            # Nothing in GetContext was tuned on this split; each conversation held out on its
            # own is what a leave-one-conversation-out report shows.
            "per_conversation": {
                user: {
                    "context": mean(xs),
                    "pack": mean(self.pack_by_conv.get(user, [])),
                    "story": mean(self.story_by_conv.get(user, [])),
                }
                for user, xs in self.by_conv.items()
            },
            # GetContext led by the story so far (the same questions, the same budget).
            "story": m.by_category(self.story_rows),
        }
