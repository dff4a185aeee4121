"""Sorted batches of data indices without replacement, drawn against a bitmap.

Races on shared minibatches sum each round's rewards, so only the *set* of a batch matters to
them, while the order of its reads matters to the reward function (ascending indices stream
through memory). Each batch of a population ``range(n)`` is a uniformly random subset of the
indices not drawn before, returned in increasing order (:func:`draw_unmarked`; the rest of a
population by :func:`take_unmarked`): tries uniform on ``range(n)`` are kept when their index is
not marked yet in a bitmap of the drawn indices (the law of a stretch of a Fisher–Yates
shuffle, read as a set). The tries come from a SplitMix64 stream (:func:`splitmix64`; two tries
per output below ``2**32`` by :func:`multiply_shift`, :func:`bounded` from there up) that the
race seeds with one 64-bit word of the caller's generator. No arrangement is kept or restored,
an index costs a few nanoseconds, and a reward function reads its data in one forward sweep.
"""

from __future__ import annotations

import numpy as np

from .._numba import leading_zeros as _leading_zeros
from .._numba import njit, trailing_zeros

__all__ = ["bounded", "clear_marks", "draw_unmarked", "lemire_threshold", "mark_at_random",
           "mark_new", "multiply_shift", "splitmix64", "take_marked", "take_unmarked",
           "write_bits"]
#
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
def write_bits(word, base, out, j):
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
            j = write_bits(word, w << 6, out, j)


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
        j = write_bits(word, w << 6, out, j)


@njit(inline="always")
def mark_new(bits, j):
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
            k += mark_new(drawn, j)
        return state
    bound = np.uint64(n)
    threshold = lemire_threshold(bound)
    while k < m:
        state, z = splitmix64(state)
        j, accepted = multiply_shift(z >> np.uint64(32), bound, threshold)
        if accepted:
            out[k] = j
            k += mark_new(drawn, j)
        j, accepted = multiply_shift(z & _LOW32, bound, threshold)
        if accepted and k < m:
            out[k] = j
            k += mark_new(drawn, j)
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
        j = write_bits(drawn[w] ^ before[w], w << 6, out, j)
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
