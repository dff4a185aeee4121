"""The Taylor proxies of a GLM's terms, row by row: their coefficients and their third-order sum.

The proxy of row ``i`` around an expansion point θ̂ is the Taylor polynomial of ``ℓ_i`` in its
linear predictor ``z = x_iᵀθ`` at ``ẑ_i = x_iᵀθ̂``: ``h_i = ℓ_i(θ̂) + c_i u + w_i u²/2 (+ t_i u³/6)``
with ``u = x_iᵀ(θ - θ̂)``. :func:`taylor_coefficients` gives ``(c_i, w_i, t_i)``;
:func:`cubic_pairs` and :func:`pack_cubic` sum ``T = sum_i t_i x_i⊗x_i⊗x_i`` in the packed form
the compiled cubic form reads.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cubic_pairs", "pack_cubic", "taylor_coefficients"]


def taylor_coefficients(family, z, y, weights, order):
    """``(c, w, t)`` per row: the derivatives ``∂ℓ/∂z``, ``∂²ℓ/∂z²`` and (at ``order`` 3, else
    None) ``∂³ℓ/∂z³`` at the predictors ``z``, times the case weights (None: all ones).

    Parameters
    ----------
    family : GLMFamily
    z : ndarray of shape (n_rows,)
        The linear predictors at the expansion point.
    y : ndarray of shape (n_rows,)
        The response, in the family's coding.
    weights : ndarray of shape (n_rows,) or None
    order : {2, 3}

    Returns
    -------
    tuple of ndarray
    """
    c, w = family.d1(z, y), family.d2(z, y)
    t = family.d3(z, y) if order == 3 else None
    if weights is not None:
        c, w = c * weights, w * weights
        t = None if t is None else t * weights
    return c, w, t


def cubic_pairs(rows, t, scratch):
    """``P[l, p] = sum_i t_i x_il x_ij x_ik`` over a block of rows, for the pairs ``p = (j, k)``
    with ``j <= k`` in the row-major order of ``triu_indices`` (built by slices rather than a
    gather; BLAS does the sum).

    Parameters
    ----------
    rows : ndarray of shape (n_rows, d)
    t : ndarray of shape (n_rows,)
    scratch : ndarray of shape (>= n_rows, d (d + 1) / 2)

    Returns
    -------
    ndarray of shape (d, d (d + 1) / 2)
    """
    d = rows.shape[1]
    pairs = scratch[:rows.shape[0]]
    column = 0
    for j in range(d):
        np.multiply(rows[:, j:j + 1], rows[:, j:], out=pairs[:, column:column + d - j])
        column += d - j
    return (rows * t[:, None]).T @ pairs


def pack_cubic(by_pair):
    """The sum ``T`` of :func:`cubic_pairs` packed for :func:`~._kernels.cubic_form`: the
    entries ``j <= k <= l`` in lexicographic order, each times its number of permutations.

    Parameters
    ----------
    by_pair : ndarray of shape (d, d (d + 1) / 2)

    Returns
    -------
    ndarray of shape (d (d + 1) (d + 2) / 6,)
    """
    d = by_pair.shape[0]
    upper_j, upper_k = np.triu_indices(d)
    index = np.array([(j, k, m) for j in range(d) for k in range(j, d)
                      for m in range(k, d)], dtype=np.int64).reshape(-1, 3)
    pair_of = np.full((d, d), -1, dtype=np.int64)
    pair_of[upper_j, upper_k] = np.arange(upper_j.size)
    permutations = np.array([6 if j < k < m else (1 if j == m else 3)
                             for j, k, m in index], dtype=np.float64)
    return by_pair[index[:, 2], pair_of[index[:, 0], index[:, 1]]] * permutations
