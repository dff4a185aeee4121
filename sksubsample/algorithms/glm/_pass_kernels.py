"""Compiled pieces of a pass over a block of rows: the logistic row sums, and Gram matrices by bin.

A pass of the set-up reads every row once and sums, at a point θ, the log-likelihood, its
gradient and its Hessian, and the Gram matrices of the residual bound by bins of the linear
predictor (:mod:`._bins`). Two things of a block are best done row by row in compiled code, on
the rows as stored (float32 or float64, read as they are; every sum in float64):

* :func:`logistic_rows`: the linear predictors ``z = xᵀθ``, the first derivatives
  ``c = ω s σ(-s z)``, the curvatures ``φ = σ(z) σ(-z) = |∂²ℓ/∂z²|``, the log-likelihood and the
  gradient, each row's bin of ``|z|``, and on request the rows scaled by ``√(ω φ)`` (whose
  Gram matrix, one BLAS call, is minus the Hessian); one exponential and one logarithm per row
  (``log σ`` is the MH tests' :func:`~sksubsample.algorithms.mh.log_expit`, the law of every
  logistic term of the package, given the exponential), both in arithmetic only
  (:mod:`sksubsample.algorithms._elementary`) in a loop of the rows' terms that is packed:
  the C library's ``log1p`` alone had taken about half of a row's time;
* :func:`grams_by_bin`: ``sum_{i in bin b} v_i x_i x_iᵀ`` for every bin, from the rows sorted
  by bin (a counting sort into scaled float64 rows, then one BLAS product per bin present), so
  that the bins cost one Gram matrix of the block, not one per bin.
"""

from __future__ import annotations

import math

import numpy as np

from .._elementary import exp_nonpositive, log1p_unit
from .._numba import njit
from ..mh import log_expit_from
from ._kernels import (
    axpy_rows,
    dense_dots,
    logistic_derivatives,
    logistic_terms_given,
    row_dot,
    row_dots,
)
from ._packed import ROWS

__all__ = ["grams_by_bin", "logistic_rows", "screen_bounds", "shifted_norms",
           "third_derivatives"]


@njit(error_model="numpy")
def logistic_rows(X, intercept, signs, weights, theta, bin_scale, n_bins, z, c, curvature,
                  bins, grad, scaled, terms):
    """One block of dense rows at ``θ`` (see the module docstring); returns the block's
    log-likelihood ``sum_i ω_i log σ(s_i z_i)`` and the first row whose ``z`` is not finite
    (-1 for none: a NaN or an infinity anywhere in a row makes its ``z`` so).

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The stored rows (float32 or float64).
    intercept : bool
        Whether the design has a column of ones after X (``θ`` then has ``p + 1`` entries).
    signs : ndarray of shape (n,)
        The response as ``±1``.
    weights : ndarray of shape (n,) or (0,)
        Case weights ``ω`` (empty: all ones).
    theta : ndarray of shape (d,)
    bin_scale : float
        Rows go to bin ``min(floor(|z| bin_scale), n_bins)`` (bin ``n_bins``: the far rows).
    n_bins : int
    z, c, curvature : ndarray of shape (n,)
        Written: ``z_i``, ``c_i = ω_i s_i σ(-s_i z_i)`` and ``φ_i = σ(z_i) σ(-z_i)``.
    bins : ndarray of int64 of shape (n,)
        Written: the rows' bins.
    grad : ndarray of shape (d,)
        Incremented by ``sum_i c_i x_i``.
    scaled : ndarray of shape (n, d) or (0, d)
        Written unless empty: the design's rows times ``√(ω_i φ_i)`` (float32 or float64).
    terms : ndarray of shape (n,)
        Scratch (float64).
    """
    n, p = X.shape
    d = theta.size
    first_bad = -1
    empty, no_rows = np.empty(0), np.empty(0, dtype=np.int64)
    row_dots(X, empty, no_rows, no_rows, False, intercept, 0, n, theta, z)
    for i in range(n):
        if not math.isfinite(z[i]):
            if first_bad < 0:
                first_bad = i
            z[i] = 0.0
    # The rows' terms in a loop of their own, without a sum or a call: packed. The flag a
    # constant in each loop (LLVM does not unswitch it).
    if weights.size:
        _row_terms(z, signs, weights, True, bin_scale, n_bins, c, curvature, bins, terms)
    else:
        _row_terms(z, signs, weights, False, bin_scale, n_bins, c, curvature, bins, terms)
    total = 0.0
    for i in range(n):
        total += terms[i]
    # (four rows per pass over the gradient: a fourth of its loads and stores, the same bits)
    axpy_rows(X, empty, no_rows, no_rows, False, intercept, 0, n, c, grad)
    if scaled.shape[0] > 0:
        roots = terms  # (free again)
        for i in range(n):
            roots[i] = math.sqrt((weights[i] if weights.size else 1.0) * curvature[i])
        for i in range(n):
            root = roots[i]
            for j in range(p):
                scaled[i, j] = X[i, j] * root
            if intercept:
                scaled[i, d - 1] = root
    return total, first_bad


@njit(inline="always")
def _row_terms(z, signs, weights, weighted, bin_scale, n_bins, c, curvature, bins, terms):
    """``c_i``, ``φ_i``, the bins and ``ω_i log σ(s_i z_i)`` of rows whose ``z_i`` are known,
    with the exponential and ``log1p`` in arithmetic only
    (:mod:`sksubsample.algorithms._elementary`), so that the loop is packed."""
    for i in range(z.size):
        zi = z[i]
        s = signs[i]
        w = weights[i] if weighted else 1.0
        e = exp_nonpositive(-abs(zi))
        tail, phi = logistic_terms_given(zi, s, e)
        c[i] = w * s * tail  # (the chain's proxy coefficient: logistic_derivatives)
        curvature[i] = phi
        terms[i] = w * log_expit_from(s * zi, log1p_unit(e))
        scaled_z = abs(zi) * bin_scale
        bins[i] = n_bins if not scaled_z < n_bins else int(scaled_z)


@njit
def grams_by_bin(X, intercept, bins, scale, n_bins, sorted_rows, out):
    """``out[b] += sum_{i: bins[i] = b} scale_i² x_i x_iᵀ`` for ``b`` in ``0..n_bins``.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The rows (float32 or float64; dense).
    intercept : bool
        Whether the design is X then a column of ones.
    bins : ndarray of int64 of shape (n,)
        Each row's bin, in ``0..n_bins``.
    scale : ndarray of shape (n,)
        ``√v_i`` of each row's weight ``v_i``.
    n_bins : int
    sorted_rows : ndarray of shape (>= n, d)
        Scratch (float64): the scaled rows sorted by bin.
    out : ndarray of shape (n_bins + 1, d, d)
    """
    n, p = X.shape
    counts = np.zeros(n_bins + 2, dtype=np.int64)
    for i in range(n):
        counts[bins[i] + 1] += 1
    for b in range(n_bins + 1):
        counts[b + 1] += counts[b]
    position = counts[:n_bins + 1].copy()
    for i in range(n):
        k = position[bins[i]]
        position[bins[i]] = k + 1
        root = scale[i]
        for j in range(p):
            sorted_rows[k, j] = X[i, j] * root
        if intercept:
            sorted_rows[k, p] = root
    for b in range(n_bins + 1):
        start, stop = counts[b], counts[b + 1]
        if stop > start:
            rows = sorted_rows[start:stop]
            out[b] += np.dot(rows.T, rows)


@njit(error_model="numpy")
def shifted_norms(W, shift, out):
    """``out[i] = ‖W[:, i] + shift‖`` in float64 (``W`` the transposed rows times ``K⁻ᵀ``,
    ``d × n``, without the intercept's column, whose share ``shift`` is the same for every
    row). Each row's squares are summed in column order; the loop over the rows is the inner
    one, so that it is packed (a row's sum across its columns would not be)."""
    d, n = W.shape
    for i in range(n):
        out[i] = 0.0
    for j in range(d):
        shift_j = shift[j]
        for i in range(n):
            v = np.float64(W[j, i]) + shift_j
            out[i] += v * v
    for i in range(n):
        out[i] = math.sqrt(out[i])


@njit(error_model="numpy")
def screen_bounds(X, directions, shift, weights, rest, intercept, out):
    """``out[i] = sum_k w_k (u_kᵀx_i + s_k)² + rest (‖x_i‖² + [intercept])``, the bound of
    squared leverages of a :class:`~._leverage.LeverageScreen`, for every row of ``X``.

    Summed in float64, four rows at a time: each row's projections and squared norm are dot
    products in the lanes of :func:`~._packed.lane_sums` (:func:`~._kernels.dense_dots` and
    :func:`~._kernels.row_dot`: the rows are read from cache once per direction), so that no
    array as large as the rows is made (the two BLAS products it replaces made three, and
    took about 1.3 times as long at 21 columns). Its rounding is less than the rows'
    precision allows for, which the screen's margin covers.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The stored rows (float32 or float64, dense).
    directions : ndarray of shape (r, p)
        ``u_k`` on the stored columns, one per row.
    shift, weights : ndarray of shape (r,)
        ``u_k`` on the intercept's column, and ``λ_k - λ_r``.
    rest : float
    intercept : bool
    out : ndarray of float64 of shape (n,)
        Written.
    """
    n = X.shape[0]
    ones = 1.0 if intercept else 0.0
    empty, no_rows = np.empty(0), np.empty(0, dtype=np.int64)
    for i in range(n):
        out[i] = rest * (row_dot(X, empty, no_rows, no_rows, False, False, i, X[i]) + ones)
    first = 0
    while first + ROWS <= n:
        for k in range(directions.shape[0]):
            u, s, w = directions[k], np.float64(shift[k]), weights[k]
            a, b, c, e = dense_dots(X, False, first, u)
            out[first] += w * (a + s) * (a + s)
            out[first + 1] += w * (b + s) * (b + s)
            out[first + 2] += w * (c + s) * (c + s)
            out[first + 3] += w * (e + s) * (e + s)
        first += ROWS
    for i in range(first, n):
        for k in range(directions.shape[0]):
            a = row_dot(X, empty, no_rows, no_rows, False, False, i, directions[k])
            a += np.float64(shift[k])
            out[i] += weights[k] * a * a


@njit
def third_derivatives(X, intercept, signs, weights, reference, out):
    """``out[i] = t_i``, the third derivative of ``ℓ_i`` at ``ẑ_i = x_iᵀθ̂`` (``θ̂`` the
    ``reference``), as the chain's proxies compute it (:func:`~._kernels.logistic_derivatives`):
    the third-order sum over the rows is then the exact sum of the proxies the chain uses."""
    empty, no_rows = np.empty(0), np.empty(0, dtype=np.int64)
    for i in range(X.shape[0]):
        z_hat = row_dot(X, empty, no_rows, no_rows, False, intercept, i, reference)
        out[i] = logistic_derivatives(z_hat, signs[i], weights[i] if weights.size else 1.0,
                                      3)[2]
