"""What one block of rows contributes to the passes over a GLM's data when they are not in memory.

Each function here maps one :class:`~sksubsample.algorithms.stores.Block` (rows of the design
with their response and case weights) to a small summary, and each summary type has an
associative ``combine``: :meth:`~sksubsample.algorithms.stores.RowStore.fold` folds them over
the store, block after block or as a tree of Dask tasks. They are module-level functions of
picklable arguments, since Dask may run them on a cluster's workers. The sums are those a
:class:`~._target.GLMTarget` computes on data in memory, over the same blocks of rows (the
design as float64, the per-row derivatives of :func:`~._expansion.taylor_coefficients`, the
bound's weights of :func:`~._expansion.bound_weights`, the cubic sums of
:func:`~._expansion.cubic_pairs`); the per-row terms are the compiled kernels'
(:mod:`._kernels`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _kernels as kernels
from ._expansion import bound_weights, cubic_pairs, taylor_coefficients
from ._leverage import TopRows, merge_top, top_rows

__all__ = ["BoundSums", "NewtonSums", "add", "bound_sums", "design_of", "gradient_sum", "gram",
           "leverage_of", "merge_bound_sums", "merge_newton_sums", "newton_sums", "rows_sum",
           "terms_sum", "with_table"]

_EMPTY = np.empty(0)
_NO_INDICES = np.empty(0, dtype=np.int64)


def design_of(block, intercept):
    """The block's design as float64: its rows of X, then a column of ones when
    ``intercept``."""
    if not intercept:
        return np.asarray(block.X, dtype=np.float64)
    n, d = block.X.shape
    X = np.empty((n, d + 1))
    X[:, :d] = block.X
    X[:, d] = 1.0
    return X


def add(a, b):
    """``a + b``: the combine of sums."""
    return a + b


# ----------------------------------------------------------------------------- Newton pass


class NewtonSums(NamedTuple):
    """The sums of one pass at a point θ: ``sum_i ℓ_i(θ)``, ``sum_i ∇ℓ_i(θ)``,
    ``sum_i ∇²ℓ_i(θ)``; and, when the pass was asked for leverages, the largest leverage
    ``‖K⁻¹x_i‖`` and the rows of largest leverage (:class:`~._leverage.TopRows`)."""

    loglik: float
    grad: np.ndarray
    hess: np.ndarray
    largest: float
    top: TopRows | None


def leverage_of(X, inverse):
    """``‖K⁻¹x_i‖`` of every row of ``X``, given ``K⁻¹`` (``inverse``, of a lower Cholesky
    factor K: one matrix product, where a triangular solve per block is several times
    slower)."""
    whitened = X @ inverse.T
    return np.sqrt(np.einsum("ij,ij->i", whitened, whitened))


def gram(X, v):
    """``Xᵀ diag(v) X`` (``v`` None: all ones), as :meth:`~._target.GLMTarget.weighted_grams`
    sums a block."""
    return X.T @ X if v is None else X.T * v @ X


def newton_sums(block, theta, family, intercept, inverse, capacity):
    """The :class:`NewtonSums` of one block at ``theta`` (with leverages for the inverse
    ``inverse`` of a lower Cholesky factor unless it is None, keeping the ``capacity`` rows of
    largest leverage).

    Parameters
    ----------
    block : Block
    theta : ndarray of shape (d,)
    family : GLMFamily
    intercept : bool
    inverse : ndarray of shape (d, d) or None
    capacity : int

    Returns
    -------
    NewtonSums
    """
    X = design_of(block, intercept)
    z = X @ theta
    c, w, _ = taylor_coefficients(family, z, block.y, block.w, 2)
    loglik = family.loglik(z, block.y)
    if block.w is not None:
        loglik = loglik * block.w
    largest, top = -np.inf, None
    if inverse is not None:
        leverage = leverage_of(X, inverse)
        largest = float(leverage.max())
        rows = block.start + np.arange(X.shape[0], dtype=np.int64)
        top = top_rows(rows, leverage, capacity)
    return NewtonSums(float(np.sum(loglik)), X.T @ c, gram(X, w), largest, top)


def merge_newton_sums(a, b):
    """The :class:`NewtonSums` of two sets of rows (``a``'s first)."""
    top = None if a.top is None else merge_top(a.top, b.top)
    return NewtonSums(a.loglik + b.loglik, a.grad + b.grad, a.hess + b.hess,
                      max(a.largest, b.largest), top)


# ----------------------------------------------------------------------------- bound pass


class BoundSums(NamedTuple):
    """The sums of the pass that fixes the residual bound: the Gram matrices
    ``sum_i M_i(R)² w_i² x_i x_iᵀ`` over the sampled rows (one per radius, then the global
    bound), the cubic sums of :func:`~._expansion.cubic_pairs` over all rows (None at order 2),
    and the exact stratum's rows (their X, y and w, in increasing row order)."""

    grams: np.ndarray
    by_pair: np.ndarray | None
    exact_rows: np.ndarray
    exact_X: np.ndarray
    exact_y: np.ndarray | None
    exact_w: np.ndarray | None


def bound_sums(block, reference, family, intercept, order, radii, exact):
    """The :class:`BoundSums` of one block.

    Parameters
    ----------
    block : Block
    reference : ndarray of shape (d,)
        The expansion point.
    family : GLMFamily
    intercept : bool
    order : {2, 3}
    radii : ndarray
    exact : ndarray of int64
        The exact stratum's rows, sorted (left out of the Gram matrices, kept as rows).

    Returns
    -------
    BoundSums
    """
    X = design_of(block, intercept)
    n, d = X.shape
    z = X @ reference
    lo, hi = np.searchsorted(exact, [block.start, block.start + n])
    local = exact[lo:hi] - block.start
    sampled = np.ones(n, dtype=bool)
    sampled[local] = False
    weights2 = None if block.w is None else block.w**2
    row_weights = bound_weights(family, order, z, radii, weights2)
    if local.size:
        X_sampled = X[sampled]
        row_weights = [v[sampled] for v in row_weights]
    else:
        X_sampled = X
    grams = np.stack([gram(X_sampled, v) for v in row_weights])
    by_pair = None
    if order == 3:
        t = taylor_coefficients(family, z, block.y, block.w, 3)[2]
        by_pair = cubic_pairs(X, t, np.empty((n, d * (d + 1) // 2)))
    return BoundSums(grams, by_pair, exact[lo:hi], block.X[local],
                     None if block.y is None else block.y[local],
                     None if block.w is None else block.w[local])


def merge_bound_sums(a, b):
    """The :class:`BoundSums` of two sets of rows (``a``'s first)."""

    def joined(u, v):
        return None if u is None else np.concatenate([u, v])

    return BoundSums(a.grams + b.grams, None if a.by_pair is None else a.by_pair + b.by_pair,
                     np.concatenate([a.exact_rows, b.exact_rows]),
                     np.concatenate([a.exact_X, b.exact_X]), joined(a.exact_y, b.exact_y),
                     joined(a.exact_w, b.exact_w))


# ----------------------------------------------------------------------------- chain passes


def with_table(X, y, w, reference, family, order):
    """The proxies' coefficients ``(c, w, ẑ, t)`` of rows (the table of
    :class:`~._expansion.GLMTaylorExpansion`, ``t = 0`` at order 2).

    Parameters
    ----------
    X : ndarray of shape (n_rows, d)
        The rows of the design (float64).
    y, w : ndarray of shape (n_rows,) or None
        Their response (signs) and case weights.
    reference : ndarray of shape (d,)
    family : GLMFamily
    order : {2, 3}

    Returns
    -------
    ndarray of shape (n_rows, 4)
    """
    z = X @ reference
    c, w2, t = taylor_coefficients(family, z, y, w, order)
    return np.column_stack([c, w2, z, np.zeros_like(z) if t is None else t])


def terms_sum(block, theta, theta_new, reference, family, intercept, order, residuals, exact):
    """``sum_i l_i`` over the rows of one block not in ``exact`` (sorted rows; empty for every
    row): the log-likelihood ratios ``ℓ_i(θ') - ℓ_i(θ)`` or, when ``residuals``, their
    control-variate residuals around ``reference``.

    Parameters
    ----------
    block : Block
    theta, theta_new : ndarray of shape (d,)
    reference : ndarray of shape (d,)
        The expansion point of the residuals.
    family : GLMFamily
    intercept : bool
    order : {2, 3}
    residuals : bool
    exact : ndarray of int64

    Returns
    -------
    float
    """
    X = design_of(block, intercept)
    n = X.shape[0]
    lo, hi = np.searchsorted(exact, [block.start, block.start + n])
    if lo == hi:
        return rows_sum(X, block.y, block.w, theta, theta_new, reference, family, order,
                        residuals, None)
    idx = np.setdiff1d(np.arange(n), exact[lo:hi] - block.start, assume_unique=True)
    return rows_sum(X, block.y, block.w, theta, theta_new, reference, family, order,
                    residuals, idx)


def rows_sum(X, y, w, theta, theta_new, reference, family, order, residuals, idx):
    """``sum_i l_i`` over the rows ``idx`` of ``X`` (every row when None), as
    :func:`terms_sum` (``X`` the design as float64, ``y`` the signs, ``w`` the case weights or
    None)."""
    n_all = X.shape[0] if idx is None else 0
    idx = _NO_INDICES if idx is None else np.ascontiguousarray(idx, dtype=np.int64)
    if n_all == 0 and idx.size == 0:
        return 0.0
    signs = np.ascontiguousarray(y, dtype=np.float64)
    weights = _EMPTY if w is None else np.ascontiguousarray(w)
    if residuals:
        table = with_table(X, signs, w, reference, family, order)
        return float(kernels.residual_sum(X, _EMPTY, _NO_INDICES, _NO_INDICES, False, signs,
                                          weights, table, theta, theta_new, idx, n_all))
    return float(kernels.loglik_ratio_sum(X, _EMPTY, _NO_INDICES, _NO_INDICES, False, signs,
                                          weights, theta, theta_new, idx, n_all))


def gradient_sum(block, theta, intercept):
    """``sum_i ∇ℓ_i(θ)`` over one block (the compiled kernel's, logistic family)."""
    X = design_of(block, intercept)
    out = np.empty(theta.size)
    kernels.grad_sum(X, _EMPTY, _NO_INDICES, _NO_INDICES, False,
                     np.ascontiguousarray(block.y, dtype=np.float64),
                     _EMPTY if block.w is None else np.ascontiguousarray(block.w), theta,
                     X.shape[0], out)
    return out
