"""What the parts of a Taylor-proxy plan cost on this machine, measured with the chain's kernels.

A plan of :class:`~._expansion.GLMTaylorExpansion` (the proxies' order, the rows summed exactly,
the minibatch the bound then allows) costs

* once, at order 3: the third derivatives and the packed third-order sum, in proportion to N;
* at every MH step: the stratum's rows (read in index order), the minibatch (indices drawn by
  the Fisher–Yates shuffle, mapped through the stratum's rows when there is one, rows read and
  their residuals summed), or every row in index order when the bound asks for all of them; at
  order 3, a cubic form.

The plan's other candidate, the exact test, costs at every step a sum of the log-likelihood
ratios of every row and, when its proposal takes the full-data gradient, a gradient over every
row per leapfrog step: two other kernels (:func:`~._kernels.loglik_ratio_sum`,
:func:`~._kernels.grad_sum`), packed loops without the proxies' terms that run several times
faster per row than the residuals, so they are timed on their own.

:func:`plan_costs` times each of these on the data being fitted, with the compiled kernels the
chain runs (:func:`~._kernels.residual_sum`, the exact test's sums, the shuffle of
:mod:`sksubsample.algorithms.sampling`, :func:`~._kernels.cubic_form`) and the set-up's own
code, for minibatches and strata of sizes ``1, 4, 16, ...``. What a row costs depends on the
kind of data far more than on its values: its layout, the non-zeros of a row and how many bytes
the rows span (which cache holds them, or none). So the costs are measured once per kind
(:func:`data_kind`) and stored (:mod:`sksubsample.algorithms._calibration`): every later fit of
that kind of data reads them, and timing noise cannot change a plan between two runs of the
same fit. They are timed on the first rows, at most :data:`TIMED_SPAN_BYTES` of them (all of
them when the data are smaller), held in memory: a view of rows in memory, a read of rows in a
store. So the same rows give the same costs, and the same plan, in memory, in a memory map, in
zarr or in a Dask array; a store's chains read prefetched rows from a buffer in memory, which
costs no more than the rows in memory. A fit whose every step could read all N rows for less than
:data:`MEASURE_ABOVE_SECONDS` is not worth a measurement; it plans with a rough model
(:func:`rough_costs`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._calibration import SECONDS, SERIES, SIZES, fastest, measured, measuring
from .._numba import as_read_only, njit, read_only
from ..sampling import new_shuffle, shuffle_draw, shuffle_restart
from . import _kernels as kernels
from ._kernel_args import NO_ROWS, NO_VALUES, kernel_array, kernel_dtype

__all__ = ["MEASURE_ABOVE_SECONDS", "TIMED_SPAN_BYTES", "PlanCosts", "data_kind", "plan_costs",
           "rough_costs"]

#: Fits whose steps could not cost this much even reading every row are planned without
#: measuring (the rough model): a measurement costs about a tenth of a second once the kernels
#: are compiled (seconds when it compiles them).
MEASURE_ABOVE_SECONDS = 1.0
#: Rows are timed on at most this many bytes of the first rows (see the module docstring):
#: more than any cache holds, so that a random row waits for main memory as it does in the
#: whole data, which then need not be read or held to be timed.
TIMED_SPAN_BYTES = 1 << 28
#: Minibatch and stratum sizes measured (those up to N).
_SIZES = (1, 4, 16, 64, 256, 1024, 4096, 16384)
#: Rows read per timing (at least), and timings per size (the fastest counts).
_ROWS_PER_TIMING = 4096
_ROUNDS = 3
#: Rows of the block on which the third-order set-up is timed (at most).
_CUBIC_ROWS = 8192
#: The fields of the stored measurements (a stored value without them is measured again).
_ROW_FIELDS = {"sizes": SIZES, "minibatch": SERIES, "mapped_minibatch": SERIES,
               "stratum": SERIES, "full_row": SECONDS, "exact_row": SECONDS,
               "gradient_row": SECONDS}
_CUBIC_FIELDS = {"cubic_setup_row": SECONDS, "cubic_step": SECONDS}


class PlanCosts(NamedTuple):
    """Seconds the parts of a plan cost, for one kind of data.

    Attributes
    ----------
    sizes : tuple of int
        The minibatch and stratum sizes measured (ascending).
    minibatch : tuple of float
        Seconds to draw a minibatch of each size and sum its residuals.
    mapped_minibatch : tuple of float
        The same through a stratum's map of the sampled rows (one more read per row).
    stratum : tuple of float
        Seconds to sum the residuals of that many rows in index order, scattered over the data.
    full_row : float
        Seconds per row of a pass summing the residuals of every row in index order (a
        bounded step whose bound allows no fewer rows than all).
    exact_row : float
        Seconds per row of the exact test's sum of the log-likelihood ratios of every row.
    gradient_row : float
        Seconds per row of a full-data gradient.
    cubic_setup_row : float
        Seconds per row of the third-order set-up (NaN when not measured: no third order).
    cubic_step : float
        Seconds of the cubic form a third-order step adds.
    measured : bool
        Whether these were measured on this machine (False: the rough model).
    probe_seconds : float
        Time this fit spent measuring (0 when the costs were stored or rough).
    """

    sizes: tuple
    minibatch: tuple
    mapped_minibatch: tuple
    stratum: tuple
    full_row: float
    exact_row: float
    gradient_row: float
    cubic_setup_row: float
    cubic_step: float
    measured: bool = True
    probe_seconds: float = 0.0

    def minibatch_seconds(self, size, mapped):
        """Seconds of a minibatch of ``size`` rows (through the stratum's map when
        ``mapped``), interpolated between the sizes measured, in proportion beyond them (an
        array of sizes: each one's)."""
        return _interpolate(self.sizes, self.mapped_minibatch if mapped else self.minibatch,
                            size)

    def stratum_seconds(self, size):
        """Seconds of a stratum of ``size`` rows (0 for none)."""
        return _interpolate(self.sizes, self.stratum, size) if size > 0 else 0.0


def _interpolate(sizes, seconds, size):
    size = np.asarray(size, dtype=np.float64)
    out = np.where(size <= sizes[0], seconds[0] * size / sizes[0],
                   np.where(size >= sizes[-1], seconds[-1] * size / sizes[-1],
                            np.interp(size, sizes, seconds)))
    return float(out) if out.ndim == 0 else out


def _footprint(target, n_rows=None):
    """Bytes the first ``n_rows`` rows of the chain span (all of them when None), as the kernels
    read them in memory: design, signs, weights and the stratum's map of rows."""
    store = target.store
    n = target.n_data if n_rows is None else n_rows
    if store.kind == "csr":
        nnz = int(store.X.indptr[n])
        data = nnz * (store.X.data.itemsize + 8) + (n + 1) * 8
    else:
        data = n * store.n_features * _dense_dtype(target).itemsize
    return _span(n, data, store.has_weights)


def _dense_dtype(target):
    """The dtype in which the kernels read ``target``'s dense rows
    (:func:`~._kernel_args.kernel_dtype` of the whole data: a small float32 X is read as
    float64)."""
    store = target.store
    return kernel_dtype(store.dtype, target.n_data * store.n_features)


def _span(n_rows, data_bytes, weighted):
    """:func:`_footprint` of ``n_rows`` rows whose design takes ``data_bytes``: the design,
    then per row a sign, the stratum's map and a weight when ``weighted``."""
    return data_bytes + n_rows * (8 + 8 + (8 if weighted else 0))


def data_kind(target):
    """What a row's cost depends on, as a key: the layout, the non-zeros of a row (to a factor
    of √2) and the bytes the rows span (to a factor of 2, at most :data:`TIMED_SPAN_BYTES`: the
    rows timed), wherever the rows are stored.

    Parameters
    ----------
    target : GLMTarget
        The data.

    Returns
    -------
    str
    """
    store = target.store
    sparse = store.kind == "csr"
    dtype = store.X.data.dtype if sparse else _dense_dtype(target)
    span = min(_footprint(target), TIMED_SPAN_BYTES)
    return (f"glm-{target.family.name}|{'csr' if sparse else 'dense'}"
            f"|{dtype.name}"
            f"|nnz{round(2 * math.log2(max(_width(target), 1.0)))}"
            f"|bytes{round(math.log2(span))}"
            f"|{'weighted' if store.has_weights else 'unweighted'}")


def _width(target):
    """Non-zeros of a row (on average)."""
    store = target.store
    return (store.X.data.size / target.n_data if store.kind == "csr"
            else float(store.n_features))


def rough_costs(target, cubic=False):
    """The costs a fit too small to be worth measuring plans with: a row's residual costs about
    40 ns plus 4 ns per non-zero, plus 150 ns of memory latency when the data outgrow 64 MB; in
    the exact test's packed loops over every row, a log-likelihood ratio costs 5 ns plus 0.4 ns
    per non-zero, a gradient term 2 ns plus 0.4 ns per non-zero (as measured at d = 21: 13.5 and
    10 ns); the third-order set-up runs at 4 multiply-adds per nanosecond. The rows of a store
    are costed as the same rows in memory (their chains read them from a buffer of prefetched
    rows).

    Parameters
    ----------
    target : GLMTarget
        The data.
    cubic : bool, default False
        Whether a third order is considered (its costs are NaN otherwise).

    Returns
    -------
    PlanCosts
    """
    return _rough(target.n_data, target.n_features, _width(target), _footprint(target), cubic)


def _rough(n, d, width, footprint, cubic):
    """The rough model of :func:`rough_costs`: ``n`` rows of ``width`` non-zeros out of ``d``
    columns, spanning ``footprint`` bytes (a random row waits for memory beyond 64 MB)."""
    compute = (40.0 + 4.0 * width) * 1e-9
    memory = 150e-9 if footprint > (64 << 20) else 0.0
    sizes = tuple(s for s in _SIZES if s <= n) or (1,)
    row = compute + memory
    packed = d * (d + 1) * (d + 2) // 6
    return PlanCosts(sizes, tuple(s * row for s in sizes), tuple(s * row for s in sizes),
                     tuple(s * row for s in sizes), compute, (5.0 + 0.4 * width) * 1e-9,
                     (2.0 + 0.4 * width) * 1e-9,
                     d * d * (d + 1) / 2 * 0.25e-9 if cubic else math.nan,
                     1.5e-9 * packed if cubic else math.nan, measured=False)


# ----------------------------------------------------------------------------- timed loops


@njit
def _time_minibatches(X, data, indices, indptr, sparse, intercept, signs, weights, reference,
                      order, theta, theta_new, rng, shuffle, batch, rows_map, n, size, repeats):
    """``repeats`` minibatches of ``size`` rows as the bounded test draws and sums them."""
    total = 0.0
    for _ in range(repeats):
        shuffle_restart(shuffle, n)
        shuffle_draw(shuffle, rng, batch[:size])
        if rows_map.size:
            for k in range(size):
                batch[k] = rows_map[batch[k]]
        # (the rows read-only and an int64, not the literal 0, as the chain passes them: a
        # writable batch or a literal would each be another specialisation of the kernel,
        # about 20 s to compile on a measuring fit)
        total += kernels.residual_sum(X, data, indices, indptr, sparse, intercept, signs,
                                      weights, reference, order, theta, theta_new,
                                      as_read_only(batch[:size]), np.int64(0))
    return total


@njit
def _time_rows(X, data, indices, indptr, sparse, intercept, signs, weights, reference, order,
               theta, theta_new, rows, n_all, repeats):
    """``repeats`` sums of the residuals of ``rows`` (of the first ``n_all`` rows when > 0)."""
    total = 0.0
    for _ in range(repeats):
        total += kernels.residual_sum(X, data, indices, indptr, sparse, intercept, signs,
                                      weights, reference, order, theta, theta_new, rows, n_all)
    return total


@njit
def _time_exact_sums(X, data, indices, indptr, sparse, intercept, signs, weights, reference,
                     order, theta, theta_new, no_rows, out, n_all, repeats, gradient):
    """``repeats`` of the exact test's sum over the first ``n_all`` rows: the log-likelihood
    ratios, or the gradient (``gradient``)."""
    total = 0.0
    for _ in range(repeats):
        if gradient:
            kernels.grad_sum(X, data, indices, indptr, sparse, intercept, signs, weights,
                             theta_new, n_all, out)
            total += out[0]
        else:
            total += kernels.loglik_ratio_sum(X, data, indices, indptr, sparse, intercept,
                                              signs, weights, theta, theta_new, no_rows,
                                              n_all)
    return total


@njit
def _time_cubic_forms(packed, a, repeats):
    total = 0.0
    for _ in range(repeats):
        total += kernels.cubic_form(packed, a)
    return total


def _fastest(run, repeats):
    """Seconds of one of ``repeats`` runs timed together (``run(repeats)``), the fastest of
    :data:`_ROUNDS` timings (:func:`~.._calibration.fastest`; one run first, outside them)."""
    return fastest(lambda: run(repeats), _ROUNDS, warm_up=lambda: run(1))[0] / repeats


def _timed_rows(target):
    """``(design, signs, weights, n)`` of the rows the costs are timed on: the first rows that
    span at most :data:`TIMED_SPAN_BYTES` (every row of smaller data), in memory as the kernels
    read them (views of rows in memory; read from a store), ``design`` in the six arguments of
    the compiled kernels."""
    n_all, store = target.n_data, target.store
    n = n_all
    while n > 1 and _footprint(target, n) > TIMED_SPAN_BYTES:
        n = max(1, int(n * TIMED_SPAN_BYTES / _footprint(target, n)))
    if store.in_memory:
        (X, data, indices, indptr, sparse, intercept), weights = (target.design,
                                                                  target.kernel_weights)
        if n < n_all:
            end = int(indptr[n]) if sparse else 0
            X, data, indices, indptr = ((X, data[:end], indices[:end], indptr[:n + 1])
                                        if sparse else (X[:n], data, indices, indptr))
            weights = weights[:n] if weights.size else weights
        return (X, data, indices, indptr, sparse, intercept), target.signs[:n], weights, n
    block = store.read(0, n, check=False)
    # (read-only, as the target's own arrays: the kernels timed are the chain's, compiled for
    # read-only arrays, not another specialisation compiled here)
    if store.kind == "csr":
        X = block.X
        design = (kernel_array(np.empty((0, X.shape[1]))), kernel_array(X.data),
                  kernel_array(X.indices, np.int64), kernel_array(X.indptr, np.int64), True,
                  target.intercept)
    else:
        design = (kernel_array(block.X, _dense_dtype(target)), NO_VALUES, NO_ROWS, NO_ROWS,
                  False, target.intercept)
    signs = kernel_array(block.y)
    weights = NO_VALUES if block.w is None else kernel_array(block.w)
    return design, signs, weights, n


def _measure_rows(rows, reference):
    """The row costs of :class:`PlanCosts`, timed on ``rows`` (:func:`_timed_rows`)."""
    design, signs, weights, n = rows
    rng = np.random.default_rng(0)
    theta = np.ascontiguousarray(reference, dtype=np.float64)
    theta_new = theta + 0.01 * rng.standard_normal(theta.size) / math.sqrt(theta.size)
    # The proxies' reference read-only, as the chain's model holds it: the kernels timed are
    # then the specialisations the chain runs, compiled once for both (a writable reference
    # made the first measuring fit on a machine compile two more, about a minute).
    arrays = (*design, signs, weights, read_only(theta), 2, theta, theta_new)
    sizes = tuple(s for s in _SIZES if s <= n) or (1,)
    shuffle = new_shuffle(n)
    batch = np.empty(sizes[-1], dtype=np.int64)
    # (read-only, as the chain's arrays: one specialisation of the timed loops and kernels)
    rows_map, no_map = read_only(np.arange(n, dtype=np.int64)), NO_ROWS
    out = {"sizes": sizes, "minibatch": [], "mapped_minibatch": [], "stratum": []}
    for size in sizes:
        repeats = max(1, _ROWS_PER_TIMING // size)
        for name, mapping in (("minibatch", no_map), ("mapped_minibatch", rows_map)):
            out[name].append(_fastest(
                lambda r, mapping=mapping, size=size: _time_minibatches(
                    *arrays, rng, shuffle, batch, mapping, n, size, r), repeats))
        rows = read_only(np.sort(rng.choice(n, size, replace=False)).astype(np.int64))
        out["stratum"].append(_fastest(
            lambda r, rows=rows: _time_rows(*arrays, rows, 0, r), repeats))
    passed = min(n, 1 << 16)
    repeats = max(1, _ROWS_PER_TIMING // passed)
    out["full_row"] = _fastest(lambda r: _time_rows(*arrays, no_map, passed, r),
                               repeats) / passed
    gradient = np.empty(theta.size)
    for name, of_gradient in (("exact_row", False), ("gradient_row", True)):
        out[name] = _fastest(lambda r, g=of_gradient: _time_exact_sums(
            *arrays, no_map, gradient, passed, r, g), repeats) / passed
    return out


def _measure_cubic(target, cubic_setup):
    """Seconds per row of the third-order set-up, and of a cubic form, timed on a block of
    ``target``'s rows."""
    run, n_rows = cubic_setup(min(target.n_data, _CUBIC_ROWS))
    setup = _fastest(lambda r: [run() for _ in range(r)], 1) / n_rows
    d = target.n_features
    packed = read_only(np.random.default_rng(0).standard_normal(d * (d + 1) * (d + 2) // 6))
    a = np.full(d, 0.1)
    step = _fastest(lambda r: _time_cubic_forms(packed, a, r), 1000)
    return {"cubic_setup_row": setup, "cubic_step": step}


def _blas_threads():
    """Threads of the BLAS the set-up's sums run on (their cost depends on it)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - a dependency of scikit-learn
        return "?"
    return max((info.get("num_threads", 1) for info in threadpool_info()
                if info.get("user_api") == "blas"), default=1)


def plan_costs(target, reference, n_steps, cubic_setup=None):
    """The :class:`PlanCosts` of ``target``'s data on this machine.

    Measured (or read from the store, :mod:`sksubsample.algorithms._calibration`) when
    measuring is on (:func:`~sksubsample.algorithms._calibration.measuring`), the target runs
    compiled kernels and ``n_steps`` steps reading every row would cost more than
    :data:`MEASURE_ABOVE_SECONDS` by the rough model; :func:`rough_costs` otherwise.

    Parameters
    ----------
    target : GLMTarget
        The data.
    reference : ndarray of shape (d,)
        A parameter vector near which the residuals are timed.
    n_steps : int
        The MH steps the plan will serve.
    cubic_setup : callable or None, default None
        ``cubic_setup(n_rows) -> (run, n_run)``: ``run()`` runs the third-order set-up on
        ``n_run`` rows (about ``n_rows``); None when no third order is considered.

    Returns
    -------
    PlanCosts
    """
    cubic = cubic_setup is not None
    rough = rough_costs(target, cubic)
    if (not measuring() or not target.compiled
            or n_steps * target.n_data * rough.full_row < MEASURE_ABOVE_SECONDS):
        return rough
    kind = data_kind(target)
    rows, seconds = measured(kind, lambda: _measure_rows(_timed_rows(target), reference),
                             _ROW_FIELDS)
    cubic_costs = {"cubic_setup_row": math.nan, "cubic_step": math.nan}
    if cubic:
        layout = "csr" if target.store.kind == "csr" else "dense"
        cubic_costs, cubic_seconds = measured(
            f"glm-cubic|{layout}|d{target.n_features}|blas{_blas_threads()}",
            lambda: _measure_cubic(target, cubic_setup), _CUBIC_FIELDS)
        seconds += cubic_seconds
    return PlanCosts(tuple(rows["sizes"]), tuple(rows["minibatch"]),
                     tuple(rows["mapped_minibatch"]), tuple(rows["stratum"]),
                     float(rows["full_row"]), float(rows["exact_row"]),
                     float(rows["gradient_row"]), float(cubic_costs["cubic_setup_row"]),
                     float(cubic_costs["cubic_step"]), measured=True, probe_seconds=seconds)
