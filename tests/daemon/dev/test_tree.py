"""The project's source files, builds' and caches' left out (daemon.dev.tree)."""

from __future__ import annotations

from pathlib import Path

from daemon.dev.tree import sources


def test_what_a_local_build_leaves_is_not_source(tmp_path: Path) -> None:
    for rel in (
        "pkg/__init__.py",
        "pkg/mod.py",
        "pkg/client/build/lib/pkg/__init__.py",  # pip install ./pkg/client builds here
        "pkg/client/dist/x.py",
        "pkg/__pycache__/mod.py",
        "pkg/client/pkg.egg-info/x.py",
        "pkg/builder/mod.py",  # a name that only starts like one is source
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    found = [p.relative_to(tmp_path).as_posix() for p in sources(tmp_path / "pkg", tmp_path)]
    assert found == ["pkg/__init__.py", "pkg/builder/mod.py", "pkg/mod.py"]
    inits = sources(tmp_path / "pkg", tmp_path, "__init__.py")
    assert [p.relative_to(tmp_path).as_posix() for p in inits] == ["pkg/__init__.py"]
