"""Carlin–Chib model selection over ARCH orders: Laplace pseudo-priors and the Gibbs sweep.

The state holds the order ``q`` and a parameter vector ``x^(j)`` (softplus coordinates) for
*every* candidate order ``j`` (Carlin & Chib 1995). Given ``q`` the selected model's parameters
have their posterior, the others their pseudo-prior ``g_j`` (here the Laplace approximation of
``p(x^(j) | q = j, r)`` at the MAP, Appendix C.2), so the full conditional of ``q`` is

``p(q = j | x) ∝ π̃_j p0_j(x^(j)) Π_t p(r_t | x^(j), j) / g_j(x^(j))``    (Eq. 25)

and the chain never changes dimension. One sweep composes three steps:

1. ``q | x`` by the racing Gibbs step (:func:`sksubsample.algorithms.sample_discrete`, the
   Gumbel-max race of Alg. 1 over the orders, the per-term log-likelihoods as factors) or the
   exact Gibbs step;
2. ``x^(q) | q`` by one MH step (:func:`sksubsample.algorithms.mh_step`) with an SGLD-type
   proposal and the racing MH test (Eq. 12) or the exact Metropolis test;
3. ``x^(j) ~ g_j`` independently for ``j ≠ q``.

Control variates (§3.4): the factor of order ``j`` at term ``t`` is the residual
``ℓ_t(x^(j)) - h_{j,t}(x^(j))`` of a second-order Taylor proxy around the order's MAP, and the
proxies' exact sum enters the state's prior term, so the conditional is unchanged while the
racing rewards' variance falls by orders of magnitude.

During warm-up (:func:`adapt_chain`) each chain adapts the adjusted prior ``π̃`` by
Wang–Landau: after each draw of ``q``, ``log π̃_q`` decreases by ``γ_t = 1 / (1 + t/100)``,
which drives ``p̃(q | r) ∝ π̃_q p(r | q)`` towards uniform so that every order is visited. The
chains' adapted ``log π̃`` (and step sizes) are then averaged and fixed, so every sampling chain
(:func:`carlin_chib_chain`) is time-homogeneous with the *same* stationary distribution (which
is what lets R-hat compare chains), and ``p(q | r) ∝ π_q p̃(q | r) / π̃_q``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import linalg, optimize, special

from .._base import ChainResult
from ..algorithms._discrete import sample_discrete
from ..algorithms._mh import build_kernel, init_state, mh_step
from ._arch_target import StackedControlVariates
from ._sgld import sgld_proposal

__all__ = ["Adaptation", "CarlinChibSweep", "LaplaceFit", "adapt_chain", "build_sweep",
           "carlin_chib_chain", "laplace_fit"]

_LOG_2PI = math.log(2.0 * math.pi)


class LaplaceFit(NamedTuple):
    """MAP and Laplace approximation of one order's posterior in softplus coordinates.

    Attributes
    ----------
    mean : ndarray of shape (d,)
        The MAP ``x̂``.
    cov : ndarray of shape (d, d)
        ``(-∇² log p(x̂ | r))⁻¹``.
    chol : ndarray of shape (d, d)
        Lower Cholesky factor of ``cov``.
    log_evidence : float
        Laplace estimate ``log p(r, x̂) + d/2 log 2π + ½ log |cov|`` of ``log p(r | q)``.
    n_iter : int
        Iterations of the optimiser.
    """

    mean: np.ndarray
    cov: np.ndarray
    chol: np.ndarray
    log_evidence: float
    n_iter: int


def laplace_fit(target, x0):
    """MAP of ``target``'s posterior by a trust-region Newton method, and its Laplace Gaussian.

    Parameters
    ----------
    target : ARCHTarget
    x0 : ndarray of shape (d,)
        Starting point.

    Returns
    -------
    LaplaceFit

    Raises
    ------
    RuntimeError
        When the optimiser fails or the Hessian at the optimum is not negative definite.
    """
    def sums(x):
        loglik, grad, hess = target.derivative_sums(x)
        return (-(loglik + target.log_prior(x)), -(grad + target.grad_log_prior(x)),
                -(hess + target.hess_log_prior(x)))

    res = optimize.minimize(lambda x: sums(x)[0], x0, jac=lambda x: sums(x)[1],
                            hess=lambda x: sums(x)[2], method="trust-exact",
                            options={"gtol": 1e-8, "maxiter": 500})
    f, _, h = sums(res.x)
    if not (np.isfinite(f) and np.all(np.isfinite(h))):
        raise RuntimeError(f"MAP search of ARCH({target.order}) failed: {res.message}")
    try:
        chol_prec = linalg.cholesky(0.5 * (h + h.T), lower=True)
    except linalg.LinAlgError as exc:
        raise RuntimeError(
            f"the posterior of ARCH({target.order}) has no negative definite Hessian at the "
            f"optimiser's end point ({res.message}); the Laplace pseudo-prior is undefined"
        ) from exc
    inv = linalg.solve_triangular(chol_prec, np.eye(res.x.size), lower=True)
    cov = inv.T @ inv
    cov = 0.5 * (cov + cov.T)
    chol = linalg.cholesky(cov, lower=True)
    d = res.x.size
    log_ev = float(-f + 0.5 * d * _LOG_2PI + np.sum(np.log(np.diag(chol))))
    return LaplaceFit(res.x, cov, chol, log_ev, int(res.nit))


def gaussian_logpdf(x, mean, chol):
    """``log N(x; mean, L Lᵀ)`` for one point."""
    u = linalg.solve_triangular(chol, x - mean, lower=True)
    return float(-0.5 * u @ u - np.sum(np.log(np.diag(chol))) - 0.5 * x.size * _LOG_2PI)


class CarlinChibSweep(NamedTuple):
    """Static configuration of the Carlin–Chib sweep (shared by the chains).

    Attributes
    ----------
    targets : tuple of ARCHTarget
        One per candidate order, all over the same terms.
    laplace : tuple of LaplaceFit
        Pseudo-priors (and reference points of the control variates).
    proxies : tuple of ARCHControlVariates
        Taylor control variates of each order around its MAP (Gibbs step and MH test).
    stacked : StackedControlVariates
        The same control variates evaluated for several orders at once (Gibbs step).
    log_adjusted_prior0 : ndarray of shape (n_orders,)
        Starting value of ``log π̃`` (minus the Laplace log evidences, so that ``p̃`` starts
        close to uniform; Wang–Landau refines it).
    method : {"racing", "exact"}
    delta : float
        Error bound of every race (Gibbs step and MH test).
    batch_size : int
        First minibatch of the races and minibatch of the SGLD gradient.
    control_variates : bool
        Whether the races see control-variate residuals.
    """

    targets: tuple
    laplace: tuple
    proxies: tuple
    stacked: StackedControlVariates
    log_adjusted_prior0: np.ndarray
    method: str
    delta: float
    batch_size: int
    control_variates: bool

    @property
    def n_terms(self):
        return self.targets[0].n_data

    def exact_evaluations_per_sweep(self):
        """Terms an exact sweep evaluates: every order's N in the Gibbs step, N in the MH test,
        and the SGLD gradient's two minibatches."""
        return (len(self.targets) + 1) * self.n_terms + 2 * self.batch_size


def build_sweep(targets, laplace, *, method, delta, batch_size, control_variates):
    """Build the control variates and collect everything a chain needs."""
    proxies = tuple(t.control_variates(fit.mean) for t, fit in zip(targets, laplace,
                                                                    strict=True))
    log_ev = np.array([fit.log_evidence for fit in laplace])
    log_pi0 = -(log_ev - special.logsumexp(log_ev))
    log_pi0 -= special.logsumexp(log_pi0)
    return CarlinChibSweep(tuple(targets), tuple(laplace), proxies,
                           StackedControlVariates(proxies), log_pi0,
                           method, float(delta), int(batch_size), bool(control_variates))


class _Counter:
    """Data terms touched by the SGLD gradient of one chain."""

    def __init__(self):
        self.n = 0


def _stochastic_gradient(target, proxy, counter):
    n = target.n_data

    def gradient(theta, idx):
        counter.n += len(idx)
        correction = target.grad_terms(theta, idx) - proxy.grad_terms(theta, idx)
        return (target.grad_log_prior(theta) + proxy.grad(theta)
                + (n / len(idx)) * correction.sum(axis=0))

    return gradient


def _kernels(sweep, counter):
    """One MH kernel per order (built per chain: the SGLD proposal counts into ``counter``)."""
    kernels = []
    n = sweep.n_terms
    first = min(sweep.batch_size, n)
    for target, fit, proxy in zip(sweep.targets, sweep.laplace, sweep.proxies, strict=True):
        proposal = sgld_proposal(_stochastic_gradient(target, proxy, counter), n, first)
        if sweep.method == "racing":
            options = {"test": "racing", "batch_size": max(2, first), "delta": sweep.delta}
        else:
            options = {"test": "metropolis"}
        kernels.append(build_kernel(target, dim=target.dim, proposal=proposal, proxy=proxy,
                                    control_variates=sweep.control_variates,
                                    preconditioner=fit.cov, **options))
    return kernels


def _gibbs_log_prior(sweep, xs, log_adjusted_prior):
    """Per-order data-free part of the log conditional of ``q`` (Eq. 25)."""
    out = np.array(log_adjusted_prior, dtype=np.float64)
    for j, (target, fit, proxy) in enumerate(zip(sweep.targets, sweep.laplace, sweep.proxies,
                                                 strict=True)):
        out[j] += target.log_prior(xs[j]) - gaussian_logpdf(xs[j], fit.mean, fit.chol)
        if sweep.control_variates:
            out[j] += proxy.sum_value(xs[j])
    return out


def gibbs_order(sweep, xs, log_adjusted_prior, rng):
    """Draw ``q | x`` (racing or exact); returns the ``DiscreteSample``."""
    if sweep.control_variates:
        def log_factors(states, idx):
            return sweep.stacked.residuals(xs, states, idx)
    else:
        def log_factors(states, idx):
            return np.stack([sweep.targets[j].loglik_terms(xs[j], idx) for j in states])
    lp = _gibbs_log_prior(sweep, xs, log_adjusted_prior)
    return sample_discrete(log_factors, sweep.n_terms, lp, method=sweep.method,
                           delta=sweep.delta, first_batch=min(sweep.batch_size, sweep.n_terms),
                           random_state=rng)


class Adaptation(NamedTuple):
    """Outcome of the warm-up of one chain (:func:`adapt_chain`).

    Attributes
    ----------
    log_adjusted_prior : ndarray of shape (n_orders,)
        ``log π̃`` after Wang–Landau, normalised over the orders.
    log_step_size : ndarray of shape (n_orders,)
        Each order's ``log ε`` averaged over the second half of its warm-up updates.
    n_visits : ndarray of shape (n_orders,)
        Warm-up sweeps that selected each order.
    n_evaluations : int
        Data terms evaluated during warm-up.
    """

    log_adjusted_prior: np.ndarray
    log_step_size: np.ndarray
    n_visits: np.ndarray
    n_evaluations: int


class _Chain:
    """One chain's kernels, state and data-term counter."""

    def __init__(self, sweep, rng):
        self.sweep = sweep
        self.rng = rng
        self.counter = _Counter()
        self.kernels = _kernels(sweep, self.counter)
        self.xs = [fit.mean + 2.0 * fit.chol @ rng.standard_normal(fit.mean.size)
                   for fit in sweep.laplace]

    def sweep_once(self, log_pi, log_eps):
        """One sweep (Eq. 25): racing (or exact) Gibbs for q, MH for x^(q), pseudo-priors."""
        sweep, rng, xs = self.sweep, self.rng, self.xs
        grads_before = self.counter.n
        gibbs = gibbs_order(sweep, xs, log_pi, rng)
        q = gibbs.sample
        kernel = self.kernels[q]
        eps = math.exp(log_eps[q])
        state, info = mh_step(rng, init_state(kernel, xs[q]), kernel, eps)
        xs[q] = state.theta
        for j, fit in enumerate(sweep.laplace):
            if j != q:
                xs[j] = fit.mean + fit.chol @ rng.standard_normal(fit.mean.size)
        evaluations = gibbs.n_evaluations + info.n_evaluations + (self.counter.n - grads_before)
        return q, eps, gibbs, info, evaluations


def adapt_chain(sweep, n_warmup, rng):
    """Warm-up of one chain: Wang–Landau on ``log π̃`` and Robbins–Monro step sizes.

    From an overdispersed start (every order's parameters at ``x̂ + 2 L ξ``), each sweep draws
    ``q``, lowers ``log π̃_q`` by ``1 / (1 + t/100)`` (Wang & Landau 2001 with the annealed step
    of Appendix C.2) and adapts the selected order's ``log ε`` by
    ``(accepted - 0.574) / k^0.6`` (its ``k``-th update; Andrieu & Thoms 2008).

    Returns
    -------
    Adaptation
    """
    chain = _Chain(sweep, rng)
    n_orders = len(sweep.targets)
    log_pi = sweep.log_adjusted_prior0.copy()
    log_eps = np.array([math.log(k.proposal.default_step_size(t.dim))
                        for k, t in zip(chain.kernels, sweep.targets, strict=True)])
    target_accept = chain.kernels[0].proposal.target_accept[0]
    n_updates = np.zeros(n_orders, dtype=np.int64)
    tail_sum = np.zeros(n_orders)
    tail_n = np.zeros(n_orders, dtype=np.int64)
    total = 0
    for t in range(1, n_warmup + 1):
        q, _, _, info, evaluations = chain.sweep_once(log_pi, log_eps)
        total += evaluations
        log_pi[q] -= 1.0 / (1.0 + t / 100.0)
        log_pi -= special.logsumexp(log_pi)
        n_updates[q] += 1
        log_eps[q] += (float(info.accepted) - target_accept) / n_updates[q] ** 0.6
        if t > n_warmup // 2:
            tail_sum[q] += log_eps[q]
            tail_n[q] += 1
    seen = tail_n > 0
    log_eps[seen] = tail_sum[seen] / tail_n[seen]
    return Adaptation(log_pi, log_eps, n_updates, int(total))


def carlin_chib_chain(sweep, log_adjusted_prior, log_step_size, n_draws, n_warmup, rng):
    """One Carlin–Chib chain at fixed ``π̃`` and step sizes: burn-in, then ``n_draws`` sweeps.

    Parameters
    ----------
    sweep : CarlinChibSweep
    log_adjusted_prior, log_step_size : ndarray of shape (n_orders,)
        Fixed for the whole chain, so it is a time-homogeneous Markov chain whose stationary
        distribution is the adjusted posterior.
    n_draws : int
    n_warmup : int
        The chain discards ``n_warmup // 4`` burn-in sweeps after its overdispersed start
        (the adaptation itself ran in :func:`adapt_chain`).
    rng : numpy.random.Generator

    Returns
    -------
    ChainResult
        ``draws`` of shape (n_draws, n_orders + Σ_j (j + 2)): the indicators ``1{q = j}``
        followed by the natural parameters ``(α_0, …, α_j, ν)`` of every order ``j``; ``stats``
        per draw: ``order`` (index into the orders), ``log_adjusted_prior`` (``log π̃_q`` of the
        drawn order), ``acceptance_rate``, ``step_size``, ``batch_size`` (of the MH test),
        ``gibbs_evaluations`` and ``n_evaluations`` (all terms of the sweep). The result's
        ``step_size`` is NaN (each order has its own, in the stats).
    """
    chain = _Chain(sweep, rng)
    n_orders = len(sweep.targets)
    n_burn = n_warmup // 4
    dims = [t.dim for t in sweep.targets]
    draws = np.empty((n_draws, n_orders + sum(dims)))
    stats = {key: np.zeros(n_draws) for key in
             ("acceptance_rate", "step_size", "log_adjusted_prior")}
    for key in ("order", "batch_size", "gibbs_evaluations", "n_evaluations"):
        stats[key] = np.zeros(n_draws, dtype=np.int64)
    total = 0
    for t in range(n_burn + n_draws):
        q, eps, gibbs, info, evaluations = chain.sweep_once(log_adjusted_prior, log_step_size)
        total += evaluations
        if t < n_burn:
            continue
        i = t - n_burn
        draws[i, :n_orders] = 0.0
        draws[i, q] = 1.0
        draws[i, n_orders:] = np.concatenate([softplus_all(x) for x in chain.xs])
        stats["order"][i] = q
        stats["log_adjusted_prior"][i] = log_adjusted_prior[q]
        stats["acceptance_rate"][i] = float(info.accepted)
        stats["step_size"][i] = eps
        stats["batch_size"][i] = info.batch_size
        stats["gibbs_evaluations"][i] = gibbs.n_evaluations
        stats["n_evaluations"][i] = evaluations
    return ChainResult(draws, stats, int(total), math.nan)


def softplus_all(x):
    """Natural parameters ``(α_0, …, α_q, ν)`` of softplus coordinates ``x``."""
    return np.logaddexp(0.0, x)
