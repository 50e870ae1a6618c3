"""Personalized PageRank on a sparse matrix, for the graph channel's walk around the linked
entities.

:class:`Walk` holds a graph's transition matrix (``scipy.sparse``, CSR), built once when the
scope's graph is built (:mod:`recall.graph.memory`); a query's walk is then one sparse
matrix-vector product per iteration, and its result the few nodes of most mass
(:func:`leading`), picked without sorting the rest. A large graph's product is shared with a
helper thread when one is given (its rows in two halves: scipy lets the interpreter go while it
multiplies, so the two run on two cores), and computed by the caller alone when the helper is
busy or closed. A large graph's first step is taken from the seeds' own edges
(:meth:`Walk.spread`): the seeds are a query's few nodes, and a product would read every edge.
"""

from __future__ import annotations

import operator
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
from scipy import sparse

SPLIT_NONZEROS = 100_000
"""The non-zeros from which a walk's product is shared with a helper thread: below, one
product takes less time than a handoff to another thread (about 0.3 ms at 100,000 here). From
it too, a walk's first step is taken from its seeds' edges when they are few
(:data:`SPREAD_SHARE`): below, a product is quicker (10,000 non-zeros: 0.011 ms, against
0.019 ms for seeds' rows of 0.5 % of them; 100,000: 0.118 against 0.025 ms, 2026-12-05)."""

SPREAD_SHARE = 10
"""A large walk's first step is read from its seeds' rows (:meth:`Walk.spread`) when they hold
less than 1 / ``SPREAD_SHARE`` of the graph's non-zeros: past that, one product is quicker
(1.7 million non-zeros: a product 2.1-2.3 ms; the seeds' rows 0.13 ms at 0.5 % of them, 1.9 ms
at 10 %, 6.3 ms at 25 %; 2026-12-05). A query's seeds held 2-4 % of the large user's graph."""


@dataclass(frozen=True, slots=True)
class Walk:
    """The random walk over the undirected weighted multigraph ``src[i] - dst[i]``
    (``weight[i]``) on nodes ``0..size-1``: ``matrix[j, i]`` is the probability of a step from
    ``i`` to ``j`` (parallel edges add up, a self-loop counts once), ``degree`` each node's
    weighted degree (0: a dangling node, without an edge), ``halves`` the matrix's rows in two
    blocks of about equal non-zeros, sharing its arrays (for a graph of
    :data:`SPLIT_NONZEROS` or more)."""

    matrix: sparse.csr_array
    degree: np.ndarray
    size: int
    halves: tuple[sparse.csr_array, sparse.csr_array] | None = None

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
        return cls(matrix, out, size, _halves(matrix))

    @property
    def dangling(self) -> np.ndarray:
        """Whether each node is dangling (has no edge)."""
        return self.degree == 0

    @property
    def nbytes(self) -> int:
        m = self.matrix
        own = sum(h.indptr.nbytes for h in self.halves or ())  # the rest is the matrix's
        return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes + self.degree.nbytes + own)

    def rank(
        self,
        seeds: np.ndarray,
        alpha: float = 0.85,
        tol: float = 1e-6,
        max_iter: int = 100,
        helper: Executor | None = None,
    ) -> np.ndarray:
        """PageRank teleporting to (and dangling into) ``seeds`` (normalised; uniform when
        they are all 0).

        The same iteration as ``networkx.pagerank(G, alpha, personalization)``, started from
        the seeds rather than uniform: the same fixed point, and a node the walk cannot reach
        stays at exactly 0. Returns the last iterate when ``max_iter`` is reached. ``helper``:
        a thread that takes half of each product of a large graph (:meth:`product`)."""
        if self.size == 0:
            return np.zeros(0)
        total = float(seeds.sum())
        p = seeds / total if total > 0 else np.full(self.size, 1.0 / self.size)
        # p is 0 but at the seeds (a query's few): the terms in p touch those nodes only
        at = np.flatnonzero(p)
        p_at = p[at]
        teleport_at = (1.0 - alpha) * p_at
        dangling = np.flatnonzero(self.dangling)
        x = p.copy()
        change = np.empty_like(x)
        first = self.halves is not None and self._few(at)
        for step in range(max_iter):
            # alpha * (M x + dangling mass * p) + (1 - alpha) * p, in place
            y = self.spread(at, p_at) if first and step == 0 else self.product(x, helper)
            if len(dangling):
                y[at] += x[dangling].sum() * p_at
            y *= alpha
            y[at] += teleport_at
            np.subtract(y, x, out=change)
            x = y
            if float(np.abs(change, out=change).sum()) < self.size * tol:
                break
        return x

    def spread(self, at: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``matrix @ x`` for the ``x`` that is ``values`` at the nodes ``at`` (distinct) and 0
        elsewhere, read from those nodes' own rows: the graph is undirected, so column ``i``
        is row ``i`` reweighed, ``matrix[k, i] = matrix[i, k] * degree[k] / degree[i]``. Its
        work follows the edges of ``at``, not the graph's. Equal to the product within
        rounding, and two nodes placed alike get the same value, as in the product."""
        ptr = self.matrix.indptr
        starts = ptr[at]
        lengths = ptr[at + 1] - starts
        # The positions of the rows of ``at`` in the matrix's arrays, one after the other.
        offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        pos = offsets + np.arange(int(lengths.sum()))
        near = self.matrix.indices[pos]
        by = np.repeat(values / np.where(lengths > 0, self.degree[at], 1.0), lengths)
        steps = self.matrix.data[pos] * self.degree[near] * by
        return np.bincount(near, weights=steps, minlength=self.size)

    def _few(self, at: np.ndarray) -> bool:
        """Whether the rows of ``at`` hold few enough non-zeros for :meth:`spread`."""
        ptr = self.matrix.indptr
        return int((ptr[at + 1] - ptr[at]).sum()) * SPREAD_SHARE < self.matrix.nnz

    def product(self, x: np.ndarray, helper: Executor | None = None) -> np.ndarray:
        """``matrix @ x``; for a graph with ``halves``, the upper half on ``helper`` while the
        caller multiplies the lower one. The caller takes the upper half back when the helper
        has not begun it by then (busy with another walk's, or shut down), so a walk never
        waits behind another. The same values as one product: each row is summed alike."""
        if helper is None or self.halves is None:
            return self.matrix @ x
        upper, lower = self.halves
        try:
            shared = helper.submit(operator.matmul, upper, x)
        except RuntimeError:  # the helper is shut down
            return self.matrix @ x
        low = lower @ x
        high = upper @ x if shared.cancel() else shared.result()
        return np.concatenate((high, low))


def _halves(matrix: sparse.csr_array) -> tuple[sparse.csr_array, sparse.csr_array] | None:
    """The rows of ``matrix`` in two blocks of about equal non-zeros, views of its data and
    indices (only the row pointers are copied); None below :data:`SPLIT_NONZEROS`."""
    if matrix.nnz < SPLIT_NONZEROS:
        return None
    rows, cols = matrix.shape
    ptr = matrix.indptr
    cut = int(np.searchsorted(ptr, matrix.nnz // 2))

    def block(first: int, last: int) -> sparse.csr_array:
        a, b = int(ptr[first]), int(ptr[last])
        shape = (last - first, cols)
        return sparse.csr_array(
            (matrix.data[a:b], matrix.indices[a:b], ptr[first : last + 1] - a), shape, copy=False
        )

    return block(0, cut), block(cut, rows)


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
