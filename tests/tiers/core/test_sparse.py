"""Sparse files (tiers.core.sparse): a copy keeps the bytes and leaves the zeros as holes, and
a read of what the disk holds skips the holes without reading them."""

from __future__ import annotations

from pathlib import Path

from tiers.core import sparse


def _sparse_file(path: Path) -> None:
    with path.open("wb") as f:
        f.write(b"head" + b"\0" * 70_000 + b"middle")
        f.seek(5 << 20)
        f.write(b"tail")
        f.truncate(9 << 20)  # ends in a hole


def test_a_copy_keeps_the_bytes_and_leaves_the_zeros_as_holes(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _sparse_file(src)
    sparse.copy_file(src, dst)
    assert dst.read_bytes() == src.read_bytes()
    assert dst.stat().st_size == 9 << 20
    assert dst.stat().st_blocks * 512 < 1 << 20
    # the source's holes are skipped unread: a copy costs what the disk holds
    with src.open("rb") as f:
        ranges = sparse.data_ranges(f.fileno())
    assert ranges[0][0] == 0 and any(start <= 5 << 20 < end for start, end in ranges)
    assert sum(end - start for start, end in ranges) < 2 << 20


def test_a_tree_copy_keeps_every_files_holes(tmp_path):
    (tmp_path / "src" / "deep").mkdir(parents=True)
    _sparse_file(tmp_path / "src" / "deep" / "a")
    (tmp_path / "src" / "b").write_bytes(b"plain")
    sparse.copy_tree(tmp_path / "src", tmp_path / "dst")
    copied = tmp_path / "dst" / "deep" / "a"
    assert copied.read_bytes() == (tmp_path / "src" / "deep" / "a").read_bytes()
    assert copied.stat().st_blocks * 512 < 1 << 20
    assert (tmp_path / "dst" / "b").read_bytes() == b"plain"


def test_what_the_disk_holds_is_every_byte_but_the_holes(tmp_path):
    path = tmp_path / "f"
    _sparse_file(path)
    parts = list(sparse.held(path))
    joined = b"".join(parts)
    assert b"head" in joined and b"middle" in joined and b"tail" in joined
    assert len(joined) < 2 << 20  # the hole before "tail" and the one at the end: not read
    assert (tmp_path / "empty").write_bytes(b"") == 0
    assert list(sparse.held(tmp_path / "empty")) == []


def test_a_files_data_size_leaves_its_holes_out(tmp_path):
    path = tmp_path / "f"
    _sparse_file(path)
    assert sparse.data_size(path) == len(b"".join(sparse.held(path))) < 2 << 20
    (tmp_path / "plain").write_bytes(b"x" * 5000)
    assert sparse.data_size(tmp_path / "plain") == 5000
