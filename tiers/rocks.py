"""A RocksDB database (``rocksdict`` in raw mode) with named column families.

Keys and values are bytes. Writes go through :meth:`RocksStore.write` with a ``WriteBatch``,
which is atomic across the store's column families; failures surface as
:class:`~tiers.core.errors.StoreUnavailable` so nothing is acknowledged that was not written.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from rocksdict import (
    AccessType,
    Checkpoint,
    ColumnFamily,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from tiers.core.errors import InvalidArgument, StoreUnavailable, TierError
from tiers.space import DiskSpace


class StoreLocked(StoreUnavailable):
    """Another process (or this one) has the store open."""


class InvalidPageToken(TierError, InvalidArgument):
    """The page token was not issued for this listing."""


# All memtables of one store together: past it, RocksDB flushes the largest. Without it each
# of a store's column families may hold up to 64 MiB (its own write buffer) before a flush,
# which under sustained writes shows as RSS growing for a long while.
MEMTABLE_BUDGET_BYTES = 64 * 1024 * 1024
KEYS_BATCH = 8192  # keys a batch of put_keys


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    opts.set_db_write_buffer_size(MEMTABLE_BUDGET_BYTES)
    return opts


class RocksStore:
    """One RocksDB directory. ``ttl_seconds`` opens it as a TTL database: every value written
    expires that long after its write, at compaction."""

    def __init__(
        self,
        path: Path,
        column_families: Sequence[str],
        *,
        sync: bool = False,
        ttl_seconds: int | None = None,
        space: DiskSpace | None = None,
    ) -> None:
        self.path = path
        # The reserve of free space on the disk (tiers.space): checked before every write.
        self.space = space
        path.parent.mkdir(parents=True, exist_ok=True)
        access = AccessType.with_ttl(ttl_seconds) if ttl_seconds else AccessType.read_write()
        try:
            self._db = Rdict(
                str(path),
                options=_options(),
                column_families={name: Options(raw_mode=True) for name in column_families},
                access_type=access,
            )
        except Exception as exc:
            if "lock" in str(exc).lower():
                raise StoreLocked(f"store {path} is in use by another process") from exc
            raise StoreUnavailable(f"cannot open store {path}: {exc}") from exc
        write_options = WriteOptions()
        write_options.sync = sync
        self._db.set_write_options(write_options)
        self._cfs = {name: self._db.get_column_family(name) for name in column_families}
        self._handles = {name: self._db.get_column_family_handle(name) for name in column_families}
        self._closed = False

    def cf(self, name: str) -> Rdict:
        return self._cfs[name]

    def batch(self) -> Batch:
        return Batch(self._handles)

    def write(self, batch: Batch) -> None:
        """Write ``batch`` atomically. Raises DiskFull (below the disk's reserve: nothing
        written) or StoreUnavailable (RocksDB refused it)."""
        if batch.empty:
            return
        if self.space is not None:
            self.space.check(f"a write to the {self.path.name} store")
        try:
            self._db.write(batch.raw)
        except Exception as exc:
            # Disk full, file too large, read-only or failing disk: RocksDB refuses every
            # later write too until the daemon reopens the store (docs/operations.md, Faults).
            raise StoreUnavailable(
                f"the {self.path.name} store cannot be written, nothing was stored: {exc}"
            ) from exc

    def get(self, cf: str, key: bytes) -> bytes | None:
        value: bytes | None = self._cfs[cf].get(key)
        return value

    def get_many(self, cf: str, keys: list[bytes]) -> list[bytes | None]:
        """The values of ``keys`` (None where absent), in one multi-get."""
        if not keys:
            return []
        values = cast(list[bytes | None], self._cfs[cf].get(cast(Any, keys)))
        return values

    def scan(
        self, cf: str, start: bytes, end: bytes | None = None, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Items with ``start <= key < end`` in key order (or reverse order)."""
        ro = ReadOptions()
        if end is not None:
            ro.set_iterate_upper_bound(end)
        # (rocksdict's set_iterate_lower_bound matches nothing in raw mode: bound by hand)
        it = self._cfs[cf].iter(ro)
        if reverse:
            it.seek_to_last()
        else:
            it.seek(start)
        while it.valid():
            key = it.key()
            if reverse and key < start:
                return
            yield key, it.value()
            if reverse:
                it.prev()
            else:
                it.next()

    def scan_prefix(
        self, cf: str, prefix: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        return self.scan(cf, prefix, prefix_end(prefix), reverse=reverse)

    def count_keys(self, cf: str) -> int:
        """The keys of ``cf``, counted on one iterator (values are not read into Python)."""
        it = self._cfs[cf].iter(ReadOptions())
        it.seek_to_first()
        n = 0
        while it.valid():
            n += 1
            it.next()
        return n

    def compact(self) -> None:
        """Flush and compact every column family (a TTL store drops expired entries here).

        Each column family has its own memtable: without its own flush, compaction does not
        see its newest entries."""
        for handle in self._cfs.values():
            handle.flush()
            handle.compact_range(None, None)

    def purge(
        self, column_families: Iterable[str], prefixes: Mapping[str, bytes] | None = None
    ) -> None:
        """Make deletes physical: no byte of a deleted value stays in the store's files.

        Every memtable is flushed, so each write-ahead log written so far holds nothing that is
        not in an SST file and RocksDB deletes it; then ``column_families`` are compacted, so
        the SST files that held the deleted values are rewritten without them. Writes go on
        meanwhile (into a new log). A family given a prefix in ``prefixes`` had its deletes
        under that prefix alone: only the files whose keys span it are compacted."""
        for handle in self._cfs.values():
            handle.flush()
        self._db.flush_wal(True)
        for name in column_families:
            prefix = (prefixes or {}).get(name)
            self._cfs[name].compact_range(prefix, prefix_end(prefix) if prefix else None)

    def flush(self) -> None:
        """Flush every memtable and fsync the WAL."""
        for handle in self._cfs.values():
            handle.flush()
        self._db.flush_wal(True)

    def checkpoint(self, dest: Path) -> None:
        Checkpoint(self._db).create_checkpoint(str(dest))

    def size_on_disk(self) -> int:
        total = 0
        for root, _dirs, files in os.walk(self.path):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.path.getsize(os.path.join(root, name))
        return total

    def put_keys(self, cf: str, keys: Iterable[bytes], done: bytes) -> int:
        """Write ``keys`` into ``cf`` with empty values, then the key ``done`` (which says they
        are all there: an index built over what a store holds). In batches of
        :data:`KEYS_BATCH`: a RocksDB write holds the interpreter throughout. Returns how many
        keys."""
        batch, staged, written = self.batch(), 0, 0
        for key in keys:
            batch.put(cf, key, b"")
            staged += 1
            written += 1
            if staged == KEYS_BATCH:
                self.write(batch)
                batch, staged = self.batch(), 0
        batch.put(cf, done, b"")
        self.write(batch)
        return written

    def close(self) -> None:
        """Idempotent. Column-family handles are closed first, or the LOCK stays held."""
        if self._closed:
            return
        self._closed = True
        for handle in self._cfs.values():
            handle.close()
        self._cfs.clear()
        self._handles.clear()
        self._db.close()


class Batch:
    """An atomic group of writes across a store's column families."""

    def __init__(self, handles: Mapping[str, ColumnFamily]) -> None:
        self.raw = WriteBatch(raw_mode=True)
        self._handles = handles
        self.empty = True

    def put(self, cf: str, key: bytes, value: bytes) -> None:
        self.raw.put(key, value, self._handles[cf])
        self.empty = False

    def delete(self, cf: str, key: bytes) -> None:
        self.raw.delete(key, self._handles[cf])
        self.empty = False

    def delete_prefix(self, cf: str, prefix: bytes) -> None:
        self.raw.delete_range(prefix, prefix_end(prefix), self._handles[cf])
        self.empty = False


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        raise ValueError("a prefix of only 0xff bytes has no upper bound")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def page_token_of(key: bytes) -> str:
    """A listing's page token: the last key of the page, for :func:`page_key` to read back."""
    return base64.urlsafe_b64encode(key).decode()


def page_key(token: str) -> bytes:
    """The key a :func:`page_token_of` token names; raises :class:`InvalidPageToken` when
    ``token`` is no such token."""
    try:
        return base64.urlsafe_b64decode(token.encode())
    except (binascii.Error, ValueError):
        raise InvalidPageToken("page_token is not a token this server issued") from None
