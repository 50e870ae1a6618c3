"""Pinned memories: what PinMemory may pin and what GetContext shows of the pins of a scope
(the pins themselves are :mod:`tiers.keyed.pins`).

Pins belong to a scope: the user's own (no agent) apply to every session of the user, an
agent's to that agent's sessions only (:meth:`tiers.keyed.pins.PinStore.for_session`). A pin
names a Tier 3 memory of its scope, or a keyed document of it the weaver has not indexed yet;
it is read from the vector store at each call, and a pin whose memory is gone is deleted.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from recall import Candidate
from recall.context.assembly import Pinned
from tiers.core.errors import NotFound, ResourceExhausted
from tiers.core.records import Scope
from tiers.keyed.documents import DocumentStore
from tiers.keyed.pins import Pin, PinStore
from tiers.semantic.store import SemanticStore
from tiers.semantic.vectors import MemoryPoint


class MemoryNotFound(NotFound):
    """No Tier 3 memory of this id in the scope (PinMemory)."""


class TooManyPins(ResourceExhausted):
    """The scope has ``limits.max_pins`` pins already (PinMemory)."""


def where(scope: Scope) -> str:
    agent = f"agent {scope.agent_id!r}" if scope.agent_id else "no agent"
    return f"user {scope.user_id!r}, {agent}"


def _date(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1_000_000, dt.UTC).strftime("%Y-%m-%d")


def visible(point: MemoryPoint, scope: Scope) -> bool:
    """Whether a pin of ``scope`` may name ``point``: the user's, and the agent's when the
    scope has one (a user's own pin may name any agent's memory, as Recall sees them)."""
    return point.scope.user_id == scope.user_id and (
        not scope.agent_id or point.scope.agent_id == scope.agent_id
    )


@dataclass(frozen=True, slots=True)
class PinnedMemories:
    """The pins of :class:`PinStore` read against Tier 3 (blocking calls: worker threads)."""

    pins: PinStore
    semantic: SemanticStore
    documents: DocumentStore | None = None

    def pin(self, scope: Scope, memory_id: str, pinned: bool, max_pins: int) -> bool:
        """Pin (or unpin) the memory for ``scope``; whether that changed anything. A new pin
        must name a memory of the scope (MemoryNotFound) and fit in ``max_pins``
        (TooManyPins); unpinning needs neither."""
        if pinned and self.pins.get(scope, memory_id) is None:
            if self.pins.count_of(scope) >= max_pins:
                raise TooManyPins(
                    f"{where(scope)} has {max_pins} pins, the limit (limits.max_pins): unpin one"
                )
            if not self.exists(scope, memory_id):
                raise MemoryNotFound(f"memory {memory_id!r} not found ({where(scope)})")
        return self.pins.set(scope, memory_id, pinned)

    def exists(self, scope: Scope, memory_id: str) -> bool:
        """Whether the memory is in Tier 3 within ``scope`` (or is a keyed document of it
        that the weaver has not indexed yet)."""
        _embedder, vectors = self.semantic.wait_ready(0)
        if any(visible(p, scope) for p in vectors.get([memory_id], scope.user_id)):
            return True
        doc = self.documents.find(memory_id) if self.documents is not None else None
        return doc is not None and visible(doc.point(), scope)

    def for_session(self, scope: Scope) -> list[Pinned]:
        """The pinned memories of a session of ``scope``, newest pin first, read from Tier 3
        (a keyed document not indexed yet from its record). Pins whose memory is gone are
        skipped, and deleted (:meth:`_prune`)."""
        pins = self.pins.for_session(scope)
        if not pins:
            return []
        _embedder, vectors = self.semantic.wait_ready(0)
        # the scope's user's shard alone: a pin's memory is its user's (PinMemory checks);
        # one not found there is looked for everywhere before its pin goes (_prune)
        points = {p.id: p for p in vectors.get([p.memory_id for p in pins], scope.user_id)}
        out: list[Pinned] = []
        missing: list[Pin] = []
        for pin in pins:
            point = points.get(pin.memory_id)
            if point is None and self.documents is not None:
                doc = self.documents.find(pin.memory_id)
                point = doc.point() if doc is not None and doc.recalled else None
                if doc is not None and point is None:
                    continue  # a document without text: nothing to show, nothing gone
            if point is None:
                missing.append(pin)
            elif visible(point, pin.scope):
                whose = f"agent {pin.scope.agent_id!r}" if pin.scope.agent_id else "the user"
                why = f"pinned for {whose} on {_date(pin.pinned_at_us)}"
                out.append(Pinned(Candidate(point), why))
        if missing:
            self._prune(missing)
        return out

    def _prune(self, pins: list[Pin]) -> None:
        """Delete the pins whose memory is gone: checked again under Tier 3's write lock, so
        a rebuild (which deletes and writes points again, holding it) is not mistaken for a
        loss; when a writer holds the lock, the pins wait for a later call."""
        if not self.semantic.write_lock.acquire(blocking=False):
            return
        try:
            _embedder, vectors = self.semantic.wait_ready(0)
            found = {p.id for p in vectors.get([p.memory_id for p in pins])}
            gone = [p for p in pins if p.memory_id not in found]
            if self.documents is not None:
                gone = [p for p in gone if self.documents.find(p.memory_id) is None]
            self.pins.delete(gone)
        finally:
            self.semantic.write_lock.release()
