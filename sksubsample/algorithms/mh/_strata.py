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
        leverage, which would otherwise dominate a bound on the others), sorted.
    sampled : ndarray of int or None
        Rows a minibatch is drawn from, uniformly without replacement; None for every row not
        in ``exact`` (left implicit where the data are not in memory).
    """

    exact: np.ndarray
    sampled: np.ndarray | None

    def sampled_rows(self, n_data):
        """The sampled rows as an array (every row but the exact ones when implicit).

        Parameters
        ----------
        n_data : int
            The number N of rows.

        Returns
        -------
        ndarray of int
        """
        if self.sampled is not None:
            return self.sampled
        sampled = np.ones(n_data, dtype=bool)
        sampled[self.exact] = False
        return np.flatnonzero(sampled)
