"""Uniform minibatches of data indices drawn without replacement, at a cost proportional to
the batch.

One implementation shared by the subsampled MH acceptance tests
(:mod:`sksubsample.algorithms._acceptance`) and by racing and lil'UCB
(:mod:`sksubsample.algorithms._racing`); :class:`MultiIndexSampler` draws the batches of many
populations of different sizes at once, for racing arms with independent populations.
"""

from __future__ import annotations

import numpy as np

__all__ = ["IndexSampler", "MultiIndexSampler"]


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


class MultiIndexSampler:
    """Successive batches of distinct indices from ``range(n_k)`` for several populations ``k``.

    The batches of many populations are drawn together, with a number of NumPy calls that does
    not grow with the number of populations: what :class:`IndexSampler` does for one population,
    applied to all of them in one vectorised step. Population ``k``'s batch is a uniformly random
    subset of its not-yet-drawn indices, independent of the other populations' batches.

    A batch of ``m`` out of the ``R`` free indices of a population is drawn on their ranks
    ``0..R-1``: ``min(m, R - m)`` distinct ranks are the first distinct values of a stream of
    independent uniform ranks (they are the ranks taken when ``2 m <= R``, and the ranks left
    out otherwise, so at least half of the ranks are always free and the stream wastes at most
    about half its draws). The first ``k`` distinct values of an i.i.d. uniform stream form a
    uniformly random ``k``-subset, so every batch is uniform, as for a sequential draw without
    replacement. Ranks are mapped to indices through the sorted indices already drawn, as in
    :class:`IndexSampler`.

    All indices drawn so far are kept as one sorted array of keys ``offset_k + index`` (the
    offsets are the cumulative population sizes, so the populations occupy disjoint key
    ranges). Drawing batches of total size ``M`` costs ``O(M log M)`` for the draws and sorts and
    ``O(C + M log C)`` for the rank translation and the merge with the ``C`` keys drawn before;
    a population whose batch is more than half of what is left costs ``O(R)``, as it does in
    :class:`IndexSampler`.

    Parameters
    ----------
    sizes : array of int of shape (n_populations,)
        Population sizes ``n_k >= 1``.
    rng : numpy.random.Generator

    Attributes
    ----------
    counts : ndarray of int64 of shape (n_populations,)
        Indices drawn so far from each population.

    Examples
    --------
    >>> import numpy as np
    >>> sampler = MultiIndexSampler(np.array([4, 10]), np.random.default_rng(0))
    >>> idx, lengths = sampler.draw(np.array([0, 1]), np.array([2, 3]))
    >>> lengths.tolist(), idx.size
    ([2, 3], 5)
    >>> rest, _ = sampler.draw(np.array([0, 1]), np.array([4, 10]))  # the remainders
    >>> sorted(np.concatenate([idx[:2], rest[:2]]).tolist())
    [0, 1, 2, 3]
    """

    __slots__ = ("_drawn", "_gaps", "counts", "offsets", "rng", "sizes")

    def __init__(self, sizes, rng: np.random.Generator):
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.offsets = np.cumsum(self.sizes) - self.sizes
        self.rng = rng
        self.counts = np.zeros(self.sizes.size, dtype=np.int64)
        self._drawn = np.empty(0, dtype=np.int64)  # sorted keys offset_k + index
        self._gaps = self._drawn  # key - (its rank within its population's drawn keys)

    def draw(self, populations: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One batch of ``min(m_j, n_k - count_k)`` new indices from each population ``k``.

        Parameters
        ----------
        populations : ndarray of int, strictly increasing
            The populations to draw from.
        m : ndarray of int, same shape
            Batch sizes wanted.

        Returns
        -------
        indices : ndarray of intp
            The batches, concatenated in the order of ``populations``, each sorted.
        lengths : ndarray of int64
            Size of each batch (``m`` clipped to what is left).
        """
        populations = np.asarray(populations, dtype=np.intp)
        free = self.sizes[populations] - self.counts[populations]
        lengths = np.minimum(np.maximum(np.asarray(m, dtype=np.int64), 0), free)
        offsets = self.offsets[populations]
        # Most of what is left (2 m > R, as in IndexSampler): draw the ranks left out instead.
        complement = 2 * lengths > free
        n_distinct = np.where(complement, free - lengths, lengths)
        ranks = _distinct_uniform(self.rng, offsets, free, n_distinct)
        if complement.any():
            comp = np.flatnonzero(complement)
            every = _segment_aranges(offsets[comp], free[comp])
            left_out = _sorted_member(ranks, every)
            ranks = np.sort(np.concatenate([ranks[~_sorted_member(every, ranks)],
                                            every[~left_out]]))
        keys = ranks
        if self._drawn.size:
            # The r-th free index of a population is r + #{drawn u : u - (rank of u) <= r};
            # population k's gaps lie in [offset_k, offset_k + n_k), so one searchsorted over
            # every population's gaps counts population k's alone once the drawn keys of the
            # populations before it are subtracted.
            before = (np.cumsum(self.counts) - self.counts)[populations]
            keys = keys + np.searchsorted(self._gaps, keys, side="right") - np.repeat(before,
                                                                                        lengths)
            self._drawn = _merge_sorted(self._drawn, keys)
        else:
            self._drawn = keys.copy()
        self.counts[populations] += lengths
        drawn_before = np.repeat(np.cumsum(self.counts) - self.counts, self.counts)
        self._gaps = self._drawn - (np.arange(self._drawn.size) - drawn_before)
        return (keys - np.repeat(offsets, lengths)).astype(np.intp, copy=False), lengths


def _segment_aranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])`` without a loop."""
    total = int(lengths.sum())
    out = np.ones(total, dtype=np.int64)
    nonempty = lengths > 0
    heads = (np.cumsum(lengths) - lengths)[nonempty]
    if heads.size:
        # Each segment's head jumps from the previous segment's last value to its own start.
        tails = (starts + lengths - 1)[nonempty]
        out[heads[0]] = starts[nonempty][0]
        out[heads[1:]] = starts[nonempty][1:] - tails[:-1]
    return np.cumsum(out)


def _sorted_member(sorted_keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is in the sorted array ``sorted_keys``."""
    if not sorted_keys.size:
        return np.zeros(values.shape, dtype=bool)
    pos = np.searchsorted(sorted_keys, values)
    return sorted_keys[np.minimum(pos, sorted_keys.size - 1)] == values


def _merge_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The union of two disjoint sorted arrays, sorted, in linear time after ``O(|b| log |a|)``."""
    merged = np.empty(a.size + b.size, dtype=a.dtype)
    slots = np.searchsorted(a, b) + np.arange(b.size)
    merged[slots] = b
    rest = np.ones(merged.size, dtype=bool)
    rest[slots] = False
    merged[rest] = a
    return merged


def _distinct_uniform(rng, offsets, highs, n_distinct) -> np.ndarray:
    """Keys ``offsets[j] + v`` (sorted) of ``n_distinct[j]`` distinct uniform ``v < highs[j]``.

    Each group's values are the first ``n_distinct[j]`` distinct values of an i.i.d. uniform
    stream on ``range(highs[j])``, hence a uniformly random subset (the law of sequential
    sampling without replacement). The stream is drawn in vectorised chunks, each a little
    longer than the expected number of draws still needed; callers keep
    ``2 n_distinct <= highs``, so at least half of every draw is new.
    """
    need = np.asarray(n_distinct, dtype=np.int64).copy()
    highs = np.asarray(highs, dtype=np.int64)
    accepted = np.empty(0, dtype=np.int64)
    while True:
        pending = np.flatnonzero(need > 0)
        if not pending.size:
            return accepted
        want, high = need[pending], highs[pending]
        # Up to n_distinct values are taken, so a draw is new with probability at least
        # 1 - n_distinct / high; draw the expected length for that and a few more.
        taken = n_distinct[pending]
        extra = want * taken / (high - taken)
        length = want + np.ceil(extra + 2.0 * np.sqrt(extra)).astype(np.int64) + 1
        group = np.repeat(pending, length)
        keys = offsets[group] + rng.integers(0, np.repeat(high, length))
        # First occurrences in stream order (a stable sort puts each value's first draw first)
        # that are not accepted yet, and of those the first `need` of each group.
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        first = np.ones(keys.size, dtype=bool)
        first[1:] = sorted_keys[1:] != sorted_keys[:-1]
        first &= ~_sorted_member(accepted, sorted_keys)
        position = np.sort(order[first])
        owner = group[position]
        rank = np.arange(owner.size) - np.searchsorted(owner, owner)
        keep = rank < need[owner]
        new = keys[position[keep]]
        need -= np.bincount(owner[keep], minlength=need.size)
        new.sort()
        accepted = _merge_sorted(accepted, new) if accepted.size else new
