"""litellm's import (tiers.core.models.library): in the background, once, and never in the way
of a second preload. The import is held by a finder of this test's own, so that it can be
caught while it runs."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest

from tiers.core.models import library


class HeldImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``litellm`` as an empty module whose import waits until ``release`` is set."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.imports = 0

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "litellm":
            return None
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec: Any) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        self.imports += 1
        self.started.set()
        assert self.release.wait(60), "the test never released the import"


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldImport]:
    finder = HeldImport()
    real = sys.modules.pop("litellm", None)
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    monkeypatch.setattr(library, "_litellm", None)
    monkeypatch.setattr(library, "_preloading", False)
    try:
        yield finder
    finally:
        finder.release.set()  # no import thread left waiting
        # The empty module goes; the real one, if this process had it, comes back.
        sys.modules.pop("litellm", None)
        if real is not None:
            sys.modules["litellm"] = real


def test_a_second_preload_returns_while_the_first_imports(held: HeldImport) -> None:
    library.preload_litellm()
    assert held.started.wait(30), "the preload did not start the import"
    # The daemon's start asks once per model client (the reranker's, the extractor's): the
    # second must not wait for the import the first started.
    second = threading.Thread(target=library.preload_litellm)
    second.start()
    second.join(30)
    assert not second.is_alive(), "a second preload waited for the import"

    user: list[Any] = []
    caller = threading.Thread(target=lambda: user.append(library.import_litellm()))
    caller.start()
    caller.join(0.2)
    assert caller.is_alive() and not user  # a caller that needs the module waits for it
    held.release.set()
    caller.join(30)
    assert user and user[0].__name__ == "litellm"
    assert user[0].DEFAULT_MAX_RETRIES == 0  # set once the import is done
    assert held.imports == 1
    assert library.import_litellm() is user[0]
