"""Taylor proxies of a generalised linear model's terms, with a bound on their residuals.

:class:`GLMTaylorExpansion` builds the control-variate proxies (second or third order in the
linear predictor) of a :class:`~._target.GLMTarget` from the set-up's pass at the expansion
point, with an O(d²) bound on the second moment of their residuals, which the bounded Barker test
turns into a minibatch size, and the plan that makes that bound tight (:mod:`._plan`).
"""

from __future__ import annotations

import numpy as np

from ..stores import Block, single_threaded_blas
from . import _kernels as kernels
from ._costs import plan_costs
from ._plan import MAX_CUBIC_DIM, PlanInputs, plan_expansion
from ._proxies import pack_cubic, taylor_coefficients

__all__ = ["GLMTaylorExpansion"]


class GLMTaylorExpansion:
    """Taylor proxies of a GLM's terms around ``reference``, per row in O(1), with a bound.

    ``h_i(θ) = ℓ_i(θ̂) + c_i u + ½ w_i u² (+ t_i u³ / 6)`` with ``u = x_iᵀ(θ - θ̂)`` and
    ``c_i, w_i, t_i`` the derivatives of ``ℓ_i`` in ``z`` at ``ẑ_i = x_iᵀθ̂``: the per-datum
    gradient is ``c_i x_i``, the Hessian ``w_i x_i x_iᵀ``, so the sums over all N data are
    ``Xᵀc``, ``Xᵀ diag(w) X`` and ``T = sum_i t_i x_i ⊗ x_i ⊗ x_i``, and no ``(N, d, d)``
    array is formed. The control-variate residuals are what is left of ``ℓ_i(θ') - ℓ_i(θ)``.

    **Bound.** When the family bounds its derivatives locally, the second moment of the
    residuals over the sampled rows is bounded in O(d²) per step
    (:meth:`residual_variance_bound`, :func:`~sksubsample.algorithms.glm._kernels.residual_bound`),
    from Gram matrices that one pass sums by bins of ``ẑ`` (:mod:`._bins`); the order of the
    proxies and the rows of largest leverage summed exactly at every step are planned for the
    fit's steps with the costs of this machine (:mod:`._plan`, :mod:`._costs`). Its choice and
    its predicted costs are :attr:`plan`.

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
    setup : Setup or None, default None
        The target's set-up at ``reference`` (:meth:`GLMTarget.set_up`); None: the expansion
        makes its own (:meth:`GLMTarget.setup_at`).
    allow_exact : bool, default True
        Whether the plan may choose the exact test on all N rows (False: the cheapest bounded
        plan, whatever it costs; e.g. to study the bound on a small data set).
    exact_gradients : float, default 0.0
        Full-data gradients an exact step's proposal is expected to take, which the plan
        counts in the exact test's cost (0: the proposal takes the proxy's gradient or none).

    Attributes
    ----------
    order : int
    loglik_sum, grad_sum, hess_sum
        ``sum_i ℓ_i(θ̂)``, ``Xᵀc``, ``Xᵀ diag(w) X``.
    strata : Strata or None
    exact_block : Block or None
        The exact stratum's rows (X as stored, the response, the case weights), in increasing
        row order.
    bound : ResidualBound or None
    planned_terms : float
        The plan's expected data terms per bounded test (exact stratum and minibatch), at
        typical pairs of posterior draws; N when there is no bound.
    plan : ExpansionPlan or None
        The choice and its predicted costs (None when there is no bound to plan for).
    """

    #: Steps the plan amortises its set-up over when not told.
    _DEFAULT_STEPS = 100_000

    def __init__(self, target, reference, order="auto", n_steps=None, n_warmup_steps=0,
                 setup=None, allow_exact=True, exact_gradients=0.0):
        if order not in ("auto", 2, 3):
            raise ValueError(f"order must be 'auto', 2 or 3, got {order!r}")
        self.target = target
        self.reference = reference
        if setup is None or not np.array_equal(setup.center, reference):
            setup = target.setup_at(reference)
        sums = setup.sums
        self.loglik_sum, self.grad_sum, self.hess_sum = float(sums.loglik), sums.grad, sums.hess
        self.strata = self.bound = self.plan = self.exact_block = None
        self.order = 2
        self.planned_terms = float(target.n_data)
        self._packed_coef = np.empty(0)
        orders = self._candidate_orders(order)
        if orders and setup.chol is not None and sums.binned is not None:
            n_steps = self._DEFAULT_STEPS if n_steps is None else int(n_steps)
            self._plan(setup, orders, n_steps, min(int(n_warmup_steps), n_steps),
                       bool(allow_exact), float(exact_gradients))
        elif order == 3:
            raise ValueError(f"order=3 needs a design with at most {MAX_CUBIC_DIM} columns and "
                             "a family with d3 and a local derivative bound")
        if self.order == 3:
            self._packed_coef = pack_cubic(target.cubic_sum(reference))

    def _candidate_orders(self, order):
        target = self.target
        if not target.bounded_family:
            return ()
        cubic_ok = target.family.d3 is not None and target.n_features <= MAX_CUBIC_DIM
        if order == 2 or not cubic_ok:
            return (2,) if order != 3 else ()
        return (3,) if order == 3 else (2, 3)

    def _plan(self, setup, orders, n_steps, n_warmup_steps, allow_exact, exact_gradients):
        target = self.target
        watched = setup.watched
        inputs = PlanInputs(setup.chol, setup.leverage, setup.sums.binned, target.binning,
                            watched.design, watched.z,
                            None if watched.w is None else watched.w**2)
        costs = self._plan_costs(n_steps, 3 in orders)
        # (the plan's products are small: BLAS's threads only contend, twice as slow at
        # d = 21; and on one thread its sums do not depend on the machine's thread count)
        with single_threaded_blas():
            self.plan, self.bound = plan_expansion(target.family, target.n_data, orders,
                                                   inputs, costs, n_steps, n_warmup_steps,
                                                   allow_exact, exact_gradients)
        self.order = self.plan.order
        self.planned_terms = self.plan.rows_per_step
        k = self.plan.n_exact_rows
        if k:
            # (the sampled stratum left implicit: a chain over rows in memory makes its index)
            self.strata = setup.leverage.strata(k)
            order = np.argsort(watched.rows[:k])
            p = target.store.n_features
            design = watched.design[order]
            self.exact_block = Block(-1, design[:, :p].astype(target.store.dtype),
                                     watched.y[order],
                                     None if watched.w is None else watched.w[order])

    def _plan_costs(self, n_steps, cubic):
        """The :class:`~._costs.PlanCosts` the plan compares (:func:`~._costs.plan_costs`: the
        same for the same rows in memory and in a store)."""
        return plan_costs(self.target, self.reference, n_steps,
                          self._cubic_setup() if cubic else None)

    def _cubic_setup(self):
        """For :func:`~._costs.plan_costs`: the third-order set-up on the first rows."""
        target = self.target

        def prepare(n_rows):
            rows = target.store.read(0, n_rows, check=False)  # (signs: the store's response)
            block = type(target)(rows.X, rows.y, target.prior_scale, target.family, rows.w,
                                 intercept=target.intercept)

            def run():
                block.cubic_sum(self.reference)

            return run, n_rows

        return prepare

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
        bound = self.bound
        return kernels.residual_bound(bound.order, bound.rho, bound.chol, bound.radii,
                                      bound.grams, np.asarray(theta) - self.reference,
                                      np.asarray(theta_new) - self.reference) / bound.n_sampled

    def diff_terms(self, a, a_new, idx):
        """``h_i(θ') - h_i(θ)`` from the offsets ``a = θ - θ̂``, ``a_new = θ' - θ̂``."""
        block = self.target.rows(idx)
        c, w, t = taylor_coefficients(self.target.family, block.X @ self.reference, block.y,
                                      block.w, 3)
        t = t if self.order == 3 else np.zeros_like(t)
        u, v = block.X @ a, block.X @ a_new
        return (v - u) * (c + 0.5 * w * (v + u) + t * (v * v + u * v + u * u) / 6.0)

    def residual_terms(self, theta, theta_new, idx):
        """``[ℓ_i(θ') - ℓ_i(θ)] - [h_i(θ') - h_i(θ)]`` with the rows gathered once."""
        target = self.target
        theta = np.asarray(theta, dtype=np.float64)
        theta_new = np.asarray(theta_new, dtype=np.float64)
        if not target.compiled:
            raw = target.loglik_ratio_terms(theta, theta_new, idx)
            return raw - self.diff_terms(theta - self.reference, theta_new - self.reference,
                                         idx)
        design, signs, weights, positions = target._kernel_rows(idx)
        out = np.empty(positions.size)
        kernels.residual_terms(*design, signs, weights, self.reference, self.order, theta,
                               theta_new, positions, out)
        return out
