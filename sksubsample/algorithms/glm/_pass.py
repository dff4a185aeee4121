"""One pass of a GLM's set-up: everything the MAP and the control variates sum over the rows.

A pass at a point θ reads every row once and sums, as the request asks (:class:`PassRequest`):

* the log-likelihood, its gradient and its Hessian at θ (Newton's method, and the Taylor
  proxies when θ is their expansion point);
* the leverages ``‖K⁻¹x_i‖`` for a lower Cholesky factor K, keeping the largest and the rows of
  largest leverage (:mod:`._leverage`);
* the Gram matrices of the residual bound by bins of ``|ẑ|`` (:mod:`._bins`);
* the data of some rows (the rows of largest leverage, which the plan and the chains set
  apart).

:func:`pass_sums` maps one read unit of a :class:`~sksubsample.algorithms.stores.RowStore` (its
fold hands out units of a few megabytes, or a Dask array's chunks) to a :class:`PassSums`, in
blocks of rows that stay in cache, and :func:`merge_pass_sums` combines two of them; both are
module-level functions of picklable arguments, since Dask may run them on a cluster's workers.
Rows are read as stored (float32 stays float32) and every sum is in float64. The logistic
family's rows are summed by compiled code (:mod:`._pass_kernels`); another family's by NumPy
with its own functions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import sparse as sp

from .._numba import read_only
from ..stores import Block, as_block, scratch, split_block, zeroed_scratch
from ._bins import BinnedGrams, Binning, merge_binned, merge_binned_into
from ._leverage import TopRows, merge_top, top_rows
from ._pass_kernels import grams_by_bin, logistic_rows, shifted_norms
from ._proxies import taylor_coefficients

__all__ = ["DENSE_COLUMNS", "HESSIAN_STRIPE", "PassRequest", "PassSums", "WatchedRows",
           "design_of", "joined_watch", "merge_pass_sums", "pass_sums", "row_leverages",
           "rows_at", "striped_rows"]

#: Designs with at most this many columns are summed over dense blocks (a CSR block is
#: densified): the same BLAS calls on the same numbers, whichever form the rows came in.
DENSE_COLUMNS = 256
#: Rows of a stripe of a pass that sums the Hessian over some stripes only (counted from row
#: 0 of the data, so that every store and chunking sums the same rows).
HESSIAN_STRIPE = 4096


class PassRequest(NamedTuple):
    """What a pass sums.

    Attributes
    ----------
    point : ndarray of shape (d,)
        The point θ.
    family : GLMFamily
    intercept : bool
        Whether the design is the stored X then a column of ones.
    inverse : ndarray of shape (d, d) or None
        ``K⁻¹`` of the lower Cholesky factor the leverages are of (None: no leverages).
    capacity : int
        Rows of largest leverage kept.
    floor : float
        No row of leverage at most this is kept (:mod:`._leverage`).
    screen : LeverageScreen or None
        Bounds the rows' leverages, so that only those of the rows that may lie above
        ``floor`` are computed (None: every row's).
    hessian_stride : int
        The Hessian is summed over the rows of one stripe of :data:`HESSIAN_STRIPE` rows in
        this many (:func:`striped_rows` counts them): a Newton step far from the MAP needs it
        to a few digits only. Ignored by a pass with bins (their sum is the Hessian).
    binning : Binning or None
        The bins of the bound's Gram matrices (None: none).
    watched : ndarray of int64 or None
        Rows (sorted) whose data the pass records.
    """

    point: np.ndarray
    family: object
    intercept: bool
    inverse: np.ndarray | None = None
    capacity: int = 0
    floor: float = -np.inf
    screen: object = None
    hessian_stride: int = 1
    binning: Binning | None = None
    watched: np.ndarray | None = None


class WatchedRows(NamedTuple):
    """The data of watched rows, in increasing row order: their design (float64, with the
    intercept's column), linear predictors at the pass's point, response and case weights."""

    rows: np.ndarray
    design: np.ndarray
    z: np.ndarray
    y: np.ndarray | None
    w: np.ndarray | None


class PassSums(NamedTuple):
    """The sums of a pass at θ (``watched``: the watched rows' data as parts, in row order,
    joined by :func:`joined_watch`).

    Attributes
    ----------
    loglik : float
        ``sum_i ℓ_i(θ)``.
    grad : ndarray of shape (d,)
        ``sum_i ∇ℓ_i(θ)``.
    hess : ndarray of shape (d, d)
        ``sum_i ∇²ℓ_i(θ)``.
    largest : float
        The largest leverage (``-inf`` without leverages).
    top : TopRows or None
        The rows of largest leverage.
    binned : BinnedGrams or None
    watched : list of WatchedRows or None
    """

    loglik: float
    grad: np.ndarray
    hess: np.ndarray
    largest: float
    top: TopRows | None
    binned: BinnedGrams | None
    watched: list | None


def design_of(X, intercept):
    """The design of stored rows ``X``: X in float64 (dense, or CSR for a wide sparse X), then
    a column of ones when ``intercept``."""
    if sp.issparse(X):
        if X.shape[1] + int(intercept) <= DENSE_COLUMNS:
            X = X.toarray()
        else:
            X = sp.csr_matrix(X, dtype=np.float64)
            if intercept:
                X = sp.hstack([X, np.ones((X.shape[0], 1))], format="csr")
            return X
    if not intercept:
        return np.asarray(X, dtype=np.float64)
    n, p = X.shape
    out = np.empty((n, p + 1))
    out[:, :p] = X
    out[:, p] = 1.0
    return out


def _gram(design, v):
    """``Dᵀ diag(v) D`` as a dense array (``v`` None: all ones)."""
    if sp.issparse(design):
        scaled = design if v is None else sp.diags(v) @ design
        return np.asarray((design.T @ scaled).todense())
    return design.T @ design if v is None else (design.T * v) @ design


class _Accumulator:
    """The running sums of one read unit."""

    def __init__(self, d, request):
        self.loglik = 0.0
        self.grad = np.zeros(d)
        self.hess = np.zeros((d, d))
        self.leverage = []  # (rows, leverages above the floor) of each block
        self.largest = -np.inf  # the largest leverage computed
        self.screened = False  # whether a screen passed over rows
        self.bins = self.far = self.used = None
        if request.binning is not None:
            # (this thread's scratch, zeroed: the bins take megabytes, which a fresh array
            # would fault in at every unit where freed memory goes back to the system at once,
            # as on Dask's workers; the result copies the bins that hold rows, ``used``. Like
            # every scratch array it stays with its thread: at most the bins' budget, 32 MB)
            self.bins, self.used = zeroed_scratch("bins", (request.binning.n_bins + 1, d, d))
            self.far = np.zeros((d, d))
        self.watched = []

    def result(self, request, unweighted):
        largest, top = -np.inf, None
        if self.leverage:
            rows = np.concatenate([r for r, _ in self.leverage])
            leverage = np.concatenate([v for _, v in self.leverage])
            largest = self.largest
            if self.screened:
                # (a row the screen passed over has a leverage of at most the floor)
                largest = max(largest, request.floor)
            top = top_rows(rows, leverage, request.capacity, request.floor)
        hess = self.hess
        binned = None
        if self.bins is not None:
            used = np.flatnonzero(self.used)
            grams = self.bins[used]
            if unweighted:
                # The bins hold φ_i x_i x_iᵀ: their sum is minus the Hessian of unweighted rows
                # (the bins in use, summed in order: the other bins are zeros).
                hess = -grams.sum(axis=0)
            binned = BinnedGrams(used, grams, self.far)
        watched = None
        if request.watched is not None:
            watched = [joined_watch(self.watched, self.grad.size, unweighted)]
        return PassSums(self.loglik, self.grad, hess, largest, top, binned, watched)


def joined_watch(parts, d=0, unweighted=True):
    """The :class:`WatchedRows` of parts recorded block by block (or of a pass's parts, which
    are :class:`WatchedRows`), in row order."""
    if not parts:
        return WatchedRows(np.empty(0, dtype=np.int64), np.empty((0, d)), np.empty(0),
                           np.empty(0), None if unweighted else np.empty(0))
    return WatchedRows(*(None if parts[0][k] is None else np.concatenate([p[k] for p in parts])
                         for k in range(5)))


def pass_sums(unit, request):
    """The :class:`PassSums` of one read unit (a :class:`~sksubsample.algorithms.stores.Block`).

    Parameters
    ----------
    unit : Block
    request : PassRequest

    Returns
    -------
    PassSums
    """
    d = request.point.size
    acc = _Accumulator(d, request)
    unweighted = unit.w is None
    step = max(256, min(16384, (1 << 18) // d))
    with np.errstate(over="ignore", invalid="ignore"):  # (overflow is refused below)
        for block in split_block(unit, step):
            _add_block(acc, block, request)
        sums = acc.result(request, unweighted)
    if not (np.isfinite(sums.loglik) and np.isfinite(sums.grad).all()
            and np.isfinite(sums.hess).all()):
        values = unit.X.data if sp.issparse(unit.X) else unit.X
        raise ValueError(
            f"X has entries as large as {float(np.max(np.abs(values))):.3g} in absolute value: "
            f"the sums of their squares over the rows overflow float64 (the MAP, the Laplace "
            f"covariance and the control variates need XᵀX). Rescale X, e.g. with "
            f"sklearn.preprocessing.StandardScaler.")
    return sums


def _summary_bytes(request):
    """An upper bound of the bytes of one unit's :class:`PassSums` (what a pass on a cluster
    may gather to the caller, per chunk): its Gram matrices (the Hessian, the far rows' and
    the bins', counted dense). (The rows a leverage request hands on lie above a floor that
    leaves a few hundred thousand rows in all, or are every row of a small data set.)"""
    d = request.point.size
    bins = 0 if request.binning is None else request.binning.n_bins + 1
    return 8 * d * d * (2 + bins)


pass_sums.summary_bytes = _summary_bytes


class _Rows(NamedTuple):
    """A block's rows at a point: the rows (``X``: dense as stored, when the logistic kernels
    read them; else ``design``: the design in float64, with the intercept's column), linear
    predictors, first and second derivatives (times the case weights), curvatures ``|∂²ℓ|``,
    bins, log-likelihood and gradient sums, and (on request) minus the Hessian's Gram matrix."""

    X: np.ndarray | None
    design: object
    z: np.ndarray
    c: np.ndarray
    w2: np.ndarray
    curvature: np.ndarray
    bins: np.ndarray | None
    loglik: float
    grad: np.ndarray
    gram: np.ndarray | None


def _compiled(request, p):
    return request.family.kernel == "logistic" and p + int(request.intercept) <= DENSE_COLUMNS


def _fresh(name, n, dtype):
    return np.empty(n, dtype=dtype)


def _reused(name, n, dtype):
    return scratch("rows_" + name, (n,), dtype)


def rows_at(block, request, hessian=False, reuse=False):
    """The :class:`_Rows` of ``block`` at ``request.point`` (compiled for the logistic family
    and a design of at most :data:`DENSE_COLUMNS` columns, NumPy otherwise): the one place a
    pass computes a row's linear predictor, so that rows gathered later get the same numbers.
    With ``hessian``, also ``sum_i ω_i φ_i x_i x_iᵀ``: in float32 for float32 rows of a pass
    that cannot be the set-up's last (Newton's step only needs it to a few digits), in
    float64 otherwise.

    Parameters
    ----------
    block : Block
    request : PassRequest
    hessian : bool, default False
    reuse : bool, default False
        Whether the rows' values (``z``, ``c``, ``w2``, ``curvature``, ``bins``) are this
        thread's scratch arrays, overwritten by the next such call (a pass's blocks, each
        used before the next): a fresh array per block costs its page faults every time
        where freed memory goes back to the system at once, as on Dask's workers, where a
        pass took 1.2 times as long with fresh arrays (``MALLOC_TRIM_THRESHOLD_=65536`` in
        the client: 0.33 s against 0.27 s at 10^7 rows).

    Returns
    -------
    _Rows
    """
    family, theta = request.family, request.point
    n, d = block.X.shape[0], theta.size
    grad = np.zeros(d)
    if _compiled(request, block.X.shape[1]):
        # (read-only, whether the rows are a memory map's or in memory: one compiled
        # specialization of the row kernels serves both)
        X = read_only(block.X.toarray() if sp.issparse(block.X) else block.X)
        array = _reused if reuse else _fresh
        z, c, curvature, terms, w2 = (array(name, n, np.float64)
                                      for name in ("z", "c", "curvature", "terms", "w2"))
        bins = array("bins", n, np.int64)
        single = X.dtype == np.float32 and request.binning is None
        scaled = scratch("scaled", (n if hessian else 0, d),
                          np.float32 if single else np.float64)
        binning = request.binning or Binning(1.0, 0)
        loglik, first_bad = logistic_rows(
            X, request.intercept, np.ascontiguousarray(block.y, dtype=np.float64),
            np.empty(0) if block.w is None else block.w, theta, binning.scale,
            binning.n_bins, z, c, curvature, bins, grad, scaled, terms)
        if first_bad >= 0 or not _weights_ok(block.w):
            _refuse(block)
        np.negative(curvature, out=w2)
        if block.w is not None:
            w2 *= block.w
        gram = (scaled.T @ scaled).astype(np.float64) if hessian else None
        return _Rows(X, None, z, c, w2, curvature, bins, loglik, grad, gram)
    design = design_of(block.X, request.intercept)
    z = np.asarray(design @ theta).ravel()
    if not (np.isfinite(z).all() and _weights_ok(block.w)):
        _refuse(block)
    c, w2, _ = taylor_coefficients(family, z, block.y, block.w, 2)
    loglik = family.loglik(z, block.y)
    loglik = float(np.sum(loglik if block.w is None else loglik * block.w))
    grad += np.asarray(design.T @ c).ravel()
    curvature = -family.d2(z, block.y)
    bins = None
    if request.binning is not None:
        bins = np.minimum(np.abs(z) * request.binning.scale,
                          request.binning.n_bins).astype(np.int64)
    gram = -_gram(design, w2) if hessian else None
    return _Rows(None, design, z, c, w2, curvature, bins, loglik, grad, gram)


def _weights_ok(w):
    return w is None or (np.isfinite(w).all() and not np.any(w < 0))


def _refuse(block):
    """Raise the store's error for the first non-finite value or bad weight of ``block``
    (naming its row and block of rows), found when a row's linear predictor was not finite;
    the values being finite, their products overflowed."""
    as_block(block.start, block.X, None, block.w, block.X.dtype,
             check=max(256, min(16384, (1 << 18) // block.X.shape[1])))
    values = block.X.data if sp.issparse(block.X) else block.X
    raise ValueError(
        f"X has entries as large as {float(np.max(np.abs(values))):.3g} in absolute value "
        f"(rows {block.start} to {block.start + block.X.shape[0] - 1}): their linear "
        f"predictors overflow float64. Rescale X, e.g. with "
        f"sklearn.preprocessing.StandardScaler.")


#: Leverages computed in single precision are raised by this factor, more than their rounding
#: (the largest leverage is a constant of the residual bound, which must not be too small).
_SINGLE_LEVERAGE_SLACK = 1.0 + 2.0**-12


def row_leverages(rows, intercept, inverse):
    """``‖K⁻¹x_i‖`` of every row of a block's :func:`rows_at` (``inverse``: ``K⁻¹``): one
    matrix product with the stored rows (in their precision), the intercept's column added as
    a shift."""
    if rows.X is None:
        whitened = np.asarray(rows.design @ inverse.T)
        return np.sqrt(np.einsum("ij,ij->i", whitened, whitened))
    return _dense_leverages(rows.X, intercept, inverse)


def _screened_leverages(rows, request):
    """The rows of a block (local indices) that may lie above the request's floor, by its
    :class:`~._leverage.LeverageScreen`, and their leverages (every row's without a screen)."""
    if request.screen is None or rows.X is None or request.floor == -np.inf:
        return None, row_leverages(rows, request.intercept, request.inverse)
    bound = request.screen.bound(rows.X, request.intercept,
                                 scratch("screen_bound", (rows.X.shape[0],), np.float64))
    candidates = np.flatnonzero(bound > request.floor**2)
    # (into scratch; mode "wrap": the candidates are rows of the block, and the default
    # "raise" would copy through a buffer as large as the rows taken)
    chosen = np.take(rows.X, candidates, axis=0, mode="wrap", out=scratch(
        "candidates", (candidates.size, rows.X.shape[1]), rows.X.dtype))
    return candidates, _dense_leverages(chosen, request.intercept, request.inverse)


def _dense_leverages(X, intercept, inverse):
    """:func:`row_leverages` of dense stored rows ``X``."""
    p = X.shape[1]
    # (d × n: each row's whitened coordinates in a column, which shifted_norms reads packed)
    whitened = np.matmul(np.ascontiguousarray(inverse[:, :p], dtype=X.dtype), X.T,
                         out=scratch("whitened", (inverse.shape[0], X.shape[0]), X.dtype))
    shift = inverse[:, p] if intercept else np.zeros(inverse.shape[0])
    leverage = np.empty(X.shape[0])
    shifted_norms(whitened, shift, leverage)
    return leverage * _SINGLE_LEVERAGE_SLACK if X.dtype == np.float32 else leverage


def striped_rows(n_rows, stride):
    """Rows of ``0..n_rows - 1`` in the stripes a pass of ``hessian_stride = stride`` sums its
    Hessian over (one stripe of :data:`HESSIAN_STRIPE` rows in ``stride``, from row 0)."""
    period = HESSIAN_STRIPE * stride
    whole, rest = divmod(n_rows, period)
    return whole * HESSIAN_STRIPE + min(rest, HESSIAN_STRIPE)


def _striped(block, stride):
    """The pieces of ``block`` in the Hessian's stripes (see :func:`striped_rows`)."""
    period = HESSIAN_STRIPE * stride
    start, stop = block.start, block.start + block.X.shape[0]
    first = start - start % period
    for a in range(first, stop, period):
        lo, hi = max(a, start) - start, min(a + HESSIAN_STRIPE, stop) - start
        if hi > lo:
            yield Block(block.start + lo, block.X[lo:hi],
                        None if block.y is None else block.y[lo:hi],
                        None if block.w is None else block.w[lo:hi])


def _add_block(acc, block, request):
    n = block.X.shape[0]
    bins_hessian = request.binning is not None and block.w is None
    striped = request.hessian_stride > 1 and request.binning is None
    rows = rows_at(block, request, hessian=not (bins_hessian or striped), reuse=True)
    acc.loglik += rows.loglik
    acc.grad += rows.grad
    if request.binning is not None:
        _add_binned(acc, rows, block.w, request)
    if rows.gram is not None:
        acc.hess -= rows.gram
    if striped:
        # (the stripes' rows at the point again, with their Gram matrix: an eighth or less
        # of the rows, through the one routine that computes a row's terms)
        for piece in _striped(block, request.hessian_stride):
            acc.hess -= rows_at(piece, request, hessian=True).gram
    if request.inverse is not None:
        # (ranked once per unit, in result: a merge per block would copy the top rows again
        # at every block)
        local, leverage = _screened_leverages(rows, request)
        if local is None:
            local = np.arange(n, dtype=np.int64)
        acc.screened |= local.size < n
        acc.largest = max(acc.largest, float(leverage.max(initial=-np.inf)))
        if request.floor > -np.inf:
            # (only rows above the floor can be kept, top_rows drops the others: a unit's
            # lists then hold a few thousand rows, not every candidate's)
            above = leverage > request.floor
            local, leverage = local[above], leverage[above]
        acc.leverage.append((block.start + local, leverage))
    if request.watched is not None:
        lo, hi = np.searchsorted(request.watched, [block.start, block.start + n])
        if hi > lo:
            local = request.watched[lo:hi] - block.start
            design = (design_of(rows.X[local], request.intercept) if rows.X is not None
                      else rows.design[local])
            acc.watched.append((request.watched[lo:hi],
                                design.toarray() if sp.issparse(design) else design,
                                rows.z[local], None if block.y is None else block.y[local],
                                None if block.w is None else block.w[local]))


def _add_binned(acc, rows, w, request):
    """The bins' Gram matrices ``φ_i ω_i² x_i x_iᵀ`` and the far rows' ``ω_i² x_i x_iᵀ``."""
    binning, bins = request.binning, rows.bins
    scale = np.sqrt(rows.curvature, out=scratch("bin_scale", rows.curvature.shape, np.float64))
    if w is not None:
        scale *= w
    far = bins == binning.n_bins
    acc.used[bins] = True  # (before the bins are written: see zeroed_scratch)
    if rows.X is not None:
        grams_by_bin(rows.X, request.intercept, bins, scale, binning.n_bins,
                     scratch("sorted", (rows.X.shape[0], request.point.size), np.float64),
                     acc.bins)
        design_far = design_of(rows.X[far], request.intercept) if far.any() else None
    else:
        for b in np.unique(bins):
            inside = bins == b
            acc.bins[b] += _gram(rows.design[inside], scale[inside] ** 2)
        design_far = rows.design[far] if far.any() else None
    if design_far is not None:
        acc.far += _gram(design_far, None if w is None else w[far] ** 2)


def merge_pass_sums(a, b):
    """The :class:`PassSums` of two sets of rows (``a``'s first)."""
    top = None if a.top is None else merge_top(a.top, b.top)
    binned = None if a.binned is None else merge_binned(a.binned, b.binned)
    # (the watched rows' parts are joined once, at the end: joined_watch)
    watched = None if a.watched is None else a.watched + b.watched
    return PassSums(a.loglik + b.loglik, a.grad + b.grad, a.hess + b.hess,
                    max(a.largest, b.largest), top, binned, watched)


def _merge_pass_sums_into(a, b):
    """:func:`merge_pass_sums` summed into ``a``'s arrays, which its caller owns (a fold's
    running total): the same sums in the same order, without copying ``a``'s bins at every
    unit (2.4 MB a merge at 100 columns)."""
    top = None if a.top is None else merge_top(a.top, b.top)
    binned = None if a.binned is None else merge_binned_into(a.binned, b.binned)
    if a.watched is not None:
        a.watched.extend(b.watched)
    np.add(a.grad, b.grad, out=a.grad)
    np.add(a.hess, b.hess, out=a.hess)
    return PassSums(a.loglik + b.loglik, a.grad, a.hess, max(a.largest, b.largest), top,
                    binned, a.watched)


merge_pass_sums.into = _merge_pass_sums_into
