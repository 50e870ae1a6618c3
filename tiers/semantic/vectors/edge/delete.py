"""A delete of the embedded shard's points by filter, a page at a time.

The engine holds the GIL through each of its calls, so a large delete (a user's 200,000 points)
goes a page of :data:`~tiers.semantic.vectors.edge.shard.READ_PAGE` at a time: the page's ids
and sparse vectors are read, the points deleted by id, their terms uncounted, and the shard
flushed every :data:`~tiers.semantic.vectors.edge.shard.DELETE_FLUSH_PAGES` pages.

A delete holds the shard's write lock throughout, so its count and its deletes are one step
for the other writers. A caller :func:`~tiers.core.priority.resting` (an erasure, whose user's
writes wait at Tier 3's door: :mod:`tiers.semantic.erasures`) takes the lock a page at a time
and rests after each: the other users' Recalls get the interpreter, and the writers of the
shard their turn, meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from qdrant_edge import CountRequest, Filter, UpdateOperation

from tiers.core.priority import rest_after, rests
from tiers.semantic.vectors import SPARSE
from tiers.semantic.vectors.edge.shard import DELETE_FLUSH_PAGES, sparse_page

if TYPE_CHECKING:
    from qdrant_edge import EdgeShard, Record

    from tiers.semantic.vectors.edge.builds import EdgeBuilds

DELETE_READS = (f"vector_storage-{SPARSE}", "payload_index", "payload_storage")
"""What a large delete reads, read ahead of it: the pages read (its sparse vectors) and those
its deletes fault (the points' payloads and their index entries). A 200,000-point user of a
shard at 10M, deleted from a cold page cache: the longest hold of the interpreter fell from
102 ms (the sparse vectors alone read ahead) to 26 ms, for 437 MiB read in 0.23 s
(2026-12-04, ``docs/benchmarks.md``)."""

Uncount = Callable[["list[Record]", "list[Any]"], None]
"""Told of each page deleted (its records and their ids), under the write lock."""


def delete_points(live: EdgeBuilds, flt: Filter, uncount: Uncount) -> int:
    """Delete the points of ``live``'s shard that match ``flt``; returns how many there were.
    Raises what :meth:`EdgeBuilds.engine` raises (the store closed, the engine's errors)."""
    with live.write_lock, live.engine("delete"):
        shard = live.current()
        n = shard.count(CountRequest(exact=True, filter=flt))
        if n:
            live.read_ahead(shard, n, DELETE_READS)
        if n and not rests():
            offset: Any = None
            page = 0
            while True:
                records, offset = sparse_page(shard, flt, offset)
                page += 1
                _remove(live, shard, records, page, uncount)
                if offset is None:
                    return n
    return _delete_resting(live, flt, uncount) if n else 0


def _delete_resting(live: EdgeBuilds, flt: Filter, uncount: Uncount) -> int:
    """Each page under the write lock, a rest after it (:func:`~tiers.core.priority.rest_after`).
    A build that swaps the live shard between two pages has replayed the deletes made so far
    into the new one: the scroll starts over there."""
    shard: EdgeShard | None = None
    offset: Any = None
    removed = page = 0
    while True:
        began = time.perf_counter()
        with live.write_lock, live.engine("delete"):
            if live.current() is not shard:
                shard, offset = live.current(), None
            records, offset = sparse_page(shard, flt, offset)
            page += 1
            removed += len(records)
            _remove(live, shard, records, page, uncount)
        if offset is None:
            return removed
        rest_after(began)


def _remove(
    live: EdgeBuilds, shard: EdgeShard, records: list[Record], page: int, uncount: Uncount
) -> None:
    """Delete the scrolled ``records`` by id and tell ``uncount``; flush the shard every
    :data:`DELETE_FLUSH_PAGES` pages. Under the write lock."""
    if not records:
        return
    ids = [r.id for r in records]  # each read of a record's id makes a UUID
    live.apply(UpdateOperation.delete_points(ids))
    uncount(records, ids)
    if page % DELETE_FLUSH_PAGES == 0:
        shard.flush()
