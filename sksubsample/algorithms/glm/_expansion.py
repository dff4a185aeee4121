"""Taylor proxies of a generalised linear model's terms, with a bound on their residuals.

:class:`GLMTaylorExpansion` builds the control-variate proxies (second or third order in the
linear predictor) of a :class:`~._target.GLMTarget` with an O(d²) bound on the second moment
of their residuals, which the bounded Barker test turns into a minibatch size.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import linalg

from .._numba import njit
from ..mh import bounded_batch_size_compiled
from . import _kernels as kernels
from ._costs import plan_costs
from ._kernels import as_indices
from ._leverage import RankedLeverage

__all__ = ["ExpansionPlan", "GLMTaylorExpansion", "ResidualBound", "bound_weights", "cubic_pairs",
           "pack_cubic", "taylor_coefficients"]


class ResidualBound(NamedTuple):
    """The constants of :func:`sksubsample.algorithms.glm._kernels.residual_bound`.

    Attributes
    ----------
    order : int
        Order of the Taylor proxies (2 or 3).
    rho : float
        Largest ``‖K⁻¹x_i‖`` over the sampled rows.
    chol : ndarray of shape (d, d)
        Lower Cholesky factor ``K`` of the Laplace precision at the expansion point.
    radii : ndarray of shape (n_radii,)
        Ascending radii of the local derivative bounds.
    grams : ndarray of shape (n_radii + 1, d, d)
        ``sum_{i sampled} M_i(R)² x_i x_iᵀ`` for each radius, then for the global bound.
    n_sampled : int
        Rows of the sampled stratum.
    """

    order: int
    rho: float
    chol: np.ndarray
    radii: np.ndarray
    grams: np.ndarray
    n_sampled: int


class ExpansionPlan(NamedTuple):
    """The plan :class:`GLMTaylorExpansion` chose, and what it expects it to cost.

    Parameters
    ----------
    order : int
        Order of the Taylor proxies (2 or 3).
    n_exact_rows : int
        Rows summed exactly at every step (the stratum of largest leverage).
    rows_per_step : float
        Expected data rows a step of the bounded test reads after warm-up (stratum and
        minibatch), at typical pairs of posterior draws.
    warmup_rows_per_step : float
        The same during warm-up, whose chains start overdispersed and try larger steps
        (pairs of draws from the Laplace approximation widened by
        :attr:`GLMTaylorExpansion.WARMUP_SCALE`).
    setup_seconds : float
        Predicted seconds of the set-up this order adds (the third-order sums; 0 at order 2).
    step_seconds : float
        Predicted seconds of the rows (and, at order 3, the cubic form) of a step after
        warm-up.
    warmup_step_seconds : float
        The same during warm-up.
    seconds : float
        Predicted seconds of everything the plan decides: ``setup_seconds`` plus the steps'
        rows. (The set-up every plan shares and the proposals' work are not included.)
    n_steps : int
        MH steps planned for, warm-up included.
    n_warmup_steps : int
        Warm-up steps among them.
    measured : bool
        Whether the costs were measured on this machine (False: the rough model of a fit too
        small to be worth measuring, or of a target without compiled kernels).
    probe_seconds : float
        Seconds this plan spent measuring costs (0 when they were stored or rough).
    """

    order: int
    n_exact_rows: int
    rows_per_step: float
    warmup_rows_per_step: float
    setup_seconds: float
    step_seconds: float
    warmup_step_seconds: float
    seconds: float
    n_steps: int
    n_warmup_steps: int
    measured: bool
    probe_seconds: float


@njit
def _batch_sizes(order, rho, chol, radii, grams, n_sampled, starts, ends, delta):
    """The bounded test's minibatch at each pair ``(starts[j], ends[j])`` of offsets from the
    expansion point, under the residual bound of those constants (symmetric in the pair)."""
    out = np.empty(starts.shape[0], dtype=np.int64)
    for j in range(starts.shape[0]):
        value = kernels.residual_bound(order, rho, chol, radii, grams, starts[j],
                                       ends[j]) / n_sampled
        out[j] = bounded_batch_size_compiled(n_sampled, value, delta)
    return out


class GLMTaylorExpansion:
    """Taylor proxies of a GLM's terms around ``reference``, per row in O(1), with a bound.

    ``h_i(θ) = ℓ_i(θ̂) + c_i u + ½ w_i u² (+ t_i u³ / 6)`` with ``u = x_iᵀ(θ - θ̂)`` and
    ``c_i, w_i, t_i`` the derivatives of ``ℓ_i`` in ``z`` at ``ẑ_i = x_iᵀθ̂``: the per-datum
    gradient is ``c_i x_i``, the Hessian ``w_i x_i x_iᵀ``, so the sums over all N data are
    ``Xᵀc``, ``Xᵀ diag(w) X`` and ``T = sum_i t_i x_i ⊗ x_i ⊗ x_i``, and no ``(N, d, d)``
    array is formed. The control-variate residuals are what is left of ``ℓ_i(θ') - ℓ_i(θ)``.

    **Bound.** When the family bounds its derivatives locally, the second moment of the
    residuals over the sampled rows is bounded in O(d²) per step
    (:meth:`residual_variance_bound`, :func:`~sksubsample.algorithms.glm._kernels.residual_bound`).
    How tight that bound is decides the bounded Barker test's minibatch, so the expansion plans
    three choices once (every choice keeps the bound valid):

    * the **order** (2, or 3 for a design with ``d <= 32``): the third-order remainder is
      smaller by about ``max_i |u_i|``, so minibatches are smaller, but the set-up sums
      ``T = sum_i t_i x_i⊗x_i⊗x_i`` over every row (``O(N d³/2)``) and each step pays a cubic
      form of ``O(d³/6)``;
    * **strata**: the ``k`` rows of largest leverage ``‖K⁻¹x_i‖`` are summed exactly at every
      step, since the bound grows with the largest leverage among the sampled rows and a few
      outlying rows would otherwise force whole-data minibatches (``k`` on the grid
      ``0, 1, 2, 4, ...``);
    * the **radii** at which local derivative bounds ``M_i(R)`` weight the Gram matrix (rows far
      from the logistic curve's bend have tiny higher derivatives).

    **Plan.** Order and stratum minimise the expected time of what they decide: the order's
    set-up, plus, at each of ``n_steps`` steps, the stratum's rows, the minibatch the bound
    allows and (order 3) the cubic form. Those costs are measured on this machine with the
    chain's own kernels, once per kind of data, and stored
    (:func:`~sksubsample.algorithms.glm._costs.plan_costs`); the minibatch is averaged over
    pairs of draws from the Laplace approximation at the planning tolerance, for warm-up steps
    over pairs widened by :attr:`WARMUP_SCALE` (warm-up starts overdispersed and tries larger
    steps, so it reads more rows). The plan's Gram matrices are estimated on a subsample of
    rows; only the chosen plan's are computed on every row. What decides the plan, hence the
    chains' draws, is therefore the data, ``n_steps`` and ``n_warmup_steps``, and the costs
    stored for this kind of data on this machine: the same fit plans the same way on the
    same machine. Its choice and its predicted costs are :attr:`plan`.

    Parameters
    ----------
    target : GLMTarget
    reference : ndarray of shape (d,)
    order : {"auto", 2, 3}, default "auto"
    n_steps : int or None, default None
        MH steps the expansion will serve, warm-up included (the plan weighs the third
        order's set-up, which costs ``O(N d³)``, against its savings per step); None means
        many (10⁵).
    n_warmup_steps : int, default 0
        How many of those steps are warm-up steps.

    Attributes
    ----------
    order : int
    table : ndarray of shape (n_data, 4)
        ``(c_i, w_i, ẑ_i, t_i)`` per row (``t_i = 0`` at order 2).
    loglik_sum, grad_sum, hess_sum
        ``sum_i ℓ_i(θ̂)``, ``Xᵀc``, ``Xᵀ diag(w) X``.
    strata : Strata or None
    bound : ResidualBound or None
    planned_terms : float
        The plan's expected data terms per bounded test (exact stratum and minibatch), at
        typical pairs of posterior draws; N when there is no bound.
    plan : ExpansionPlan or None
        The choice and its predicted costs (None when there is no bound to plan for).
    """

    #: Efficiency only: the tolerance and the number of pairs that set the radii; the pairs
    #: over which the plan averages the minibatch (after warm-up and during it).
    _PLANNING_DELTA = 0.01
    _PLANNING_PAIRS = 8
    _COST_PAIRS = 64
    #: Warm-up steps are costed at pairs of draws from the Laplace approximation widened by
    #: this factor: it matches the rows warm-up reads on logistic regressions at N = 10⁴-10⁶
    #: (the grid benchmark reports the predicted and the measured rows of each fit).
    WARMUP_SCALE = 1.5
    #: Radii of the local derivative bounds, as multiples of the median ``max_i |u_i|`` of the
    #: planning pairs.
    _RADII = (0.7, 1.0, 1.4, 2.0, 2.8)
    _MAX_CUBIC_DIM = 32
    #: Steps the plan amortises its set-up over when not told.
    _DEFAULT_STEPS = 100_000

    def __init__(self, target, reference, order="auto", n_steps=None, n_warmup_steps=0):
        if order not in ("auto", 2, 3):
            raise ValueError(f"order must be 'auto', 2 or 3, got {order!r}")
        self.target = target
        self.reference = reference
        self.strata = None
        self.bound = None
        self.order = 2
        self.planned_terms = float(target.n_data)
        self.plan = None
        self._packed_coef = np.empty(0)
        self._sum_proxies()
        orders = self._candidate_orders(order)
        if orders:
            n_steps = self._DEFAULT_STEPS if n_steps is None else int(n_steps)
            self._plan(orders, n_steps, min(int(n_warmup_steps), n_steps))
        elif order == 3:
            raise ValueError(f"order=3 needs a design with at most {self._MAX_CUBIC_DIM} "
                             "columns and a family with d3")
        if self.order == 3:
            self._sum_cubic()

    def _sum_proxies(self):
        """The proxies' coefficients per row (:attr:`table`) and their sums."""
        target = self.target
        family, y = target.family, target.y
        z = target.predict(self.reference)
        c, w, _ = taylor_coefficients(family, z, y, target.weights, 2)
        self.loglik_sum = float(np.sum(target.weight_terms(family.loglik(z, y))))
        self.grad_sum = target.transpose_dot(c)
        self.hess_sum = target.weighted_gram(w)
        self.table = np.column_stack([c, w, z, np.zeros_like(z)])

    def _sum_cubic(self):
        """The third-order coefficients per row and their packed sum (:attr:`cubic_sum`)."""
        target = self.target
        self.table[:, 3] = target.weight_terms(target.family.d3(self.table[:, 2], target.y))
        self._packed_coef = self._packed_cubic_sum(target, self.table[:, 3])

    # ------------------------------------------------------------------ planning

    def _candidate_orders(self, order):
        target = self.target
        family = target.family
        if family.local_derivative_bound is None:
            return ()
        cubic_ok = family.d3 is not None and target.n_features <= self._MAX_CUBIC_DIM
        if order == 2 or not cubic_ok:
            return (2,) if order != 3 else ()
        return (3,) if order == 3 else (2, 3)

    def _plan(self, orders, n_steps, n_warmup_steps):
        target = self.target
        n, d = target.n_data, target.n_features
        whitening = self._whitening()
        if whitening is None:
            return
        chol, leverage = whitening
        rng = np.random.default_rng(0)
        pairs = [linalg.solve_triangular(chol.T, rng.standard_normal((d, 2)), lower=False).T
                 for _ in range(self._PLANNING_PAIRS)]
        whitened = np.array([[np.linalg.norm(chol.T @ a) for a in pair] for pair in pairs])
        typical = float(np.median(whitened.max(axis=1))) * leverage.largest
        radii = typical * np.asarray(self._RADII)
        # The plan's Gram matrices are estimated on a uniform subsample of the rows (exact
        # when N is small); only the chosen plan's are computed on every row. (No index of
        # every row is made for a large N: the plan's memory does not grow with N.)
        if n > self._PLANNING_ROWS:
            subsample = np.sort(rng.choice(n, self._PLANNING_ROWS, replace=False))
        else:
            subsample = np.arange(n)
        sub_z, sub_weights2 = self._predictors_at(subsample)
        sub_rank = leverage.ranks(subsample)
        costs = self._plan_costs(n_steps, 3 in orders)
        # The pairs the minibatches are averaged over: from a stream of their own, so that
        # the radii above stay those of the pairs they always came from.
        cost_rng = np.random.default_rng(1)
        sampling, warmup = (
            [np.ascontiguousarray(m) for m in scale * linalg.solve_triangular(
                chol.T, cost_rng.standard_normal((d, 2 * self._COST_PAIRS)),
                lower=False).T.reshape(2, self._COST_PAIRS, d)]
            for scale in (1.0, self.WARMUP_SCALE))
        best = None
        for k_order in orders:
            row_weights = self._bound_weights(k_order, sub_z, radii, sub_weights2)
            sub_grams = self._grams_at(row_weights, subsample)
            setup = costs.cubic_setup_row * n if k_order == 3 else 0.0
            per_step = costs.cubic_step if k_order == 3 else 0.0
            taken = 0
            for k in [0] + [1 << j for j in range(max(1, n.bit_length() - 2))]:
                if k > n // 4 or k > leverage.limit:
                    break
                if k > taken:
                    # Subsampled rows among the k of largest leverage leave the estimate.
                    leaving = np.flatnonzero((sub_rank >= taken) & (sub_rank < k))
                    if leaving.size:
                        sub_grams -= self._grams_at([w[leaving] for w in row_weights],
                                                    subsample[leaving])
                    taken = k
                kept = int(np.sum(sub_rank >= k))
                grams = sub_grams * ((n - k) / max(kept, 1))
                rho = leverage.value(k)
                phases = [self._phase(costs, k_order, rho, chol, radii, grams, n - k, k,
                                      pair, per_step) for pair in (sampling, warmup)]
                (step, rows), (warm_step, warm_rows) = phases
                cost = setup + (n_steps - n_warmup_steps) * step + n_warmup_steps * warm_step
                if best is None or cost < best[0]:
                    best = (cost, k, k_order, rows, warm_rows, setup, step, warm_step)
        cost, k, order, rows, warm_rows, setup, step, warm_step = best
        self.planned_terms = rows
        self.plan = ExpansionPlan(order, k, rows, warm_rows, setup, step, warm_step, cost,
                                  n_steps, n_warmup_steps, costs.measured, costs.probe_seconds)
        grams = self._bound_grams(order, radii, leverage.top(k))
        if k:
            self.strata = leverage.strata(k)
        self.order = order
        self.bound = ResidualBound(order, leverage.value(k), chol, radii, grams, n - k)

    def _whitening(self):
        """``(K, leverage)``: the lower Cholesky factor ``K`` of the Laplace precision at the
        expansion point (:meth:`_whitening_factor`) and the rows ordered by their leverage
        ``‖K⁻¹x_i‖`` (:class:`~._leverage.RankedLeverage`); None when there is no factor."""
        chol = self._whitening_factor()
        if chol is None:
            return None
        return chol, RankedLeverage(self._leverage(chol))

    def _whitening_factor(self):
        """The lower Cholesky factor of ``-H + prior precision``, or None when it is not
        positive definite."""
        target = self.target
        precision = -self.hess_sum + target.prior_precision * np.eye(target.n_features)
        try:
            return linalg.cholesky(0.5 * (precision + precision.T), lower=True)
        except linalg.LinAlgError:
            return None

    def _grams_at(self, row_weights, rows):
        """``sum_i v_i x_i x_iᵀ`` over ``rows`` (of the plan's subsample) for each weight
        vector ``v`` of ``row_weights``."""
        return self.target.weighted_grams(row_weights, rows)

    def _predictors_at(self, rows):
        """The linear predictors ``ẑ_i`` at the expansion point and the squared case weights
        (None without) of ``rows``."""
        weights = self.target.weights
        return self.table[rows, 2], None if weights is None else weights[rows]**2

    def _bound_grams(self, order, radii, top):
        """The bound's Gram matrices ``sum_i M_i(R)² w_i² x_i x_iᵀ`` over every row but
        ``top`` (the exact stratum), one per radius and one for the global bound."""
        target = self.target
        weights2 = None if target.weights is None else target.weights**2
        row_weights = self._bound_weights(order, self.table[:, 2], radii, weights2)
        grams = target.weighted_grams(row_weights)
        if top.size:
            grams -= target.weighted_grams([w[top] for w in row_weights], top)
        return grams

    def _phase(self, costs, order, rho, chol, radii, grams, n_sampled, k, pairs, per_step):
        """``(seconds, rows)`` of a step of the plan ``(order, k)``, averaged over the pairs
        of offsets ``pairs``: the stratum, the minibatch the bound allows (every sampled row
        in index order when it allows no fewer) and the order's own work."""
        sizes = _batch_sizes(order, rho, chol, radii, grams, n_sampled, pairs[0], pairs[1],
                             self._PLANNING_DELTA)
        minibatches = [costs.full_row * n_sampled if b >= n_sampled
                       else costs.minibatch_seconds(b, mapped=k > 0) for b in sizes.tolist()]
        seconds = costs.stratum_seconds(k) + float(np.mean(minibatches)) + per_step
        return seconds, k + float(np.mean(sizes))

    #: Rows on which the plan estimates its Gram matrices.
    _PLANNING_ROWS = 1 << 15

    def _plan_costs(self, n_steps, cubic):
        """The :class:`~._costs.PlanCosts` the plan compares (measured on this machine for
        the kinds of data the compiled kernels read, :func:`~._costs.plan_costs`)."""
        return plan_costs(self.target, self.table, self.reference, n_steps,
                          self._cubic_setup() if cubic else None)

    def _cubic_setup(self):
        """For :func:`~._costs.plan_costs`: the third-order set-up on the first rows."""
        target, z = self.target, self.table[:, 2]

        def prepare(n_rows):
            rows = np.arange(n_rows)
            block = type(target)(target.X[rows], target.y[rows], target.prior_scale,
                                 target.family,
                                 None if target.weights is None else target.weights[rows])

            def run():
                t = block.weight_terms(block.family.d3(z[rows], block.y))
                GLMTaylorExpansion._packed_cubic_sum(block, t)

            return run, n_rows

        return prepare

    def _bound_weights(self, order, z, radii, weights2):
        """``M_i(R)² w_i²`` per row (of the predictors ``z`` and squared weights ``weights2``)
        for each radius, then for the global derivative bound: the weights of the bound's Gram
        matrices."""
        return bound_weights(self.target.family, order, z, radii, weights2)

    def _leverage(self, chol):
        """``‖K⁻¹ x_i‖`` for every row: how far row i's predictor moves per unit of ``‖Kᵀa‖``."""
        target = self.target
        leverage = np.empty(target.n_data)
        for start, rows in target.row_blocks():
            whitened = linalg.solve_triangular(chol, rows.T, lower=True)
            leverage[start:start + rows.shape[0]] = np.sqrt(
                np.einsum("ij,ij->j", whitened, whitened))
        return leverage

    @staticmethod
    def _bound_value(bound, a, a_new):
        return kernels.residual_bound(bound.order, bound.rho, bound.chol, bound.radii,
                                      bound.grams, a, a_new) / bound.n_sampled

    @staticmethod
    def _packed_cubic_sum(target, t):
        """``T = sum_i t_i x_i⊗x_i⊗x_i`` by its entries ``j <= k <= l`` (BLAS, by blocks)."""
        d = target.n_features
        by_pair = np.zeros((d, d * (d + 1) // 2))
        scratch = np.empty((min(target.block_rows, target.n_data), d * (d + 1) // 2))
        for start, rows in target.row_blocks():
            by_pair += cubic_pairs(rows, t[start:start + rows.shape[0]], scratch)
        return pack_cubic(by_pair)

    # ------------------------------------------------------------------ proxies

    @property
    def cubic_sum(self):
        """The third-order sum packed for :func:`~._kernels.cubic_form` (empty at
        order 2)."""
        return self._packed_coef

    def sum_diff(self, a, a_new):
        """``sum_i [h_i(θ') - h_i(θ)]`` from the offsets, in O(d²) (+ O(d³/6) at order 3)."""
        return (kernels.proxy_value(self.grad_sum, self.hess_sum, self._packed_coef,
                                    self.order, np.asarray(a_new, dtype=np.float64))
                - kernels.proxy_value(self.grad_sum, self.hess_sum, self._packed_coef,
                                      self.order, np.asarray(a, dtype=np.float64)))

    def residual_variance_bound(self, theta, theta_new):
        """``V >= (1/N_s) sum_{i sampled} r_i²`` for the residuals of :meth:`residual_terms`.

        See :func:`sksubsample.algorithms.glm._kernels.residual_bound` for the bound; the sum
        runs over the sampled stratum (all N rows unless :attr:`strata` sets some high-leverage
        rows apart to be summed exactly), ``N_s`` its size. Symmetric in ``(θ, θ')``. Returns
        None when the family has no local derivative bound.
        """
        if self.bound is None:
            return None
        return self._bound_value(self.bound, np.asarray(theta) - self.reference,
                                 np.asarray(theta_new) - self.reference)

    def diff_terms(self, a, a_new, idx):
        """``h_i(θ') - h_i(θ)`` from the offsets ``a = θ - θ̂``, ``a_new = θ' - θ̂``."""
        rows = self.target.dense_rows(idx)
        c, w, _, t = self.table[np.asarray(idx)].T
        u, v = rows @ a, rows @ a_new
        return (v - u) * (c + 0.5 * w * (v + u) + t * (v * v + u * v + u * u) / 6.0)

    def residual_terms(self, theta, theta_new, idx):
        """``[ℓ_i(θ') - ℓ_i(θ)] - [h_i(θ') - h_i(θ)]`` with the rows gathered once."""
        target = self.target
        theta = np.asarray(theta, dtype=np.float64)
        theta_new = np.asarray(theta_new, dtype=np.float64)
        if target.compiled:
            idx = as_indices(idx)
            out = np.empty(idx.size)
            kernels.residual_terms(*target.design, target.y, target.kernel_weights,
                                   self.table, theta, theta_new, idx, out)
            return out
        raw = target.loglik_ratio_terms(theta, theta_new, idx)
        return raw - self.diff_terms(theta - self.reference, theta_new - self.reference, idx)


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


def bound_weights(family, order, z, radii, weights2):
    """``M_i(R)² w_i²`` per row for each radius ``R`` of ``radii``, then for the global bound.

    Parameters
    ----------
    family : GLMFamily
    order : {2, 3}
        Order of the proxies (the bound is of the derivative of order ``order + 1``).
    z : ndarray of shape (n_rows,)
        The linear predictors at the expansion point.
    radii : ndarray of shape (n_radii,)
    weights2 : ndarray of shape (n_rows,) or None
        The squared case weights (None: all ones).

    Returns
    -------
    list of ndarray of shape (n_rows,)
    """
    out = []
    for radius in (*radii, math.inf):
        scale = family.local_derivative_bound(order + 1, z, radius)
        out.append(scale**2 if weights2 is None else scale**2 * weights2)
    return out


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
