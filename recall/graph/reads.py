"""What a scope's graph build reads from the vector store: the features of the scope's
memories, either from the listing of all their ids (:func:`listed`, a first build, or after a
write told without its ids) or from the points a few writes touched (:func:`updated`, the
graph kept before them and :mod:`recall.graph.writes`). Both give the rows in the order of
their ids, so a graph updated and one built from the listing are the same graph.

``between`` is called before each page of :data:`READ_PAGE` points read: a build steps aside
there, and stops by raising.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection
from dataclasses import replace

import numpy as np

from recall.graph.features import ID, Features, FeatureTable
from tiers.core.records import Scope
from tiers.semantic.vectors import MemoryPoint, PointFilter, VectorStore, admits

log = logging.getLogger("strata.recall")

READ_PAGE = 64  # points a build reads and decodes, then steps aside for the Recalls served
FALLBACK_KINDS = ("episode_chunk", "fact")  # a scope's memories when it has no turn


def counted(
    scope: Scope, vectors: VectorStore, kinds: tuple[str, ...], inline_reads: int, large_scope: int
) -> int:
    """The memories of ``kinds`` of a scope not built yet (or evicted), by the engine's count (a
    few ms), as a build would read them: exact between ``inline_reads`` and ``large_scope``.
    A scope the engine's estimate puts at twice ``large_scope`` or more is large with no exact
    count (:meth:`~tiers.semantic.vectors.VectorStore.count`: 0.3 ms against 36-45 ms of a
    200,000-point user's first visit; the estimate was a fifth below the count at 1M points,
    so such a scope is large unless the estimate is twice the count)."""
    flt = PointFilter(user_id=scope.user_id, agent_id=scope.agent_id, include_superseded=False)
    asked = kinds
    if "episode_turn" in kinds:
        asked = tuple(dict.fromkeys((*kinds, *FALLBACK_KINDS)))
    rough = vectors.count(replace(flt, kinds=asked), exact=False)
    if rough >= 2 * large_scope:
        return rough
    memories = vectors.count(replace(flt, kinds=asked))
    if memories >= large_scope or memories <= inline_reads:
        return memories
    # The fallback's chunks are read only when there is no turn (a build's): with none, its
    # facts and chunks are: ``memories`` as counted.
    if asked != kinds and vectors.count(replace(flt, kinds=("episode_turn",))):
        return vectors.count(replace(flt, kinds=kinds))
    return memories


class TooManyReads(Exception):
    """A build would read more than it was allowed (its argument: the scope's memories)."""


def current(
    flt: PointFilter,
    vectors: VectorStore,
    known: FeatureTable,
    touched: Collection[str] | None,
    *,
    most: int | None,
    max_points: int,
    between: Callable[[], None],
) -> tuple[FeatureTable, int]:
    """The features of the memories matching ``flt`` now, and how many of ``known``'s are not
    among them. With ``touched`` (the ids the writes since ``known``'s build touched),
    ``known`` is that build's table and only those points are read (:func:`updated`); else,
    or when the result is ``max_points`` or more, or has lost its last turn, they are listed
    (:func:`listed`): a scope with no turn (``episode_turn`` among ``flt.kinds``) takes
    :data:`FALLBACK_KINDS` instead. Raises :class:`TooManyReads` past ``most`` reads."""
    turns = "episode_turn" in flt.kinds
    if touched is not None and (not turns or known.has_kind("episode_turn")):
        if most is not None and len(touched) > most:
            raise TooManyReads(len(known))
        table, removed = updated(flt, vectors, known, touched, between)
        if len(table) < max_points and (not turns or table.has_kind("episode_turn")):
            return table, removed
    reading = functools.partial(
        listed, vectors=vectors, most=most, max_points=max_points, between=between
    )
    table, seen = reading(flt, known=known)
    if turns and not table.has_kind("episode_turn"):
        table, _seen = reading(replace(flt, kinds=FALLBACK_KINDS), known=seen)
    if len(table) >= max_points:
        fields = {"user_id": flt.user_id, "max_points": max_points}
        log.warning("recall.graph_truncated", extra={"fields": fields})
    return table, len(known) - int(np.isin(known.ids, table.ids).sum()) if len(known) else 0


def listed(
    flt: PointFilter,
    vectors: VectorStore,
    known: FeatureTable,
    *,
    most: int | None,
    max_points: int,
    between: Callable[[], None],
) -> tuple[FeatureTable, FeatureTable]:
    """The features of the memories matching ``flt``, in the order of their ids: ``known``'s
    rows, and those of the new ones read from their points (a point deleted between the two
    reads is left out); and ``known`` with the rows read. Raises :class:`TooManyReads` when
    more than ``most`` points would be read."""
    ids = np.sort(np.array(vectors.ids(flt, limit=max_points), dtype=ID))
    at = known.positions(ids)
    new = [bytes(i).decode() for i in ids[at < 0]]
    if most is not None and len(new) > most:
        raise TooManyReads(len(ids))
    if new:
        read = _read(new, flt.user_id, vectors, between)
        known = known.append(FeatureTable.of([(p.id, Features.of(p)) for p in read]))
        at = known.positions(ids)
    return known.take(at[at >= 0]), known


def updated(
    flt: PointFilter,
    vectors: VectorStore,
    table: FeatureTable,
    touched: Collection[str],
    between: Callable[[], None],
) -> tuple[FeatureTable, int]:
    """``table`` (the memories matching ``flt`` before some writes) after writes that
    touched the points ``touched`` and no other: those are read again, and each is in the
    result if it still exists and matches ``flt`` (a fact superseded, a point deleted or of
    another scope is not); and how many of ``table``'s memories are not."""
    if not touched:
        return table, 0
    wanted = sorted(touched)
    rows = [
        (p.id, Features.of(p))
        for p in _read(wanted, flt.user_id, vectors, between)
        if admits(flt, p)
    ]
    kept = table.take(np.flatnonzero(~np.isin(table.ids, np.array(wanted, dtype=ID))))
    merged = kept.append(FeatureTable.of(rows))
    result = merged.take(np.argsort(merged.ids, kind="stable"))
    removed = len(table) - int(np.isin(table.ids, result.ids).sum())
    return result, removed


def _read(
    ids: list[str], user_id: str, vectors: VectorStore, between: Callable[[], None]
) -> list[MemoryPoint]:
    points: list[MemoryPoint] = []
    for start in range(0, len(ids), READ_PAGE):
        between()
        points.extend(vectors.get(ids[start : start + READ_PAGE], user_id))
    return points
