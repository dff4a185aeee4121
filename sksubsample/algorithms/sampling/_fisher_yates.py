"""Batches of data indices without replacement as stretches of one Fisher–Yates shuffle.

Every batch of a population ``range(n)`` is a uniformly random subset of the indices not drawn
before, in random order: the batches are successive stretches of one Fisher–Yates shuffle of
``range(n)`` started from the identity arrangement. Position ``k`` of the shuffle takes the
value at a uniform position ``j`` in ``[k, n)`` (one ``Generator.integers(0, n - k)`` per
index), so the whole stream is fixed by the generator's state, whichever caller draws it.

The shuffle is kept *sparse*: only positions that were swapped are stored, in an
open-addressing hash table (:func:`fisher_yates_sparse`), so a batch of ``m`` costs ``O(m)``
whatever ``n``. A shuffle that is about to draw more than a quarter of its population
materialises the arrangement once (``O(n)``, proportionate then) and continues on the dense
array (:func:`fisher_yates_dense`). Both representations give the same indices for the same
generator state.

One compiled state carries the law for every caller:

* :class:`Shuffle`, one population: the subsampled MH tests (through :class:`IndexSampler`),
  lil'UCB, and the compiled MH chain, which draws a fresh batch at every step
  (:func:`shuffle_restart` keeps the memory);
* :class:`Shuffles`, several populations in one table at disjoint offsets, each with its own
  shuffle: the independent-arms race (App. C.3 of Chen & Ghahramani 2016) and
  :class:`MultiIndexSampler`.

(Races on shared minibatches sum each batch, so only its set matters to them: they draw sorted
sets instead, :mod:`._sorted_sets`.)
"""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.experimental import structref

from .._numba import njit, random_methods

__all__ = ["FREE", "IndexSampler", "MultiIndexSampler", "Shuffle", "Shuffles", "below",
           "fisher_yates_dense", "fisher_yates_sparse", "new_shuffle", "new_shuffles",
           "shuffle_draw", "shuffle_restart", "shuffles_draw", "shuffles_reserve", "slot",
           "table_capacity", "value_at"]

FREE = -1
# Knuth's multiplicative hash (2^32 / golden ratio); the table size is a power of two.
_HASH = 2654435761
_NO_INDICES = np.empty(0, dtype=np.int64)


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
def slot(keys, key):
    """The slot of ``key`` in the open-addressing table, or the free slot where it belongs."""
    mask = keys.size - 1
    h = (key * _HASH) & mask
    while keys[h] != FREE and keys[h] != key:
        h = (h + 1) & mask
    return h


@njit(inline="always")
def table_capacity(n_entries):
    """The capacity of a table for ``n_entries`` swaps: a power of two, at least 16 and at
    least twice the entries, so linear probing stays short."""
    capacity = 16
    while capacity < 2 * n_entries:
        capacity *= 2
    return capacity


@njit
def fisher_yates_sparse(rng, n, count, m, keys, values, out, offset=0):
    """Positions ``count .. count + m - 1`` of a sparse Fisher–Yates shuffle of ``range(n)``.

    ``keys``/``values`` hold the positions swapped so far (as ``offset + position``; a table may
    hold several populations at disjoint offsets) and must have room for ``m`` more entries
    (capacity at least twice the entries). Writes the ``m`` indices into ``out[:m]``.
    """
    for k in range(count, count + m):
        j = k + below(rng, n - k)
        sj = slot(keys, offset + j)
        vj = values[sj] if keys[sj] == offset + j else j
        if j != k:
            sk = slot(keys, offset + k)
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
def _rehash(keys, values, new_keys, new_values):
    for s in range(keys.size):
        if keys[s] != FREE:
            t = slot(new_keys, keys[s])
            new_keys[t] = keys[s]
            new_values[t] = values[s]


@njit
def _grown(keys, values, n_entries):
    """``(keys, values)`` of a table with room for ``n_entries`` swaps holding those of the
    given table."""
    capacity = table_capacity(n_entries)
    new_keys = np.full(capacity, FREE, dtype=np.int64)
    new_values = np.empty(capacity, dtype=np.int64)
    _rehash(keys, values, new_keys, new_values)
    return new_keys, new_values


@njit
def value_at(keys, values, offset, position):
    """What position ``position`` of the sparse shuffle at ``offset`` holds."""
    if keys.size == 0:
        return position
    s = slot(keys, offset + position)
    return values[s] if keys[s] == offset + position else position


# ----------------------------------------------------------------------------- one population


@structref.register
class ShuffleType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Shuffle(structref.StructRefProxy):
    """The compiled state of a Fisher–Yates shuffle of ``range(n)`` drawn in batches
    (:func:`new_shuffle`, :func:`shuffle_draw`, :func:`shuffle_restart`).

    Fields: ``n``, ``count`` (indices drawn), ``capacity`` (the table's slots in use: ``keys``
    and ``values`` may be larger, their first ``capacity`` slots are the table), ``keys``,
    ``values``, ``arrangement`` (the dense arrangement, once materialised) and ``dense``.
    """

    @property
    def count(self):
        return _count(self)


@njit
def _count(shuffle):
    return shuffle.count


structref.define_proxy(Shuffle, ShuffleType,
                       ["n", "count", "capacity", "keys", "values", "arrangement", "dense"])


@njit
def new_shuffle(n):
    """A :class:`Shuffle` of ``range(n)`` with nothing drawn."""
    return Shuffle(np.int64(n), np.int64(0), np.int64(0), _NO_INDICES.copy(),
                   _NO_INDICES.copy(), _NO_INDICES.copy(), False)


@njit
def shuffle_restart(shuffle, n):
    """Start a new shuffle of ``range(n)`` in ``shuffle``'s memory (nothing drawn)."""
    shuffle.keys[:shuffle.capacity] = FREE
    shuffle.capacity = 0
    shuffle.count = 0
    shuffle.n = n
    shuffle.dense = False


@njit
def shuffle_draw(shuffle, rng, out):
    """Draw the next ``min(out.size, n - count)`` positions of the shuffle into ``out``.

    Returns the number drawn. The table grows (its capacity doubling) as entries accumulate;
    a draw that would take the shuffle past a quarter of its population first materialises
    the arrangement (the law is unchanged: the same positions hold the same values).
    """
    n = shuffle.n
    count = shuffle.count
    m = min(out.size, n - count)
    if m <= 0:
        return 0
    total = count + m
    if not shuffle.dense and 4 * total > n:
        # Most of the population will be drawn: one O(n) arrangement is proportionate.
        if shuffle.arrangement.size < n:
            shuffle.arrangement = np.empty(n, dtype=np.int64)
        arrangement = shuffle.arrangement[:n]
        for p in range(n):
            arrangement[p] = p
        keys = shuffle.keys[:shuffle.capacity]
        values = shuffle.values[:shuffle.capacity]
        for s in range(keys.size):
            if keys[s] != FREE and count <= keys[s] < n:
                arrangement[keys[s]] = values[s]
        keys[:] = FREE
        shuffle.capacity = 0
        shuffle.dense = True
    if shuffle.dense:
        fisher_yates_dense(rng, count, m, shuffle.arrangement[:n], out[:m])
    else:
        if 2 * total > shuffle.capacity:
            capacity = table_capacity(total)
            if shuffle.keys.size < capacity:
                keys, values = _grown(shuffle.keys[:shuffle.capacity],
                                      shuffle.values[:shuffle.capacity], total)
                shuffle.keys = keys
                shuffle.values = values
            elif shuffle.capacity:
                # The table in the first ``capacity`` slots moves to the first
                # ``new capacity`` slots (its hash mask changes).
                old_keys = shuffle.keys[:shuffle.capacity].copy()
                old_values = shuffle.values[:shuffle.capacity].copy()
                shuffle.keys[:capacity] = FREE
                _rehash(old_keys, old_values, shuffle.keys[:capacity],
                        shuffle.values[:capacity])
            else:
                shuffle.keys[:capacity] = FREE
            shuffle.capacity = capacity
        fisher_yates_sparse(rng, n, count, m, shuffle.keys[:shuffle.capacity],
                            shuffle.values[:shuffle.capacity], out[:m])
    shuffle.count = total
    return m


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
        The generator the shuffle draws from.

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

    __slots__ = ("_shuffle", "n", "rng")

    def __init__(self, n: int, rng: np.random.Generator):
        self.n = int(n)
        self.rng = rng
        self._shuffle = new_shuffle(self.n)

    @property
    def count(self):
        return self._shuffle.count

    def draw(self, m: int) -> np.ndarray:
        """A uniformly random subset of ``min(m, n - count)`` not-yet-drawn indices.

        Parameters
        ----------
        m : int
            Indices wanted.

        Returns
        -------
        ndarray of intp, in random order
        """
        m = max(0, min(int(m), self.n - self.count))
        out = np.empty(m, dtype=np.intp)
        if m:
            shuffle_draw(self._shuffle, self.rng, out)
        return out


# ----------------------------------------------------------------------------- populations


@structref.register
class ShufflesType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Shuffles(structref.StructRefProxy):
    """The compiled state of one Fisher–Yates shuffle per population ``range(sizes[k])``, all
    in one sparse table at the disjoint offsets ``offsets[k]`` (:func:`new_shuffles`,
    :func:`shuffles_draw`). Fields: ``sizes``, ``offsets``, ``counts`` (indices drawn from each
    population), ``entries`` (swaps stored), ``keys``, ``values``."""

    @property
    def counts(self):
        return _counts(self)


@njit
def _counts(shuffles):
    return shuffles.counts.copy()


structref.define_proxy(Shuffles, ShufflesType,
                       ["sizes", "offsets", "counts", "entries", "keys", "values"])


@njit
def new_shuffles(sizes):
    """A :class:`Shuffles` of the populations ``range(sizes[k])``, nothing drawn."""
    sizes = sizes.astype(np.int64)
    offsets = np.cumsum(sizes) - sizes
    return Shuffles(sizes, offsets, np.zeros(sizes.size, dtype=np.int64), np.int64(0),
                    np.full(16, FREE, dtype=np.int64), np.empty(16, dtype=np.int64))


@njit
def shuffles_reserve(shuffles, n_new):
    """Make room in the table for ``n_new`` more swaps."""
    needed = shuffles.entries + n_new
    if 2 * needed > shuffles.keys.size:
        keys, values = _grown(shuffles.keys, shuffles.values, needed)
        shuffles.keys = keys
        shuffles.values = values
    shuffles.entries = needed


@njit
def shuffles_draw(shuffles, rng, population, out):
    """Draw the next ``out.size`` positions of population ``population``'s shuffle into
    ``out`` (room reserved first with :func:`shuffles_reserve`; at most what is left)."""
    k = population
    count = shuffles.counts[k]
    fisher_yates_sparse(rng, shuffles.sizes[k], count, out.size, shuffles.keys,
                        shuffles.values, out, shuffles.offsets[k])
    shuffles.counts[k] = count + out.size


class MultiIndexSampler:
    """Successive batches of distinct indices from ``range(n_k)`` for several populations ``k``.

    Each population has its own Fisher–Yates shuffle (the law of :class:`IndexSampler`), kept
    in one shared table at disjoint offsets (:class:`Shuffles`, the state the independent-arms
    race draws from); population ``k``'s batch is a uniformly random subset of its
    not-yet-drawn indices, independent of the other populations' batches.

    Parameters
    ----------
    sizes : array of int of shape (n_populations,)
        Population sizes ``n_k >= 1``.
    rng : numpy.random.Generator
        The generator the shuffles draw from.

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

    __slots__ = ("_shuffles", "rng", "sizes")

    def __init__(self, sizes, rng: np.random.Generator):
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.rng = rng
        self._shuffles = new_shuffles(self.sizes)

    @property
    def counts(self):
        return self._shuffles.counts

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
        m = np.asarray(m, dtype=np.int64)
        lengths = np.empty(populations.size, dtype=np.int64)
        out = _draw_populations(self._shuffles, self.rng, populations, m, lengths)
        return out.astype(np.intp, copy=False), lengths


@njit
def _draw_populations(shuffles, rng, populations, m, lengths):
    """The batches of :meth:`MultiIndexSampler.draw`, population after population."""
    total = 0
    for j in range(populations.size):
        k = populations[j]
        lengths[j] = min(max(m[j], 0), shuffles.sizes[k] - shuffles.counts[k])
        total += lengths[j]
    shuffles_reserve(shuffles, total)
    out = np.empty(total, dtype=np.int64)
    start = 0
    for j in range(populations.size):
        shuffles_draw(shuffles, rng, populations[j], out[start:start + lengths[j]])
        start += lengths[j]
    return out
