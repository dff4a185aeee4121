"""The set-up of a GLM target: its MAP, and what the control variates need at their expansion point.

:func:`set_up` finds the MAP of the tempered posterior with Newton's method (:mod:`._map`) in
as few passes over the rows as it needs: the MAP of a subsample held in memory
(:func:`start_rows`: every row when there are few), then passes over every row
(:mod:`._pass`). The first pass also ranks the rows by their leverage ``‖K⁻¹x_i‖``, for the
factor K of the subsample's Laplace precision standing for all the data (any K keeps the
residual bound valid; one a few standard deviations from the MAP ranks the rows nearly alike);
every pass that may be the last also sums the bound's Gram matrices by bins (:mod:`._bins`),
records the rows of largest leverage. At large N the subsample's MAP is some standard
deviations away and the second pass is the last; when the subsample is every row, the first is.

:func:`setup_at` gives the same at any expansion point (a pass there, with the leverages for the
subsample's Laplace precision at that point).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import linalg

from ..stores import Block, check_gathered
from ._leverage import TopLeverage
from ._map import newton
from ._pass import PassRequest, WatchedRows, design_of, joined_watch, pass_sums, rows_at

__all__ = ["CENTER_TOLERANCE", "LEVERAGE_ROWS", "MAP_TOLERANCE", "Setup", "set_up", "setup_at",
           "start_rows"]

#: Rows of largest leverage a pass keeps: the plan's exact stratum has at most this many.
LEVERAGE_ROWS = 1 << 16
#: Newton's method stops when the MAP is known to this many posterior standard deviations, at a
#: point within CENTER_TOLERANCE of it (:mod:`._map`).
MAP_TOLERANCE = 1e-3
CENTER_TOLERANCE = 0.5
#: The subsample whose MAP starts Newton's method over all rows: a 1 / START_FRACTION share of
#: the rows (a power of two within START_ROWS; every row below that), in runs of START_RUN
#: consecutive rows at random (fixed) places, so that a file is read in few places. Its MAP is
#: about ``sqrt(d (N / m - 1))`` posterior standard deviations from the MAP, the same at every
#: N, and Newton's quadratic rate shrinks as N grows, so the second pass over all rows is the
#: last at large N.
START_FRACTION = 256
START_ROWS = (1 << 16, 1 << 20)
START_RUN = 256


class Setup(NamedTuple):
    """What the set-up found, for the control variates.

    Attributes
    ----------
    map : ndarray of shape (d,)
        The MAP of the tempered posterior.
    center : ndarray of shape (d,)
        The expansion point (within half a posterior standard deviation of the MAP).
    precision : ndarray of shape (d, d)
        The Laplace precision of the tempered posterior at ``center``.
    n_passes : int
        Passes over all the rows.
    sums : PassSums
        The pass at ``center`` (with the bound's bins when the target has a bound).
    chol : ndarray of shape (d, d) or None
        The lower Cholesky factor the leverages are of (None: no leverages).
    leverage : TopLeverage or None
    watched : WatchedRows or None
        The data of the rows of largest leverage, in rank order.
    """

    map: np.ndarray
    center: np.ndarray
    precision: np.ndarray
    n_passes: int
    sums: object
    chol: np.ndarray | None
    leverage: TopLeverage | None
    watched: WatchedRows | None


def start_rows(n):
    """The rows of the subsample whose MAP starts Newton's method (see :data:`START_FRACTION`):
    only the chosen rows' indices are made (an index of every row would be O(N)).

    Parameters
    ----------
    n : int
        Rows of the data.

    Returns
    -------
    ndarray of int64
    """
    low, high = START_ROWS
    m = min(high, max(low, 1 << max(0, (n // START_FRACTION).bit_length() - 1)))
    if n <= m:
        return np.arange(n, dtype=np.int64)
    runs = np.random.default_rng(0).choice(n // START_RUN, m // START_RUN, replace=False)
    return (np.sort(runs)[:, None] * START_RUN + np.arange(START_RUN)).ravel()


def _subsample(target):
    """The start subsample as one block of rows in memory, checked, and ``N / m``."""
    rows = start_rows(target.n_data)
    block = target.store.take(rows)
    step = target.store.block_rows()
    check_gathered(block.X, rows, step, target.n_data)
    if block.w is not None:
        check_gathered(block.w[:, None], rows, step, target.n_data)
        if np.any(block.w < 0):
            raise ValueError("sample_weight must be non-negative, one per row of X")
    return Block(0, block.X, block.y, block.w), target.n_data / rows.size


def _leverage_factor(target, hess, scale):
    """The lower Cholesky factor of ``-scale H + prior precision`` (the untempered Laplace
    precision of rows standing for all the data), or None when not positive definite."""
    precision = -scale * hess + target.prior_precision * np.eye(target.n_features)
    try:
        return linalg.cholesky(0.5 * (precision + precision.T), lower=True)
    except linalg.LinAlgError:
        return None


def _inverse(chol):
    return linalg.solve_triangular(chol, np.eye(chol.shape[0]), lower=True)


def _final_request(target, watched):
    """The further fields of a pass that may be the set-up's last."""
    return {"binning": target.binning, "watched": watched}


def set_up(target, temperature=1.0):
    """The MAP by Newton's method, and what the control variates need at the expansion point
    (see the module docstring).

    Parameters
    ----------
    target : GLMTarget
    temperature : float > 0, default 1.0

    Returns
    -------
    Setup
    """
    sub, scale = _subsample(target)
    d = target.n_features
    start = newton(lambda point, _: pass_sums(sub, PassRequest(point, target.family,
                                                               target.intercept)),
                   np.zeros(d), target.prior_precision, scale=scale, temperature=temperature,
                   tol=1e-6, name="Newton's method on the start subsample")
    chol = (_leverage_factor(target, start.sums.hess, scale) if target.bounded_family
            else None)
    inverse = None if chol is None else _inverse(chol)
    whole = scale == 1.0
    found = {}

    def sums_at(point, n_pass):
        request = {}
        if n_pass == 1 and inverse is not None:
            request.update(inverse=inverse, capacity=LEVERAGE_ROWS + 1)
        if whole or n_pass > 1:
            request.update(_final_request(target, found.get("watched")))
        sums = target.pass_at(point, **request)
        if n_pass == 1 and inverse is not None:
            found["leverage"] = TopLeverage(sums.top, sums.largest, target.n_data)
            found["watched"] = np.sort(found["leverage"].rows)
        return sums

    result = newton(sums_at, start.map, target.prior_precision, temperature=temperature,
                    tol=MAP_TOLERANCE, center_tol=CENTER_TOLERANCE)
    sums, n_passes = result.sums, result.n_passes
    if target.binning is not None and sums.binned is None:
        # The first pass met the tolerance (its subsample almost every row): the bins.
        sums = target.pass_at(result.center, **_final_request(target, found.get("watched")))
        n_passes += 1
    leverage = found.get("leverage")
    watched = None
    if leverage is not None:
        watched = (joined_watch(sums.watched) if sums.watched is not None
                   else _watch(target, found["watched"], result.center))
        watched = _ranked(watched, leverage.rows)
    return Setup(result.map, result.center, result.precision, n_passes, sums, chol, leverage,
                 watched)


def setup_at(target, reference):
    """What :func:`set_up` gives the control variates, at any expansion point: the leverages for
    the start subsample's Laplace precision at ``reference``, and one pass there.

    Parameters
    ----------
    target : GLMTarget
    reference : ndarray of shape (d,)

    Returns
    -------
    Setup
    """
    reference = np.asarray(reference, dtype=np.float64)
    chol = leverage = watched = None
    request = {}
    if target.bounded_family:
        sub, scale = _subsample(target)
        sub_sums = pass_sums(sub, PassRequest(reference, target.family, target.intercept))
        chol = _leverage_factor(target, sub_sums.hess, scale)
    if chol is not None:
        request = dict(inverse=_inverse(chol), capacity=LEVERAGE_ROWS + 1,
                       **_final_request(target, None))
    sums = target.pass_at(reference, **request)
    if chol is not None:
        leverage = TopLeverage(sums.top, sums.largest, target.n_data)
        watched = _ranked(_watch(target, np.sort(leverage.rows), reference), leverage.rows)
    precision = -sums.hess + target.prior_precision * np.eye(target.n_features)
    return Setup(reference, reference, 0.5 * (precision + precision.T), 1, sums, chol,
                 leverage, watched)


def _watch(target, rows, point):
    """The :class:`~._pass.WatchedRows` of ``rows`` (sorted), gathered."""
    block = target.store.take(rows)
    at = rows_at(block, PassRequest(point, target.family, target.intercept))
    design = at.design if at.X is None else design_of(at.X, target.intercept)
    design = design if isinstance(design, np.ndarray) else design.toarray()
    return WatchedRows(rows, design, at.z, block.y, block.w)


def _ranked(watched, ranked_rows):
    """``watched`` (rows sorted) in the order of ``ranked_rows``."""
    position = np.searchsorted(watched.rows, ranked_rows)
    return WatchedRows(*(None if v is None else v[position] for v in watched))
