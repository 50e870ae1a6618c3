"""Pins: Tier 3 memories a scope marks to be put first in every context (GetContext), such
as a user's standing instructions.

A pin belongs to a scope: a user with no agent (the pin applies to every session of the
user, whatever its agent) or a user and an agent (to that agent's sessions only). It names a
memory by its Tier 3 id (a fact, a keyed document, a turn, a chunk, a summary, a profile);
the memory itself stays where it is, and GetContext reads it from the vector store at each
call, so a pinned memory's current text is what the context shows. Pins are durable (one
write of the state store before the call returns) and bounded per scope
(``limits.max_pins``, checked by the daemon).

Key layout of the state store (``<data_dir>/state``)::

    pins     <user_id> 0x00 <agent_id> 0x00 <memory_id>  -> {"t": pinned µs}
    pin_ids  <memory_id> 0x00 <user_id> 0x00 <agent_id>  -> b""   (a memory's pins)

Ids contain no control characters, so ``<user_id> 0x00`` is every pin of a user and
``<user_id> 0x00 <agent_id> 0x00`` of one scope (an empty agent: the user's own pins); the
``pin_ids`` entry, written in the same batch, finds the pins of a forgotten memory in every
scope (:meth:`PinStore.forget_into`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
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

PINS_CF = "pins"
PIN_IDS_CF = "pin_ids"
PIN_CFS = (PINS_CF, PIN_IDS_CF)
RECORD_TYPE = "pin"  # in an export file


def scope_prefix(scope: Scope) -> bytes:
    return scope.user_id.encode() + b"\x00" + scope.agent_id.encode() + b"\x00"


@dataclass(frozen=True, slots=True)
class Pin:
    scope: Scope  # an empty agent_id: the user's pin, for every agent
    memory_id: str
    pinned_at_us: int

    @property
    def key(self) -> bytes:
        return scope_prefix(self.scope) + self.memory_id.encode()

    @property
    def id_key(self) -> bytes:
        s = self.scope
        return f"{self.memory_id}\x00{s.user_id}\x00{s.agent_id}".encode()

    def record(self) -> dict[str, Any]:
        """Its export record (:mod:`tiers.rights.archive.format`: ``pin``)."""
        return {
            "type": RECORD_TYPE,
            **scope_fields(self.scope),
            "memory_id": self.memory_id,
            "pinned_at_us": self.pinned_at_us,
        }

    @classmethod
    def decode(cls, key: bytes, raw: bytes) -> Pin:
        user, agent, memory_id = key.split(b"\x00", 2)
        return cls(Scope(user.decode(), agent.decode()), memory_id.decode(), unpack(raw)["t"])


def read_record(d: dict[str, Any], reader: RecordReader) -> Pin:
    """A ``pin`` record of an export file (:meth:`Pin.record`), checked."""
    pin = Pin(reader.scope(d), reader.uuid(d, "memory_id"), reader.micros(d, "pinned_at_us"))
    reader.once(("pin", pin.scope.agent_id, pin.memory_id), f"the pin of {pin.memory_id}")
    return pin


class PinStore(KeyedStore):
    """The pins in the state store; a scoped kind (:class:`tiers.scoped.ScopedKind`)."""

    name = "pins"
    record_type = RECORD_TYPE
    column_families = PIN_CFS
    change_types = {"pin.changed": "memory_id, pinned"}
    read_record = staticmethod(read_record)

    lock = nullcontext()  # a pin of a forgotten memory is refused by the daemon

    def get(self, scope: Scope, memory_id: str) -> Pin | None:
        key = scope_prefix(scope) + memory_id.encode()
        raw = self._state.get(PINS_CF, key)
        return None if raw is None else Pin.decode(key, raw)

    def set(self, scope: Scope, memory_id: str, pinned: bool) -> bool:
        """Pin (or unpin) ``memory_id`` in ``scope``; durable on return. Returns whether
        anything changed (a repeated pin keeps its first time). Raises StoreUnavailable."""
        if (self.get(scope, memory_id) is not None) == pinned:
            return False
        batch = self._state.batch()
        if pinned:
            self._put_into(batch, Pin(scope, memory_id, int(self._clock() * 1_000_000)))
        else:
            self._delete_into(batch, [Pin(scope, memory_id, 0)])
        change = Change(scope, "pin.changed", {"memory_id": memory_id, "pinned": pinned})
        changelog.write(self._state, batch, self.changes, [change])
        return True

    def restore(self, pin: Pin) -> None:
        """Write ``pin`` as it is, its time included (an import)."""
        batch = self._state.batch()
        self._put_into(batch, pin)
        self._state.write(batch)

    @staticmethod
    def _put_into(batch: Batch, pin: Pin) -> None:
        batch.put(PINS_CF, pin.key, pack({"t": pin.pinned_at_us}))
        batch.put(PIN_IDS_CF, pin.id_key, b"")

    def delete(self, pins: Iterable[Pin]) -> None:
        batch = self._state.batch()
        self._delete_into(batch, pins)
        self._state.write(batch)

    def count_of(self, scope: Scope) -> int:
        """The pins of exactly ``scope``."""
        return sum(1 for _ in self._state.scan_prefix(PINS_CF, scope_prefix(scope)))

    def for_session(self, scope: Scope) -> list[Pin]:
        """The pins that apply to a session of ``scope``: the user's own (no agent) and, for
        a session of an agent, that agent's; a memory pinned in both once (the newer pin).
        Newest pin first."""
        found: dict[str, Pin] = {}
        scopes = [Scope(scope.user_id)] + ([scope] if scope.agent_id else [])
        for s in scopes:
            for key, raw in self._state.scan_prefix(PINS_CF, scope_prefix(s)):
                pin = Pin.decode(key, raw)
                old = found.get(pin.memory_id)
                if old is None or old.pinned_at_us < pin.pinned_at_us:
                    found[pin.memory_id] = pin
        return sorted(found.values(), key=lambda p: (-p.pinned_at_us, p.memory_id))

    def of_scope(self, scope: Scope) -> Iterator[Pin]:
        """The pins of ``scope``: of the user and every agent of it when ``agent_id`` is
        empty (as for Forget and Export)."""
        prefix = scope.user_id.encode() + b"\x00"
        if scope.agent_id:
            prefix = scope_prefix(scope)
        for key, raw in self._state.scan_prefix(PINS_CF, prefix):
            yield Pin.decode(key, raw)

    def of_memory(self, memory_id: str) -> list[Pin]:
        """Every pin of ``memory_id``, in any scope."""
        out = []
        for key, _ in self._state.scan_prefix(PIN_IDS_CF, memory_id.encode() + b"\x00"):
            _mid, user, agent = key.decode().split("\x00")
            pin = self.get(Scope(user, agent), memory_id)
            if pin is not None:
                out.append(pin)
        return out

    # -- a scoped kind: Forget, Export, Import, Stats (tiers.scoped) -----------------------------
    def count(self) -> int:
        return self._state.count_keys(PINS_CF)

    def owner(self, memory_id: str) -> Scope | None:
        return None  # a pin names a memory, it is none

    def forget_into(self, batch: Batch, covered: Covered) -> Forgotten:
        """Add to ``batch`` the deletes of the pins of ``covered.scope`` (every agent's when
        its ``agent_id`` is empty) and of the pins of its memory ids, in any scope."""
        scope = covered.scope
        found = {p.key: p for p in self.of_scope(scope)} if scope is not None else {}
        for memory_id in covered.memory_ids:
            found.update((p.key, p) for p in self.of_memory(memory_id))
        self._delete_into(batch, found.values())
        return Forgotten(len(found))

    def export(self, scope: Scope, tombstones: Tombstones) -> Iterator[dict[str, Any]]:
        """The pins of ``scope``, but those of forgotten memories."""
        return (p.record() for p in self.of_scope(scope) if not tombstones.memory(p.memory_id))

    def import_values(
        self,
        values: Sequence[Pin],
        tombstones: Tombstones,
        write_points: Callable[[list[MemoryPoint]], object],
    ) -> int:
        """Write each pin as it is, but those of a memory this daemon has forgotten."""
        kept = [p for p in values if not tombstones.memory(p.memory_id)]
        for pin in kept:
            self.restore(pin)
        return len(kept)

    @staticmethod
    def _delete_into(batch: Batch, pins: Iterable[Pin]) -> None:
        for pin in pins:
            batch.delete(PINS_CF, pin.key)
            batch.delete(PIN_IDS_CF, pin.id_key)
