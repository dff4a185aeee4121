"""Validation of a precomputed log-potential matrix for the pairwise CRF."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import sparse

__all__ = ["check_precomputed"]

# Relative asymmetry tolerated in a precomputed matrix (rounding in the user's computation).
_SYM_RTOL = 1e-10
def _warn_if_distances(X):
    """Warn when a dense precomputed matrix looks like distances rather than log-potentials:
    every pair then attracts every other (``f(i, j) >= 0`` for all pairs), so the model's
    most probable partition is a single cluster, which is almost never what was meant."""
    n = X.shape[0]
    if n < 3:
        return
    off = X[~np.eye(n, dtype=bool)]
    if np.all(off >= 0.0) and np.any(off > 0.0):
        warnings.warn(
            "X: every off-diagonal entry of the precomputed matrix is >= 0, as in a matrix of "
            "distances or similarities; metric='precomputed' expects log-potentials f(i, j) "
            "(log-odds that i and j corefer: positive for likely pairs, negative for "
            "unlikely ones), and with no negative entry every mention attracts every other "
            "and the partition collapses to one cluster. Convert distances D to "
            "log-potentials (e.g. X = threshold - D), or pass the features with "
            "metric='euclidean'", UserWarning, stacklevel=7)


def check_precomputed(X):
    """Validate a precomputed log-potential matrix; return it without its diagonal."""
    if X.shape[0] != X.shape[1]:
        raise ValueError(f"metric='precomputed' needs a square (n, n) matrix X of "
                         f"log-potentials, got shape {X.shape}")
    if sparse.issparse(X):
        coo = sparse.coo_matrix(X)
        coo.sum_duplicates()
        values = coo.data
    else:
        values = X
    if np.isnan(values).any() or np.isposinf(values).any():
        raise ValueError("X holds NaN or +inf log-potentials; they must be finite (or -inf "
                         "for pairs that can never share a cluster)")
    if not sparse.issparse(X):
        X = np.array(X, dtype=np.float64)  # a copy: its diagonal is cleared
        np.fill_diagonal(X, 0.0)  # the diagonal is no factor of the model
        _warn_if_distances(X)
        if not np.allclose(X, X.T, rtol=_SYM_RTOL, atol=0.0):  # -inf equals -inf here
            raise ValueError("metric='precomputed' needs a symmetric X: f(i, j) = f(j, i)")
        return X
    off = coo.row != coo.col  # the diagonal is no factor of the model
    rows, cols, vals = coo.row[off], coo.col[off], values[off].astype(np.float64)
    # Symmetric in which pairs are stored (an unstored pair means -repulsion) and in values.
    forward = np.lexsort((cols, rows))
    backward = np.lexsort((rows, cols))
    if not (np.array_equal(rows[forward], cols[backward])
            and np.array_equal(cols[forward], rows[backward])
            and np.allclose(vals[forward], vals[backward], rtol=_SYM_RTOL, atol=0.0)):
        raise ValueError("metric='precomputed' needs a symmetric X: the same pairs stored "
                         "in both triangles with f(i, j) = f(j, i)")
    # Explicit zeros are stored potentials (f = 0), so the matrix is built without pruning.
    n = X.shape[0]
    out = sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))
    out.sort_indices()
    return out
