"""Uniform minibatches of data indices drawn without replacement, at a cost proportional to
the batch.

Every batch of a population ``range(n)`` is a uniformly random subset of the indices not drawn
before; two representations of that law serve the package's callers.

*Shuffles* (the subsampled MH tests, lil'UCB, the compiled MH chains, the independent-arms
race): the batches are successive stretches of one Fisher–Yates shuffle of ``range(n)``
started from the identity arrangement. Position ``k`` of the shuffle takes the value at a
uniform position ``j`` in ``[k, n)`` (one ``Generator.integers(0, n - k)`` per index), so each
batch is in uniformly random order, and the whole stream is fixed by the generator's state,
whichever caller (compiled or interpreted) draws it. The shuffle is kept *sparse*: only
positions that were swapped are stored, in an open-addressing hash table
(:func:`fisher_yates_sparse`), so a batch of ``m`` costs ``O(m)`` whatever ``n``; a sampler
that is about to draw more than a quarter of its population materialises the arrangement once
(``O(n)``, proportionate then) and continues on the dense array (:func:`fisher_yates_dense`).
Both representations give the same indices for the same generator state.

*Sorted sets* (races on shared minibatches, which sum each batch, so that only its set
matters): each batch is drawn by rejection against a bitmap of the drawn indices and returned
in increasing order (:func:`draw_unmarked`, the rest of a population by
:func:`take_unmarked`), from a SplitMix64 stream (:func:`splitmix64`; two tries per output
below ``2**32`` by :func:`multiply_shift`, :func:`bounded` from there up) that the race seeds
with one 64-bit word of the caller's generator. No arrangement is kept or restored,
an index costs a few nanoseconds, and a reward function reads its data in one forward sweep.
"""

from __future__ import annotations

import numpy as np

from .._numba import leading_zeros as _leading_zeros
from .._numba import njit, random_methods, trailing_zeros

__all__ = ["IndexSampler", "MultiIndexSampler", "below", "bounded", "clear_marks",
           "draw_unmarked", "fisher_yates_dense", "fisher_yates_sparse", "lemire_threshold",
           "mark_at_random", "multiply_shift", "new_table", "splitmix64", "take_marked",
           "take_unmarked"]

_FREE = -1
# Knuth's multiplicative hash (2^32 / golden ratio); the table size is a power of two.
_HASH = 2654435761


@njit(inline="always")
def below(rng, n):
    """``rng.integers(0, n)`` for ``1 <= n < 2**63``: the same value from the same stream.

    ``Generator.integers`` computes exactly this (Lemire's rejection method on the bit
    generator, as NumPy does) but allocates an array for every scalar draw in compiled code,
    which makes it several times slower.
    """
    bound = n - 1
    if bound == 0:
        return 0
    if bound < 0xFFFFFFFF:
        return np.int64(random_methods.buffered_bounded_lemire_uint32(rng.bit_generator, bound))
    if bound == 0xFFFFFFFF:
        return np.int64(random_methods.next_uint32(rng.bit_generator))
    return np.int64(random_methods.bounded_lemire_uint64(rng.bit_generator, bound))


@njit(inline="always")
def _slot(keys, key):
    """The slot of ``key`` in the open-addressing table, or the free slot where it belongs."""
    mask = keys.size - 1
    h = (key * _HASH) & mask
    while keys[h] != _FREE and keys[h] != key:
        h = (h + 1) & mask
    return h


def new_table(n_entries):
    """Empty ``(keys, values)`` arrays of a table holding up to ``n_entries`` swaps.

    The capacity is a power of two at least twice ``n_entries``, so linear probing stays short.
    """
    capacity = 1 << max(4, int(2 * max(int(n_entries), 1) - 1).bit_length())
    return np.full(capacity, _FREE, dtype=np.int64), np.empty(capacity, dtype=np.int64)


@njit
def fisher_yates_sparse(rng, n, count, m, keys, values, out, offset=0):
    """Positions ``count .. count + m - 1`` of a sparse Fisher–Yates shuffle of ``range(n)``.

    ``keys``/``values`` hold the positions swapped so far (as ``offset + position``; a table may
    hold several populations at disjoint offsets) and must have room for ``m`` more entries
    (capacity at least twice the entries). Writes the ``m`` indices into ``out[:m]``.
    """
    for k in range(count, count + m):
        j = k + below(rng, n - k)
        sj = _slot(keys, offset + j)
        vj = values[sj] if keys[sj] == offset + j else j
        if j != k:
            sk = _slot(keys, offset + k)
            vk = values[sk] if keys[sk] == offset + k else k
            # Position j now holds what position k held; position k is never read again.
            keys[sj] = offset + j
            values[sj] = vk
        out[k - count] = vj


@njit
def fisher_yates_dense(rng, count, m, arrangement, out):
    """Positions ``count .. count + m - 1`` of a Fisher–Yates shuffle held in ``arrangement``
    (a permutation of ``range(n)`` whose positions ``>= count`` are still to be drawn)."""
    n = arrangement.size
    for k in range(count, count + m):
        j = k + below(rng, n - k)
        v = arrangement[j]
        arrangement[j] = arrangement[k]
        arrangement[k] = v
        out[k - count] = v


@njit
def _densify(n, count, keys, values, offset):
    """The arrangement of a sparse shuffle of ``range(n)`` (positions ``>= count`` matter)."""
    arrangement = np.arange(n)
    for s in range(keys.size):
        position = keys[s] - offset
        if keys[s] != _FREE and count <= position < n:
            arrangement[position] = values[s]
    return arrangement


@njit
def _rehash(keys, values, new_keys, new_values):
    for s in range(keys.size):
        if keys[s] != _FREE:
            t = _slot(new_keys, keys[s])
            new_keys[t] = keys[s]
            new_values[t] = values[s]


class IndexSampler:
    """Successive batches of distinct indices from ``range(n)``, without replacement.

    Each batch is a uniformly random subset of the indices not drawn before, in random order
    (the next stretch of one Fisher–Yates shuffle: see the module docstring). A batch of ``m``
    costs ``O(m)``: a test that stops after 100 terms out of 10⁶ does not pay for a permutation
    of 10⁶.

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

    __slots__ = ("_arrangement", "_keys", "_values", "count", "n", "rng")

    def __init__(self, n: int, rng: np.random.Generator):
        self.n = int(n)
        self.rng = rng
        self.count = 0
        self._keys = self._values = self._arrangement = None

    def draw(self, m: int) -> np.ndarray:
        """A uniformly random subset of ``min(m, n - count)`` not-yet-drawn indices.

        Parameters
        ----------
        m : int

        Returns
        -------
        ndarray of intp, in random order
        """
        m = min(int(m), self.n - self.count)
        if m <= 0:
            return np.empty(0, dtype=np.intp)
        out = np.empty(m, dtype=np.intp)
        total = self.count + m
        if self._arrangement is None and 4 * total > self.n:
            # Most of the population will be drawn: one O(n) arrangement is proportionate.
            if self._keys is None:
                self._arrangement = np.arange(self.n)
            else:
                self._arrangement = _densify(self.n, self.count, self._keys, self._values, 0)
            self._keys = self._values = None
        if self._arrangement is not None:
            fisher_yates_dense(self.rng, self.count, m, self._arrangement, out)
        else:
            if self._keys is None or 2 * total > self._keys.size:
                keys, values = new_table(total)
                if self._keys is not None:
                    _rehash(self._keys, self._values, keys, values)
                self._keys, self._values = keys, values
            fisher_yates_sparse(self.rng, self.n, self.count, m, self._keys, self._values, out)
        self.count = total
        return out


class MultiIndexSampler:
    """Successive batches of distinct indices from ``range(n_k)`` for several populations ``k``.

    Each population has its own Fisher–Yates shuffle (the law of :class:`IndexSampler`), kept
    in one shared table at disjoint offsets; population ``k``'s batch is a uniformly random
    subset of its not-yet-drawn indices, independent of the other populations' batches.

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

    __slots__ = ("_keys", "_values", "counts", "offsets", "rng", "sizes")

    def __init__(self, sizes, rng: np.random.Generator):
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.offsets = np.cumsum(self.sizes) - self.sizes
        self.rng = rng
        self.counts = np.zeros(self.sizes.size, dtype=np.int64)
        self._keys, self._values = new_table(0)

    def draw(self, populations: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One batch of ``min(m_j, n_k - count_k)`` new indices from each population ``k``.

        Parameters
        ----------
        populations : ndarray of int
            The populations to draw from (distinct).
        m : ndarray of int, same shape
            Batch sizes wanted.

        Returns
        -------
        indices : ndarray of intp
            The batches, concatenated in the order of ``populations``.
        lengths : ndarray of int64
            Size of each batch (``m`` clipped to what is left).
        """
        populations = np.asarray(populations, dtype=np.int64)
        free = self.sizes[populations] - self.counts[populations]
        lengths = np.minimum(np.maximum(np.asarray(m, dtype=np.int64), 0), free)
        total = int(self.counts.sum() + lengths.sum())
        if 2 * total > self._keys.size:
            keys, values = new_table(total)
            _rehash(self._keys, self._values, keys, values)
            self._keys, self._values = keys, values
        out = np.empty(int(lengths.sum()), dtype=np.intp)
        _draw_populations(self.rng, populations, lengths, self.sizes, self.offsets, self.counts,
                          self._keys, self._values, out)
        return out, lengths


@njit
def _draw_populations(rng, populations, lengths, sizes, offsets, counts, keys, values, out):
    """The batches of :meth:`MultiIndexSampler.draw`, population after population."""
    start = 0
    for j in range(populations.size):
        k = populations[j]
        m = lengths[j]
        fisher_yates_sparse(rng, sizes[k], counts[k], m, keys, values, out[start:start + m],
                            offsets[k])
        counts[k] += m
        start += m


# ----------------------------------------------------------------------------- sorted batches
#
# Racing sums each batch, so only the *set* of a batch matters to it, while the order of its
# reads matters to the reward function (ascending indices stream through memory). Its batches
# follow the set law below, at a few nanoseconds per index: no arrangement of the population
# to shuffle and restore, no sort of a shuffled batch.


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)
_TWO32 = np.uint64(1 << 32)


@njit(inline="always")
def splitmix64(state):
    """``(state, bits)``: the next 64 random bits of a SplitMix64 stream (Steele, Lea and
    Flood, OOPSLA 2014; the generator that seeds NumPy's and Java's streams, which passes
    BigCrush). Its whole state is one ``uint64``, so a race keeps it in a register."""
    state = state + _GOLDEN
    z = state
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return state, z ^ (z >> np.uint64(31))


@njit(inline="always")
def lemire_threshold(bound):
    """``2**32 mod bound``: the low products that :func:`multiply_shift` rejects are those
    below it (``uint64`` ``1 <= bound <= 2**32``)."""
    return (_TWO32 - bound) % bound


@njit(inline="always")
def multiply_shift(bits32, bound, threshold):
    """``(j, accepted)``: 32 random bits mapped onto ``range(bound)`` by Lemire's
    multiply-shift (ACM TOMACS 2019). ``j = floor(bits32 * bound / 2**32)``; rejecting the
    ``threshold = 2**32 mod bound`` smallest low products leaves every ``j`` exactly
    ``floor(2**32 / bound)`` preimages, so an accepted ``j`` is exactly uniform."""
    product = bits32 * bound
    return np.int64(product >> np.uint64(32)), (product & _LOW32) >= threshold


@njit(inline="always")
def bounded(state, n):
    """``(state, j)`` with ``j`` uniform on ``range(n)``, ``1 <= n < 2**63``: the low bits of a
    SplitMix64 output under the smallest all-ones mask covering ``n - 1``, redrawn while
    ``j >= n`` (fewer than two tries on average). :func:`mark_at_random` uses it from
    ``2**32`` up; below, two :func:`multiply_shift` tries per output are cheaper."""
    mask = ~np.uint64(0) >> np.uint64(_leading_zeros(np.uint64(n - 1)))
    while True:
        state, z = splitmix64(state)
        j = z & mask
        if j < np.uint64(n):
            return state, np.int64(j)


@njit(inline="always")
def _write_bits(word, base, out, j):
    """Write ``base + b`` for each set bit ``b`` of ``word``, ascending, at ``out[j:]``;
    returns the next position."""
    while word != 0:
        out[j] = base + trailing_zeros(word)
        j += 1
        word &= word - 1
    return j


@njit(inline="always")
def take_marked(bits, n, out):
    """Write the marked indices of ``range(n)`` into ``out`` in increasing order and clear
    their bits (the bitmap ``bits``, 64 indices per int64 word, is zero after).

    A bitmap of ``n`` indices is ``n / 8`` bytes (12.5 KB for ``n = 10^5``, in the first-level
    cache), so reading a batch back in order costs about one operation per index plus one per
    64 indices of the population.
    """
    j = 0
    for w in range((n + 63) >> 6):
        word = bits[w]
        if word != 0:
            bits[w] = 0
            j = _write_bits(word, w << 6, out, j)


@njit
def take_unmarked(bits, n, out):
    """Write the indices of ``range(n)`` not marked in ``bits`` into ``out``, ascending
    (``bits`` unchanged)."""
    j = 0
    words = (n + 63) >> 6
    for w in range(words):
        word = ~bits[w]
        if w == words - 1 and n & 63:
            word &= (np.int64(1) << (n & 63)) - 1
        j = _write_bits(word, w << 6, out, j)


@njit(inline="always")
def _mark_new(bits, j):
    """Set bit ``j`` of the bitmap ``bits``; 1 if it was clear, else 0 (without a branch:
    the test fails at random, up to two thirds of the time in a race)."""
    w = j >> 6
    bit = np.int64(1) << (j & 63)
    old = bits[w]
    bits[w] = old | bit
    return np.int64((old & bit) == 0)


@njit
def mark_at_random(state, n, drawn, out):
    """Mark ``out.size`` indices of ``range(n)`` not marked in ``drawn``, uniformly at random
    without replacement, writing them to ``out`` in the order drawn. Returns the generator
    state.

    Each try is uniform on ``range(n)`` and kept only if its index is not marked yet, so each
    kept index is uniform on the indices not drawn yet: the law of a stretch of a Fisher–Yates
    shuffle. Below ``2**32`` one SplitMix64 output gives two tries (its high and low halves,
    :func:`multiply_shift`); a second try is not used once the batch is complete.
    """
    m = out.size
    k = 0
    if n > 0xFFFFFFFF:
        while k < m:
            state, j = bounded(state, n)
            out[k] = j
            k += _mark_new(drawn, j)
        return state
    bound = np.uint64(n)
    threshold = lemire_threshold(bound)
    while k < m:
        state, z = splitmix64(state)
        j, accepted = multiply_shift(z >> np.uint64(32), bound, threshold)
        if accepted:
            out[k] = j
            k += _mark_new(drawn, j)
        j, accepted = multiply_shift(z & _LOW32, bound, threshold)
        if accepted and k < m:
            out[k] = j
            k += _mark_new(drawn, j)
    return state


@njit
def draw_unmarked(state, n, drawn, before, out):
    """Draw ``out.size`` indices of ``range(n)`` not marked in ``drawn``, uniformly at random
    without replacement (:func:`mark_at_random`); mark them in ``drawn`` and write them to
    ``out`` in increasing order. Returns the generator state.

    The batch is a uniformly random subset of the indices not drawn yet. A race draws at
    random only while at most two thirds of its population is drawn (the remainder rule), so an
    index costs fewer than three tries. The batch is sorted by reading the bits that the draws
    set (``drawn`` against its copy in ``before``, a bitmap of ``n`` bits left zero), in
    ``O(m + n / 64)``, or by a comparison sort when ``m`` is too small for two passes over
    ``n / 64`` words to pay.
    """
    m = out.size
    if m == 0:
        return state
    words = (n + 63) >> 6
    # A comparison sort costs about 5 ns * m log2(m); the bitmap, about 1 ns per word and 9 ns
    # per index (measured with n = 10^5: they cross near m = 80).
    if 4 * m * max(1, 62 - _leading_zeros(m)) < words:
        state = mark_at_random(state, n, drawn, out)
        out.sort()
        return state
    before[:words] = drawn[:words]
    state = mark_at_random(state, n, drawn, out)
    j = 0
    for w in range(words):
        j = _write_bits(drawn[w] ^ before[w], w << 6, out, j)
        before[w] = 0
    return state


@njit
def clear_marks(bits, marked, n):
    """Zero the bitmap of ``range(n)`` whose marked indices are ``marked``, in
    ``O(min(len(marked), n / 64))``."""
    words = (n + 63) >> 6
    if marked.size < words:
        for k in range(marked.size):
            bits[marked[k] >> 6] = 0
    else:
        bits[:words] = 0
