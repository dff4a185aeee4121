"""Pairwise log-potentials ``f(x_i, x_j)`` of the coreference CRF.

:class:`PairPotentials` holds the potentials of one fit: features and a bandwidth
(``"euclidean"``), a dense matrix or the CSR arrays of a sparse one (``"precomputed"``), or a
user's vectorised callable. It sums the potential of a whole partition (the diagnostic trace)
and checks a callable's answers for NaN and ``+inf`` (``-inf``, a cannot-link constraint, is
allowed).

The compiled sweeps read the potentials of a row ``i`` through two generic operations
(:func:`~sksubsample.algorithms.kernels.generic`) on a small value, :meth:`PairPotentials.compiled`:

:func:`potential`
    one factor ``f(x_i, x_j)`` (:class:`FeaturePotentials`, :class:`MatrixPotentials`;
    :class:`StoredPotentials` reads the stored value at a position of the CSR arrays);
:func:`potentials`, :func:`add_row_scores`, :func:`member_sum`
    the factors of ``i`` with several mentions at once, for every kind, including a callable
    (:class:`CallbackPotentials`, called back from compiled code in object mode).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import objmode
from scipy import sparse

from ..algorithms.kernels import call_back, checked_array, generic, kernel_array, njit

__all__ = ["CallbackPotentials", "FeaturePotentials", "MatrixPotentials", "PairPotentials",
           "StoredPotentials", "add_row_scores", "callback_pairs", "member_sum", "potential",
           "potentials"]

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
    sparse : bool
        A sparse ``"precomputed"`` matrix: stored pairs and ``-repulsion`` for the others.
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
        # Read-only views, whether the caller's arrays are writable or not (a read-only memory
        # map from joblib, say): the compiled sweeps only read them, and numba compiles them
        # once per argument type, a read-only array being another type than a writable one.
        if kind == "euclidean" or (kind == "precomputed" and not self.sparse):
            self.matrix = kernel_array(data)
        elif self.sparse:
            self.indptr = kernel_array(data.indptr, np.int64)
            self.indices = kernel_array(data.indices, np.int64)
            self.values = kernel_array(data.data)

    def compiled(self, handle=-1):
        """What the compiled dense sweep reads: :class:`FeaturePotentials`,
        :class:`MatrixPotentials`, or for a callable :class:`CallbackPotentials` of the
        ``handle`` its :meth:`pairs` is registered under
        (:func:`~sksubsample.algorithms.kernels.push_callback`)."""
        if self.kind == "euclidean":
            return FeaturePotentials(self.matrix, self.scale)
        if self.kind == "callable":
            return CallbackPotentials(handle)
        return MatrixPotentials(self.matrix)

    def _metric(self, A, B):
        """``func(A, B)`` as float64 of shape ``(len(A), len(B))``, or a clear error."""
        return checked_array(self.func(A, B), (len(A), len(B)), "metric(A, B)")

    def pairs(self, i, js):
        """``f(x_i, x_j)`` for the mentions ``js`` (never ``i`` itself), shape ``(len(js),)``."""
        if self.kind == "callable":
            values = self._metric(self.data[i:i + 1], self.data[js])
            return _check_values(values[0], "metric(A, B)")
        return self.row(i)[js]

    def row(self, i):
        """``f(x_i, x_j)`` for every ``j``, shape ``(n,)``; entry ``i`` is meaningless."""
        if self.kind == "callable":
            values = self._metric(self.data[i:i + 1], self.data)[0].copy()
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
        member arrays ``clusters`` (a callable returning them: sparse potentials need only the
        labels)."""
        if self.sparse:
            # One pass over the stored entries; unstored same-cluster pairs carry -repulsion.
            rows = np.repeat(np.arange(self.n), np.diff(self.indptr))
            same = labels[rows] == labels[self.indices]
            sizes = np.bincount(labels).astype(np.float64)
            n_pairs = 0.5 * float(np.sum(sizes * (sizes - 1)))
            stored = 0.5 * float(self.values[same].sum())
            return stored - self.repulsion * (n_pairs - 0.5 * float(np.count_nonzero(same)))
        return float(sum(self.block_sum(c) for c in clusters()))

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
            values = self._metric(self.data[rows], self.data[members])
            upper = np.arange(m)[None, :] > (start + np.arange(len(rows)))[:, None]
            total += float(_check_values(values[upper], "metric(A, B)").sum())
        return total


# ----------------------------------------------------------------------------- compiled forms


class FeaturePotentials(NamedTuple):
    """``f = 1 - scale ||x_i - x_j||²`` of the rows of ``X``."""

    X: np.ndarray
    scale: float


class MatrixPotentials(NamedTuple):
    """``f = X[i, j]`` of a dense matrix."""

    X: np.ndarray


class StoredPotentials(NamedTuple):
    """The stored potentials of a CSR matrix: "mention" ``j`` is a position in ``values``."""

    values: np.ndarray


class CallbackPotentials(NamedTuple):
    """A callable's potentials, through :meth:`PairPotentials.pairs` registered as
    ``handle``."""

    handle: int


@generic
def potential(pot, i, j):
    """One factor ``f(x_i, x_j)`` (compiled potentials)."""


@generic
def potentials(pot, i, js, out):
    """``out[k] = f(x_i, x_{js[k]})`` for every ``k``."""


@potential.implement(FeaturePotentials)
@njit(inline="always")
def _feature_potential(pot, i, j):
    X = pot.X
    s = 0.0
    for d in range(X.shape[1]):
        t = X[i, d] - X[j, d]
        s += t * t
    return 1.0 - pot.scale * s


@potential.implement(MatrixPotentials)
@njit(inline="always")
def _matrix_potential(pot, i, j):
    return pot.X[i, j]


@potential.implement(StoredPotentials)
@njit(inline="always")
def _stored_potential(pot, i, j):
    return pot.values[j]


@njit
def _compiled_potentials(pot, i, js, out):
    for k in range(js.size):
        out[k] = potential(pot, i, js[k])


for _cls in (FeaturePotentials, MatrixPotentials, StoredPotentials):
    potentials.implement(_cls)(_compiled_potentials)


@potentials.implement(CallbackPotentials)
@numba.njit(cache=True)  # object mode holds the GIL: without nogil, which numba warns about
def _callback_potentials(pot, i, js, out):
    handle = pot.handle
    with objmode(values="float64[::1]"):
        values = np.ascontiguousarray(call_back(handle, i, js), dtype=np.float64)
    out[:] = values


def callback_pairs(pot):
    """The callable registered for :class:`CallbackPotentials`: ``(i, js) -> f(x_i, x_js)``
    (checked: shape, NaN and ``+inf``)."""

    def pairs(i, js):
        return pot.pairs(int(i), js)

    return pairs



@generic
def add_row_scores(pot, i, labels, scores):
    """``scores[labels[j]] += f(x_i, x_j)`` for every mention ``j != i``, skipping the
    clusters whose score is NaN (marked so by the caller); returns the factors read."""


@generic
def member_sum(pot, i, members):
    """``Σ_j f(x_i, x_j)`` over the mentions ``members`` (in order)."""


@njit
def _compiled_add_row_scores(pot, i, labels, scores):
    n_read = 0
    for j in range(labels.size):
        if j != i:
            k = labels[j]
            if scores[k] == scores[k]:
                scores[k] += potential(pot, i, j)
                n_read += 1
    return n_read


@njit
def _compiled_member_sum(pot, i, members):
    s = 0.0
    for q in range(members.size):
        s += potential(pot, i, members[q])
    return s


for _cls in (FeaturePotentials, MatrixPotentials):
    add_row_scores.implement(_cls)(_compiled_add_row_scores)
    member_sum.implement(_cls)(_compiled_member_sum)


@add_row_scores.implement(CallbackPotentials)
@njit
def _callback_add_row_scores(pot, i, labels, scores):
    js = np.empty(labels.size, dtype=np.int64)
    m = 0
    for j in range(labels.size):
        if j != i and scores[labels[j]] == scores[labels[j]]:
            js[m] = j
            m += 1
    values = np.empty(m)
    potentials(pot, i, js[:m], values)
    for q in range(m):
        scores[labels[js[q]]] += values[q]
    return m


@member_sum.implement(CallbackPotentials)
@njit
def _callback_member_sum(pot, i, members):
    values = np.empty(members.size)
    potentials(pot, i, members, values)
    s = 0.0
    for q in range(members.size):
        s += values[q]
    return s
