"""The bytes that files under a directory hold on disk, searched for words a test wrote: a
forgotten or deleted text must leave none.

Only the ranges the disk holds are read (:func:`tiers.core.sparse.held`): the vector engine's
files are sparse, about 200 MiB apparent per shard for one MiB held, and reading the holes'
zeros made each look through a data dir cost most of a second."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support import wait_until
from tiers.core.sparse import held

PURGE_BOUND = 60.0  # docs/operations.md, Forget: the bytes leave the disk within this


def on_disk(root: Path, needles: list[str]) -> dict[str, list[str]]:
    """Every file under ``root`` that holds one of ``needles``, by its path relative to
    ``root``, with the ones it holds."""
    found: dict[str, list[str]] = {}
    wanted = [(n, n.encode()) for n in needles]
    for folder, _dirs, files in os.walk(root):  # files a purge removes meanwhile are skipped
        for name in files:
            path = Path(folder) / name
            hits: set[str] = set()
            try:
                for data in held(path):
                    hits.update(n for n, raw in wanted if raw in data)
            except FileNotFoundError:
                continue
            if hits:
                found[str(path.relative_to(root))] = [n for n in needles if n in hits]
    return found


def in_logs(root: Path, needles: list[str]) -> list[str]:
    """The RocksDB write-ahead logs under ``root`` (``*.log`` of the state and journal stores)
    that hold one of ``needles``: none once Forget has returned (docs/operations.md, Forget)."""
    logs = (p for p in on_disk(root, needles) if p.endswith(".log"))
    return sorted(p for p in logs if p.startswith(("state/", "journal/")))


def taken(root: Path) -> int:
    """What the files under ``root`` take on disk (their blocks, not their apparent size)."""
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def files_with(root: Path, needle: str | bytes) -> list[str]:
    """The files under ``root`` that hold ``needle``, by their paths relative to it, sorted."""
    text = needle.decode() if isinstance(needle, bytes) else needle
    return sorted(on_disk(root, [text]))


def gone_within(root: Path, needles: list[str], seconds: float = PURGE_BOUND) -> None:
    """Every byte of ``needles`` leaves the files under ``root`` within ``seconds``."""
    left: dict[str, list[str]] = {}

    def gone() -> bool:
        left.clear()
        left.update(on_disk(root, needles))
        return not left

    try:
        wait_until(gone, seconds, interval=0.2)
    except AssertionError:
        raise AssertionError(f"still on disk after {seconds:g} s: {left}") from None
