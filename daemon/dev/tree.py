"""The project's source files as the docs and the layering tests read them: what a local build
or a run leaves in the tree (``pip install ./daemon/client`` builds in ``daemon/client/build/``;
``.gitignore`` lists the same) is not source."""

from __future__ import annotations

from pathlib import Path

LEFT_BY_BUILDS = frozenset({"build", "dist", "__pycache__"})


def is_source(path: Path, root: Path) -> bool:
    """Whether ``path`` (under ``root``) is outside every build's and cache's directory."""
    return not any(
        part in LEFT_BY_BUILDS or part.endswith(".egg-info")
        for part in path.relative_to(root).parts
    )


def sources(top: Path, root: Path, pattern: str = "*.py") -> list[Path]:
    """The files under ``top`` matching ``pattern``, sorted, builds' and caches' left out."""
    return [path for path in sorted(top.rglob(pattern)) if is_source(path, root)]
