"""Uniform minibatches of data indices drawn without replacement, at a cost proportional to
the batch.

One implementation shared by the subsampled MH acceptance tests
(:mod:`sksubsample.algorithms._acceptance`) and by racing and lil'UCB
(:mod:`sksubsample.algorithms._racing`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["IndexSampler"]


class IndexSampler:
    """Successive batches of distinct indices from ``range(n)``, without replacement.

    Each batch is a uniformly random subset of the indices not drawn before. It is drawn on
    the ranks of the free indices by ``Generator.choice(..., replace=False)`` (Floyd's
    algorithm for small batches), so a test that stops after 100 terms out of 10^6 does not
    pay for a permutation of 10^6. Batches are returned sorted: the order within a batch is
    irrelevant to the sums the callers keep, and sorted indices make the row gathers
    cache-friendly.

    The indices drawn so far are kept as one sorted array, merged with each new batch in linear
    time. A batch of ``m`` costs the draw (``O(m)`` by Floyd's algorithm while ``m`` is small
    against what is left), an ``O(m log m)`` sort and the ``O(count + m)`` merge; a batch of more
    than half of what is left is taken from a mask of the free indices in ``O(n)``. The first
    batch needs no merge and no rank translation (nothing is drawn yet), which is the common
    case of a minibatch MH test deciding on its first minibatch.

    Parameters
    ----------
    n : int
        Population size.
    rng : numpy.random.Generator

    Attributes
    ----------
    count : int
        Indices drawn so far.

    Examples
    --------
    >>> import numpy as np
    >>> sampler = IndexSampler(10, np.random.default_rng(0))
    >>> a, b = sampler.draw(4), sampler.draw(10)
    >>> sorted(np.concatenate([a, b]).tolist()) == list(range(10))
    True
    """

    __slots__ = ("_drawn", "count", "n", "rng")

    def __init__(self, n: int, rng: np.random.Generator):
        self.n = int(n)
        self.rng = rng
        self.count = 0
        self._drawn = None  # sorted indices drawn so far (None before the first batch)

    @property
    def drawn(self) -> np.ndarray:
        """Sorted array of the indices drawn so far."""
        return np.empty(0, dtype=np.intp) if self._drawn is None else self._drawn

    def draw(self, m: int) -> np.ndarray:
        """A sorted, uniformly random subset of ``min(m, n - count)`` not-yet-drawn indices.

        Parameters
        ----------
        m : int

        Returns
        -------
        ndarray of intp, sorted
        """
        remaining = self.n - self.count
        if m > remaining:
            m = remaining
        if m <= 0:
            return np.empty(0, dtype=np.intp)
        drawn = self._drawn
        if 2 * m > remaining:
            # Most of what is left: O(N) work is proportionate here.
            if drawn is None:
                out = np.arange(self.n, dtype=np.intp)
            else:
                free = np.ones(self.n, dtype=bool)
                free[drawn] = False
                out = np.flatnonzero(free)
            if m < remaining:
                out = out[np.sort(self.rng.choice(remaining, size=m, replace=False,
                                                  shuffle=False))]
        else:
            # Floyd's algorithm (small m) or a partial shuffle, on the ranks of free indices.
            out = self.rng.choice(remaining, size=m, replace=False, shuffle=False)
            out.sort()
            out = out.astype(np.intp, copy=False)
            if drawn is not None:
                # The r-th free index is r + #{drawn u : u - (its rank among drawn) <= r}.
                gaps = drawn - np.arange(drawn.size)
                out += np.searchsorted(gaps, out, side="right")
        # (A copy on the first batch: callers may write to the batch they are given.)
        self._drawn = out.copy() if drawn is None else self._merge(drawn, out)
        self.count += m
        return out

    @staticmethod
    def _merge(drawn: np.ndarray, out: np.ndarray) -> np.ndarray:
        # Merge the two sorted arrays in linear time rather than re-sort every batch.
        merged = np.empty(drawn.size + out.size, dtype=np.intp)
        slots = np.searchsorted(drawn, out) + np.arange(out.size)
        merged[slots] = out
        rest = np.ones(merged.size, dtype=bool)
        rest[slots] = False
        merged[rest] = drawn
        return merged
