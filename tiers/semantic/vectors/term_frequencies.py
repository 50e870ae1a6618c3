"""The keyword channel's IDF over the whole embedded store, not over one shard.

The engine can weigh a sparse vector's terms by IDF itself (the ``Idf`` modifier), but it
counts over the points of one shard, and it keeps counting deleted points until its optimizer
rewrites their segment. With Tier 3 in shards, a user's keyword scores then depended on
which users shared its shard (measured: BM25 alone lost 0.7 points of R@10 on LoCoMo,
multi-hop R@10 of the full system 0.8). So the embedded store keeps the document frequencies
itself: its shards store the BM25 term weights without a modifier, every write and delete
updates one :class:`DocumentFrequencies` shared by the shards, and a query's terms are weighed
by :meth:`DocumentFrequencies.weigh` before the engine's dot product. The formula is the
engine's (BM25's IDF, ``ln(1 + (N - n + 0.5) / (n + 0.5))``), so scores are those of one
store with the modifier, exact under deletes.

A sharded store writes the counts at a clean close (:meth:`DocumentFrequencies.keep`,
``<vectors>/term-frequencies``), reads them at its next open instead of a scan and moves the
file aside at once (durably, before any write: it becomes the checkpoint below), so that file
exists only while the store is closed and always counts exactly what it holds. It holds term
ids (hashes) with their counts, and only of terms some point still holds: a term that only
forgotten points held has left the counts with them.

After a crash there is no such file, and the counts are rebuilt from the shards' sparse vectors
(0.3 s per 50k points): a scan of every shard at open kept the store from serving for over four
minutes at ten million points. So they are counted again shard by shard as the shards open
(:meth:`DocumentFrequencies.recount`): until the last is counted, queries are weighed by a
checkpoint (``term-frequencies.checkpoint``: the counts a clean close kept, once taken at the
next open, then the exact counts written at each build round and after each purge; removed by
a purge while the counts are not exact, so no forgotten term outlives a purge in it), or by no
counts at all when there is none. A clean close before the last shard was counted keeps what
the recount has counted and the shards it has left, and the next open goes on from there.
A shard is counted apart (:class:`Tally`) and added whole, so that a daemon's stop can give
its count up between two pages (:meth:`~tiers.semantic.vectors.VectorStore.interrupt`: at ten
million points on a slow disk one shard's count took minutes, and a stop waited for the
weaver's write counting it): the shard is then left for the next open.
"""

from __future__ import annotations

import io
import logging
import math
import threading
import zipfile
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tiers.semantic.vectors import SparseVector, VectorStoreInterrupted
from tiers.semantic.vectors.edge.shard import (
    fsync_dir,
    records_terms,
    replace_durably,
    sparse_pages,
)

if TYPE_CHECKING:
    from qdrant_edge import EdgeShard

log = logging.getLogger("strata.vectors")

__all__ = ["DocumentFrequencies", "Tally"]

_Table = tuple[dict[int, int], int]  # term counts, and the points counted


class Terms(Protocol):
    """One point's sparse vector, for its terms: a
    :class:`~tiers.semantic.vectors.SparseVector` or the engine's own (its indices are
    distinct)."""

    @property
    def indices(self) -> Sequence[int]: ...


class DocumentFrequencies:
    """How many points hold each term (``n``) and how many points hold a sparse vector
    (``N``), over every shard of a store. Thread-safe; the shards' writers call :meth:`add`
    and :meth:`remove` under their own write locks, queries call :meth:`weigh`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._checkpointing = threading.Lock()
        self._counts: dict[int, int] = {}
        self._points = 0
        # While a recount runs: the counts of the shards counted so far (with every change
        # since), and the shards not counted yet.
        self._fresh: dict[int, int] | None = None
        self._fresh_points = 0
        self._uncounted: set[int] = set()

    @property
    def exact(self) -> bool:
        """Whether the counts are exact: False while a :meth:`recount` runs."""
        return self._fresh is None

    @property
    def points(self) -> int:
        """Points with a sparse vector (``N``)."""
        return self._points

    def count(self, term: int) -> int:
        """Points whose sparse vector holds ``term`` (``n``)."""
        return self._counts.get(term, 0)

    def add(self, vectors: Iterable[Terms]) -> None:
        """Count the points of ``vectors`` (each one point's sparse vector)."""
        self._update(vectors, 1)

    def remove(self, vectors: Iterable[Terms]) -> None:
        """Stop counting the points of ``vectors``, each added before (a count never goes
        below zero)."""
        self._update(vectors, -1)

    def count_opened(self, tally: Tally) -> None:
        """Count the points of a shard being opened, tallied whole: into the counts a
        :meth:`recount` rebuilds while it runs, else as :meth:`add`."""
        with self._lock:
            self._apply(tally, 1, live=self._fresh is None)

    def recount(
        self, shards: Iterable[int], checkpoint: Path | None, counted: _Table = ({}, 0)
    ) -> None:
        """Count again, shard by shard: each of ``shards`` is counted as it opens
        (:meth:`count_opened`, then :meth:`counted`), added to ``counted`` (the other shards'
        counts: none after a crash; what a close kept before its recount was done). Until the
        last one is, the counts are those at ``checkpoint`` (:meth:`checkpoint`; else
        ``counted``), moved by every change meanwhile; then they are the exact sums."""
        pending = set(shards)
        found = bool(pending) and checkpoint is not None and self.load(checkpoint)
        with self._lock:
            if not found:
                self._counts, self._points = dict(counted[0]), counted[1]
            if pending:
                self._fresh, self._fresh_points = dict(counted[0]), counted[1]
                self._uncounted = pending
        if pending:
            log.warning(
                "vectors.term_frequencies_recount",
                extra={"fields": {"shards": len(pending), "checkpoint": found}},
            )

    def checkpoint(self, path: Path, *, deleted: bool = False) -> None:
        """Write the counts to ``path`` (:meth:`keep`) for a :meth:`recount` after a crash.
        When they cannot be written (not exact yet, or the disk refused), an older file stays,
        unless points were ``deleted`` since: then it is removed, so that no term of a
        deleted point stays in it. Raises ``OSError`` when it cannot be removed."""
        # One at a time (a build round's and a purge's, on two threads): they would share
        # the temporary file, and an older one's counts could land after a newer one's.
        with self._checkpointing:
            if not self.keep(path) and deleted:
                path.unlink(missing_ok=True)

    def uncounted(self, shard: int) -> bool:
        """Whether a :meth:`recount` has yet to count ``shard``."""
        with self._lock:
            return shard in self._uncounted

    def counted(self, shard: int) -> None:
        """``shard`` was counted (:meth:`count_opened`); after the last one, the counts are
        exact."""
        with self._lock:
            self._uncounted.discard(shard)
            if self._fresh is None or self._uncounted:
                return
            self._counts, self._points = self._fresh, self._fresh_points
            self._fresh = None
        terms = len(self._counts)
        log.info("vectors.term_frequencies_recounted", extra={"fields": {"terms": terms}})

    def add_counts(self, other: DocumentFrequencies) -> None:
        """Count also what ``other`` counts (the points of other shards)."""
        with other._lock:
            counts, points = dict(other._counts), other._points
        with self._lock:
            self._points += points
            for term, n in counts.items():
                self._counts[term] = self._counts.get(term, 0) + n

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._points = 0
            self._fresh, self._uncounted = None, set()

    def keep(self, path: Path, *, unfinished: bool = False) -> bool:
        """Write the counts to ``path``, durably (a temporary file fsynced, then renamed), for
        :meth:`take` or :meth:`load`; False when that failed, which is logged (the next open
        counts), or when they are not :attr:`exact` (nothing is written). With
        ``unfinished``, a recount under way is written instead: what it has counted and the
        shards left, which :meth:`take` resumes (a close before it was done)."""
        with self._lock:
            table, total, left = self._counts, self._points, sorted(self._uncounted)
            if self._fresh is not None:
                if not unfinished:
                    return False
                table, total = self._fresh, self._fresh_points
            size = len(table)
            terms = np.fromiter(table.keys(), dtype=np.int64, count=size)
            counts = np.fromiter(table.values(), dtype=np.int64, count=size)
            points = np.array([total], dtype=np.int64)
            uncounted = np.array(left, dtype=np.int64)
        data = io.BytesIO()
        np.savez(data, terms=terms, counts=counts, points=points, uncounted=uncounted)
        try:
            replace_durably(path, data.getvalue())
        except OSError as exc:
            log.warning(
                "vectors.term_frequencies_unsaved",
                extra={"fields": {"file": str(path), "error": str(exc)}},
            )
            return False
        return True

    def take(self, path: Path, checkpoint: Path | None = None, *, resume: bool = True) -> bool:
        """Take the counts :meth:`keep` wrote to ``path`` in place of these (:meth:`load`),
        and delete the file or make it the ``checkpoint``, durably, so a crash after any later
        write leaves no ``path``. A file of a recount not done (``keep(..., unfinished=True)``)
        resumes it (:meth:`recount` of the shards it had left) and is deleted; without
        ``resume`` (its shards were moved since) it is only deleted, and False returned.
        Raises ``OSError`` when the file cannot be moved or deleted."""
        read = self._read(path)
        if read is None:
            return False
        table, total, left = read
        if left or checkpoint is None:
            path.unlink()
        else:
            path.replace(checkpoint)
        fsync_dir(path.parent)
        if left and not resume:
            return False
        if left:
            self.recount(left, checkpoint, (table, total))
        else:
            with self._lock:
                self._counts, self._points = table, total
        return True

    def load(self, path: Path) -> bool:
        """Take the counts :meth:`keep` wrote to ``path`` in place of these; the file stays.
        False, with the counts unchanged, when there is no file, it cannot be read (which is
        logged, and the file deleted) or it holds an unfinished recount."""
        read = self._read(path)
        if read is None or read[2]:
            return False
        with self._lock:
            self._counts, self._points = read[0], read[1]
        return True

    def _read(self, path: Path) -> tuple[dict[int, int], int, list[int]] | None:
        """The counts, points and shards left uncounted in ``path`` (:meth:`keep`); None
        when there is no file or it cannot be read (logged, and the file deleted)."""
        path.with_name(path.name + ".tmp").unlink(missing_ok=True)  # a keep a crash cut short
        try:
            with np.load(path) as doc:
                terms, counts, points = doc["terms"], doc["counts"], doc["points"]
                if terms.shape != counts.shape or points.shape != (1,):
                    raise ValueError(f"arrays of {terms.shape}, {counts.shape}, {points.shape}")
                left = doc["uncounted"].tolist() if "uncounted" in doc.files else []
                return dict(zip(terms.tolist(), counts.tolist(), strict=True)), int(points[0]), left
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            log.warning(
                "vectors.term_frequencies_unreadable",
                extra={"fields": {"file": str(path), "error": str(exc)}},
            )
            path.unlink(missing_ok=True)
            return None

    def weigh(self, query: SparseVector) -> SparseVector:
        """``query`` with each term's weight multiplied by its IDF."""
        with self._lock:
            total = self._points
            counts = [self._counts.get(term, 0) for term in query.indices]
        values = [v * _idf(total, n) for v, n in zip(query.values, counts, strict=True)]
        return SparseVector(indices=list(query.indices), values=values)

    def _update(self, vectors: Iterable[Terms], sign: int) -> None:
        """Move the counts queries read and, during a recount, the ones it rebuilds by
        ``sign`` for each of ``vectors``."""
        tally = Tally()
        tally.add(vectors)
        with self._lock:
            self._apply(tally, sign, live=True)

    def _apply(self, tally: Tally, sign: int, *, live: bool) -> None:
        """Move the counts (``live``: the ones queries read) and, during a recount, the ones
        it rebuilds by ``sign`` times ``tally`` (self._lock held)."""
        points = sign * tally.points
        if live:
            self._points = _moved(self._counts, tally.terms, sign, self._points + points)
        if self._fresh is not None:
            self._fresh_points = _moved(self._fresh, tally.terms, sign, self._fresh_points + points)


class Tally:
    """The terms of one shard's points, counted apart from the store's counts while the shard
    opens and added to them in one step once it is all counted
    (:meth:`DocumentFrequencies.count_opened`): a count given up halfway (a stop) leaves
    them as they were, and the shard to count again."""

    def __init__(self) -> None:
        self.terms: Counter[int] = Counter()
        self.points = 0

    def add(self, vectors: Iterable[Terms]) -> None:
        """Count the points of ``vectors`` (each one point's sparse vector)."""
        points = 0

        def terms(vector: Terms) -> Iterable[int]:
            nonlocal points
            points += 1
            return vector.indices  # a sparse vector's indices are distinct

        self.terms.update(chain.from_iterable(map(terms, vectors)))
        self.points += points

    @classmethod
    def of_shard(cls, shard: EdgeShard, interrupted: threading.Event, path: Path) -> Tally:
        """The terms of every point of the engine's ``shard`` (at ``path``), read a page at a
        time. Raises :class:`~tiers.semantic.vectors.VectorStoreInterrupted` between two
        pages once ``interrupted`` is set (the store is stopping)."""
        tally = cls()
        for records in sparse_pages(shard):
            if interrupted.is_set():
                raise VectorStoreInterrupted(
                    f"the vector store at {path} is stopping: its keyword terms are counted"
                    " when it next opens"
                )
            tally.add(records_terms(records))
        return tally


def _moved(counts: dict[int, int], delta: Counter[int], sign: int, points: int) -> int:
    """Move ``counts`` by ``sign`` times ``delta`` (dropping terms at zero); returns ``points``
    floored at zero."""
    for term, d in delta.items():
        n = counts.get(term, 0) + sign * d
        if n > 0:
            counts[term] = n
        else:
            counts.pop(term, None)
    return max(0, points)


def _idf(total: int, n: int) -> float:
    """BM25's IDF as the engine computes it (its ``Idf`` modifier)."""
    return math.log(1.0 + (total - n + 0.5) / (n + 0.5))
