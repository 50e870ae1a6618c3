"""docs/architecture.md's tables, checked against the code so that they cannot drift: the
packages (each subpackage in a row, every module a row names present; the floors are checked in
``tests/test_layering.py``) and the column families of both RocksDB stores. The list of every
module is generated (``docs/modules.md``, ``python -m daemon.dev.docgen``, checked in test_docs)."""

from __future__ import annotations

import re

import pytest

from daemon.dev.docgen import GENERATED, PACKAGES
from daemon.dev.tree import sources
from tests.support import ROOT
from tiers.journal.store import JOURNAL_CFS
from tiers.schema import STATE_CFS

DOC = ROOT / "docs" / "architecture.md"


def _section(heading: str) -> list[str]:
    """The table rows (``| ...``) under ``heading`` up to the next heading."""
    lines = DOC.read_text().splitlines()
    start = lines.index(heading) + 1
    rows = []
    for line in lines[start:]:
        if line.startswith("#"):
            break
        if line.startswith("| `"):
            rows.append(line)
    assert rows, f"no table under {heading!r}"
    return rows


def _first_cells(heading: str) -> set[str]:
    return {re.match(r"\| `([^`]+)`", row).group(1) for row in _section(heading)}  # type: ignore[union-attr]


def _package_rows() -> dict[str, tuple[str, str]]:
    """package dir -> (floor cell, what-it-holds cell)."""
    out = {}
    for row in _section("## Packages"):
        cells = [c.strip() for c in row.strip("|").split("|")]
        out[cells[0].strip("`").rstrip("/")] = (cells[1], cells[2])
    return out


def _python_packages() -> list[str]:
    """Every package dir of the four packages, relative to the root (``tiers/semantic/vectors``
    ...),
    generated stubs aside (named in the daemon's row as ``pb/``)."""
    found = []
    for top in PACKAGES:
        for init in sources(ROOT / top, ROOT, "__init__.py"):
            rel = init.parent.relative_to(ROOT).as_posix()
            if not any(rel == n or rel.startswith(n + "/") for n in GENERATED):
                found.append(rel)
    return found


def test_the_state_store_table_lists_exactly_its_column_families() -> None:
    assert _first_cells("### `state/`") == set(STATE_CFS)


def test_the_journal_table_lists_exactly_its_column_families() -> None:
    assert _first_cells("### `journal/`") == set(JOURNAL_CFS)


@pytest.mark.parametrize("package", _python_packages())
def test_each_package_has_a_row_and_the_modules_its_row_names_exist(package: str) -> None:
    rows = _package_rows()
    owner = package
    while owner not in rows:  # a subpackage without a row of its own: its parent's row
        assert "/" in owner, f"{package}/ has no row in docs/architecture.md"
        owner = owner.rsplit("/", 1)[0]
    text = rows[owner][1]
    if owner != package:
        sub = package[len(owner) + 1 :]
        assert f"`{sub}/`" in text, f"{package}/ is not named in the row of {owner}/"
        return
    modules = {p.name for p in (ROOT / package).glob("*.py")}
    named = set(re.findall(r"`([a-z_]+\.py)`", text))
    assert named <= modules, f"named in the row of {owner}/ but absent: {named - modules}"
