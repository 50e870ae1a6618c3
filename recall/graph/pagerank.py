"""Personalized PageRank on a sparse matrix, for the graph channel's walk around the linked
entities.

:class:`Walk` holds a graph's transition matrix (``scipy.sparse``, CSR), built once when the
scope's graph is built (:mod:`recall.graph.memory`); a query's walk is then one sparse
matrix-vector product per iteration, and its result the few nodes of most mass
(:func:`leading`), picked without sorting the rest, among those above a bound sampled from
the array when it is large. A large graph's first step is taken from the seeds' own edges
(:meth:`Walk.spread`; by hub, a hub's column as kept): the seeds are a query's few nodes, and a
product would read every edge; such a walk starts from the seeds alone, with no vector of the
graph's size until its first step. A large graph whose last nodes are its hubs (a scope's few
entities, each linked to many memories) multiplies by hub (:class:`Hubs`): its many short rows
cost a CSR product more per row than per edge. Such a walk steps in single precision
(:data:`HUB_DTYPE`), and takes a last step known in advance for the memories alone when the
caller reads no other mass (:data:`LAST_STEP_MARGIN`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from tiers.semantic.vectors.ranking import tie_floor, tie_keys

LARGE_NONZEROS = 100_000
"""The non-zeros from which a walk is large: its first step is taken from its seeds' edges when
they are few (:data:`SPREAD_SHARE`; below, a product is quicker: 10,000 non-zeros: 0.011 ms,
against 0.019 ms for seeds' rows of 0.5 % of them; 100,000: 0.118 against 0.025 ms,
2026-12-05), and its products go by hub (:class:`Hubs`)."""

SPREAD_SHARE = 10
"""A large walk's first step is read from its seeds' rows (:meth:`Walk.spread`) when they hold
less than 1 / ``SPREAD_SHARE`` of the graph's non-zeros: past that, one product is quicker
(1.7 million non-zeros: a product 2.1-2.3 ms; the seeds' rows 0.13 ms at 0.5 % of them, 1.9 ms
at 10 %, 6.3 ms at 25 %; 2026-12-05). A query's seeds held 2-4 % of the large user's graph."""

LAST_STEP_MARGIN = 0.999
"""A walk stops once a step changes its mass by less than ``size * tol`` (L1), and a step
changes it by at most ``alpha`` times the step before (its operator, the walk's matrix with
the dangling mass sent to the seeds, is column-stochastic times ``alpha``). So when ``alpha``
times the last change is below that bound the next step is the last, and a caller that reads
only the memories need not have the hubs' rows multiplied in it (:meth:`Walk.rank`'s
``wanted``; half a product's reads on the large user's graph, whose walks stop after three
steps). The margin keeps rounding from ever ending a walk a step sooner than without."""

HUB_DTYPE = np.float32
"""A walk by hub (:class:`Hubs`) steps in single precision: a product reads the matrix's
values, and the walk's vectors, in half the bytes, and this product is bound by its reads
(a walk of 4.4 ms alone took 6.2 beside another process streaming memory, and 4.2 beside a
pure-Python loop, offline). The large user's walk of 1.7 million non-zeros: 4.2 ms against
5.6 in double precision, offline; the leading 50 memories the same in each of 100 walks,
each memory's mass within 3e-6 of the double's (2026-12-06)."""


@dataclass(frozen=True, slots=True)
class Hubs:
    """A large graph's transition matrix by hub: its nodes from ``first`` on are its hubs (few,
    each with many edges: a scope's entities), the others have short rows (a scope's
    memories). A CSR product spends more per row than per edge, and most of the matrix's rows
    are short, so the steps into the other nodes are kept by hub too (``into``, compressed by
    column: one long run per hub), beside the hubs' own rows (``rows``: the matrix's, its
    values copied) and the steps among the other nodes (``among``: a question's turn and its
    reply; None when there are none), all in single precision (:data:`HUB_DTYPE`). The
    matrix's products within rounding (a 200,000-memory scope's: 0.94 ms, against 2.0 ms by
    rows, 2026-12-06, in double precision)."""

    first: int
    rows: sparse.csr_array
    into: sparse.csc_array
    among: sparse.csr_array | None
    between: sparse.csc_array  # the steps among the hubs, by column (few)

    @classmethod
    def of(cls, matrix: sparse.csr_array, first: int) -> Hubs:
        size = matrix.shape[0]
        ptr = matrix.indptr
        start = int(ptr[first])
        rows = sparse.csr_array(
            (matrix.data[start:].astype(HUB_DTYPE), matrix.indices[start:], ptr[first:] - start),
            shape=(size - first, size),
            copy=False,
        )
        others = matrix[:first]
        among = others[:, :first].astype(HUB_DTYPE)
        into = others[:, first:].tocsc().astype(HUB_DTYPE)
        between = rows[:, first:].tocsc()
        return cls(first, rows, into, among if among.nnz else None, between)

    @property
    def nbytes(self) -> int:
        """What the hubs hold beside the matrix."""
        held = [self.rows.data, self.rows.indptr, self.into.data, self.into.indices]
        held += [self.into.indptr, self.between.data, self.between.indices, self.between.indptr]
        if self.among is not None:
            held += [self.among.data, self.among.indices, self.among.indptr]
        return sum(int(a.nbytes) for a in held)

    def spread(self, y: np.ndarray, at: np.ndarray, values: np.ndarray) -> None:
        """Add to ``y`` the steps from the hubs ``at`` (nodes, each :attr:`first` or more,
        distinct) holding ``values``: each hub's column, one contiguous run in :attr:`into`
        and one in :attr:`between` (a hub's column holds each node once)."""
        into, between = self.into, self.between
        for hub, value in zip((at - self.first).tolist(), values.tolist(), strict=True):
            lo, hi = into.indptr[hub], into.indptr[hub + 1]
            y[into.indices[lo:hi]] += into.data[lo:hi] * HUB_DTYPE(value)
            lo, hi = between.indptr[hub], between.indptr[hub + 1]
            y[between.indices[lo:hi] + self.first] += between.data[lo:hi] * HUB_DTYPE(value)

    def product(self, x: np.ndarray) -> np.ndarray:
        """``matrix @ x`` for ``x`` in :data:`HUB_DTYPE`."""
        y = np.empty(len(x), dtype=HUB_DTYPE)
        y[self.first :] = self.rows @ x
        y[: self.first] = self.others(x)
        return y

    def others(self, x: np.ndarray) -> np.ndarray:
        """``(matrix @ x)[:first]``, the other nodes' part of :meth:`product`: each node's
        steps from the others first, then from the hubs in their order."""
        first = self.first
        if self.among is None:
            return np.asarray(self.into @ x[first:])
        y = np.asarray(self.among @ x[:first])
        y += self.into @ x[first:]
        return y


@dataclass(frozen=True, slots=True)
class Walk:
    """The random walk over the undirected weighted multigraph ``src[i] - dst[i]``
    (``weight[i]``) on nodes ``0..size-1``: ``matrix[j, i]`` is the probability of a step from
    ``i`` to ``j`` (parallel edges add up, a self-loop counts once), ``degree`` each node's
    weighted degree (0: a dangling node, without an edge), ``hubs`` the matrix by hub (a
    large graph's whose hubs are named: :class:`Hubs`), ``large`` whether it had
    :data:`LARGE_NONZEROS` non-zeros or more when it was made (:meth:`of`)."""

    matrix: sparse.csr_array
    degree: np.ndarray
    size: int
    hubs: Hubs | None = None
    large: bool = False
    _dangling_nodes: np.ndarray = field(init=False, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        size: int,
        src: np.ndarray,
        dst: np.ndarray,
        weight: np.ndarray,
        hubs_from: int | None = None,
    ) -> Walk:
        """``hubs_from``: the first of the graph's hubs, its last nodes (None: it has none)."""
        loop = src == dst
        rows = np.concatenate([src, dst[~loop]])
        cols = np.concatenate([dst, src[~loop]])
        w = np.concatenate([weight, weight[~loop]]).astype(np.float64)
        out = np.bincount(rows, weights=w, minlength=size)
        step = w / np.where(out[rows] > 0, out[rows], 1.0)
        matrix = sparse.csr_array((step, (cols, rows)), shape=(size, size))
        matrix.sum_duplicates()
        large = matrix.nnz >= LARGE_NONZEROS
        hubs = None
        if large and hubs_from is not None and hubs_from < size:
            hubs = Hubs.of(matrix, hubs_from)
        return cls(matrix, out, size, hubs, large)

    @property
    def dtype(self) -> type[np.floating]:
        """The precision of the walk's steps: :data:`HUB_DTYPE` by hub, else double."""
        return np.float64 if self.hubs is None else HUB_DTYPE

    @property
    def dangling_nodes(self) -> np.ndarray:
        """The dangling nodes (without an edge), found once."""
        return self._dangling_nodes

    def __post_init__(self) -> None:
        object.__setattr__(self, "_dangling_nodes", np.flatnonzero(self.degree == 0))

    def _at(self, at: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The vector that is ``values`` at the nodes ``at`` and 0 elsewhere."""
        x = np.zeros(self.size, dtype=self.dtype)
        x[at] = values
        return x

    @property
    def nbytes(self) -> int:
        m = self.matrix
        own = self.hubs.nbytes if self.hubs is not None else 0
        return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes + self.degree.nbytes + own)

    def rank(
        self,
        seeds: np.ndarray,
        alpha: float = 0.85,
        tol: float = 1e-6,
        max_iter: int = 100,
        wanted: int | None = None,
    ) -> np.ndarray:
        """PageRank teleporting to (and dangling into) ``seeds`` (normalised; uniform when
        they are all 0), in the walk's :attr:`dtype`.

        The same iteration as ``networkx.pagerank(G, alpha, personalization)``, started from
        the seeds rather than uniform: the same fixed point, and a node the walk cannot reach
        stays at exactly 0. Returns the last iterate when ``max_iter`` is reached.

        ``wanted``: the caller reads only the first ``wanted`` nodes' mass (a scope's
        memories). A walk by hub whose hubs are none of them takes its last step for the
        others alone when that step is sure to be the last (:data:`LAST_STEP_MARGIN`): the
        wanted nodes' mass is the same bits, the hubs' that of the step before."""
        if self.size == 0:
            return np.zeros(0)
        total = float(seeds.sum())
        if total > 0:  # p is 0 but at the seeds (a query's few): its terms touch those alone
            at = np.flatnonzero(seeds)
            p_at = (seeds[at] / total).astype(self.dtype, copy=False)
            at, p_at = at[p_at != 0], p_at[p_at != 0]
        else:
            at = np.arange(self.size)
            p_at = np.full(self.size, 1.0 / self.size, dtype=self.dtype)
        teleport_at = (1.0 - alpha) * p_at
        dangling = self.dangling_nodes
        # A large walk's first step is read from its seeds' edges, so it starts from them
        # alone; p itself is made only for a walk that multiplies from its start.
        first = self.large and self._few(at)
        x = None if first else self._at(at, p_at)
        change: np.ndarray | None = None
        limit = self.size * tol
        short = self.hubs is not None and wanted is not None and wanted <= self.hubs.first
        last = math.inf
        for _ in range(max_iter):
            if x is not None and short and alpha * last < limit * LAST_STEP_MARGIN:
                return self._last_step(x, at, p_at, teleport_at, dangling, alpha)
            # alpha * (M x + dangling mass * p) + (1 - alpha) * p, in place; from the seeds
            # alone, the first step is read from their edges
            y = (
                self.spread(at, p_at).astype(self.dtype, copy=False)
                if x is None
                else self.product(x)
            )
            if len(dangling):
                held = p_at[self.degree[at] == 0] if x is None else x[dangling]
                y[at] += held.sum() * p_at
            y *= alpha
            y[at] += teleport_at
            if x is None:  # the change by the seeds' nodes: elsewhere x is 0, y never negative
                near = y[at]
                last = float(y.sum(dtype=np.float64)) - float(near.sum(dtype=np.float64))
                last += float(np.abs(near - p_at).sum(dtype=np.float64))
            else:
                if change is None:
                    change = np.empty_like(x)
                np.subtract(y, x, out=change)
                last = float(np.abs(change, out=change).sum(dtype=np.float64))
            x = y
            if last < limit:
                break
        assert x is not None
        return x

    def _last_step(
        self,
        x: np.ndarray,
        at: np.ndarray,
        p_at: np.ndarray,
        teleport_at: np.ndarray,
        dangling: np.ndarray,
        alpha: float,
    ) -> np.ndarray:
        """:meth:`rank`'s step from ``x`` for the nodes before the hubs alone, in the same
        operations; the hubs keep ``x``'s mass."""
        assert self.hubs is not None
        first = self.hubs.first
        y = x.copy()
        y[:first] = self.hubs.others(x)
        inside = at < first
        if len(dangling):
            y[at[inside]] += x[dangling].sum() * p_at[inside]
        y[:first] *= alpha
        y[at[inside]] += teleport_at[inside]
        return y

    def spread(self, at: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``matrix @ x`` for the ``x`` that is ``values`` at the nodes ``at`` (distinct) and 0
        elsewhere, in the walk's :attr:`dtype`, read from those nodes' own rows: the graph is
        undirected, so column ``i`` is row ``i`` reweighed, ``matrix[k, i] = matrix[i, k] *
        degree[k] / degree[i]``. Its work follows the edges of ``at``, not the graph's. By
        hub, a hub's column is read as kept (:meth:`Hubs.spread`): one contiguous run, rather
        than its row's tens of thousands of edges gathered (the large user's first steps,
        offline: 0.35-0.41 ms at p50, against 0.44-0.58 by rows, 2026-12-07). Equal to the
        product within rounding, and two nodes placed alike get the same value, as in the
        product."""
        if self.hubs is None:
            near, steps = self._column_steps(at, values)
            return np.bincount(near, weights=steps, minlength=self.size)
        y = np.zeros(self.size, dtype=HUB_DTYPE)
        hubs = at >= self.hubs.first
        if not hubs.all():
            near, steps = self._column_steps(at[~hubs], values[~hubs])
            np.add.at(y, near, steps.astype(HUB_DTYPE))
        self.hubs.spread(y, at[hubs], values[hubs])
        return y

    def _column_steps(self, at: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The steps of :meth:`spread` from the rows of ``at``: each one's node and value."""
        ptr = self.matrix.indptr
        starts = ptr[at]
        lengths = ptr[at + 1] - starts
        # The positions of the rows of ``at`` in the matrix's arrays, one after the other.
        offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        pos = offsets + np.arange(int(lengths.sum()))
        near = self.matrix.indices[pos]
        by = np.repeat(values / np.where(lengths > 0, self.degree[at], 1.0), lengths)
        return near, self.matrix.data[pos] * self.degree[near] * by

    def _few(self, at: np.ndarray) -> bool:
        """Whether the rows of ``at`` hold few enough non-zeros for :meth:`spread`."""
        ptr = self.matrix.indptr
        return int((ptr[at + 1] - ptr[at]).sum()) * SPREAD_SHARE < self.matrix.nnz

    def product(self, x: np.ndarray) -> np.ndarray:
        """``matrix @ x``: by hub for a graph with ``hubs`` (:class:`Hubs`)."""
        return self.matrix @ x if self.hubs is None else self.hubs.product(x)


SAMPLE_STRIDE = 32
""":func:`leading` on a large array first looks for a bound from every ``SAMPLE_STRIDE``-th
entry (a 180,000-memory scope's leading 50: 0.15 ms, against 1.05 for a partition of the
whole array and 1.34 for one of its positive entries, 2026-12-07)."""

SAMPLE_MARGIN = 4
""":func:`leading`'s sampled bound aims at ``SAMPLE_MARGIN`` times the entries wanted, so
that it seldom leaves fewer above it (then the whole array is partitioned)."""


def leading(mass: np.ndarray, n: int, ids: np.ndarray) -> np.ndarray:
    """The indices of the ``n`` largest positive entries of ``mass``, largest first, at the
    cost of a partition rather than a sort of the whole array (a 200,000-memory scope's sort
    took half its walk's time), of the few entries above a bound sampled from it when it is
    large (:data:`SAMPLE_STRIDE`). Ties go by ``ids`` (each node's id), masses that round alike
    tying (:func:`~tiers.semantic.vectors.ranking.tie_keys`): a scope's nodes are numbered in
    the order its memories were read, and its sums follow that order in their last bits, so
    two builds of the same memories give the same leading memories only so
    (:mod:`tiers.semantic.vectors.ranking`)."""
    if n <= 0:
        return np.flatnonzero(mass[:0])
    sampled = _above(mass, n)
    chosen, bound = sampled if sampled is not None else (np.flatnonzero(mass > 0), 0.0)
    if sampled is not None or n < len(chosen):
        values = mass[chosen]
        cut = np.partition(values, len(values) - n)[len(values) - n]  # the n-th largest
        floor = tie_floor(cut)
        # with those that tie with it: all above the bound, or read again from the whole array
        chosen = chosen[values >= floor] if floor >= bound else np.flatnonzero(mass >= floor)
    return chosen[np.lexsort((ids[chosen], -tie_keys(mass[chosen])))][:n]


def _above(mass: np.ndarray, n: int) -> tuple[np.ndarray, float] | None:
    """The entries of ``mass`` at or above a positive bound sampled from it, and the bound,
    when they are ``n`` or more (so the ``n`` largest are among them); else None."""
    sample = mass[::SAMPLE_STRIDE]
    want = SAMPLE_MARGIN * n // SAMPLE_STRIDE + 1  # the sample's entries at the bound or above
    if len(sample) <= 4 * want:
        return None
    bound = float(np.partition(sample, len(sample) - want)[len(sample) - want])
    if bound <= 0:
        return None
    above = np.flatnonzero(mass >= bound)
    return (above, bound) if len(above) >= n else None
