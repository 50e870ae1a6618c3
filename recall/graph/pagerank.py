"""Personalized PageRank on a sparse matrix, for the graph channel's walk around the linked
entities.

:class:`Walk` holds a graph's transition matrix (``scipy.sparse``, CSR), built once when the
scope's graph is built (:mod:`recall.graph.memory`); a query's walk is then one sparse
matrix-vector product per iteration, and its result the few nodes of most mass
(:func:`leading`), picked without sorting the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse


@dataclass(frozen=True, slots=True)
class Walk:
    """The random walk over the undirected weighted multigraph ``src[i] - dst[i]``
    (``weight[i]``) on nodes ``0..size-1``: ``matrix[j, i]`` is the probability of a step from
    ``i`` to ``j`` (parallel edges add up, a self-loop counts once), ``dangling`` the nodes
    without an edge."""

    matrix: sparse.csr_array
    dangling: np.ndarray
    size: int

    @classmethod
    def of(cls, size: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> Walk:
        loop = src == dst
        rows = np.concatenate([src, dst[~loop]])
        cols = np.concatenate([dst, src[~loop]])
        w = np.concatenate([weight, weight[~loop]]).astype(np.float64)
        out = np.bincount(rows, weights=w, minlength=size)
        step = w / np.where(out[rows] > 0, out[rows], 1.0)
        matrix = sparse.csr_array((step, (cols, rows)), shape=(size, size))
        matrix.sum_duplicates()
        return cls(matrix, out == 0, size)

    @property
    def nbytes(self) -> int:
        m = self.matrix
        return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes + self.dangling.nbytes)

    def rank(
        self, seeds: np.ndarray, alpha: float = 0.85, tol: float = 1e-6, max_iter: int = 100
    ) -> np.ndarray:
        """PageRank teleporting to (and dangling into) ``seeds`` (normalised; uniform when
        they are all 0).

        The same iteration as ``networkx.pagerank(G, alpha, personalization)``, started from
        the seeds rather than uniform: the same fixed point, and a node the walk cannot reach
        stays at exactly 0. Returns the last iterate when ``max_iter`` is reached."""
        if self.size == 0:
            return np.zeros(0)
        total = float(seeds.sum())
        p = seeds / total if total > 0 else np.full(self.size, 1.0 / self.size)
        teleport = (1.0 - alpha) * p
        dangling = np.flatnonzero(self.dangling)
        x = p.copy()
        change = np.empty_like(x)
        for _ in range(max_iter):
            # alpha * (M x + dangling mass * p) + (1 - alpha) * p, in place
            y = self.matrix @ x
            if len(dangling):
                y += x[dangling].sum() * p
            y *= alpha
            y += teleport
            np.subtract(y, x, out=change)
            x = y
            if float(np.abs(change, out=change).sum()) < self.size * tol:
                break
        return x


def leading(mass: np.ndarray, n: int) -> np.ndarray:
    """The indices of the ``n`` largest positive entries of ``mass``, largest first and ties
    in index order: the first ``n`` of a stable descending argsort less its zeros, at the cost
    of a partition rather than a sort of the whole array (a 200,000-memory scope's sort took
    half its walk's time)."""
    positive = np.flatnonzero(mass > 0)
    if n <= 0:
        return positive[:0]
    if n < len(positive):
        values = mass[positive]
        cut = np.partition(values, len(values) - n)[len(values) - n]  # the n-th largest
        positive = positive[values >= cut]  # ties at the cut included, still in index order
    return positive[np.argsort(-mass[positive], kind="stable")][:n]
