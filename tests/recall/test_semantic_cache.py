"""The semantic cache (``recall.cache_ttl_seconds``) never keeps an answer that was read before
a write or a Forget in its scope: a recall that read Tier 3 before the write and finished
after it (its cache entry put after the write had emptied the scope's entries) would otherwise
serve the old text to every later recall, after a recall had already returned the new one.
Real model, real RocksDB and embedded engine; the first recall is held between its read and
its answer (:class:`tests.support.gates.Pause`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from recall import Channel, Query, QueryContext
from recall.cache import SemanticCache
from recall.channels import VectorChannel
from recall.engine import RecallEngine
from recall.recipe import Recipe
from recall.result import RecallResult
from tests.contracts.corpus import Tier3
from tests.support.gates import DEADLINE, Pause
from tiers.core.records import Scope
from tiers.keyed.document import Document
from tiers.semantic.events import Tier3Written
from tiers.semantic.vectors import MemoryPoint, PointFilter

ALICE = Scope("alice")
QUERY = "Which colour does Alice like?"
OLD, NEW = "Alice's favourite colour is teal.", "Alice now loves crimson."


class Held:
    """A channel that reads, then holds its thread at ``pause`` before it answers."""

    def __init__(self, inner: Channel, pause: Pause) -> None:
        self.name = inner.name
        self._inner = inner
        self._pause = pause

    def search(self, ctx: QueryContext, limit: int) -> list[tuple[MemoryPoint, float]]:
        hits = self._inner.search(ctx, limit)
        self._pause()
        return hits


@pytest.fixture
def tier3(tmp_path: Path) -> Iterator[Tier3]:
    t = Tier3(tmp_path)
    yield t
    t.close()


def note(text: str) -> MemoryPoint:
    return Document(ALICE, ("notes",), "colour", text, "", 1, 2).point()


def texts(result: RecallResult) -> list[str]:
    return [c.point.text for c in result.hits]


@pytest.mark.parametrize("change", ["replace", "forget"])
def test_an_answer_read_before_a_write_is_not_cached_after_it(tier3: Tier3, change: str) -> None:
    semantic = tier3.semantic
    cache = SemanticCache(ttl_seconds=600, size=100, similarity=0.99)
    # as the daemon wires it (daemon.components)
    semantic.events.subscribe(Tier3Written, lambda event: cache.invalidate(event.user_id))
    pause = Pause("between the first recall's read and its answer")
    engine = RecallEngine(semantic, {"vector": Held(VectorChannel(semantic), pause)}, {}, cache)
    query = Query(QUERY, ALICE, 5, Recipe(), kinds=("document",), channels=("vector",))
    with semantic.write_lock:
        semantic.write([note(OLD)])
    first: list[RecallResult] = []
    reader = threading.Thread(target=lambda: first.append(engine.recall(query)))
    reader.start()
    pause.reached()  # it read the old text and has not answered yet
    with semantic.write_lock:
        if change == "replace":  # the weaver writes the document's new text
            semantic.write([note(NEW)])
            want: list[str] = [NEW]
        else:  # a Forget: the point goes, then the scope's caches are emptied
            semantic.delete(PointFilter(ids=(note(OLD).id,)), ())
            cache.forget_scope("alice")
            want = []
    assert texts(engine.recall(query)) == want  # read after the change
    pause.release()
    reader.join(DEADLINE)
    assert texts(first[0]) == [OLD]  # it began before the change: the old text is its answer
    later = engine.recall(query)
    assert texts(later) == want, "a cached answer read before the change came back"
    again = engine.recall(query)
    assert again.cached and texts(again) == want  # the cache still serves newer answers


def test_a_put_names_when_its_answer_was_read() -> None:
    cache = SemanticCache(ttl_seconds=600, size=10, similarity=0.99)
    vector = np.ones(4, dtype=np.float32) / 2.0
    answer = RecallResult(hits=[])
    read = cache.stamp("alice")
    cache.invalidate("alice")  # a write after the read
    assert not cache.put("alice", "k=5", vector, answer, read)
    assert cache.get("alice", "k=5", vector) is None
    other = cache.stamp("bob")  # another user's writes do not matter
    cache.invalidate("alice")
    assert cache.put("bob", "k=5", vector, answer, other)
    assert cache.get("bob", "k=5", vector) is answer
    fresh = cache.stamp("alice")
    assert cache.put("alice", "k=5", vector, answer, fresh)
    assert cache.forget_scope("alice") == 1
    assert not cache.put("alice", "k=5", vector, answer, fresh)  # a Forget counts as a write
