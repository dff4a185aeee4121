"""A slow reference of the compiled Carlin–Chib sweep, composed of the package's public pieces.

One sweep of :mod:`sksubsample.time_series._sweep` is, by law, the composition of

* ``q | x`` by :func:`sksubsample.algorithms.sample_discrete` (racing or exact) on compiled
  log-factors (:func:`gibbs_reward`, a :class:`~sksubsample.algorithms.CompiledRewards`
  function);
* ``x^(q) | q`` by :func:`sksubsample.algorithms.mh_step` with the SGLD-type proposal of
  :func:`sgld_proposal`, the order's control variates and the ``racing`` (or ``metropolis``) test;
* the pseudo-prior draws of the other orders.

The tests run both from generators in the same state and compare the draws.
"""

import math

import numba
import numpy as np

from sksubsample.algorithms import (
    CompiledRewards,
    Proposal,
    build_kernel,
    init_state,
    mh_step,
    sample_discrete,
)
from sksubsample.time_series import _arch_kernels as kernels
from sksubsample.time_series import _sweep
from sksubsample.time_series._sgld import SGLD_TARGET_ACCEPT, sgld_step_size


@numba.njit
def gibbs_reward(data, arm, t):
    """Log-factor of order ``arm`` at term ``t`` (``data = (y2, z, q1, coef, loglik_ref,
    params, cv)``)."""
    y2, z, q1, coef, loglik_ref, params, cv = data
    return kernels.term(y2, z, coef, loglik_ref, arm, q1[arm], params, arm, t, cv)


def sgld_proposal(stochastic_gradient, n_data, batch_size):
    """The SGLD-type proposal as a :class:`~sksubsample.algorithms.Proposal`: preconditioned
    Langevin with a minibatch gradient ``stochastic_gradient(theta, idx)`` on indices drawn
    with replacement, the same minibatch for the reverse density (Welling & Teh 2011;
    Chen & Ghahramani 2016, App. C.2)."""

    def propose(rng, state, step_size, chol):
        idx = rng.integers(0, n_data, size=batch_size)
        grad = stochastic_gradient(state.theta, idx)
        xi = rng.standard_normal(state.theta.size)
        drift = (0.5 * step_size) * (chol.T @ grad)
        return state.theta + step_size * (chol @ (xi + drift)), (idx, xi, drift)

    def log_q_ratio(state, theta_new, grad_new, aux, step_size, chol):
        idx, xi, drift = aux
        back = xi + drift + (0.5 * step_size) * (chol.T @ stochastic_gradient(theta_new, idx))
        return 0.5 * (float(xi @ xi) - float(back @ back))

    return Proposal(propose, log_q_ratio, False, "sgld", sgld_step_size, SGLD_TARGET_ACCEPT)


def reference_sweep(model, targets, laplace, xs, log_pi, log_eps, rng):
    """One sweep of the interpreted pieces; ``xs`` (n_orders, D) is updated in place; returns
    ``(q, accepted)``."""
    work = _sweep.new_work(model)
    _sweep._gibbs_log_prior(model, xs, log_pi, work.params, work.lp)
    n = model.n_terms
    rewards = CompiledRewards(gibbs_reward, (model.y2, model.z, model.q1, model.coef,
                                             model.loglik_ref, work.params, model.gibbs_cv))
    gibbs = sample_discrete(rewards, n, work.lp.copy(),
                            method="racing" if model.racing else "exact",
                            delta=model.delta, first_batch=model.gibbs_first, random_state=rng)
    q = gibbs.sample
    target, fit = targets[q], laplace[q]
    d = target.dim
    q1 = target.order + 1

    def gradient(x, idx):
        out = np.empty(d)
        rows = target.params_rows(x, model.theta_ref[q])
        kernels.stochastic_gradient(model.y2, model.z, model.coef, q, q1,
                                    np.ascontiguousarray(x), rows, model.prior_shape,
                                    model.prior_rate, model.grad_sum[q], model.hess_sum[q],
                                    np.ascontiguousarray(idx, dtype=np.int64), out)
        return out

    proposal = sgld_proposal(gradient, n, model.batch_size)
    if model.racing:
        options = {"test": "racing", "batch_size": model.mh_first, "delta": model.delta}
    else:
        options = {"test": "metropolis"}
    kernel = build_kernel(target, dim=d, proposal=proposal,
                          proxy=target.control_variates(fit.mean),
                          control_variates=bool(model.mh_cv), preconditioner=fit.cov,
                          **options)
    state, info = mh_step(rng, init_state(kernel, xs[q, :d]), kernel, math.exp(log_eps[q]))
    xs[q, :d] = state.theta
    _sweep._redraw(rng, model, xs, q)
    return q, bool(info.accepted)
