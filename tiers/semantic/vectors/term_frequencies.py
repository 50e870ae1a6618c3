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

The counts are rebuilt from the shards' sparse vectors when the store opens (0.3 s per 50k
points), unless the store was closed cleanly: a sharded store then writes them at close
(:meth:`DocumentFrequencies.save`, ``<vectors>/term-frequencies``), reads them at its next
open instead of the scan and deletes the file at once (durably, before any write), so a
file exists only while the store is closed and always counts exactly what it holds. It
holds term ids (hashes) with their counts, and only of terms some point still holds: a term
that only forgotten points held has left the counts with them.
"""

from __future__ import annotations

import io
import logging
import math
import threading
import zipfile
from collections import Counter
from collections.abc import Iterable
from itertools import chain
from pathlib import Path

import numpy as np

from tiers.semantic.vectors import SparseVector
from tiers.semantic.vectors.edge_shard import fsync_dir, replace_durably

log = logging.getLogger("strata.vectors")

__all__ = ["DocumentFrequencies"]


class DocumentFrequencies:
    """How many points hold each term (``n``) and how many points hold a sparse vector
    (``N``), over every shard of a store. Thread-safe; the shards' writers call :meth:`add`
    and :meth:`remove` under their own write locks, queries call :meth:`weigh`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[int, int] = {}
        self._points = 0

    @property
    def points(self) -> int:
        """Points with a sparse vector (``N``)."""
        return self._points

    def count(self, term: int) -> int:
        """Points whose sparse vector holds ``term`` (``n``)."""
        return self._counts.get(term, 0)

    def add(self, vectors: Iterable[SparseVector]) -> None:
        """Count the points of ``vectors`` (each one point's sparse vector)."""
        self._update(vectors, 1)

    def remove(self, vectors: Iterable[SparseVector]) -> None:
        """Stop counting the points of ``vectors``, each added before (a count never goes
        below zero)."""
        self._update(vectors, -1)

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

    def keep(self, path: Path) -> bool:
        """Write the counts to ``path``, durably (a temporary file fsynced, then renamed), for
        :meth:`take`; False when that failed, which is logged (the next open counts)."""
        with self._lock:
            size = len(self._counts)
            terms = np.fromiter(self._counts.keys(), dtype=np.int64, count=size)
            counts = np.fromiter(self._counts.values(), dtype=np.int64, count=size)
            points = np.array([self._points], dtype=np.int64)
        data = io.BytesIO()
        np.savez(data, terms=terms, counts=counts, points=points)
        try:
            replace_durably(path, data.getvalue())
        except OSError as exc:
            log.warning(
                "vectors.term_frequencies_unsaved",
                extra={"fields": {"file": str(path), "error": str(exc)}},
            )
            return False
        return True

    def take(self, path: Path) -> bool:
        """Take the counts :meth:`keep` wrote to ``path`` in place of these, and delete the
        file (durably, so a crash after any later write leaves none). False, with the counts
        unchanged, when there is no file or it cannot be read (which is logged). Raises
        ``OSError`` when the file cannot be deleted."""
        path.with_name(path.name + ".tmp").unlink(missing_ok=True)  # a keep a crash cut short
        try:
            with np.load(path) as doc:
                terms, counts, points = doc["terms"], doc["counts"], doc["points"]
                if terms.shape != counts.shape or points.shape != (1,):
                    raise ValueError(f"arrays of {terms.shape}, {counts.shape}, {points.shape}")
                table = dict(zip(terms.tolist(), counts.tolist(), strict=True))
                total = int(points[0])
        except FileNotFoundError:
            return False
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            log.warning(
                "vectors.term_frequencies_unreadable",
                extra={"fields": {"file": str(path), "error": str(exc)}},
            )
            path.unlink(missing_ok=True)
            return False
        path.unlink()
        fsync_dir(path.parent)
        with self._lock:
            self._counts = table
            self._points = total
        return True

    def weigh(self, query: SparseVector) -> SparseVector:
        """``query`` with each term's weight multiplied by its IDF."""
        with self._lock:
            total = self._points
            counts = [self._counts.get(term, 0) for term in query.indices]
        values = [v * _idf(total, n) for v, n in zip(query.values, counts, strict=True)]
        return SparseVector(indices=list(query.indices), values=values)

    def _update(self, vectors: Iterable[SparseVector], sign: int) -> None:
        points = 0

        def terms(vector: SparseVector) -> Iterable[int]:
            nonlocal points
            points += 1
            return vector.indices  # a sparse vector's indices are distinct

        delta = Counter(chain.from_iterable(map(terms, vectors)))
        with self._lock:
            self._points = max(0, self._points + sign * points)
            for term, d in delta.items():
                n = self._counts.get(term, 0) + sign * d
                if n > 0:
                    self._counts[term] = n
                else:
                    self._counts.pop(term, None)


def _idf(total: int, n: int) -> float:
    """BM25's IDF as the engine computes it (its ``Idf`` modifier)."""
    return math.log(1.0 + (total - n + 0.5) / (n + 0.5))
