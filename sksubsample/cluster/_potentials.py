"""Pairwise log-potentials ``f(x_i, x_j)`` of the coreference CRF, evaluated on demand.

The sampler asks for ``f`` between one mention ``i`` and a set of mentions: all of them for an
exact Gibbs update, a subsample of one cluster for a racing update. :class:`PairPotentials`
answers both, for the three kinds of potential :class:`CorefGibbsClusterer` accepts, and checks
every answer for NaN and ``+inf`` (``-inf``, a cannot-link constraint, is allowed).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

__all__ = ["PairPotentials"]

# Pairs per call when the log-potential of a whole partition is summed (bounds the memory).
_BLOCK = 1 << 20


def _check_values(values, what):
    if not np.isfinite(values).all() and (np.isnan(values).any() or np.isposinf(values).any()):
        raise ValueError(f"{what} returned NaN or +inf log-potentials; they must be finite "
                         "(or -inf for pairs that can never share a cluster)")
    return values


class PairPotentials:
    """Log-potentials of one mention against others, for a fixed mention at a time.

    Parameters
    ----------
    kind : {"euclidean", "callable", "precomputed"}
    data : ndarray of shape (n, d), or (n, n) sparse matrix / ndarray for "precomputed"
    bandwidth : float
        ``f = 1 - ||x_i - x_j||² / (2 bandwidth²)`` for "euclidean".
    repulsion : float
        ``f = -repulsion`` for the pairs a sparse "precomputed" matrix does not store.
    func : callable, optional
        ``func(A, B) -> (len(A), len(B))`` for "callable".

    Notes
    -----
    :meth:`set_mention` must be called before :meth:`pairs` / :meth:`row`: a sparse
    precomputed matrix then scatters row ``i`` into a dense buffer once, so that a racing update
    looks up subsampled pairs by indexing instead of searching the sparse row.
    """

    def __init__(self, kind, data, *, bandwidth=1.0, repulsion=5.0, func=None):
        self.kind = kind
        self.data = data
        self.n = data.shape[0]
        self.scale = 1.0 / (2.0 * bandwidth * bandwidth)
        self.repulsion = float(repulsion)
        self.func = func
        self.i = -1
        self.sparse = kind == "precomputed" and sparse.issparse(data)
        self._row = None
        if self.sparse:
            # Row buffer holding -repulsion except at the current mention's stored entries,
            # which are written and erased in O(nnz of the row).
            self._row = np.full(self.n, -self.repulsion)

    def set_mention(self, i):
        """Make ``i`` the mention whose potentials :meth:`pairs` and :meth:`row` return."""
        if self._row is not None and i != self.i:
            if self.i >= 0:
                self._row[self.stored()[0]] = -self.repulsion
            self.i = i
            idx, values = self.stored()
            self._row[idx] = values
        self.i = i

    def stored(self):
        """Indices and values of the stored entries of row ``i`` of a sparse matrix."""
        lo, hi = self.data.indptr[self.i], self.data.indptr[self.i + 1]
        return self.data.indices[lo:hi], self.data.data[lo:hi]

    def pairs(self, js):
        """``f(x_i, x_j)`` for the mentions ``js`` (never ``i`` itself), shape ``(len(js),)``."""
        i = self.i
        if self.kind == "euclidean":
            diff = self.data[js] - self.data[i]
            return 1.0 - self.scale * np.einsum("ij,ij->i", diff, diff)
        if self.kind == "callable":
            values = np.asarray(self.func(self.data[i:i + 1], self.data[js]), dtype=np.float64)
            if values.shape != (1, len(js)):
                raise ValueError(f"metric(A, B) must return an array of shape (len(A), len(B)) "
                                 f"= {(1, len(js))}, got {values.shape}")
            return _check_values(values[0], "metric(A, B)")
        if self._row is not None:
            return self._row[js]
        return self.data[i, js]

    def row(self):
        """``f(x_i, x_j)`` for every ``j``, shape ``(n,)``; entry ``i`` is meaningless."""
        if self.kind == "callable":
            values = np.asarray(self.func(self.data[self.i:self.i + 1], self.data),
                                dtype=np.float64)
            if values.shape != (1, self.n):
                raise ValueError(f"metric(A, B) must return an array of shape (len(A), len(B)) "
                                 f"= {(1, self.n)}, got {values.shape}")
            values = values[0].copy()
            values[self.i] = 0.0  # f(x_i, x_i) is no factor of the model: never checked
            return _check_values(values, "metric(A, B)")
        if self.kind == "euclidean":
            diff = self.data - self.data[self.i]
            return 1.0 - self.scale * np.einsum("ij,ij->i", diff, diff)
        if self._row is not None:
            return self._row.copy()
        return np.array(self.data[self.i], dtype=np.float64)

    def partition_sum(self, labels, clusters):
        """``Σ_{a<b, same cluster} f(x_a, x_b)`` of a partition given by ``labels`` and the
        member arrays ``clusters``."""
        if self.sparse:
            # One pass over the stored entries; unstored same-cluster pairs carry -repulsion.
            rows = np.repeat(np.arange(self.n), np.diff(self.data.indptr))
            same = labels[rows] == labels[self.data.indices]
            sizes = np.array([c.size for c in clusters], dtype=np.float64)
            n_pairs = 0.5 * float(np.sum(sizes * (sizes - 1)))
            stored = 0.5 * float(self.data.data[same].sum())
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
            centred = self.data[members] - self.data[members].mean(axis=0)
            return n_pairs - self.scale * m * float(np.einsum("ij,ij->", centred, centred))
        if self.kind == "precomputed":
            if sparse.issparse(self.data):
                # The matrix holds no diagonal (removed when fitted), so every stored entry of
                # the sub-matrix is an off-diagonal ordered pair; the others carry -repulsion.
                sub = self.data[members][:, members]
                return 0.5 * (float(sub.sum()) - self.repulsion * (m * (m - 1) - sub.nnz))
            sub = self.data[np.ix_(members, members)]
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
