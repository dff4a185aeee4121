"""Sums over every row that a GLM's chains and third-order proxies ask of a row store.

Module-level functions of one read unit (a :class:`~sksubsample.algorithms.stores.Block`) and
picklable arguments, folded by :meth:`~sksubsample.algorithms.stores.RowStore.fold` (as Dask
tasks where the rows live, for a Dask array): the log-likelihood ratios or their control-variate
residuals over every row (the steps whose test reads all rows), the full-data gradient, the
third-order sums of the proxies, and the Lipschitz bound's sums. The per-row terms are the
compiled kernels' (:mod:`._kernels`), on the rows as stored.
"""

from __future__ import annotations

import numpy as np

from . import _kernels as kernels
from ._kernel_args import NO_ROWS, NO_VALUES, kernel_array
from ._pass import design_of
from ._pass_kernels import third_derivatives
from ._proxies import cubic_pairs, taylor_coefficients

__all__ = ["add", "cubic_sums", "gradient_sum", "largest_row_norm", "rows_sum", "terms_sum",
           "weighted_gram"]

def add(a, b):
    """``a + b``: the combine of sums."""
    return a + b


def _kernel_rows(X):
    """The six design arguments of the kernels for dense stored rows (without intercept)."""
    return kernel_array(X, None), NO_VALUES, NO_ROWS, NO_ROWS, False


def rows_sum(X, intercept, y, w, theta, theta_new, reference, family, order, residuals, idx):
    """``sum_i l_i`` over the rows ``idx`` of stored rows ``X`` (every row when None): the
    log-likelihood ratios ``ℓ_i(θ') - ℓ_i(θ)`` or, when ``residuals``, their control-variate
    residuals around ``reference``.

    Parameters
    ----------
    X : ndarray of shape (n_rows, p)
    intercept : bool
    y, w : ndarray of shape (n_rows,) or None
        The signs and the case weights.
    theta, theta_new, reference : ndarray of shape (d,)
    family : GLMFamily
    order : {2, 3}
    residuals : bool
    idx : ndarray of int or None

    Returns
    -------
    float
    """
    n_all = X.shape[0] if idx is None else 0
    idx = NO_ROWS if idx is None else kernel_array(idx, np.int64)
    if n_all == 0 and idx.size == 0:
        return 0.0
    if not isinstance(X, np.ndarray):  # a CSR block
        X = X.toarray()
    signs = kernel_array(y)
    weights = NO_VALUES if w is None else kernel_array(w)
    design = (*_kernel_rows(X), bool(intercept))
    if residuals:
        return float(kernels.residual_sum(*design, signs, weights,
                                          kernel_array(reference), order, theta,
                                          theta_new, idx, n_all))
    return float(kernels.loglik_ratio_sum(*design, signs, weights, theta, theta_new, idx,
                                          n_all))


def terms_sum(unit, theta, theta_new, reference, family, intercept, order, residuals, exact):
    """:func:`rows_sum` over the rows of one unit not in ``exact`` (sorted rows; empty for
    every row).

    Parameters
    ----------
    unit : Block
    theta, theta_new, reference : ndarray of shape (d,)
    family : GLMFamily
    intercept : bool
    order : {2, 3}
    residuals : bool
    exact : ndarray of int64

    Returns
    -------
    float
    """
    n = unit.X.shape[0]
    lo, hi = np.searchsorted(exact, [unit.start, unit.start + n])
    idx = None
    if hi > lo:
        idx = np.setdiff1d(np.arange(n), exact[lo:hi] - unit.start, assume_unique=True)
    return rows_sum(unit.X, intercept, unit.y, unit.w, theta, theta_new, reference, family,
                    order, residuals, idx)


def gradient_sum(unit, theta, intercept):
    """``sum_i ∇ℓ_i(θ)`` over one unit (the compiled kernel's, logistic family)."""
    X = unit.X if isinstance(unit.X, np.ndarray) else unit.X.toarray()
    out = np.empty(theta.size)
    kernels.grad_sum(*_kernel_rows(X), bool(intercept), kernel_array(unit.y),
                     NO_VALUES if unit.w is None else kernel_array(unit.w), theta,
                     X.shape[0], out)
    return out


def cubic_sums(unit, reference, family, intercept):
    """The third-order sums of one unit: ``P[l, p] = sum_i t_i x_il x_ij x_ik`` by pairs
    ``j <= k`` (:func:`~._proxies.cubic_pairs`), with ``t_i`` the third derivative of
    ``ℓ_i`` at the expansion point ``reference`` (for the logistic family, as the chain's
    proxies compute it: :func:`~._pass_kernels.third_derivatives`).

    Parameters
    ----------
    unit : Block
    reference : ndarray of shape (d,)
    family : GLMFamily
    intercept : bool

    Returns
    -------
    ndarray of shape (d, d (d + 1) / 2)
    """
    d = reference.size
    out = np.zeros((d, d * (d + 1) // 2))
    step = max(256, min(16384, (1 << 18) // d))
    scratch = np.empty((min(step, unit.X.shape[0]), d * (d + 1) // 2))
    for start in range(0, unit.X.shape[0], step):
        design = design_of(unit.X[start:start + step], intercept)
        if not isinstance(design, np.ndarray):
            design = design.toarray()
        rows = slice(start, start + design.shape[0])
        w = None if unit.w is None else unit.w[rows]
        if family.kernel == "logistic":
            X = unit.X[rows]
            t = np.empty(design.shape[0])
            third_derivatives(kernel_array(X if isinstance(X, np.ndarray) else X.toarray(), None),
                              bool(intercept), kernel_array(unit.y[rows]),
                              NO_VALUES if w is None else kernel_array(w), reference, t)
        else:
            t = taylor_coefficients(family, design @ reference, unit.y[rows], w, 3)[2]
        out += cubic_pairs(design, t, scratch)
    return out


def weighted_gram(unit, intercept):
    """``Xᵀ diag(w²) X`` over one unit (the Lipschitz variance bound's)."""
    design = design_of(unit.X, intercept)
    if isinstance(design, np.ndarray):
        scaled = design if unit.w is None else design * unit.w[:, None]
        return scaled.T @ scaled
    scaled = design if unit.w is None else design.multiply(unit.w[:, None]).tocsr()
    return (scaled.T @ scaled).toarray()


def largest_row_norm(unit, intercept):
    """``max_i w_i ‖x_i‖`` over one unit."""
    design = design_of(unit.X, intercept)
    squares = (np.einsum("ij,ij->i", design, design) if isinstance(design, np.ndarray)
               else np.asarray(design.multiply(design).sum(axis=1)).ravel())
    norms = np.sqrt(squares)
    return float(np.max(norms if unit.w is None else norms * unit.w)) if norms.size else 0.0
