"""Pairwise log-potentials ``f(x_i, x_j)`` of the coreference CRF.

:class:`PairPotentials` holds the potentials of one fit in the form the sampler reads them:
features and a bandwidth (``"euclidean"``), a dense matrix or the CSR arrays of a sparse one
(``"precomputed"``), all read factor by factor by the compiled sweeps
(:mod:`sksubsample.cluster._kernels`); or a user's vectorised callable, read by NumPy calls.
It also sums the potential of a whole partition (the diagnostic trace), and checks a callable's
answers for NaN and ``+inf`` (``-inf``, a cannot-link constraint, is allowed).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from . import _kernels

__all__ = ["PairPotentials"]

# Pairs per call when the log-potential of a whole partition is summed (bounds the memory).
_BLOCK = 1 << 20


def _check_values(values, what):
    if not np.isfinite(values).all() and (np.isnan(values).any() or np.isposinf(values).any()):
        raise ValueError(f"{what} returned NaN or +inf log-potentials; they must be finite "
                         "(or -inf for pairs that can never share a cluster)")
    return values


class PairPotentials:
    """The log-potentials of a fit.

    Parameters
    ----------
    kind : {"euclidean", "callable", "precomputed"}
    data : ndarray of shape (n, d), or (n, n) sparse CSR matrix / ndarray for "precomputed"
        A sparse matrix must hold no diagonal and have sorted indices.
    bandwidth : float
        ``f = 1 - ||x_i - x_j||² / (2 bandwidth²)`` for "euclidean".
    repulsion : float
        ``f = -repulsion`` for the pairs a sparse "precomputed" matrix does not store.
    func : callable, optional
        ``func(A, B) -> (len(A), len(B))`` for "callable".

    Attributes
    ----------
    compiled : int or None
        How the compiled sweeps read a factor (:data:`~._kernels.EUCLIDEAN`,
        :data:`~._kernels.MATRIX`), "sparse" for the CSR sweep, None for a callable.
    """

    def __init__(self, kind, data, *, bandwidth=1.0, repulsion=5.0, func=None):
        self.kind = kind
        self.data = data
        self.n = data.shape[0]
        self.scale = 1.0 / (2.0 * bandwidth * bandwidth)
        if not np.isfinite(self.scale):
            # 1 - inf * 0 is NaN for duplicate points: refuse before any sweep.
            raise ValueError(f"bandwidth={bandwidth!r} is too small: 1 / (2 bandwidth²) "
                             "overflows")
        self.repulsion = float(repulsion)
        self.func = func
        self.sparse = kind == "precomputed" and sparse.issparse(data)
        if kind == "euclidean":
            self.compiled = _kernels.EUCLIDEAN
            self.matrix = np.ascontiguousarray(data, dtype=np.float64)
        elif kind == "precomputed" and not self.sparse:
            self.compiled = _kernels.MATRIX
            self.matrix = np.ascontiguousarray(data, dtype=np.float64)
        elif self.sparse:
            self.compiled = "sparse"
            self.indptr = np.ascontiguousarray(data.indptr, dtype=np.int64)
            self.indices = np.ascontiguousarray(data.indices, dtype=np.int64)
            self.values = np.ascontiguousarray(data.data, dtype=np.float64)
        else:
            self.compiled = None

    def pairs(self, i, js):
        """``f(x_i, x_j)`` for the mentions ``js`` (never ``i`` itself), shape ``(len(js),)``."""
        if self.kind == "callable":
            values = np.asarray(self.func(self.data[i:i + 1], self.data[js]), dtype=np.float64)
            if values.shape != (1, len(js)):
                raise ValueError(f"metric(A, B) must return an array of shape (len(A), len(B)) "
                                 f"= {(1, len(js))}, got {values.shape}")
            return _check_values(values[0], "metric(A, B)")
        return self.row(i)[js]

    def row(self, i):
        """``f(x_i, x_j)`` for every ``j``, shape ``(n,)``; entry ``i`` is meaningless."""
        if self.kind == "callable":
            values = np.asarray(self.func(self.data[i:i + 1], self.data), dtype=np.float64)
            if values.shape != (1, self.n):
                raise ValueError(f"metric(A, B) must return an array of shape (len(A), len(B)) "
                                 f"= {(1, self.n)}, got {values.shape}")
            values = values[0].copy()
            values[i] = 0.0  # f(x_i, x_i) is no factor of the model: never checked
            return _check_values(values, "metric(A, B)")
        if self.kind == "euclidean":
            diff = self.matrix - self.matrix[i]
            return 1.0 - self.scale * np.einsum("ij,ij->i", diff, diff)
        if self.sparse:
            out = np.full(self.n, -self.repulsion)
            lo, hi = self.indptr[i], self.indptr[i + 1]
            out[self.indices[lo:hi]] = self.values[lo:hi]
            return out
        return self.matrix[i].copy()

    def partition_sum(self, labels, clusters):
        """``Σ_{a<b, same cluster} f(x_a, x_b)`` of a partition given by ``labels`` and the
        member arrays ``clusters``."""
        if self.sparse:
            # One pass over the stored entries; unstored same-cluster pairs carry -repulsion.
            rows = np.repeat(np.arange(self.n), np.diff(self.indptr))
            same = labels[rows] == labels[self.indices]
            sizes = np.array([c.size for c in clusters], dtype=np.float64)
            n_pairs = 0.5 * float(np.sum(sizes * (sizes - 1)))
            stored = 0.5 * float(self.values[same].sum())
            return stored - self.repulsion * (n_pairs - 0.5 * float(np.count_nonzero(same)))
        return float(sum(self.block_sum(c) for c in clusters))

    def block_sum(self, members):
        """``Σ_{a<b} f(x_a, x_b)`` over the pairs of one cluster ``members``."""
        m = len(members)
        if m < 2:
            return 0.0
        n_pairs = 0.5 * m * (m - 1)
        if self.kind == "euclidean":
            # Σ_{a<b} ||x_a - x_b||² = m Σ_a ||x_a - mean||², exact in O(m d).
            block = self.matrix[members]
            centred = block - block.mean(axis=0)
            return n_pairs - self.scale * m * float(np.einsum("ij,ij->", centred, centred))
        if self.kind == "precomputed":
            sub = self.matrix[np.ix_(members, members)]
            return 0.5 * float(sub.sum() - np.trace(sub))
        total = 0.0
        step = max(1, _BLOCK // m)  # row blocks bound the memory of large clusters
        for start in range(0, m - 1, step):
            rows = members[start:start + step]
            values = np.asarray(self.func(self.data[rows], self.data[members]), dtype=np.float64)
            if values.shape != (len(rows), m):
                raise ValueError(f"metric(A, B) must return an array of shape (len(A), len(B)) "
                                 f"= {(len(rows), m)}, got {values.shape}")
            upper = np.arange(m)[None, :] > (start + np.arange(len(rows)))[:, None]
            total += float(_check_values(values[upper], "metric(A, B)").sum())
        return total
