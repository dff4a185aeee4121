"""Compiled helpers shared by the package's kernels."""

import numba
import numpy as np
import pytest

from sksubsample.algorithms._numba import as_read_only, read_only
from sksubsample.algorithms.kernels import permutation_into
from tests._stats import assert_chisquare_pmf


@numba.njit
def _theirs(rng, n):
    return rng.permutation(n)


@numba.njit
def _ours(rng, out, n):
    return permutation_into(rng, out, n).copy()


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000])
def test_a_permutation_drawn_into_a_buffer_is_numbas_own(n):
    # The same permutation, and the stream left in the same state, as numba's permutation of
    # the same generator; the buffer's rest untouched.
    theirs_rng, ours_rng = np.random.default_rng(5), np.random.default_rng(5)
    out = np.full(n + 3, -1, dtype=np.int64)
    for _ in range(3):
        np.testing.assert_array_equal(_ours(ours_rng, out, n), _theirs(theirs_rng, n))
    assert ours_rng.random() == theirs_rng.random()
    assert np.all(out[n:] == -1)


def test_a_permutation_drawn_into_a_buffer_is_uniform():
    # Each of the 6 orders of 3 items about equally often (chi-square, 6 000 draws).
    rng, out = np.random.default_rng(0), np.empty(3, dtype=np.int64)
    orders = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
    samples = [orders.index(tuple(_ours(rng, out, 3))) for _ in range(6000)]
    assert_chisquare_pmf(samples, np.full(6, 1 / 6))


@numba.njit
def _read_sum(rows):
    total = 0
    for r in rows:
        total += r
    return total


@numba.njit
def _sum_of_writable(rows):
    rows[0] += 1  # (writable here)
    return _read_sum(as_read_only(rows))


def test_a_writable_array_reaches_a_kernel_as_read_only_without_a_copy():
    rows = np.arange(5, dtype=np.int64)
    assert _sum_of_writable(rows) == 11 and rows[0] == 1
    # the kernel was compiled for the read-only array only, as for one from Python
    assert [s[0].mutable for s in _read_sum.signatures] == [False]
    assert _read_sum(read_only(rows)) == 11
    assert len(_read_sum.signatures) == 1
    # negative control: the writable array itself is another specialization
    _read_sum(rows)
    assert len(_read_sum.signatures) == 2
