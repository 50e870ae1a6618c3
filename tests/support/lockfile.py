"""Check that ``deploy/requirements.lock`` matches the two ``pyproject.toml`` files (the
daemon's, ``stratad``, and the client's, ``daemon/client/``) and the installed venv.

Run as ``python -m tests.support.lockfile`` (``make test`` does, before the linters). It fails,
saying what is wrong and how to refresh the lock (``make lock``), when:

- a requirement of either ``pyproject.toml`` (dependencies, every optional extra, build-system
  requires) is missing from the lock, or pinned at a version its specifier refuses (the
  daemon's requirement of the client aside: both are built from this repository);
- the lock was compiled without one of the project's extras;
- a line of the lock is not an exact ``name==version`` pin;
- with ``--installed`` (the default): a locked package is missing from this environment or
  installed at another version, so the tests would run other code than the lock names.

The lock is written by pip-tools (``make lock``); see ``docs/operations.md``.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "deploy" / "requirements.lock"
PYPROJECT = ROOT / "pyproject.toml"
CLIENT_PYPROJECT = ROOT / "daemon" / "client" / "pyproject.toml"
REFRESH = "refresh it with `make lock` (docs/operations.md, 'Dependencies and the lock file')"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*(?:#.*)?$")


@dataclass(frozen=True)
class Lock:
    pins: dict[str, Version]
    extras: frozenset[str]  # the --extra options recorded in the header


def parse_lock(text: str) -> tuple[Lock, list[str]]:
    """The pins and the extras the lock was compiled with; plus the lines that are not pins."""
    pins: dict[str, Version] = {}
    extras: set[str] = set()
    bad: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            extras.update(re.findall(r"--extra[= ]([A-Za-z0-9_.-]+)", line))
            continue
        if not line or raw.startswith((" ", "\t")):
            continue
        match = _PIN.match(line)
        if match is None:
            bad.append(line)
            continue
        pins[canonicalize_name(match.group(1))] = Version(match.group(2))
    return Lock(pins, frozenset(extras)), bad


def project_requirements(pyproject: dict[str, Any]) -> tuple[list[Requirement], set[str]]:
    """Every requirement the project declares, and the names of its optional extras."""
    project = pyproject["project"]
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    lines = list(project.get("dependencies", []))
    for group in optional.values():
        lines += group
    lines += pyproject.get("build-system", {}).get("requires", [])
    return [Requirement(line) for line in lines], set(optional)


def mismatches(
    pyproject: dict[str, Any], lock: Lock, bad_lines: list[str], *others: dict[str, Any]
) -> list[str]:
    """What is wrong with ``lock`` for ``pyproject`` and the ``others`` of the repository (a
    requirement of one of them by another is no pin of the lock)."""
    problems = [f"not an exact pin: {line!r}" for line in bad_lines]
    requirements, extras = [], set()
    for project in (pyproject, *others):
        found, named = project_requirements(project)
        requirements += found
        extras |= named
    own = {canonicalize_name(p["project"]["name"]) for p in (pyproject, *others)}
    for extra in sorted(extras - lock.extras):
        problems.append(f"the lock was compiled without the extra [{extra}]")
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if canonicalize_name(req.name) in own:
            continue
        pinned = lock.pins.get(canonicalize_name(req.name))
        if pinned is None:
            problems.append(f"{req} is not in the lock")
        elif not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req} is pinned at {pinned}, which it does not allow")
    return problems


def not_installed(lock: Lock) -> list[str]:
    problems = []
    for name, version in sorted(lock.pins.items()):
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            problems.append(f"{name}=={version} is locked but not installed")
            continue
        if installed != version:
            problems.append(f"{name} is installed at {installed}, the lock says {version}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.lockfile", description=__doc__)
    parser.add_argument("--lock", type=Path, default=LOCK)
    parser.add_argument("--pyproject", type=Path, default=PYPROJECT)
    parser.add_argument("--client-pyproject", type=Path, default=CLIENT_PYPROJECT)
    parser.add_argument(
        "--no-installed", action="store_true", help="do not compare the lock with this venv"
    )
    args = parser.parse_args(argv)
    if not args.lock.exists():
        print(f"{args.lock} is missing: {REFRESH}", file=sys.stderr)
        return 1
    lock, bad = parse_lock(args.lock.read_text())
    problems = mismatches(
        tomllib.loads(args.pyproject.read_text()),
        lock,
        bad,
        tomllib.loads(args.client_pyproject.read_text()),
    )
    if problems:
        print(f"{args.lock.name} does not match pyproject.toml; {REFRESH}:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    if not args.no_installed:
        drift = not_installed(lock)
        if drift:
            print(
                f"this environment differs from {args.lock.name}; reinstall it "
                "(`make clean` then `make test`), or refresh the lock:",
                file=sys.stderr,
            )
            for problem in drift:
                print(f"  - {problem}", file=sys.stderr)
            return 1
    print(f"{args.lock.name}: {len(lock.pins)} pins match pyproject.toml and this environment")
    return 0


if __name__ == "__main__":
    sys.exit(main())
