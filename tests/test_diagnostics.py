"""The rank-normalised diagnostics: the shortcuts of check_convergence compute what the
definitions say."""

import numpy as np
from scipy import stats

from sksubsample.diagnostics import (
    _z_scale,
    _z_scale_with_folded,
    check_convergence,
    effective_sample_size,
    split_rhat,
)


def test_ranks_average_ties_like_scipy():
    # MH draws repeat values at every rejection: many ties.
    x = np.round(np.random.default_rng(0).standard_normal((6, 501)), 1)
    expected = stats.norm.ppf((stats.rankdata(x, method="average") - 0.375) / (x.size + 0.25))
    np.testing.assert_allclose(_z_scale(x), expected.reshape(x.shape), rtol=1e-12)


def test_folded_scores_from_one_sort_equal_their_definition():
    rng = np.random.default_rng(1)
    for x in (rng.standard_normal((8, 1000)), np.round(rng.standard_normal((8, 999)), 2),
              rng.exponential(size=(4, 301))):
        z, folded = _z_scale_with_folded(x)
        np.testing.assert_array_equal(z, _z_scale(x))
        np.testing.assert_allclose(folded, _z_scale(np.abs(x - np.median(x))), rtol=1e-12)


def test_check_convergence_returns_the_public_diagnostics():
    rng = np.random.default_rng(2)
    draws = np.cumsum(rng.standard_normal((4, 400, 3)), axis=1) * 0.05 + rng.standard_normal(
        (4, 400, 3))
    draws[:, :, 2] = np.round(draws[:, :, 2], 1)  # ties
    rhat, ess = check_convergence(draws)
    np.testing.assert_allclose(rhat, split_rhat(draws), rtol=1e-12)
    np.testing.assert_allclose(ess, effective_sample_size(draws), rtol=1e-12)
