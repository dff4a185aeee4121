"""The compiled Carlin–Chib sweep over ARCH orders (Chen & Ghahramani 2016, §5.2, App. C.2).

One sweep composes three steps on the state ``(q, x^(0), x^(1), ...)`` of the
:class:`~._chain_model.ChainModel`:

1. ``q | x`` by the Gumbel-max Gibbs step of Eq. 2-3 over the conditional of Eq. 25: the
   perturbations are drawn first, then the best perturbed order is found by a race of
   Alg. 1 on the per-term log-likelihoods (``racing``; exactly when a race's first round would
   read every term) or by the exact sums (:func:`gibbs_step`);
2. ``x^(q) | q`` by one MH step with an SGLD-type proposal (a Langevin move with a
   variance-reduced minibatch gradient, Welling & Teh 2011; Baker et al. 2019) corrected by
   the racing MH test of Eq. 12 (a two-armed race) or the exact Metropolis test
   (:func:`mh_test`);
3. ``x^(j) ~ g_j`` independently for ``j ≠ q`` (the pseudo-priors).

Both methods run the same compiled code: the races are the package's race loop
(:func:`~sksubsample.algorithms.kernels.shared_race`) on this module's rewards, registered as
per-datum rewards, and the exact sums are the Gumbel-max sampler's
(:func:`~sksubsample.algorithms.kernels.exact_sums`). The exact Metropolis test reuses
``Σ_t ℓ_t(x^(q))`` from the exact Gibbs step of the same sweep (the same number as summing the
ratio terms, up to rounding, at half the evaluations).

Control variates (§3.4): the racing steps' rewards are the residuals ``ℓ_t - h_{j,t}`` of
second-order Taylor proxies around each order's MAP, and the proxies' exact sum enters the
data-free part of the conditionals, which are therefore unchanged, while the rewards' variance
falls by orders of magnitude.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..algorithms.kernels import (
    BAD_VALUE,
    BAILED,
    DONE,
    DrawBuffers,
    exact_sums,
    fill_rows,
    finish_exactly,
    new_race,
    next_uint64,
    njit,
    per_datum_rewards,
    restart_race,
    shared_race,
    work_size,
)
from ..algorithms.mh import finite, langevin_log_q_ratio, langevin_propose
from . import _arch_kernels as kernels

__all__ = [
    "OrderRewards",
    "Races",
    "RatioRewards",
    "TermRewards",
    "Work",
    "gibbs_step",
    "mh_race",
    "mh_test",
    "mh_test_exact_ratio",
    "new_races",
    "new_work",
    "order_factors",
    "propose",
    "start",
    "sweep",
    "sweeps",
]


# ----------------------------------------------------------------------------- rewards


class OrderRewards(NamedTuple):
    """The Gibbs step's log-factors: order ``arm`` at term ``t`` is ``ℓ_t(x^(arm))`` (or its
    control-variate residual with ``model.gibbs_cv``), at the parameter rows ``params``."""

    model: object
    params: np.ndarray


class RatioRewards(NamedTuple):
    """The MH test's terms of order ``q``: ``ℓ_t(x') - ℓ_t(x)`` (or the difference of the
    residuals with ``model.mh_cv``), ``x`` and ``x'`` at ``params[0]`` and ``params[1]``; the
    reject arm of Eq. 12 has scale 0 and is never evaluated."""

    model: object
    q: int
    params: np.ndarray


class TermRewards(NamedTuple):
    """The raw terms ``ℓ_t`` of order ``q`` at the parameter row ``params[row]``."""

    model: object
    q: int
    params: np.ndarray
    row: int


@njit
def _order_value(rewards, arm, t):
    m = rewards.model
    return kernels.term(m.y2, m.z, m.coef, m.loglik_ref, arm, m.q1[arm], rewards.params, arm, t,
                        m.gibbs_cv)


@njit
def _ratio_value(rewards, arm, t):
    m, q = rewards.model, rewards.q
    return (kernels.term(m.y2, m.z, m.coef, m.loglik_ref, q, m.q1[q], rewards.params, 1, t,
                         m.mh_cv)
            - kernels.term(m.y2, m.z, m.coef, m.loglik_ref, q, m.q1[q], rewards.params, 0, t,
                           m.mh_cv))


@njit
def _term_value(rewards, arm, t):
    m, q = rewards.model, rewards.q
    return kernels.term(m.y2, m.z, m.coef, m.loglik_ref, q, m.q1[q], rewards.params,
                        rewards.row, t, False)


per_datum_rewards(OrderRewards, _order_value)
per_datum_rewards(RatioRewards, _ratio_value)
per_datum_rewards(TermRewards, _term_value)


# ----------------------------------------------------------------------------- buffers


class Work(NamedTuple):
    """Buffers of one chain's sweeps (``work``: the Langevin proposal's, rows of ``max_d``)."""

    params: np.ndarray
    params2: np.ndarray
    lp: np.ndarray
    sums: np.ndarray
    offset2: np.ndarray
    idx: np.ndarray
    x: np.ndarray
    x_new: np.ndarray
    grad: np.ndarray
    grad_new: np.ndarray
    work: np.ndarray
    total: np.ndarray


def new_work(model):
    """The :class:`Work` buffers of one chain's sweeps."""
    n = model.n_orders
    width = kernels.row_width(int(model.z.shape[1]))
    max_d = model.mean.shape[1]
    return Work(np.zeros((n, width)), np.zeros((2, width)), np.zeros(n), np.zeros(n),
                np.zeros(2), np.zeros(model.batch_size, dtype=np.int64), np.zeros(max_d),
                np.zeros(max_d), np.zeros(max_d), np.zeros(max_d), np.zeros((4, max_d)),
                np.zeros(1))


class Races(NamedTuple):
    """The races of one chain, kept from sweep to sweep: the Gibbs race over the orders (its
    offsets ``gibbs.offset`` set before each race), the MH race's two arms (reject: scale 0,
    offset ``log u / N``; accept: scale 1, offset ``rest / N``: ``work.offset2``), the memory
    of their rounds, the sizes, scales and offsets of the exact sums, and the sums of a race
    finished exactly."""

    gibbs: object
    mh: object
    draws: DrawBuffers
    sizes: np.ndarray
    ones: np.ndarray
    zeros: np.ndarray
    exact: np.ndarray


def new_races(model, work):
    """The :class:`Races` of one chain (``work``: its :class:`Work`)."""
    n, n_terms = model.n_orders, model.n_terms
    sizes = np.full(n, n_terms, dtype=np.int64)
    gibbs = new_race(np.ones(n), np.zeros(n), np.zeros(n), sizes,
                     np.empty((n, model.gibbs_stored)), False)
    mh = new_race(np.array([0.0, 1.0]), work.offset2, np.zeros(2),
                  np.full(2, n_terms, dtype=np.int64), np.empty((2, 0)), False)
    words = (n_terms + 63) >> 6
    draws = DrawBuffers(np.zeros(words, dtype=np.int64), np.zeros(words, dtype=np.int64),
                        np.empty(n_terms, dtype=np.int64), np.empty(work_size(n)))
    return Races(gibbs, mh, draws, sizes, np.ones(n), np.zeros(n), np.zeros(max(n, 2)))


# ----------------------------------------------------------------------------- the steps

# How a step was decided: by the exact sums, by a race, or by a race finished exactly.
EXACT, RACED, FINISHED_EXACTLY = 0, 1, 2

_NO_ORDER = ("the Gibbs step over the orders found no order of positive probability (a NaN "
             "or infinite log-likelihood term)")
_BAD_RATIO = "an ARCH log-likelihood ratio term is NaN or +inf"


@njit
def _gibbs_log_prior(m, xs, log_pi, params, lp):
    """Parameter rows of every order and the data-free part of the conditional of ``q``
    (Eq. 25): ``log π̃_j + log p0_j(x^(j)) - log g_j(x^(j))`` (+ the proxies' sum)."""
    for j in range(m.q1.size):
        q1 = m.q1[j]
        d = m.dims[j]
        kernels.fill_params(xs[j], q1, m.theta_ref[j], params[j])
        value = (log_pi[j] + kernels.log_prior(xs[j], d, m.prior_shape, m.prior_rate,
                                               m.prior_log_norm[j])
                 - kernels.gaussian_logpdf(xs[j], m.mean[j], m.chol[j], d))
        if m.gibbs_cv:
            value += kernels.proxy_value(params[j], q1, m.ref_sum[j], m.grad_sum[j],
                                         m.hess_sum[j])
        lp[j] = value


@njit
def gibbs_step(rng, m, xs, log_pi, w, r, racing):
    """``q | x`` (Eq. 25) by the Gumbel-max trick: ``(q, evaluations, how, guarded)``.

    Gumbel perturbations ``-log E_j`` are drawn first (Eq. 2). With ``racing`` the best
    perturbed order is found by a race on the rewards ``factor + offset_j / N`` (Eq. 3),
    unless a race's first round would read every term; otherwise by the exact sums, kept in
    ``w.sums``. The error of a racing draw is at most ``m.delta`` in total variation (Prop. 1).
    A race that stops paying (``method="auto"``) is finished by the exact sums of its
    survivors. ``how``: :data:`EXACT`, :data:`RACED` or :data:`FINISHED_EXACTLY` (a race that
    stopped paying); ``guarded``: the guard of the normal approximation held back an
    elimination.
    """
    n = m.q1.size
    n_terms = m.y2.size
    _gibbs_log_prior(m, xs, log_pi, w.params, w.lp)
    offsets = np.empty(n)
    for j in range(n):
        offsets[j] = w.lp[j] - math.log(rng.standard_exponential())
    rewards = OrderRewards(m, w.params)
    if not racing or n == 1 or m.gibbs_whole:
        bad, evaluations = exact_sums(rewards, r.sizes, r.ones, r.zeros, w.sums)
        if bad:
            raise ValueError(_NO_ORDER)
        q = 0
        for j in range(1, n):
            if offsets[j] + w.sums[j] > offsets[q] + w.sums[q]:
                q = j
        return q, evaluations, EXACT, False
    for j in range(n):
        r.gibbs.offset[j] = offsets[j] / n_terms
    restart_race(r.gibbs)
    status, evaluations = shared_race(rewards, next_uint64(rng), r.gibbs, m.gibbs_race,
                                      r.draws)
    guarded = r.gibbs.n_guarded > 0
    if status == BAILED:
        q, bad, exact = finish_exactly(rewards, r.gibbs, r.exact)
        if bad:
            raise ValueError(_NO_ORDER)
        return q, evaluations + exact, FINISHED_EXACTLY, guarded
    if status != DONE:
        raise ValueError(_NO_ORDER)
    return r.gibbs.best, evaluations, RACED, guarded


@njit
def propose(rng, m, q, xs, log_eps, w):
    """The SGLD proposal of ``x^(q)`` and the part of the MH log ratio without data: prior
    ratio, proposal ratio, and the proxies' sum.

    ``x' = x + ε L (ξ + (ε/2) Lᵀ ĝ_S(x))`` with ``ξ ~ N(0, I)``, the pseudo-prior's Cholesky
    factor ``L`` as preconditioner, and ``ĝ_S`` the control-variate gradient on a minibatch
    ``S`` drawn with replacement, kept for the reverse move: for each ``S`` an MH proposal
    with an exact ratio, so the stochastic gradient changes the acceptance rate, never the
    stationary distribution (Chen & Ghahramani 2016, App. C.2; Welling & Teh 2011, Eq. 4).

    Returns ``(rest, gradient evaluations)``; ``rest`` is ``-inf`` for a proposal rejected
    before any test (not finite, or outside the prior's support). ``w.params2`` holds the
    parameter rows of ``x`` and ``x' = w.x_new``.
    """
    d = m.dims[q]
    q1 = m.q1[q]
    n_terms = m.y2.size
    chol = m.chol[q]
    eps = math.exp(log_eps[q])
    x, x_new, grad, grad_new, work = w.x[:d], w.x_new[:d], w.grad[:d], w.grad_new[:d], w.work[:, :d]
    for k in range(d):
        x[k] = xs[q, k]
    for k in range(w.idx.size):
        w.idx[k] = rng.integers(0, n_terms)
    kernels.fill_params(x, q1, m.theta_ref[q], w.params2[0])
    kernels.stochastic_gradient(m.y2, m.z, m.coef, q, q1, x, w.params2[0:1], m.prior_shape,
                                m.prior_rate, m.grad_sum[q], m.hess_sum[q], w.idx, grad)
    langevin_propose(rng, x, grad, eps, chol, x_new, work)
    gradient_evaluations = w.idx.size
    if not finite(x_new):
        return -math.inf, gradient_evaluations
    log_prior = kernels.log_prior(x, d, m.prior_shape, m.prior_rate, m.prior_log_norm[q])
    log_prior_new = kernels.log_prior(x_new, d, m.prior_shape, m.prior_rate,
                                      m.prior_log_norm[q])
    if not log_prior_new > -math.inf:
        return -math.inf, gradient_evaluations
    rest = log_prior_new - log_prior
    kernels.fill_params(x_new, q1, m.theta_ref[q], w.params2[1])
    kernels.stochastic_gradient(m.y2, m.z, m.coef, q, q1, x_new, w.params2[1:2],
                                m.prior_shape, m.prior_rate, m.grad_sum[q], m.hess_sum[q],
                                w.idx, grad_new)
    gradient_evaluations += w.idx.size
    rest += langevin_log_q_ratio(eps, chol, grad_new, work)
    if m.mh_cv:
        rest += (kernels.proxy_value(w.params2[1], q1, m.ref_sum[q], m.grad_sum[q],
                                     m.hess_sum[q])
                 - kernels.proxy_value(w.params2[0], q1, m.ref_sum[q], m.grad_sum[q],
                                       m.hess_sum[q]))
    return rest, gradient_evaluations


@njit
def mh_race(rng, m, q, w, r, log_u, rest):
    """The racing MH test of Eq. 12 on the proposal in ``w.params2``: ``(accepted,
    evaluations, how, guarded)`` (as :func:`gibbs_step`'s). Arm 0 (reject) has the constant
    reward ``log(u) / N``, arm 1 (accept) the ratio terms plus ``rest / N``; the race errs
    with probability at most ``m.delta``. A race that stops paying (``method="auto"``) ends
    in the exact test."""
    n_terms = m.y2.size
    w.offset2[0] = log_u / n_terms
    w.offset2[1] = rest / n_terms
    restart_race(r.mh)
    rewards = RatioRewards(m, q, w.params2)
    status, evaluations = shared_race(rewards, next_uint64(rng), r.mh, m.mh_race, r.draws)
    guarded = r.mh.n_guarded > 0
    if status == BAILED:
        best, bad, exact = finish_exactly(rewards, r.mh, r.exact)
        if bad:
            raise ValueError(_BAD_RATIO)
        return best == 1, evaluations + exact, FINISHED_EXACTLY, guarded
    if status == BAD_VALUE:
        raise ValueError(_BAD_RATIO)
    return r.mh.best == 1, evaluations, RACED, guarded


@njit
def mh_test_exact_ratio(m, q, w, r):
    """``Σ_t`` of the MH test's terms of order ``q`` over every term (the exact sum of the
    racing test's accept arm, without its offset)."""
    exact_sums(RatioRewards(m, q, w.params2), r.sizes[:1], r.ones[:1], r.zeros[:1], w.total)
    return w.total[0]


@njit
def mh_test(rng, m, q, w, r, rest, racing):
    """The MH test of the proposal in ``w.params2`` (:func:`propose`'s ``rest``):
    ``(accepted, evaluations, how, guarded)``. Racing: :func:`mh_race`. Exact: Metropolis
    on ``Σ_t ℓ_t(x') - Σ_t ℓ_t(x) + rest``, with ``Σ_t ℓ_t(x)`` from the exact Gibbs step of
    the same sweep (``w.sums[q]``)."""
    if not rest > -math.inf:
        return False, 0, EXACT, False
    log_u = -rng.standard_exponential()
    if racing:
        return mh_race(rng, m, q, w, r, log_u, rest)
    _, evaluations = exact_sums(TermRewards(m, q, w.params2, 1), r.sizes[:1], r.ones[:1],
                                r.zeros[:1], w.total)
    delta = w.total[0] - w.sums[q] + rest
    if delta != delta or delta == math.inf:
        raise ValueError(_BAD_RATIO)
    return log_u < delta, evaluations, EXACT, False


@njit
def _redraw(rng, m, xs, q):
    """``x^(j) ~ g_j`` for every ``j ≠ q``, in order."""
    for j in range(m.q1.size):
        if j != q:
            kernels.gaussian_draw(rng, m.mean[j], m.chol[j], m.dims[j], 1.0, xs[j])


@njit
def _accept(m, q, xs, w, accepted):
    if accepted:
        for k in range(m.dims[q]):
            xs[q, k] = w.x_new[k]


@njit
def sweep(rng, m, xs, log_pi, log_eps, w, r):
    """One Carlin–Chib sweep (Eq. 25): Gibbs step, MH step, pseudo-prior draws. Returns ``(q,
    accepted, test evaluations, Gibbs evaluations, all evaluations, steps decided by a race,
    races finished exactly, races the guard held back)``."""
    q, gibbs_evaluations, gibbs_how, gibbs_guarded = gibbs_step(rng, m, xs, log_pi, w, r,
                                                                m.racing)
    rest, gradient_evaluations = propose(rng, m, q, xs, log_eps, w)
    accepted, test_evaluations, mh_how, mh_guarded = mh_test(rng, m, q, w, r, rest, m.racing)
    _accept(m, q, xs, w, accepted)
    _redraw(rng, m, xs, q)
    return (q, accepted, test_evaluations, gibbs_evaluations,
            gibbs_evaluations + test_evaluations + gradient_evaluations,
            int(gibbs_how == RACED) + int(mh_how == RACED),
            int(gibbs_how == FINISHED_EXACTLY) + int(mh_how == FINISHED_EXACTLY),
            int(gibbs_guarded) + int(mh_guarded))


@njit
def start(rng, m, xs):
    """The overdispersed start ``x^(j) = x̂_j + 2 L_j ξ`` of every order, in order."""
    for j in range(m.q1.size):
        kernels.gaussian_draw(rng, m.mean[j], m.chol[j], m.dims[j], 2.0, xs[j])


@njit
def _normalise(log_pi):
    top = log_pi.max()
    total = 0.0
    for j in range(log_pi.size):
        total += math.exp(log_pi[j] - top)
    shift = top + math.log(total)
    for j in range(log_pi.size):
        log_pi[j] -= shift


@njit
def _adapt_update(m, t, q, accepted, n_warmup, log_pi, log_eps, counts, tail_sum):
    """After warm-up sweep ``t`` (from 1): Wang–Landau lowers ``log π̃_q`` by
    ``1 / (1 + t/100)``, Robbins–Monro moves the order's ``log ε`` towards the target
    acceptance rate; the second half of the warm-up accumulates ``log ε`` for its average."""
    log_pi[q] -= 1.0 / (1.0 + t / 100.0)
    _normalise(log_pi)
    counts[0, q] += 1
    log_eps[q] += ((1.0 if accepted else 0.0) - m.target_accept) / counts[0, q] ** 0.6
    if t > n_warmup // 2:
        tail_sum[q] += log_eps[q]
        counts[1, q] += 1


@njit
def _record(m, xs, i, q, accepted, test_used, gibbs_used, used, raced, finished, guarded,
            draws, ints):
    """Row ``i`` of the draws (indicators of ``q``, then every order's natural parameters)
    and of the per-draw statistics ``ints`` (order, accepted, test, Gibbs, all evaluations,
    steps decided by a race, races finished exactly, guarded races)."""
    n = m.q1.size
    col = n
    for j in range(n):
        draws[i, j] = 1.0 if j == q else 0.0
        for k in range(m.dims[j]):
            draws[i, col] = kernels.softplus(xs[j, k])
            col += 1
    ints[0, i] = q
    ints[1, i] = accepted
    ints[2, i] = test_used
    ints[3, i] = gibbs_used
    ints[4, i] = used
    ints[5, i] = raced
    ints[6, i] = finished
    ints[7, i] = guarded


@njit
def sweeps(rng, m, xs, log_pi, log_eps, start, stop, n_skip, adapt, n_warmup, counts, tail_sum,
           trace_log_pi, trace_evaluations, draws, ints, evaluations, w, r):
    """Sweeps ``start … stop - 1``: warm-up (``adapt``, with the trace of ``log π̃`` and of the
    evaluations) or sampling (recording from sweep ``n_skip`` on). Returns the running
    evaluation count."""
    for t in range(start, stop):
        q, accepted, test_used, gibbs_used, used, raced, finished, guarded = sweep(
            rng, m, xs, log_pi, log_eps, w, r)
        evaluations += used
        if adapt:
            _adapt_update(m, t + 1, q, accepted, n_warmup, log_pi, log_eps, counts, tail_sum)
            trace_log_pi[t] = log_pi
            trace_evaluations[t] = evaluations
        elif t >= n_skip:
            _record(m, xs, t - n_skip, q, accepted, test_used, gibbs_used, used, raced,
                    finished, guarded, draws, ints)
    return evaluations


def order_factors(model, xs, cv):
    """Every order's log-factors at every term at the state ``xs``, raw or (``cv``) as
    control-variate residuals: an array of shape (n_orders, n_terms)."""
    m = model._replace(gibbs_cv=bool(cv))
    params = new_work(model).params
    _fill_params(m, np.ascontiguousarray(xs, dtype=np.float64), params)
    out = np.empty((model.n_orders, model.n_terms))
    arms = np.arange(model.n_orders)
    fill_rows(OrderRewards(m, params), arms, arms.size, np.ones(arms.size),
              np.arange(model.n_terms), out)
    return out


@njit
def _fill_params(m, xs, params):
    for j in range(m.q1.size):
        kernels.fill_params(xs[j], m.q1[j], m.theta_ref[j], params[j])
