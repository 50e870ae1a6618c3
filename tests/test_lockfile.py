"""The lock-file check (``python -m tests.support.lockfile``, part of ``make test``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.support.lockfile import LOCK, PYPROJECT, main, mismatches, not_installed, parse_lock

PYPROJECT_TEXT = """
[build-system]
requires = ["setuptools>=77"]
[project]
name = "x"
dependencies = ["grpcio==1.85.1", "numpy>=2,<3", "tomli>=2; python_version < '3.11'"]
[project.optional-dependencies]
dev = ["pytest>=8"]
"""
LOCK_TEXT = """#
#    pip-compile --extra=dev --output-file=deploy/requirements.lock pyproject.toml
#
grpcio==1.85.1
    # via x (pyproject.toml)
numpy==2.4.6
pytest==9.0.1
setuptools==84.2.1
"""


def check(pyproject: str, lock: str) -> list[str]:
    parsed, bad = parse_lock(lock)
    return mismatches(tomllib.loads(pyproject), parsed, bad)


def test_a_matching_lock_passes_and_markers_for_other_pythons_are_ignored() -> None:
    assert check(PYPROJECT_TEXT, LOCK_TEXT) == []


def test_each_kind_of_drift_is_named() -> None:
    assert check(PYPROJECT_TEXT.replace("numpy>=2,<3", "numpy>=3"), LOCK_TEXT) == [
        "numpy>=3 is pinned at 2.4.6, which it does not allow"
    ]
    assert check(PYPROJECT_TEXT.replace('"pytest>=8"', '"pytest>=8", "rich"'), LOCK_TEXT) == [
        "rich is not in the lock"
    ]
    added_extra = PYPROJECT_TEXT + 'mcp = ["grpcio"]\n'
    assert check(added_extra, LOCK_TEXT) == ["the lock was compiled without the extra [mcp]"]
    assert check(PYPROJECT_TEXT, LOCK_TEXT + "httpx>=0.27\n") == ["not an exact pin: 'httpx>=0.27'"]


def test_a_requirement_of_the_other_distribution_is_no_pin_but_its_own_requirements_are() -> None:
    client = '[project]\nname = "x-client"\ndependencies = ["protobuf>=7"]\n'
    daemon = PYPROJECT_TEXT.replace('"grpcio==1.85.1",', '"grpcio==1.85.1", "x-client==0.1.0",')
    parsed, bad = parse_lock(LOCK_TEXT + "protobuf==7.35.1\n")
    assert mismatches(tomllib.loads(daemon), parsed, bad, tomllib.loads(client)) == []
    parsed, bad = parse_lock(LOCK_TEXT)
    assert mismatches(tomllib.loads(daemon), parsed, bad, tomllib.loads(client)) == [
        "protobuf>=7 is not in the lock"
    ]
    assert check(daemon, LOCK_TEXT) == ["x-client==0.1.0 is not in the lock"]  # no sibling


def test_the_environment_is_compared_with_the_lock() -> None:
    lock, _ = parse_lock("packaging==0.0.1\nno-such-package-strata==1.0\n")
    problems = not_installed(lock)
    assert problems[0] == "no-such-package-strata==1.0 is locked but not installed"
    assert problems[1].startswith("packaging is installed at ")


def test_the_projects_lock_matches_its_pyproject(tmp_path: Path, capsys: object) -> None:
    assert main(["--no-installed"]) == 0
    stale = tmp_path / "pyproject.toml"
    stale.write_text(PYPROJECT.read_text().replace('"rocksdict==0.3.29"', '"rocksdict==0.4"'))
    assert main(["--no-installed", "--pyproject", str(stale), "--lock", str(LOCK)]) == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "rocksdict==0.4 is pinned at 0.3.29" in err and "make lock" in err
