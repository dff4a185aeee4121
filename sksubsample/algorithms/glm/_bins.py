"""The residual bound's Gram matrices, for every radius, from one Gram matrix per bin of ``|ẑ|``.

The bound of the control variates' residuals (:func:`~._kernels.residual_bound`) needs, for each
radius ``R`` of a few, ``G(R) = sum_i M_i(R)² ω_i² x_i x_iᵀ``, where ``M_i(R)`` bounds the
derivative of order ``k + 1`` of the logistic log-likelihood on ``[ẑ_i - R, ẑ_i + R]`` (``ẑ_i``
the row's linear predictor at the expansion point, ``k`` the proxies' order) and depends on the
row only through ``|ẑ_i|``. Summing one Gram matrix per radius reads every row once per radius.

Instead, a pass sums one Gram matrix per *bin* of ``|ẑ|`` (width ``1 / scale``),
``G_b = sum_{i in b} φ_i ω_i² x_i x_iᵀ`` with the curvature ``φ_i = σ(ẑ_i) σ(-ẑ_i)``: each row
enters one bin, so the bins cost one Gram matrix of the data (:func:`~._pass_kernels.grams_by_bin`),
and for unweighted rows their sum is the Hessian the proxies need anyway. Then, for any radius
and order, ``G(R) <= sum_b r_b(R) G_b`` in the order of positive semi-definite matrices, with

``r_b(R) = max_j E(max(c_j - R, 0))² / φ(c_{j+1})``

over eight cells ``[c_j, c_{j+1}]`` of the bin: ``E`` (the family's local derivative bound) does
not increase and ``φ`` decreases with ``|z|``, so every row of a cell has ``M_i(R)² / φ_i`` at
most that cell's ratio. Both functions change by about ``e^{-|z|}`` per unit, so the bound is at
most about ``e^{1/scale}`` looser than the sums of every row's own weight (6 % at the default
width of 1/16). Rows with ``|ẑ| >= n_bins / scale`` (where ``φ`` underflows the bins' use) are
summed apart, unweighted: ``M_i(R) <= E(max(F - R, 0))`` for them.

The radii and the order are chosen after the pass, and the plan of the control variates weighs
as many of them as it likes: every ``G(R)`` is a weighted sum of the same bins.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import special

from .._numba import read_only
from ._pass_kernels import grams_by_bin

__all__ = ["BinnedGrams", "Binning", "BoundTable", "binned_rows", "binning_for", "bound_grams",
           "bound_table", "merge_binned", "merge_binned_into"]

#: Bins per unit of ``|ẑ|`` (the finest binning), and where the far rows begin.
SCALE = 16.0
FAR = 36.0
#: Bytes of one pass's bins (the bins coarsen for wide designs) and the fewest bins worth a
#: bound (fewer would be too loose to save reading any rows).
_BUDGET = 32 << 20
_MIN_BINS = 16
#: Cells per bin over which a bin's ratio is bounded.
_CELLS = 8
#: Slack of the cells' edges: a row's bin is computed in floating point.
_EDGE_SLACK = 1e-9


class Binning(NamedTuple):
    """Bins of ``|ẑ|``: bin ``b < n_bins`` holds ``b / scale <= |ẑ| < (b + 1) / scale``, bin
    ``n_bins`` the far rows."""

    scale: float
    n_bins: int

    @property
    def far(self):
        """Where the far rows begin."""
        return self.n_bins / self.scale


class BinnedGrams(NamedTuple):
    """What a pass sums for the bound, for the bins that hold rows only (a summary a cluster's
    worker sends holds no empty bin): ``grams[j] = sum_{i in bins[j]} φ_i ω_i² x_i x_iᵀ`` (bin
    ``n_bins``: the far rows') and ``far = sum_{i far} ω_i² x_i x_iᵀ``."""

    bins: np.ndarray
    grams: np.ndarray
    far: np.ndarray

    @classmethod
    def of_dense(cls, grams, far):
        """The :class:`BinnedGrams` of one Gram matrix per bin (zero for the empty bins)."""
        present = np.flatnonzero(grams.any(axis=(1, 2)))  # (no temporary as large as grams)
        return cls(present, grams[present], far)

    def dense(self, n_bins):
        """One Gram matrix per bin ``0..n_bins``, zero for the empty ones."""
        out = np.zeros((n_bins + 1, *self.far.shape))
        out[self.bins] = self.grams
        return out


def merge_binned(a, b):
    """The :class:`BinnedGrams` of two sets of rows."""
    if _holds(a, b):
        # (the common case past a pass's first units: a's bins hold b's)
        return _added(BinnedGrams(a.bins, a.grams.copy(), a.far.copy()), b)
    return _joined(a, b)


def merge_binned_into(a, b):
    """:func:`merge_binned` summed into ``a``'s arrays when ``a``'s bins hold ``b``'s (which its
    caller owns: a fold's running total); a new :class:`BinnedGrams` otherwise."""
    return _added(a, b) if _holds(a, b) else _joined(a, b)


def _holds(a, b):
    """Whether ``a``'s bins hold ``b``'s."""
    return b.bins.size <= a.bins.size and np.isin(b.bins, a.bins).all()


def _added(a, b):
    """``b``'s sums added into ``a``'s arrays (``a``'s bins hold ``b``'s)."""
    a.grams[np.searchsorted(a.bins, b.bins)] += b.grams  # (b.bins are distinct)
    np.add(a.far, b.far, out=a.far)
    return a


def _joined(a, b):
    """The :class:`BinnedGrams` of ``a`` and ``b`` over the union of their bins, new."""
    # (the bins are few small integers: a mask, where np.union1d's hashing cost about 1 ms
    # a merge, and a pass over 10^7 rows merges about a hundred units)
    present = np.zeros(max(a.bins.max(initial=-1), b.bins.max(initial=-1)) + 1, dtype=bool)
    present[a.bins] = True
    present[b.bins] = True
    bins = np.flatnonzero(present)
    grams = np.zeros((bins.size, *a.far.shape))
    grams[np.searchsorted(bins, a.bins)] += a.grams
    grams[np.searchsorted(bins, b.bins)] += b.grams
    return BinnedGrams(bins, grams, a.far + b.far)


def binning_for(d, scale=SCALE, far=FAR):
    """The :class:`Binning` of a design of ``d`` columns: bins of width ``1 / scale`` up to
    ``far``, wider when ``(n_bins + 1) d²`` values would exceed the bins' memory budget; None
    when fewer than 16 bins fit (no bound then: a design that wide is sampled exactly).

    Parameters
    ----------
    d : int
    scale, far : float

    Returns
    -------
    Binning or None
    """
    n_bins = min(int(far * scale), _BUDGET // (8 * d * d) - 1)
    if n_bins < _MIN_BINS:
        return None
    return Binning(n_bins / far, n_bins)


def _curvature(z):
    """``φ(z) = σ(z) σ(-z)``."""
    return special.expit(z) * special.expit(-z)


class BoundTable(NamedTuple):
    """The weights of :func:`bound_grams`: ``ratios[r, b]`` of bin ``b`` for radius ``r``
    (the last row for the global bound, any radius) and ``far[r]`` of the far rows."""

    ratios: np.ndarray
    far: np.ndarray


def bound_table(family, order, radii, binning):
    """The :class:`BoundTable` of ``radii`` (then the global bound) at proxies of ``order``.

    Parameters
    ----------
    family : GLMFamily
        A family whose curvature is the logistic ``φ`` (the bins' weight) and which bounds its
        derivatives locally.
    order : {2, 3}
    radii : ndarray of shape (n_radii,)
    binning : Binning

    Returns
    -------
    BoundTable
    """
    k = order + 1
    n_bins = binning.n_bins
    cells = (np.arange(n_bins)[:, None] + np.arange(_CELLS + 1)[None, :] / _CELLS) / binning.scale
    low = np.maximum(cells[:, :-1] - _EDGE_SLACK, 0.0)
    curvature = _curvature(cells[:, 1:] + _EDGE_SLACK)
    ratios, far = [], []
    for radius in (*np.asarray(radii, dtype=np.float64), math.inf):
        envelope = family.local_derivative_bound(k, low, radius)
        ratios.append(np.max(envelope**2 / curvature, axis=1))
        edge = np.array([max(binning.far - _EDGE_SLACK, 0.0)])
        far.append(float(family.local_derivative_bound(k, edge, radius)[0]) ** 2)
    return BoundTable(np.array(ratios), np.array(far))


def bound_grams(binned, table):
    """``G(R) >= sum_i M_i(R)² ω_i² x_i x_iᵀ`` for every radius of ``table`` (and the global
    bound, last).

    Parameters
    ----------
    binned : BinnedGrams
    table : BoundTable

    Returns
    -------
    ndarray of shape (n_radii + 1, d, d)
    """
    n_bins = table.ratios.shape[1]
    inside = binned.bins < n_bins  # (bin n_bins: the far rows, bounded by ``far``)
    grams = np.tensordot(table.ratios[:, binned.bins[inside]], binned.grams[inside],
                         axes=(1, 0))
    return grams + table.far[:, None, None] * binned.far


def binned_rows(design, z, weights2, binning):
    """The share of some rows in a pass's :class:`BinnedGrams` (what removing them from the
    pass's rows removes): each row's ``φ_i ω_i² x_i x_iᵀ`` in its bin of ``|z_i|``, and the far
    rows' ``ω_i² x_i x_iᵀ`` (one Gram matrix of the rows, :func:`~._pass_kernels.grams_by_bin`:
    then :func:`bound_grams` weighs the share for any radius and order, where weighing every
    row for each had cost a Gram matrix of the rows per radius).

    Parameters
    ----------
    design : ndarray of float64 of shape (n_rows, d)
        The rows' design (the intercept's column included).
    z : ndarray of shape (n_rows,)
        Their linear predictors at the expansion point.
    weights2 : ndarray of shape (n_rows,) or None
        Their squared case weights (None: all ones).
    binning : Binning

    Returns
    -------
    BinnedGrams
    """
    n, d = design.shape
    bins = np.minimum(np.abs(z) * binning.scale, binning.n_bins).astype(np.int64)
    present, local = np.unique(bins, return_inverse=True)
    weights = _curvature(z) if weights2 is None else _curvature(z) * weights2
    grams = np.zeros((present.size, d, d))
    grams_by_bin(read_only(np.ascontiguousarray(design, dtype=np.float64)), False, local.ravel(),
                 np.sqrt(weights), present.size - 1, np.empty((n, d)), grams)
    far = bins == binning.n_bins
    rows = design[far]
    far_gram = rows.T @ (rows if weights2 is None else rows * weights2[far, None])
    return BinnedGrams(present, grams, far_gram)
