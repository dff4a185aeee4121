"""A split of the data into rows always evaluated and rows subsampled."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Strata"]


class Strata(NamedTuple):
    """Two disjoint sets of data indices covering all N rows.

    Attributes
    ----------
    exact : ndarray of int
        Rows whose terms are summed exactly at every step (e.g. the few rows of largest
        leverage, which would otherwise dominate a bound on the others).
    sampled : ndarray of int
        Rows a minibatch is drawn from, uniformly without replacement.
    """

    exact: np.ndarray
    sampled: np.ndarray
