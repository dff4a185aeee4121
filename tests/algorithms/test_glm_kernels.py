"""The per-datum logistic kernels: batch sums against their per-term values."""

import math

import numpy as np
import pytest
from scipy import sparse

from sksubsample.algorithms._numba import read_only
from sksubsample.algorithms.glm import _kernels as kernels

# The arrays the kernels only read are given read-only, as the package gives them (the same
# compiled specializations: a writable one of these kernels takes a minute to compile).


def _kernel_design(X, csr, intercept):
    if csr:
        M = sparse.csr_matrix(X)
        arrays = (np.empty((0, X.shape[1])), M.data, M.indices.astype(np.int64),
                  M.indptr.astype(np.int64))
    else:
        arrays = (X, np.empty(0), np.empty(0, np.int64), np.empty(0, np.int64))
    return (*map(read_only, arrays), csr, intercept)


def _design(rng, n, d, csr, intercept=False):
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.3] = 0.0
    return _kernel_design(X, csr, intercept)


@pytest.mark.parametrize("csr", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("intercept", [False, True])
def test_batch_sums_are_the_sums_of_the_terms(csr, weighted, intercept):
    # The batch sums read their rows ahead in a separate pass; the sum must be the sum of
    # the per-term kernels over the same rows, whatever the layout.
    rng = np.random.default_rng(0)
    n, d = 500, 9
    design = _design(rng, n, d, csr, intercept)
    signs = read_only(np.where(rng.random(n) < 0.5, 1.0, -1.0))
    weights = read_only(rng.uniform(0.5, 2.0, n) if weighted else np.empty(0))
    theta, theta_new = rng.normal(size=d + intercept), rng.normal(size=d + intercept)
    reference = read_only(rng.normal(size=d + intercept))
    idx = read_only(rng.choice(n, size=37, replace=False).astype(np.int64))
    terms = np.empty(idx.size)
    kernels.residual_terms(*design, signs, weights, reference, 3, theta, theta_new, idx, terms)
    total = kernels.residual_sum(*design, signs, weights, reference, 3, theta, theta_new, idx,
                                 0)
    assert total == pytest.approx(terms.sum(), rel=1e-12, abs=1e-12)
    kernels.loglik_ratio_terms(*design, signs, weights, theta, theta_new, idx, terms)
    total = kernels.loglik_ratio_sum(*design, signs, weights, theta, theta_new, idx, 0)
    assert total == pytest.approx(terms.sum(), rel=1e-12, abs=1e-12)
    # The exact test's sum and the gradient over every row (dense rows four at a time, the
    # terms packed with exponentials and logarithms in arithmetic only; a number of rows that
    # is not a multiple of four too): the terms' sum to rounding, the same bits for both
    # layouts.
    other = _kernel_design(_dense(design), not csr, intercept)
    for n_all in (n, n - 3):
        every = read_only(np.arange(n_all, dtype=np.int64))
        terms = np.empty(n_all)
        kernels.loglik_ratio_terms(*design, signs, weights, theta, theta_new, every, terms)
        total = kernels.loglik_ratio_sum(*design, signs, weights, theta, theta_new, idx, n_all)
        assert total == pytest.approx(terms.sum(), rel=1e-12, abs=1e-12)
        assert total == kernels.loglik_ratio_sum(*other, signs, weights, theta, theta_new, idx,
                                                 n_all)
        gradients = np.empty((2, d + intercept))
        for k, layout in enumerate((design, other)):
            kernels.grad_sum(*layout, signs, weights, theta, n_all, gradients[k])
        np.testing.assert_array_equal(gradients[0], gradients[1])


def _dense(design):
    """The rows of a kernel design as a dense array."""
    X, data, indices, indptr, csr, _ = design
    if not csr:
        return X
    shape = (indptr.size - 1, X.shape[1])
    return sparse.csr_matrix((data, indices, indptr), shape=shape).toarray()


def test_a_nan_in_a_read_row_makes_the_batch_sums_nan():
    rng = np.random.default_rng(1)
    n, d = 200, 5
    X = rng.normal(size=(n, d))
    rows = read_only(X)  # (a view: X's changes below are read)
    signs = read_only(np.ones(n))
    reference = read_only(np.zeros(d))
    theta, theta_new = np.zeros(d), np.full(d, 1e-3)
    idx = read_only(np.arange(0, n, 7, dtype=np.int64))
    args = (*_kernel_design(X, False, False)[1:], signs, read_only(np.empty(0)))
    assert np.isfinite(kernels.residual_sum(rows, *args, reference, 2, theta, theta_new, idx, 0))
    X[idx[2], 3] = np.nan
    assert np.isnan(kernels.residual_sum(rows, *args, reference, 2, theta, theta_new, idx, 0))
    assert np.isnan(kernels.loglik_ratio_sum(rows, *args, theta, theta_new, idx, 0))
    # A NaN in a row outside the batch is never read.
    X[idx[2], 3] = 0.0
    X[1, 0] = np.nan
    assert np.isfinite(kernels.loglik_ratio_sum(rows, *args, theta, theta_new, idx, 0))


@pytest.mark.parametrize("csr", [False, True])
def test_the_intercept_is_a_column_of_ones_not_stored(csr):
    rng = np.random.default_rng(2)
    n, d = 300, 6
    X = rng.normal(size=(n, d)).astype(np.float32)
    ones = np.column_stack([X.astype(np.float64), np.ones(n)])
    signs = read_only(np.where(rng.random(n) < 0.5, 1.0, -1.0))
    theta, theta_new = rng.normal(size=d + 1), rng.normal(size=d + 1)
    idx = read_only(rng.choice(n, size=50, replace=False).astype(np.int64))
    virtual, stored = _kernel_design(X, csr, True), _kernel_design(ones, csr, False)
    no_weights = read_only(np.empty(0))
    for design in (virtual, stored):
        design_terms = np.empty(idx.size)
        kernels.loglik_ratio_terms(*design, signs, no_weights, theta, theta_new, idx,
                                   design_terms)
        gradient = np.empty(d + 1)
        kernels.grad_sum(*design, signs, no_weights, theta, n, gradient)
        if design is virtual:
            expected_terms, expected_gradient = design_terms, gradient
    np.testing.assert_allclose(design_terms, expected_terms, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-12)


@pytest.mark.parametrize("order", [2, 3])
def test_the_residual_is_the_ratio_less_the_taylor_polynomial(order):
    # The proxy's coefficients are the derivatives of ω log σ(s z) at ẑ = xᵀθ̂ (the family's
    # NumPy functions here): the residual is the ratio less the Taylor polynomial of that order.
    from sksubsample.algorithms.glm import BERNOULLI_LOGIT

    rng = np.random.default_rng(3)
    n, d = 50, 4
    X = rng.normal(size=(n, d))
    design = _kernel_design(X, False, False)
    signs = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    weights = rng.uniform(0.5, 2.0, n)
    reference, theta, theta_new = (rng.normal(size=d) for _ in range(3))
    idx = np.arange(n, dtype=np.int64)
    out = np.empty(n)
    kernels.residual_terms(*design, *map(read_only, (signs, weights, reference)), order, theta,
                           theta_new, read_only(idx), out)
    z_hat, u, v = X @ reference, X @ (theta - reference), X @ (theta_new - reference)

    def ell(z):
        return weights * BERNOULLI_LOGIT.loglik(z, signs)

    derivative = [weights * f(z_hat, signs) for f in (BERNOULLI_LOGIT.d1, BERNOULLI_LOGIT.d2,
                                                      BERNOULLI_LOGIT.d3)]

    def taylor(a):
        return sum(derivative[k] * a ** (k + 1) / math.factorial(k + 1) for k in range(order))

    expected = ell(z_hat + v) - ell(z_hat + u) - (taylor(v) - taylor(u))
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-12)
