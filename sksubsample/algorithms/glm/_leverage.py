"""The rows of a design ordered by leverage, as far as the plan of the control variates reads it.

The plan of :class:`~._expansion.GLMTaylorExpansion` sets the rows of largest leverage
``‖K⁻¹x_i‖`` apart (its strata) and needs, for the numbers ``k`` of rows it weighs, the leverage
of the row of rank ``k`` (ranks count from 0, by decreasing leverage, ties by increasing row),
and the ``k`` rows of smallest rank. :class:`TopLeverage` answers from the ``limit + 1``
largest, gathered in one pass over the rows wherever they are (:func:`top_rows`,
:func:`merge_top`, folded block by block or in a tree), and knows the ranks up to ``limit``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..mh import Strata

__all__ = ["TopLeverage", "TopRows", "merge_top", "top_rows"]


class TopRows(NamedTuple):
    """The rows of largest leverage seen in a pass: ``rows`` with their ``leverage``, in no
    particular order (:class:`TopLeverage` ranks them), a superset of the ``capacity`` first.

    At most ``2 capacity`` rows are held: a merge partitions only when that many have
    entered, not at every block. ``floor`` is a leverage that ``capacity`` of the rows seen
    reach: a later row of no larger leverage cannot be among the first (ties go to the
    earlier row), and is not let in.
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


def top_rows(rows, leverage, capacity):
    """The :class:`TopRows` of a block: its ``capacity`` rows of largest leverage.

    Parameters
    ----------
    rows : ndarray of int64
        The rows of the block.
    leverage : ndarray of float64
        Their leverage.
    capacity : int

    Returns
    -------
    TopRows
    """
    return _kept(rows, leverage, capacity)


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
        The largest ``k`` whose row of rank ``k`` is known (``capacity - 1``, or all rows).
    """

    def __init__(self, top, largest, n_rows):
        order = np.lexsort((top.rows, -top.leverage))[:top.capacity]
        self.rows, self.leverage = top.rows[order], top.leverage[order]
        self.largest = float(largest)
        self.n_rows = int(n_rows)
        self.limit = min(order.size, n_rows) - 1

    def value(self, k):
        """The leverage of the row of rank ``k <= limit``."""
        return float(self.leverage[k])

    def top(self, k):
        """The ``k <= limit`` rows of smallest rank, by rank."""
        return self.rows[:k]

    def strata(self, k):
        """The :class:`Strata` with the ``k`` rows of largest leverage summed exactly (the
        sampled stratum is every other row, left implicit)."""
        return Strata(np.sort(self.rows[:k]), None)
