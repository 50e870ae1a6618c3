"""Session anchors: one small, always-current record per session that the agent writes (the
task in flight, the plan step, the last decisions, the next step) and GetContext puts first.

An anchor is the deterministic part of a session's context: an agent whose host truncated its
context, or that restarted, reads it back exactly, where a vector search would be too fuzzy.
It is replaced whole on each set (an empty text clears it), durable before the set returns
(one write of the state store, with ``fsync`` when ``sync`` is on) and readable after its
session ended. Sessions are per user (:mod:`tiers.working.session`), so anchors are too.

Key layout of the state store (``<data_dir>/state``)::

    anchors  <user_id> 0x00 <session_id>  -> {"t": text, "a": agent_id, "u": updated µs}

Ids contain no control characters (the daemon validates them), so ``<user_id> 0x00`` is every
anchor of a user: a Forget of the user (or of one of its agents: the value names the agent)
finds them with one prefix scan (:meth:`AnchorStore.forget_into`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from tiers.changes import log as changelog
from tiers.changes.log import Change
from tiers.core.records import Scope, pack, unpack
from tiers.keyed import KeyedStore
from tiers.rocks import Batch
from tiers.scoped import Covered, Forgotten, RecordReader, scope_fields
from tiers.semantic.tombstones import Tombstones
from tiers.semantic.vectors import MemoryPoint

ANCHORS_CF = "anchors"
ANCHOR_CFS = (ANCHORS_CF,)
RECORD_TYPE = "anchor"  # in an export file


def anchor_key(user_id: str, session_id: str) -> bytes:
    return user_id.encode() + b"\x00" + session_id.encode()


@dataclass(frozen=True, slots=True)
class Anchor:
    session_id: str
    scope: Scope  # the session's user and agent
    text: str
    updated_at_us: int

    @property
    def key(self) -> bytes:
        return anchor_key(self.scope.user_id, self.session_id)

    def encode(self) -> bytes:
        return pack({"t": self.text, "a": self.scope.agent_id, "u": self.updated_at_us})

    def record(self) -> dict[str, Any]:
        """Its export record (:mod:`tiers.rights.archive.format`: ``anchor``)."""
        return {
            "type": RECORD_TYPE,
            "session_id": self.session_id,
            **scope_fields(self.scope),
            "text": self.text,
            "updated_at_us": self.updated_at_us,
        }

    @classmethod
    def decode(cls, key: bytes, raw: bytes) -> Anchor:
        user, _, session = key.partition(b"\x00")
        d = unpack(raw)
        return cls(session.decode(), Scope(user.decode(), d["a"]), d["t"], d["u"])


def read_record(d: dict[str, Any], reader: RecordReader) -> Anchor:
    """An ``anchor`` record of an export file (:meth:`Anchor.record`), checked."""
    sid = reader.id(d, "session_id", limit=reader.limits.max_session_id_bytes)
    text = reader.string(d, "text")
    if len(text.encode()) > reader.limits.max_anchor_bytes:
        raise ValueError(f"text is over limits.max_anchor_bytes ({reader.limits.max_anchor_bytes})")
    anchor = Anchor(sid, reader.scope(d), text, reader.micros(d, "updated_at_us"))
    reader.once(("anchor", sid), f"the anchor of session {sid!r}")
    return anchor


class AnchorStore(KeyedStore):
    """The anchors in the state store; a scoped kind (:class:`tiers.scoped.ScopedKind`)."""

    name = "anchors"
    record_type = RECORD_TYPE
    column_families = ANCHOR_CFS
    change_types = {"anchor.set": "session_id, cleared"}
    read_record = staticmethod(read_record)

    lock = nullcontext()  # a set and a Forget of the same anchor: either order holds

    def get(self, user_id: str, session_id: str) -> Anchor | None:
        key = anchor_key(user_id, session_id)
        raw = self._state.get(ANCHORS_CF, key)
        return None if raw is None else Anchor.decode(key, raw)

    def set(self, scope: Scope, session_id: str, text: str) -> tuple[Anchor | None, bool]:
        """Replace the anchor of the session ``session_id`` of ``scope.user_id`` with
        ``text`` (empty: clear it); durable on return. Returns the anchor (None when cleared)
        and whether there was one before. Raises StoreUnavailable (nothing changed)."""
        key = anchor_key(scope.user_id, session_id)
        existed = self._state.get(ANCHORS_CF, key) is not None
        batch = self._state.batch()
        anchor = None
        if text:
            anchor = Anchor(session_id, scope, text, int(self._clock() * 1_000_000))
            batch.put(ANCHORS_CF, key, anchor.encode())
        elif existed:
            batch.delete(ANCHORS_CF, key)
        change = Change(scope, "anchor.set", {"session_id": session_id, "cleared": not text})
        changelog.write(self._state, batch, self.changes, [change] if text or existed else [])
        return anchor, existed

    def restore(self, anchor: Anchor) -> None:
        """Write ``anchor`` as it is, its time included (an import)."""
        batch = self._state.batch()
        batch.put(ANCHORS_CF, anchor.key, anchor.encode())
        self._state.write(batch)

    def of_scope(self, scope: Scope) -> Iterator[Anchor]:
        """The anchors of ``scope``: of every agent of the user when ``agent_id`` is empty."""
        for key, raw in self._state.scan_prefix(ANCHORS_CF, scope.user_id.encode() + b"\x00"):
            anchor = Anchor.decode(key, raw)
            if not scope.agent_id or anchor.scope.agent_id == scope.agent_id:
                yield anchor

    # -- a scoped kind: Forget, Export, Import, Stats (tiers.scoped) -----------------------------
    def count(self) -> int:
        return self._state.count_keys(ANCHORS_CF)

    def owner(self, memory_id: str) -> Scope | None:
        return None  # an anchor is no memory

    def forget_into(self, batch: Batch, covered: Covered) -> Forgotten:
        """Add the deletes of the anchors of ``covered.scope`` (a Forget by scope) to
        ``batch``: an anchor belongs to a session, not to an episode or a memory."""
        if covered.scope is None:
            return Forgotten(0)
        found = list(self.of_scope(covered.scope))
        for anchor in found:
            batch.delete(ANCHORS_CF, anchor.key)
        return Forgotten(len(found))

    def export(self, scope: Scope, tombstones: Tombstones) -> Iterator[dict[str, Any]]:
        return (anchor.record() for anchor in self.of_scope(scope))

    def import_values(
        self,
        values: Sequence[Anchor],
        tombstones: Tombstones,
        write_points: Callable[[list[MemoryPoint]], object],
    ) -> int:
        """Write each anchor as it is, replacing this daemon's anchor of the same session."""
        for anchor in values:
            self.restore(anchor)
        return len(values)
