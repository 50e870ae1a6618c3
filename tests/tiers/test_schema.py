"""One owner per column family (``tiers/schema.py``): every family a store opens is declared
by exactly one module and composed into the schema with that owner, every family the schema
names is opened, and no code names a family by a string of its own."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from rocksdict import Rdict

from tests.support import ROOT
from tiers.journal.store import JOURNAL_CFS as JOURNAL_OWN
from tiers.rocks import RocksStore
from tiers.schema import FAMILIES, JOURNAL_CFS, STATE_CFS

PACKAGES = ("tiers", "weaver", "recall", "daemon")
# The RocksStore and Batch methods whose first argument is a column family.
CF_METHODS = {"get", "get_many", "put", "delete", "delete_prefix", "scan", "scan_prefix"}


def _sources() -> dict[str, ast.Module]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "pb" in path.relative_to(ROOT).parts:
                continue
            out[_module(path)] = ast.parse(path.read_text(), str(path))
    return out


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _declared() -> dict[str, list[str]]:
    """Column family name -> the modules assigning it to a module-level ``*_CF`` constant."""
    found: dict[str, list[str]] = {}
    for module, tree in _sources().items():
        for node in tree.body:
            if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
                continue
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.endswith("_CF"):
                    found.setdefault(str(node.value.value), []).append(module)
    return found


def _is_store(node: ast.expr) -> bool:
    """Whether a call's receiver is a RocksDB store or batch (``state``, ``self._jstore``,
    ``batch``, ...), not a dict."""
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return any(word in name.lower() for word in ("state", "store", "batch"))


def test_every_store_family_is_opened_and_owned(tmp_path: Path) -> None:
    """A real state and journal store, opened as the daemon opens them: the families on disk
    are exactly the schema's, and each has an owner module that declares it."""
    for path, names in ((tmp_path / "state", STATE_CFS), (tmp_path / "journal", JOURNAL_CFS)):
        RocksStore(path, names).close()
        on_disk = set(Rdict.list_cf(str(path))) - {"default"}
        assert on_disk == set(names)
    owners = {(cf.store, cf.name): cf.owner for cf in FAMILIES}
    assert len(owners) == len(FAMILIES), "a column family is composed twice"
    for cf in FAMILIES:
        module = importlib.import_module(cf.owner)
        values = [v for k, v in vars(module).items() if k.endswith("_CF") and v == cf.name]
        assert values, f"{cf.owner} does not declare {cf.name!r} (tiers/schema.py says it owns it)"
    assert tuple(JOURNAL_CFS) == tuple(JOURNAL_OWN)


def test_every_declared_family_has_one_owner_in_the_schema() -> None:
    """A ``*_CF`` constant anywhere in the code is a column family: declared once, by the
    module the schema names as its owner. A new store's family left out of
    ``tiers/schema.py`` fails here."""
    declared = _declared()
    schema = {cf.name: cf.owner for cf in FAMILIES}
    for name, modules in declared.items():
        assert len(modules) == 1, f"column family {name!r} is declared in {modules}"
        assert name in schema, f"{modules[0]} declares {name!r}, which tiers/schema.py lacks"
        assert schema[name] == modules[0], f"{name!r}: declared in {modules[0]}, not its owner"
    assert set(schema) <= set(declared), "tiers/schema.py names a family no module declares"


def test_no_family_is_named_by_a_string_literal() -> None:
    """Reads and writes name a family by its owner's constant, never by a string of their
    own (``state.get("extractions", ...)`` would be a second owner)."""
    names = {cf.name for cf in FAMILIES}
    offenders = []
    for module, tree in _sources().items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in CF_METHODS
                and _is_store(node.func.value)
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in names
            ):
                offenders.append(f"{module}:{node.lineno} {node.args[0].value!r}")
    assert offenders == []
