"""Compiled helpers shared by the package's kernels."""

import numba
import numpy as np
import pytest

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
