"""Stored extractions are found by their owner
(``tiers.journal.consolidation.extractions_of``) on a real RocksDB store: the entries written
and deleted with each record, and built once for a store written before them."""

from __future__ import annotations

from pathlib import Path

from tiers.core.records import Scope, pack
from tiers.journal.consolidation import (
    EXTRACTION_OWNERS_CF,
    EXTRACTIONS_CF,
    delete_extraction,
    extractions_of,
    put_extraction,
)
from tiers.rocks import RocksStore
from tiers.schema import KINDS, state_families


def record(scope: Scope | None) -> bytes:
    """A stored extraction as the weaver writes it, with its provenance (or an old one
    without)."""
    ep = {"u": scope.user_id, "a": scope.agent_id} if scope is not None else None
    return pack({"s": "a summary", "f": [], **({"ep": ep} if ep else {})})


def test_a_users_records_are_found_by_owner_and_go_with_their_delete(tmp_path: Path):
    state = RocksStore(tmp_path / "state", state_families(KINDS))
    try:
        batch = state.batch()
        put_extraction(batch, "e1", record(Scope("ann")))
        put_extraction(batch, "e2", record(Scope("ann", "bot")))
        put_extraction(batch, "e3", record(Scope("anne")))  # a longer id with the same start
        put_extraction(batch, "e4", record(None))  # before provenance: no owner
        state.write(batch)
        assert sorted(extractions_of(state, "ann")) == [
            ("e1", Scope("ann")),
            ("e2", Scope("ann", "bot")),
        ]
        batch = state.batch()
        raw = state.get(EXTRACTIONS_CF, b"e2")
        assert raw is not None
        delete_extraction(batch, "e2", raw)
        state.write(batch)
        assert extractions_of(state, "ann") == [("e1", Scope("ann"))]
        assert state.get(EXTRACTIONS_CF, b"e2") is None
    finally:
        state.close()


def test_a_store_written_before_the_owners_entries_gets_them_at_the_first_call(tmp_path: Path):
    state = RocksStore(tmp_path / "state", state_families(KINDS))
    try:
        batch = state.batch()  # as an earlier release wrote them: the record alone
        for i in range(20_000):
            batch.put(EXTRACTIONS_CF, f"e{i}".encode(), record(Scope(f"user-{i % 7}")))
        state.write(batch)
        assert list(state.scan(EXTRACTION_OWNERS_CF, b"")) == []
        found = extractions_of(state, "user-3")
        assert sorted(e for e, _ in found) == sorted(f"e{i}" for i in range(3, 20_000, 7))
        built = sum(1 for _ in state.scan(EXTRACTION_OWNERS_CF, b""))
        assert built == 20_000 + 1  # every record's entry, and the mark that they are all there
        assert len(extractions_of(state, "user-4")) == len(range(4, 20_000, 7))
    finally:
        state.close()
