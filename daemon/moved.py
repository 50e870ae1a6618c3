"""The old import paths of the client, kept for one release with a ``DeprecationWarning``.

Until 0.1 the client, its stubs and the framework adapters were ``daemon.client``,
``daemon.pb`` and ``daemon.adapters`` (with ``langgraph_store``), installed by ``pip install
strata``: names other projects hold (``daemon`` is python-daemon's). They are the package
``stratad_client`` now (``stratad_client.pb``, ``stratad_client.integrations``), distributed
as ``stratad-client``. The one step to take: replace the old prefix with the new one
(:data:`MOVES`; ``docs/integrations.md``, "Moving from daemon.client"). Until then,
:func:`install` (run by ``import daemon``) answers an import of an old name with the module of
the new one, and warns.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

# Old prefix -> new, the longest first.
MOVES = (
    ("daemon.adapters.langgraph_store", "stratad_client.integrations.langgraph"),
    ("daemon.adapters", "stratad_client.integrations"),
    ("daemon.client", "stratad_client"),
    ("daemon.pb", "stratad_client.pb"),
)


def new_name(old: str) -> str | None:
    """The module's name since 0.1, or None when ``old`` did not move."""
    for before, after in MOVES:
        if old == before or old.startswith(before + "."):
            return after + old[len(before) :]
    return None


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated since stratad 0.1: import {new} (stratad-client)",
        DeprecationWarning,
        stacklevel=3,
    )


class _Alias(importlib.abc.Loader):
    """An old module's name: the new module itself; an old package's: a package of the old
    name whose attributes are the new package's or its submodules' under their new names
    (``from daemon.adapters import langgraph_store``)."""

    def __init__(self, old: str, new: str) -> None:
        self.old = old
        self.new = new
        self._own: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.new)
        if hasattr(module, "__path__"):
            return self._package(module)
        self._own = module.__spec__
        return module

    def _package(self, target: ModuleType) -> ModuleType:
        old = self.old

        def attribute(name: str) -> object:
            if hasattr(target, name):
                return getattr(target, name)
            moved = new_name(f"{old}.{name}") or f"{target.__name__}.{name}"
            try:
                module = importlib.import_module(moved)
            except ModuleNotFoundError:
                raise AttributeError(f"module {old!r} has no attribute {name!r}") from None
            _warn(f"{old}.{name}", moved)
            return module

        proxy = ModuleType(old, target.__doc__)
        proxy.__path__ = []  # a package: its submodules are found by their old names
        proxy.__getattr__ = attribute  # type: ignore[method-assign]
        return proxy

    def exec_module(self, module: ModuleType) -> None:
        # The new module ran when it was imported; the import system gave it the old name's
        # spec meanwhile: it keeps its own.
        if self._own is not None:
            module.__spec__ = self._own


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds an old name as the module of its new one (the same module object)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        found = importlib.util.find_spec(new)
        if found is None:
            return None  # no such module under the new name either: ModuleNotFoundError
        _warn(fullname, new)
        package = found.submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(fullname, _Alias(fullname, new), is_package=package)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
