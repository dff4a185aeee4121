"""The rows of a design ordered by leverage, as far as the plan of the control variates reads it.

The plan of :class:`~._expansion.GLMTaylorExpansion` sets the rows of largest leverage
``‖K⁻¹x_i‖`` apart (its strata) and needs, for the numbers ``k`` of rows it weighs, the leverage
of the row of rank ``k`` (ranks count from 0, by decreasing leverage, ties by increasing row),
and the ``k`` rows of smallest rank. :class:`TopLeverage` answers from the ``limit + 1``
largest, gathered in one pass over the rows wherever they are (:func:`top_rows`,
:func:`merge_top`, folded block by block or in a tree), and knows the ranks up to ``limit``.

A pass may be given a *floor*: a leverage below which no row can be among the first (chosen
from a subsample, :func:`subsample_floor`), so that a block hands on only the few rows above
it rather than up to ``capacity`` of its own, and merging the blocks costs little. The ranks
are those of every row whenever at least ``capacity`` rows lie above the floor; when fewer
do (a subsample unlike the rest of the rows), the rows above it are ranked and the floor
stands, as an upper bound, for the leverage of the next rank: the bound that leverage enters
stays valid, the plan only weighs fewer strata.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..mh import Strata
from ._pass_kernels import screen_bounds

__all__ = ["FLOOR_MARGIN", "SCREEN_COLUMNS", "SCREEN_RANKS", "LeverageScreen", "TopLeverage",
           "TopRows", "leverage_screen", "merge_top", "subsample_floor", "top_rows"]

#: The screens tried (:func:`leverage_screen`): a rank, and the largest share of a subsample's
#: rows its bound may put above the floor, beyond which it costs about as much as it saves
#: (measured at d = 21 float32: the bound of rank 1 costs about 6 ns a row, of rank 4 about
#: 14, a leverage about 24); and the fewest design columns a screen is tried for.
SCREEN_RANKS = ((1, 0.1), (4, 0.3))
SCREEN_COLUMNS = 8

#: A pass's floor is the leverage of the subsample's row of this many times the rank that
#: ``capacity`` rows of all the data have in it: about ``FLOOR_MARGIN · capacity`` rows of the
#: data lie above it, so that it falls short only for a subsample unlike the data.
FLOOR_MARGIN = 4


class TopRows(NamedTuple):
    """The rows of largest leverage seen in a pass: ``rows`` with their ``leverage``, in no
    particular order (:class:`TopLeverage` ranks them), a superset of the ``capacity`` first.

    At most ``2 capacity`` rows are held: a merge partitions only when that many have
    entered, not at every block. ``floor`` is a leverage that ``capacity`` of the rows seen
    reach, or the pass's floor: a later row of no larger leverage cannot be among the first
    (ties go to the earlier row), and is not let in.
    """

    rows: np.ndarray
    leverage: np.ndarray
    capacity: int
    floor: float = -np.inf


def _kept(rows, leverage, capacity):
    """The ``capacity`` first of ``rows`` by decreasing leverage, ties by increasing row, in
    no particular order (a partition, not a sort)."""
    if leverage.size <= capacity:
        return TopRows(rows, leverage, capacity)
    cut = np.partition(leverage, leverage.size - capacity)[leverage.size - capacity]
    above = leverage > cut
    tied = np.flatnonzero(leverage == cut)
    tied = tied[np.argsort(rows[tied], kind="stable")[:capacity - int(above.sum())]]
    keep = np.concatenate([np.flatnonzero(above), tied])
    return TopRows(rows[keep], leverage[keep], capacity, float(cut))


def top_rows(rows, leverage, capacity, floor=-np.inf):
    """The :class:`TopRows` of a block: its ``capacity`` rows of largest leverage above
    ``floor``.

    Parameters
    ----------
    rows : ndarray of int64
        The rows of the block.
    leverage : ndarray of float64
        Their leverage.
    capacity : int
    floor : float, default -inf
        No row of leverage at most ``floor`` is kept (see the module docstring).

    Returns
    -------
    TopRows
    """
    if floor > -np.inf:
        above = leverage > floor
        rows, leverage = rows[above], leverage[above]
    top = _kept(rows, leverage, capacity)
    return top if top.floor >= floor else top._replace(floor=float(floor))


class LeverageScreen(NamedTuple):
    """A cheap upper bound of every row's squared leverage, so that a pass with a floor
    computes the leverage of the rows that may lie above it only.

    With ``A = K⁻ᵀK⁻¹ = sum_k λ_k u_k u_kᵀ`` (``λ`` decreasing), for any ``r``

    ``‖K⁻¹x‖² = xᵀAx <= sum_{k < r} (λ_k - λ_r) (u_kᵀx)² + λ_r ‖x‖²``:

    ``r`` projections and a norm, against ``d²`` products for the leverage. It is tight when
    ``A``'s spectrum past its first ``r`` directions is flat, as the Laplace covariance of
    standardized features mostly is: its outliers are the intercept's direction and a few
    directions of correlated features (:func:`leverage_screen` picks ``r`` by a subsample).

    Attributes
    ----------
    directions : ndarray of shape (r, p)
        ``u_k`` on the stored columns (one per row), in the rows' precision.
    shift : ndarray of shape (r,)
        ``u_k`` on the intercept's column (zero without one), in the rows' precision.
    weights : ndarray of shape (r,)
        ``λ_k - λ_r``.
    rest : float
        ``λ_r`` plus a margin of ``8 d u λ_0 (r + 1)`` (``u`` the rows' unit roundoff): more
        than the rounding of the projections and the norm computed in the rows' precision, so
        that the bound computed stays above every row's leverage.
    """

    directions: np.ndarray
    shift: np.ndarray
    weights: np.ndarray
    rest: float

    @classmethod
    def of(cls, inverse, p, intercept, dtype, rank):
        """The screen of rank ``rank`` of ``K⁻¹`` (``inverse``) for rows of ``p`` stored
        columns in ``dtype``."""
        d = inverse.shape[0]
        values, vectors = np.linalg.eigh(inverse.T @ inverse)
        values, vectors = np.maximum(values[::-1], 0.0), vectors[:, ::-1]
        shift = vectors[p, :rank] if intercept else np.zeros(rank)
        margin = 8.0 * d * float(np.finfo(dtype).eps) * float(values[0]) * (rank + 1)
        return cls(np.ascontiguousarray(vectors[:p, :rank].T, dtype=dtype),
                   shift.astype(dtype), values[:rank] - values[rank],
                   float(values[rank]) + margin)

    def bound(self, X, intercept, out=None):
        """Upper bounds of the squared leverages of the rows ``X`` (dense, as stored), in
        float64 (:func:`~._pass_kernels.screen_bounds`), written into ``out`` when given."""
        X = np.ascontiguousarray(X)
        out = np.empty(X.shape[0]) if out is None else out
        screen_bounds(X, self.directions, self.shift, self.weights, self.rest, intercept, out)
        return out


def leverage_screen(inverse, sample, floor, intercept):
    """The :class:`LeverageScreen` a pass of ``floor`` uses, or None: the first rank of
    :data:`SCREEN_RANKS` whose bound puts at most its share of the ``sample`` rows (a
    subsample of the rows, dense as stored) above the floor; none for a narrow design.

    Parameters
    ----------
    inverse : ndarray of shape (d, d)
        ``K⁻¹``.
    sample : ndarray of shape (m, p)
    floor : float
    intercept : bool

    Returns
    -------
    LeverageScreen or None
    """
    d = inverse.shape[0]
    if d < SCREEN_COLUMNS or floor == -np.inf:
        return None
    for rank, share in SCREEN_RANKS:
        screen = LeverageScreen.of(inverse, sample.shape[1], intercept, sample.dtype, rank)
        if np.mean(screen.bound(sample, intercept) > floor**2) <= share:
            return screen
    return None


def subsample_floor(leverage, n_rows, capacity):
    """The floor of a pass over ``n_rows`` rows (see the module docstring), from the leverages
    of a subsample of them: -inf when the subsample is too small to place it (or is every
    row).

    Parameters
    ----------
    leverage : ndarray of shape (m,)
        The subsample's leverages.
    n_rows : int
    capacity : int

    Returns
    -------
    float
    """
    m = leverage.size
    rank = math.ceil(FLOOR_MARGIN * capacity * m / n_rows)
    if m >= n_rows or rank >= m // 2:
        return -np.inf
    return float(np.partition(leverage, m - 1 - rank)[m - 1 - rank])


def merge_top(a, b):
    """The :class:`TopRows` of two disjoint sets of rows, ``a``'s rows before ``b``'s."""
    # Only rows above a's floor can enter (a tie goes to a's earlier row).
    enter = b.leverage > a.floor
    if not enter.any():
        return a
    rows = np.concatenate([a.rows, b.rows[enter]])
    leverage = np.concatenate([a.leverage, b.leverage[enter]])
    if rows.size <= 2 * a.capacity:
        return TopRows(rows, leverage, a.capacity, a.floor)
    return _kept(rows, leverage, a.capacity)


def _ranked_first(rows, leverage, k):
    """The positions of the ``k`` first of ``rows`` by decreasing leverage, ties by increasing
    row, in that order: those at or above the ``k``-th largest leverage (a partition), then
    sorted (a sort of all the rows a pass kept, up to ``2 k``, had taken twice as long)."""
    if leverage.size > k:
        cut = np.partition(leverage, leverage.size - k)[leverage.size - k]
        candidates = np.flatnonzero(leverage >= cut)
        return candidates[np.lexsort((rows[candidates], -leverage[candidates]))][:k]
    return np.lexsort((rows, -leverage))


class TopLeverage:
    """The ranks of the ``limit + 1`` rows of largest leverage, from a pass's :class:`TopRows`.

    Parameters
    ----------
    top : TopRows
    largest : float
        The largest leverage of all rows.
    n_rows : int

    Attributes
    ----------
    largest : float
    limit : int
        The largest ``k`` whose row of rank ``k`` is known (``capacity - 1``, or all rows),
        or bounded by the pass's floor (the rows above a floor that fell short).
    """

    def __init__(self, top, largest, n_rows):
        order = _ranked_first(top.rows, top.leverage, top.capacity)
        self.rows, self.leverage = top.rows[order], top.leverage[order]
        self.largest = float(largest)
        self.n_rows = int(n_rows)
        self.limit = min(order.size, n_rows) - 1
        self.floor = None
        if order.size < min(top.capacity, n_rows):
            # Fewer rows above the floor than asked for: the next rank's leverage is at most
            # the floor.
            self.floor = float(top.floor)
            self.limit = order.size

    def value(self, k):
        """The leverage of the row of rank ``k <= limit`` (an upper bound of it, the pass's
        floor, for the rank after the rows above a floor that fell short)."""
        return self.floor if k == self.leverage.size else float(self.leverage[k])

    def top(self, k):
        """The ``k <= limit`` rows of smallest rank, by rank."""
        return self.rows[:k]

    def strata(self, k):
        """The :class:`Strata` with the ``k`` rows of largest leverage summed exactly (the
        sampled stratum is every other row, left implicit)."""
        return Strata(np.sort(self.rows[:k]), None)
