"""The plan of a GLM's control variates: the proxies' order and the rows summed exactly.

The bounded Barker test's minibatch is the smallest the residual bound allows
(:func:`~._kernels.residual_bound`), so how tight the bound is decides what a step reads. Two
choices keep the bound valid and change its tightness, and :func:`plan_expansion` makes them
once, before the chains run:

* the **order** of the proxies (2, or 3 for a design of at most 32 columns): the third-order
  remainder is smaller by about ``max_i |u_i|``, so minibatches are smaller, but the set-up sums
  ``T = sum_i t_i x_i⊗x_i⊗x_i`` over every row (``O(N d³/2)``) and each step pays a cubic form
  of ``O(d³/6)``;
* the **stratum**: the ``k`` rows of largest leverage ``‖K⁻¹x_i‖`` are summed exactly at every
  step, since the bound grows with the largest leverage among the sampled rows and a few
  outlying rows would otherwise force whole-data minibatches (``k`` on the grid
  ``0, 1, 2, 4, ...``, at most a quarter of the rows and the rows a pass ranks).

Order and stratum minimise the expected time of what they decide: the order's set-up, plus, at
each of ``n_steps`` steps, the stratum's rows, the minibatch the bound allows and (order 3) the
cubic form, with the costs of :mod:`._costs`.

A third choice is whether to subsample at all. The exact Metropolis test on all N rows is a
candidate too: where the cheapest bounded plan costs, per *effective* step, at least what an
exact step costs (the log-likelihood ratios of every row, and the full-data gradients its
proposal takes, one per leapfrog step, when it takes them), or reads every row at every step
anyway, the plan is exact (:attr:`ExpansionPlan.exact`). A step whose minibatch is
smaller than the sampled rows makes Barker's decision, which accepts less often than
Metropolis's: Barker's acceptance probability ``π'/(π + π')`` is at least half of Metropolis's
``min(1, π'/π)`` for every proposal, and half of it where Metropolis accepts nearly always (the
Hamiltonian proposal's regime), so the asymptotic variance of the Barker chain is at most
about twice the Metropolis chain's (Peskun–Tierney ordering; Łatuszyński & Roberts 2013,
Theorem 4). Such a step is costed at :data:`BARKER_EFFICIENCY` of an exact step's worth; a step
whose bound allows no fewer than every sampled row makes the exact decision and is costed at
its reads. The minibatch is averaged over pairs of draws from
the Laplace approximation (after warm-up), and over pairs widened by :data:`WARMUP_SCALE` for
warm-up steps (warm-up starts overdispersed and tries larger steps). The bound's Gram matrices
of every plan weighed are exact: they are weighted sums of one pass's bins (:mod:`._bins`) less
the rows of the stratum, whose data the pass recorded.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import linalg

from .._numba import njit
from ..mh import bounded_batch_size_compiled
from . import _kernels as kernels
from ._bins import binned_rows, bound_grams, bound_table

__all__ = ["BARKER_EFFICIENCY", "ExpansionPlan", "ResidualBound", "plan_expansion"]

#: Efficiency only: the tolerance and the number of pairs that set the radii; the pairs over
#: which the plan averages the minibatch (after warm-up and during it).
_PLANNING_DELTA = 0.01
_PLANNING_PAIRS = 8
_COST_PAIRS = 64
#: Warm-up steps are costed at pairs of draws from the Laplace approximation widened by this
#: factor: it matches the rows warm-up reads on logistic regressions at N = 10⁴-10⁶ (the grid
#: benchmark reports the predicted and the measured rows of each fit).
WARMUP_SCALE = 1.5
#: Radii of the local derivative bounds, as multiples of the median ``max_i |u_i|`` of the
#: planning pairs.
RADII = (0.7, 1.0, 1.4, 2.0, 2.8)
#: Designs with more columns have no third-order proxies.
MAX_CUBIC_DIM = 32
#: What a step that makes Barker's decision (a minibatch smaller than the sampled rows) is worth
#: against a step that makes the exact Metropolis decision, in effective draws: the worst case
#: of Barker's acceptance against Metropolis's (see the module docstring).
BARKER_EFFICIENCY = 0.5
#: A stratum's rows are subtracted from the bins' sums with this much to spare (the sums were
#: added in another order: the bound must not drop below the remaining rows' by rounding).
_SUBTRACTION_SLACK = 1.0 - 1e-12


class ResidualBound(NamedTuple):
    """The constants of :func:`sksubsample.algorithms.glm._kernels.residual_bound`.

    Attributes
    ----------
    order : int
        Order of the Taylor proxies (2 or 3).
    rho : float
        Largest ``‖K⁻¹x_i‖`` over the sampled rows.
    chol : ndarray of shape (d, d)
        The lower Cholesky factor ``K`` of the leverages (of the Laplace precision near the
        expansion point).
    radii : ndarray of shape (n_radii,)
        Ascending radii of the local derivative bounds.
    grams : ndarray of shape (n_radii + 1, d, d)
        ``G(R) >= sum_{i sampled} M_i(R)² x_i x_iᵀ`` for each radius, then for the global bound.
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
    """The plan :class:`~._expansion.GLMTaylorExpansion` chose, and what it expects it to cost.

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
        (pairs of draws from the Laplace approximation widened by :data:`WARMUP_SCALE`).
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
        small to be worth measuring, or of rows not in memory).
    probe_seconds : float
        Seconds this plan spent measuring costs (0 when they were stored or rough).
    exact : bool, default False
        Whether the plan is the exact test on all N rows (no minibatch, no bound): the
        cheapest bounded plan cost at least as much per effective step. The other fields then
        describe that exact test (every row read at every step, order 2, no stratum).
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
    exact: bool = False


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


class PlanInputs(NamedTuple):
    """What :func:`plan_expansion` reads of the set-up's last pass.

    Attributes
    ----------
    chol : ndarray of shape (d, d)
        The factor the leverages are of.
    leverage : TopLeverage
    binned : BinnedGrams
    binning : Binning
    top_design : ndarray of shape (n_top, d)
        The design of the rows of largest leverage, in rank order.
    top_z : ndarray of shape (n_top,)
        Their linear predictors at the expansion point.
    top_weights2 : ndarray of shape (n_top,) or None
        Their squared case weights.
    """

    chol: np.ndarray
    leverage: object
    binned: object
    binning: object
    top_design: np.ndarray
    top_z: np.ndarray
    top_weights2: np.ndarray | None


def _phase(costs, order, rho, chol, radii, grams, n_sampled, k, pairs, per_step):
    """``(seconds, rows, effective seconds)`` of a step of the plan ``(order, k)``, averaged
    over the pairs of offsets ``pairs``: the stratum, the minibatch the bound allows (every
    sampled row in index order when it allows no fewer) and the order's own work; the
    effective seconds divide a step that makes Barker's decision by
    :data:`BARKER_EFFICIENCY`."""
    sizes = _batch_sizes(order, rho, chol, radii, grams, n_sampled, pairs[0], pairs[1],
                         _PLANNING_DELTA)
    stratum = costs.stratum_seconds(k)
    exact = sizes >= n_sampled
    minibatches = np.where(exact, costs.full_row * n_sampled,
                           costs.minibatch_seconds(sizes, mapped=k > 0))
    effective = (stratum + per_step + minibatches) / np.where(exact, 1.0, BARKER_EFFICIENCY)
    seconds = stratum + float(np.mean(minibatches)) + per_step
    return seconds, k + float(np.mean(sizes)), float(np.mean(effective))


def _pairs(chol, count, scale, rng):
    """``count`` pairs of offsets from the Laplace approximation of precision ``K Kᵀ``, widened
    by ``scale``: arrays ``(starts, ends)`` of shape ``(count, d)``."""
    d = chol.shape[0]
    draws = scale * linalg.solve_triangular(chol.T, rng.standard_normal((d, 2 * count)),
                                            lower=False).T
    return [np.ascontiguousarray(m) for m in draws.reshape(2, count, d)]


def plan_expansion(family, n, orders, inputs, costs, n_steps, n_warmup_steps,
                   allow_exact=True, exact_gradients=0.0):
    """The cheapest plan by ``costs`` among ``orders`` and strata (see the module docstring).

    Parameters
    ----------
    family : GLMFamily
    n : int
        Rows of the data.
    orders : tuple of int
        The orders weighed.
    inputs : PlanInputs
    costs : PlanCosts
    n_steps, n_warmup_steps : int
    allow_exact : bool, default True
        Whether the exact test is a candidate.
    exact_gradients : float, default 0.0
        Full-data gradients an exact step's proposal is expected to take (0 when it takes the
        proxy's gradient or none).

    Returns
    -------
    plan : ExpansionPlan
    bound : ResidualBound or None
        None when the plan is exact.
    """
    chol, leverage = inputs.chol, inputs.leverage
    rng = np.random.default_rng(0)
    planning = _pairs(chol, _PLANNING_PAIRS, 1.0, rng)
    whitened = np.linalg.norm(np.stack(planning) @ chol, axis=2)
    typical = float(np.median(whitened.max(axis=0))) * leverage.largest
    radii = typical * np.asarray(RADII)
    # The pairs the minibatches are averaged over: from a stream of their own.
    cost_rng = np.random.default_rng(1)
    sampling, warmup = (_pairs(chol, _COST_PAIRS, scale, cost_rng) for scale in (1.0,
                                                                                 WARMUP_SCALE))
    best = None
    shares = {}  # (the stretches of the rows of largest leverage that the strata add, binned)
    for order in orders:
        table = bound_table(family, order, radii, inputs.binning)
        grams = bound_grams(inputs.binned, table)
        setup = costs.cubic_setup_row * n if order == 3 else 0.0
        per_step = costs.cubic_step if order == 3 else 0.0
        taken = 0
        for k in [0] + [1 << j for j in range(max(1, n.bit_length() - 2))]:
            if k > n // 4 or k > leverage.limit:
                break
            if k > taken:
                if (taken, k) not in shares:
                    shares[taken, k] = binned_rows(
                        inputs.top_design[taken:k], inputs.top_z[taken:k],
                        None if inputs.top_weights2 is None else inputs.top_weights2[taken:k],
                        inputs.binning)
                grams = grams - _SUBTRACTION_SLACK * bound_grams(shares[taken, k], table)
                taken = k
            rho = leverage.value(k)
            (step, rows_read, effective), (warm_step, warm_rows, warm_effective) = (
                _phase(costs, order, rho, chol, radii, grams, n - k, k, pairs, per_step)
                for pairs in (sampling, warmup))
            sampling_steps = n_steps - n_warmup_steps
            cost = setup + sampling_steps * step + n_warmup_steps * warm_step
            if best is None or cost < best[0]:
                best = (cost, k, order, rows_read, warm_rows, setup, step, warm_step, rho,
                        grams, setup + sampling_steps * effective
                        + n_warmup_steps * warm_effective)
    cost, k, order, rows_read, warm_rows, setup, step, warm_step, rho, grams, effective = best
    exact_step = (costs.exact_row + exact_gradients * costs.gradient_row) * n
    if allow_exact and (exact_step * n_steps <= effective or min(rows_read, warm_rows) >= n):
        # (Ties go to the exact test, and so does a bound that allows no minibatch at any pair:
        # every row is read either way, and the exact test skips the bound's work, which no
        # cost above counts.)
        plan = ExpansionPlan(2, 0, float(n), float(n), 0.0, exact_step, exact_step,
                             exact_step * n_steps, n_steps, n_warmup_steps, costs.measured,
                             costs.probe_seconds, exact=True)
        return plan, None
    plan = ExpansionPlan(order, k, rows_read, warm_rows, setup, step, warm_step, cost, n_steps,
                         n_warmup_steps, costs.measured, costs.probe_seconds)
    return plan, ResidualBound(order, rho, chol, radii, grams, n - k)
