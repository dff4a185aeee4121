"""A GLM target whose data stay in their store: passes over blocks, chains through buffers.

:class:`StreamedGLMTarget` is the subsampled target of :class:`~._target.GLMTarget` for data
that are not in memory (a :class:`~sksubsample.algorithms.stores.RowStore` over a memory map, a
zarr array or a Dask array). It never holds a vector of N values:

* the set-up reads the data in a few passes of blocks (:mod:`._passes`): Newton's method for
  the MAP (:meth:`StreamedGLMTarget.newton_map`), whose last pass also gives the proxies' sums
  at the expansion point and the rows of largest leverage; then one pass for the residual
  bound's Gram matrices (:class:`StreamedTaylorExpansion`, whose plan is
  :class:`~._expansion.GLMTaylorExpansion`'s);
* a chain reads its rows through a buffer of its own, filled many steps ahead from a stream of
  uniform row draws (:meth:`StreamedGLMTarget.compiled_chain`, :mod:`._row_stream`), and
  computes on them with the logistic model's compiled kernels (:mod:`._streamed_model`).

The plan sets apart at most :attr:`StreamedGLMTarget.LEVERAGE_ROWS` rows of largest leverage
(every chain holds them), where a plan on data in memory may weigh up to a quarter of the rows.
"""

from __future__ import annotations

import math
import warnings
from functools import cached_property
from typing import NamedTuple

import numpy as np
from scipy import linalg

from .._numba import read_only
from ..mh import PrefetchedMinibatches, registered
from ..sampling import table_capacity
from ..stores import Block
from . import _kernels as kernels
from ._costs import rough_stored_costs
from ._expansion import GLMTaylorExpansion, pack_cubic
from ._family import BERNOULLI_LOGIT
from ._leverage import TopLeverage, merge_top, top_rows
from ._model import _c, assembled_model, lent_expansion
from ._passes import (
    add,
    bound_sums,
    design_of,
    gradient_sum,
    gram,
    leverage_of,
    merge_bound_sums,
    merge_newton_sums,
    newton_sums,
    with_table,
)
from ._row_stream import RowStream
from ._streamed_model import StreamedGLMModel
from ._target import Design, GaussianPrior, summed_grams

__all__ = ["MapFit", "PassAt", "StreamedGLMTarget", "StreamedTaylorExpansion", "grams_of_rows"]


class PassAt(NamedTuple):
    """A pass over the data at ``point``: its :class:`~._passes.NewtonSums`, and the factor
    ``chol`` its leverages are of (None when it computed none)."""

    point: np.ndarray
    sums: object
    chol: np.ndarray | None


class MapFit(NamedTuple):
    """The result of :meth:`StreamedGLMTarget.newton_map`.

    Attributes
    ----------
    map : ndarray of shape (d,)
        The MAP: the last point plus its Newton step.
    center : ndarray of shape (d,)
        The last point (rounded to single precision), within ``tol`` posterior standard
        deviations of the MAP: the expansion point.
    last_pass : PassAt
        The pass at ``center``.
    n_passes : int
        Passes over the data.
    """

    map: np.ndarray
    center: np.ndarray
    last_pass: PassAt
    n_passes: int


def _leverage_block(block, inverse, intercept, capacity):
    """``(largest leverage, TopRows)`` of one block (``inverse``: of the Cholesky factor)."""
    leverage = leverage_of(design_of(block, intercept), inverse)
    rows = block.start + np.arange(leverage.size, dtype=np.int64)
    return float(leverage.max()), top_rows(rows, leverage, capacity)


def _merge_leverage(a, b):
    return max(a[0], b[0]), merge_top(a[1], b[1])


def _weighted_gram_block(block, intercept):
    return gram(design_of(block, intercept), None if block.w is None else block.w**2)


def _row_norm_block(block, intercept):
    X = design_of(block, intercept)
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    return float(np.max(norms if block.w is None else norms * block.w))


def _inverse(chol):
    """``K⁻¹`` of a lower Cholesky factor."""
    return linalg.solve_triangular(chol, np.eye(chol.shape[0]), lower=True)


def _single(value):
    """A point rounded to single precision (the expansion point's precision)."""
    return np.asarray(value, dtype=np.float32).astype(np.float64)


class StreamedGLMTarget(GaussianPrior):
    """Subsampled target of a GLM whose rows stay in a :class:`RowStore`.

    ``ℓ_i(θ) = w_i family.loglik(x_iᵀθ, y_i)`` with an isotropic Gaussian prior, as
    :class:`~._target.GLMTarget`, for the rows of ``store`` (the response after the store's
    ``response`` map, in the family's coding).

    Parameters
    ----------
    store : RowStore
    prior_scale : float > 0
    family : GLMFamily, default BERNOULLI_LOGIT
        Only the logistic family runs compiled chains (the others serve the set-up and the
        per-row methods).
    intercept : bool, default False
        Append a column of ones to X (the design is ``[X, 1]``).

    Attributes
    ----------
    n_data, n_features : int
        Rows, and columns of the design.
    """

    #: Rows of largest leverage a pass keeps: the plan's exact stratum has at most this many.
    LEVERAGE_ROWS = 1 << 16
    #: Newton's method stops when its step is this many posterior standard deviations.
    MAP_TOLERANCE = 1e-3
    #: Newton's method may stop at a point this many posterior standard deviations from the
    #: MAP, once the MAP itself is known to :attr:`MAP_TOLERANCE`.
    CENTER_TOLERANCE = 0.5

    def __init__(self, store, prior_scale, family=BERNOULLI_LOGIT, intercept=False):
        self.store = store
        self.family = family
        self.intercept = bool(intercept)
        self.n_data = store.n_rows
        self.n_features = store.n_features + int(self.intercept)
        super().__init__(prior_scale, self.n_features)
        # What the plan of the control variates reads of the target's layout: dense rows, and
        # no case-weight vector in memory (the weights are read with the rows).
        self.weights = None
        self.design = Design(np.empty((0, self.n_features)), np.empty(0),
                             np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), False)

    @property
    def compiled(self):
        """Whether the family's per-datum work runs in compiled kernels."""
        return self.family.kernel == "logistic"

    @property
    def block_rows(self):
        return self.store.block_rows()

    # ------------------------------------------------------------------ rows

    def rows(self, idx):
        """The rows ``idx`` (in that order) as a :class:`Block` whose X is the design in
        float64.

        Parameters
        ----------
        idx : array_like of int of shape (n_rows,)

        Returns
        -------
        Block
        """
        block = self.store.take(np.asarray(idx, dtype=np.int64).reshape(-1))
        return Block(-1, design_of(block, self.intercept), block.y, block.w)

    def rows_between(self, start, stop):
        """The rows ``start`` to ``stop - 1`` as a :class:`Block` whose X is the design in
        float64 (read as they are stored, unchecked).

        Parameters
        ----------
        start, stop : int

        Returns
        -------
        Block
        """
        block = self.store.read(start, stop, check=False)
        return Block(start, design_of(block, self.intercept), block.y, block.w)

    def _terms(self, theta, block, function):
        z = block.X @ theta
        values = function(z, block.y)
        if block.w is not None:
            values = values * (block.w if values.ndim == 1 else block.w[:, None])
        return values

    def loglik_terms(self, theta, idx):
        return self._terms(np.asarray(theta, dtype=np.float64), self.rows(idx),
                           self.family.loglik)

    def loglik_ratio_terms(self, theta, theta_new, idx):
        block = self.rows(idx)
        return (self._terms(np.asarray(theta_new, dtype=np.float64), block, self.family.loglik)
                - self._terms(np.asarray(theta, dtype=np.float64), block, self.family.loglik))

    def grad_terms(self, theta, idx):
        block = self.rows(idx)
        d1 = self._terms(np.asarray(theta, dtype=np.float64), block, self.family.d1)
        return d1[:, None] * block.X

    def hess_terms(self, theta, idx):
        block = self.rows(idx)
        d2 = self._terms(np.asarray(theta, dtype=np.float64), block, self.family.d2)
        return d2[:, None, None] * (block.X[:, :, None] * block.X[:, None, :])

    def weighted_grams(self, row_weights, rows):
        """``sum_i v_i x_i x_iᵀ`` over the gathered ``rows`` for each weight vector ``v``
        (None: one unweighted sum), in the blocks of :meth:`GLMTarget.weighted_grams`.

        Parameters
        ----------
        row_weights : list of ndarray of shape (n_rows,) or None
        rows : ndarray of int of shape (n_rows,)

        Returns
        -------
        ndarray of shape (len(row_weights), d, d)
        """
        return grams_of_rows(self.rows(rows).X, row_weights, self.block_rows)

    # ------------------------------------------------------------------ passes

    def _fold(self, function, combine, args):
        return self.store.fold(function, combine, args)

    def pass_at(self, point, chol=None):
        """One pass at ``point``: the :class:`~._passes.NewtonSums` (with the leverages for the
        lower Cholesky factor ``chol`` unless it is None), as a :class:`PassAt`.

        Parameters
        ----------
        point : ndarray of shape (d,)
        chol : ndarray of shape (d, d) or None, default None

        Returns
        -------
        PassAt
        """
        point = np.asarray(point, dtype=np.float64)
        inverse = None if chol is None else _inverse(chol)
        sums = self._fold(newton_sums, merge_newton_sums,
                          (point, self.family, self.intercept, inverse, self.LEVERAGE_ROWS + 1))
        return PassAt(point, sums, chol)

    def leverage(self, chol):
        """The rows by leverage ``‖K⁻¹x_i‖`` for the lower Cholesky factor ``chol`` (one
        pass), as a :class:`~._leverage.TopLeverage`."""
        largest, top = self._fold(_leverage_block, _merge_leverage,
                                  (_inverse(chol), self.intercept, self.LEVERAGE_ROWS + 1))
        return TopLeverage(top, largest, self.n_data)

    def grad_loglik_sum(self, theta):
        """``sum_i ∇ℓ_i(θ)`` over all N data (one pass; logistic family)."""
        return self._fold(gradient_sum, add, (np.asarray(theta, dtype=np.float64),
                                              self.intercept))

    @cached_property
    def gram(self):
        """``Xᵀ diag(w²) X`` (one pass, when first needed): the Lipschitz variance bound's."""
        return self._fold(_weighted_gram_block, add, (self.intercept,))

    @cached_property
    def max_row_norm(self):
        """``max_i w_i ‖x_i‖`` (one pass, when first needed)."""
        return self._fold(_row_norm_block, max, (self.intercept,))

    def newton_map(self, start, temperature=1.0, *, tol=None, max_passes=50):
        """The MAP of the tempered posterior by Newton's method, one pass per step.

        Each pass, at a point rounded to single precision, sums the log-likelihood, its
        gradient and its Hessian; the Newton step from there is ``s = P⁻¹ g`` with ``P`` the
        Laplace precision, and its size in posterior standard deviations is the Newton
        decrement ``δ = sqrt(sᵀ P s)``. The point of the last pass is the expansion point of the
        control variates and the point plus its step is the MAP. The method stops at the
        first point where

        * the step is at most ``tol`` or rounds to nothing; or
        * the point is within :attr:`CENTER_TOLERANCE` standard deviations of the MAP and the
          MAP is known to ``tol``: Newton's method converges quadratically, ``δ' ≈ r δ²``, and
          the rate ``r`` observed from the previous full step predicts the error of the point
          plus its step (``r δ²``). An expansion point half a standard deviation from the MAP
          adds at most a quarter to ``E‖θ - θ̂‖²``, which is ``d`` under the posterior: the
          control variates are as good as at the MAP, and the pass that would only polish the
          point is saved.

        A pass that follows a step of more than one standard deviation (outside Newton's
        quadratic region) and lowers the posterior density halves that step. Every pass after
        the first also gathers the rows of largest leverage for the plan of the control
        variates, with the previous pass's Hessian (any factor keeps the bound valid; a
        Hessian some standard deviations away ranks the rows nearly alike).

        Parameters
        ----------
        start : ndarray of shape (d,)
            The first point (e.g. the MAP of a subsample).
        temperature : float > 0, default 1.0
        tol : float or None, default None
            :attr:`MAP_TOLERANCE` when None.
        max_passes : int, default 50

        Returns
        -------
        MapFit

        Warns
        -----
        sklearn.exceptions.ConvergenceWarning
            When ``max_passes`` passes do not reach ``tol``.
        """
        from sklearn.exceptions import ConvergenceWarning

        tol = self.MAP_TOLERANCE if tol is None else float(tol)
        d = self.n_features
        eye = np.eye(d)
        point = _single(start)
        previous = None  # (point, objective, decrement, planning factor)
        halved = False  # whether this pass follows a halved step (no rate to observe)
        for n_passes in range(1, max_passes + 1):
            done = self.pass_at(point, None if previous is None else previous[3])
            sums = done.sums
            objective = sums.loglik / temperature + self.log_prior(point)
            if (previous is not None and previous[2] > 1.0 and objective < previous[1]):
                point = _single(previous[0] + 0.5 * (point - previous[0]))
                halved = True
                continue
            precision = -sums.hess / temperature + self.prior_precision * eye
            gradient = sums.grad / temperature - self.prior_precision * point
            factor = linalg.cho_factor(0.5 * (precision + precision.T), lower=True)
            step = linalg.cho_solve(factor, gradient)
            decrement = math.sqrt(max(float(step @ gradient), 0.0))
            # Newton's quadratic rate as the last full step shows it: δ = rate · δ_previous².
            rate = None if previous is None or halved else decrement / previous[2] ** 2
            halved = False
            known = (decrement <= tol
                     or (rate is not None and decrement <= self.CENTER_TOLERANCE
                         and rate * decrement**2 <= tol))
            if known or np.array_equal(_single(point + step), point):
                return MapFit(point + step, point, done, n_passes)
            planning = -sums.hess + self.prior_precision * eye
            planning_chol = linalg.cholesky(0.5 * (planning + planning.T), lower=True)
            previous = (point, objective, decrement, planning_chol)
            point = _single(point + step)
        warnings.warn(f"Newton's method for the MAP did not reach {tol} posterior standard "
                      f"deviations in {max_passes} passes over the data (last step "
                      f"{previous[2]:.3g})", ConvergenceWarning, stacklevel=2)
        return MapFit(point, point, self.pass_at(point), max_passes + 1)

    def taylor_expansion(self, reference, order="auto", n_steps=None, n_warmup_steps=0,
                         last_pass=None):
        """The Taylor proxies around ``reference`` (:class:`StreamedTaylorExpansion`).

        Parameters
        ----------
        reference : array_like of shape (d,)
        order : {"auto", 2, 3}, default "auto"
        n_steps : int or None, default None
        n_warmup_steps : int, default 0
            How many of those steps are warm-up steps.
        last_pass : PassAt or None, default None
            A pass at ``reference`` already made (e.g. the last of :meth:`newton_map`), whose
            sums and leverages the expansion takes instead of passing again.

        Returns
        -------
        StreamedTaylorExpansion
        """
        return StreamedTaylorExpansion(self, np.asarray(reference, dtype=np.float64),
                                       order=order, n_steps=n_steps,
                                       n_warmup_steps=n_warmup_steps, last_pass=last_pass)

    def loglik_ratio_bound(self, theta, theta_new):
        """``C = L max_i w_i‖x_i‖ ‖θ' - θ‖`` (see :meth:`GLMTarget.loglik_ratio_bound`)."""
        if self.family.lipschitz is None:
            return None
        step = float(np.linalg.norm(np.asarray(theta_new) - theta))
        return self.family.lipschitz * self.max_row_norm * step

    def loglik_ratio_variance_bound(self, theta, theta_new):
        """``V = L² (θ' - θ)ᵀ (Xᵀ W² X / N) (θ' - θ)`` (see
        :meth:`GLMTarget.loglik_ratio_variance_bound`)."""
        if self.family.lipschitz is None:
            return None
        step = np.asarray(theta_new, dtype=np.float64) - theta
        return self.family.lipschitz**2 * float(step @ self.gram @ step) / self.n_data

    # ------------------------------------------------------------------ chains

    #: Slots of a chain's buffer: about this many steps' minibatches, within the bounds below.
    _BUFFER_STEPS = 1024
    _MIN_SLOTS = 1 << 12
    _MAX_SLOTS = 1 << 18
    #: A Dask array pays a task per chunk touched by a refill: larger buffers.
    _MIN_SLOTS_DASK = 1 << 16

    def buffer_slots(self, kernel, expansion):
        """Slots of a chain's buffer for ``kernel``: about :attr:`_BUFFER_STEPS` steps of the
        planned minibatch (of a warm-up step, when larger), within :attr:`_MIN_SLOTS` (for a
        Dask array :attr:`_MIN_SLOTS_DASK`) and :attr:`_MAX_SLOTS` (a power of two); a few for
        the exact tests, which draw none."""
        if kernel.test.compiled_law[0] != "bounded_barker":
            return 16
        if kernel.control_variates and expansion is not None and expansion.bound is not None:
            # The warm-up's steps (larger, while the proposal adapts) are planned too: a
            # minibatch of more than a quarter of the buffer takes a pass over the data.
            exact = 0 if expansion.strata is None else expansion.strata.exact.size
            planned = expansion.planned_terms
            if expansion.plan is not None:
                planned = max(planned, expansion.plan.warmup_rows_per_step)
            per_step = max(1.0, planned - exact)
        else:
            per_step = 256.0
        low = self._MIN_SLOTS_DASK if self.store.kind == "dask" else self._MIN_SLOTS
        wanted = max(low, self._BUFFER_STEPS * per_step)
        return int(min(self._MAX_SLOTS, 1 << math.ceil(math.log2(wanted))))

    def compiled_chain(self, kernel, rng, resources):
        """The :class:`~._streamed_model.StreamedGLMModel` and
        :class:`~sksubsample.algorithms.mh.PrefetchedMinibatches` of one chain of ``kernel``
        (see :class:`sksubsample.algorithms.mh.SupportsCompiledChain`), or None.

        The chain's row stream draws its seed from ``rng`` and is registered in
        ``resources`` for the time of the chain.

        Parameters
        ----------
        kernel : MHKernel
        rng : numpy.random.Generator
        resources : contextlib.ExitStack

        Returns
        -------
        (StreamedGLMModel, PrefetchedMinibatches) or None
        """
        expansion = lent_expansion(self, kernel)
        if expansion is False:
            return None
        d = self.n_features
        n_slots = self.buffer_slots(kernel, expansion)
        seed = rng.integers(0, 2**63, size=2)
        stream = resources.enter_context(
            RowStream(self, expansion if kernel.control_variates else None, seed, n_slots))
        handle = resources.enter_context(registered(stream))
        uses_gram = kernel.test.compiled_law[0] == "bounded_barker" and not (
            kernel.control_variates)
        empty, no_rows = _c(np.empty(0)), _c(np.empty(0, dtype=np.int64), np.int64)
        rows = (read_only(stream.X), empty, no_rows, no_rows, False, read_only(stream.signs),
                read_only(stream.weights))
        local = assembled_model(self, kernel, expansion, rows, read_only(stream.table),
                                _c(self.gram if uses_gram else np.zeros((d, d))))
        k = stream.exact.size
        minibatches = PrefetchedMinibatches(
            handle, read_only(np.arange(k, dtype=np.int64)), int(stream.n_sampled),
            read_only(stream.ids), k, np.zeros(2, dtype=np.int64),
            np.empty(table_capacity(n_slots // 4), dtype=np.int64),
            np.empty(n_slots, dtype=np.int64))
        return StreamedGLMModel(local, handle), minibatches


def grams_of_rows(X, row_weights, block_rows):
    """``sum_i v_i x_i x_iᵀ`` over the rows of ``X`` for each weight vector (None: one
    unweighted sum), in blocks of ``block_rows`` rows (:func:`~._target.summed_grams`)."""
    weights = [None] if row_weights is None else list(row_weights)
    blocks = ((start, X[start:start + block_rows]) for start in range(0, X.shape[0],
                                                                       block_rows))
    return summed_grams(blocks, weights, X.shape[1])


class StreamedTaylorExpansion(GLMTaylorExpansion):
    """:class:`~._expansion.GLMTaylorExpansion` of a :class:`StreamedGLMTarget`: the same
    proxies, bound and plan, with the sums made in passes over the store and no per-row table
    (a chain computes a row's coefficients when it reads the row).

    Parameters
    ----------
    target : StreamedGLMTarget
    reference : ndarray of shape (d,)
    order : {"auto", 2, 3}, default "auto"
    n_steps : int or None, default None
    n_warmup_steps : int, default 0
    last_pass : PassAt or None, default None
        A pass at ``reference`` already made (its sums, and its leverages when it has them,
        are taken instead of passing again).

    Attributes
    ----------
    exact_block : Block or None
        The exact stratum's rows (X as stored, y, w), in increasing row order.
    """

    def __init__(self, target, reference, order="auto", n_steps=None, n_warmup_steps=0,
                 last_pass=None):
        if last_pass is not None and not np.array_equal(last_pass.point, reference):
            last_pass = None
        self._last_pass = last_pass
        self._planning_rows = None
        self.table = None
        self.exact_block = None
        self._by_pair = None
        super().__init__(target, reference, order=order, n_steps=n_steps,
                         n_warmup_steps=n_warmup_steps)
        # What only the plan read: the chains (which get the expansion) need none of it.
        self._last_pass = self._planning_rows = self._by_pair = None

    def _sum_proxies(self):
        done = self._last_pass
        if done is None:
            done = self._last_pass = self.target.pass_at(self.reference)
        self.loglik_sum = float(done.sums.loglik)
        self.grad_sum = done.sums.grad
        self.hess_sum = done.sums.hess

    def _plan_costs(self, n_steps, cubic):
        # Rows come from a buffer of prefetched rows: no compiled kernel over a design in
        # memory to time, so the rough model of stored rows.
        target = self.target
        return rough_stored_costs(target.n_data, target.n_features,
                                  target.weights is not None, cubic)

    def _whitening(self):
        done = self._last_pass
        if done.chol is not None:
            return done.chol, TopLeverage(done.sums.top, done.sums.largest,
                                          self.target.n_data)
        chol = self._whitening_factor()
        if chol is None:
            return None
        return chol, self.target.leverage(chol)

    def _predictors_at(self, rows):
        block = self.target.rows(rows)
        self._planning_rows = (np.asarray(rows), block.X)
        z = block.X @ self.reference
        return z, None if block.w is None else block.w**2

    def _grams_at(self, row_weights, rows):
        known, X = self._planning_rows
        return grams_of_rows(X[np.searchsorted(known, rows)], row_weights,
                             self.target.block_rows)

    def _bound_grams(self, order, radii, top):
        target = self.target
        sums = target._fold(bound_sums, merge_bound_sums,
                            (self.reference, target.family, target.intercept, order,
                             np.asarray(radii, dtype=np.float64),
                             np.sort(np.asarray(top, dtype=np.int64))))
        self._by_pair = sums.by_pair
        self.exact_block = Block(-1, sums.exact_X, sums.exact_y, sums.exact_w)
        return sums.grams

    def _sum_cubic(self):
        self._packed_coef = pack_cubic(self._by_pair)

    def _rows_with_table(self, idx):
        target = self.target
        block = target.rows(idx)
        table = with_table(block.X, block.y, block.w, self.reference, target.family,
                           self.order)
        return block, table

    def diff_terms(self, a, a_new, idx):
        """``h_i(θ') - h_i(θ)`` from the offsets ``a = θ - θ̂``, ``a_new = θ' - θ̂``."""
        block, table = self._rows_with_table(idx)
        c, w, _, t = table.T
        u, v = block.X @ a, block.X @ a_new
        return (v - u) * (c + 0.5 * w * (v + u) + t * (v * v + u * v + u * u) / 6.0)

    def residual_terms(self, theta, theta_new, idx):
        """``[ℓ_i(θ') - ℓ_i(θ)] - [h_i(θ') - h_i(θ)]`` for ``idx`` (the rows gathered once)."""
        block, table = self._rows_with_table(idx)
        out = np.empty(block.X.shape[0])
        kernels.residual_terms(block.X, np.empty(0), np.empty(0, dtype=np.int64),
                               np.empty(0, dtype=np.int64), False,
                               np.ascontiguousarray(block.y, dtype=np.float64),
                               np.empty(0) if block.w is None else block.w, table,
                               np.asarray(theta, dtype=np.float64),
                               np.asarray(theta_new, dtype=np.float64),
                               np.arange(block.X.shape[0], dtype=np.int64), out)
        return out

