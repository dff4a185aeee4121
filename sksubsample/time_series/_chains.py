"""Chains of the Carlin–Chib sampler over ARCH orders: warm-up, sampling, continuation, and
the checks of the racing steps at the chains' states.

During warm-up (:func:`adapt_chain`) each chain adapts the adjusted prior ``π̃`` by
Wang–Landau: after each draw of ``q``, ``log π̃_q`` decreases by ``γ_t = 1 / (1 + t/100)``,
which drives ``p̃(q | r) ∝ π̃_q p(r | q)`` towards uniform so that every order is visited. The
chains' adapted ``log π̃`` (and step sizes) are then averaged and fixed, so every sampling chain
(:func:`sample_chain`) is time-homogeneous with the *same* stationary distribution (which is
what lets R-hat compare chains), and ``p(q | r) ∝ π_q p̃(q | r) / π̃_q``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._base import ChainResult
from .._partial import stop_asked
from ._chain_model import read_only_model
from ._sgld import sgld_step_size
from ._sweep import (
    gibbs_step,
    mh_race,
    mh_test_exact_ratio,
    new_races,
    new_work,
    order_factors,
    propose,
    start,
    sweeps,
)

__all__ = ["Adaptation", "ChainState", "adapt_chain", "continue_chain", "initial_state",
           "race_checks", "reward_spreads", "sample_chain"]


class Adaptation(NamedTuple):
    """Outcome of the warm-up of one chain (:func:`adapt_chain`).

    Attributes
    ----------
    log_adjusted_prior : ndarray of shape (n_orders,)
        ``log π̃`` after Wang–Landau, normalised over the orders.
    log_step_size : ndarray of shape (n_orders,)
        Each order's ``log ε`` averaged over its updates in the second half of the warm-up
        sweeps (an order not selected then keeps its last ``log ε``).
    n_visits : ndarray of shape (n_orders,)
        Warm-up sweeps that selected each order.
    n_evaluations : int
        Data terms evaluated during warm-up.
    trace_log_adjusted_prior : ndarray of shape (n_warmup, n_orders)
        ``log π̃`` after each warm-up sweep (Fig. 2b of the paper plots ``-log π̃``).
    trace_evaluations : ndarray of int, shape (n_warmup,)
        Data terms evaluated up to each warm-up sweep.
    """

    log_adjusted_prior: np.ndarray
    log_step_size: np.ndarray
    n_visits: np.ndarray
    n_evaluations: int
    trace_log_adjusted_prior: np.ndarray
    trace_evaluations: np.ndarray


class ChainState(NamedTuple):
    """Where a sampling chain stopped: every order's parameters and the chain's generator."""

    xs: np.ndarray
    rng: np.random.Generator


#: Sweeps between two progress reports of a chain.
_SEGMENT = 250


def _segments(n, progress):
    step = n if progress is None else _SEGMENT
    return [(a, min(a + step, n)) for a in range(0, n, max(step, 1))]


def initial_state(model, rng):
    """The overdispersed start of a chain (drawn from ``rng``)."""
    xs = np.zeros(model.mean.shape)
    start(rng, model, xs)
    return xs


def _workspace(model):
    """The buffers and races of one chain."""
    work = new_work(model)
    return work, new_races(model, work)


def adapt_chain(model, n_warmup, rng, progress=None):
    """Warm-up of one chain: Wang–Landau on ``log π̃`` and Robbins–Monro step sizes.

    From an overdispersed start (every order's parameters at ``x̂ + 2 L ξ``), each sweep draws
    ``q``, lowers ``log π̃_q`` by ``1 / (1 + t/100)`` (Wang & Landau 2001 with the annealed step
    of Appendix C.2) and adapts the selected order's ``log ε`` by
    ``(accepted - a*) / k^0.6`` (its ``k``-th update; Andrieu & Thoms 2008), ``a*`` the SGLD
    proposal's target acceptance rate.

    Returns
    -------
    Adaptation
    """
    model = read_only_model(model)
    n = model.n_orders
    xs = initial_state(model, rng)
    log_pi = model.log_adjusted_prior0.copy()
    log_eps = np.log([sgld_step_size(int(d)) for d in model.dims])
    counts = np.zeros((2, n), dtype=np.int64)
    tail_sum = np.zeros(n)
    trace_log_pi = np.zeros((n_warmup, n))
    trace_evaluations = np.zeros(n_warmup, dtype=np.int64)
    no_draws, no_ints = np.zeros((0, 0)), np.zeros((N_STATS, 0), dtype=np.int64)
    work, races = _workspace(model)
    evaluations = 0
    for first, stop in _segments(n_warmup, progress):
        evaluations = sweeps(rng, model, xs, log_pi, log_eps, first, stop, 0, True, n_warmup,
                             counts, tail_sum, trace_log_pi, trace_evaluations, no_draws,
                             no_ints, evaluations, work, races)
        if progress is not None:
            progress(stop - first)
    seen = counts[1] > 0
    log_eps[seen] = tail_sum[seen] / counts[1][seen]
    return Adaptation(log_pi, log_eps, counts[0].copy(), int(evaluations), trace_log_pi,
                      trace_evaluations)


# Rows of the per-draw integer statistics written by the sweeps (``_sweep._record``).
N_STATS = 8


def _run(model, log_pi, log_eps, xs, n_burn, n_draws, rng, progress, from_seed):
    model = read_only_model(model)
    n = model.n_orders
    draws = np.zeros((n_draws, n + int(model.dims.sum())))
    ints = np.zeros((N_STATS, n_draws), dtype=np.int64)
    # Writable copies: the sweep loop is compiled once for warm-up, which adapts them.
    log_pi = np.array(log_pi, dtype=np.float64)
    log_eps = np.array(log_eps, dtype=np.float64)
    counts, tail_sum, no_trace = np.zeros((2, n), dtype=np.int64), np.zeros(n), np.zeros((0, n))
    no_evaluations = np.zeros(0, dtype=np.int64)
    work, races = _workspace(model)
    total, done = 0, 0
    for first, stop in [(0, n_burn)] + [(n_burn + a, n_burn + b)
                                       for a, b in _segments(n_draws, progress)]:
        if stop > first:
            total = sweeps(rng, model, xs, log_pi, log_eps, first, stop, n_burn, False, 0,
                           counts, tail_sum, no_trace, no_evaluations, draws, ints, total, work,
                           races)
        done = stop - n_burn
        if first >= n_burn and stop_asked(progress, stop - first):
            break
    # Cut short by Ctrl-C, the chain keeps the sweeps it finished (its state is theirs).
    draws, ints = draws[:done], ints[:, :done]
    orders = ints[0]
    accepted = ints[1].astype(bool)
    stats = {"order": orders, "log_adjusted_prior": log_pi[orders],
             "acceptance_rate": accepted.astype(np.float64), "accepted": accepted,
             "step_size": np.exp(log_eps[orders]), "batch_size": ints[2],
             "gibbs_evaluations": ints[3], "n_evaluations": ints[4], "n_raced": ints[5],
             "n_finished_exactly": ints[6], "n_guarded": ints[7]}
    # A chain stopped before its first draw has nothing to continue: it runs again from its seed.
    state = ChainState(xs, rng) if done or not from_seed else None
    return ChainResult(draws, stats, int(total), math.nan, state)


def sample_chain(model, log_adjusted_prior, log_step_size, n_draws, n_warmup, rng,
                 progress=None):
    """One Carlin–Chib chain at fixed ``π̃`` and step sizes: burn-in, then ``n_draws`` sweeps.

    Parameters
    ----------
    model : ChainModel
    log_adjusted_prior, log_step_size : ndarray of shape (n_orders,)
        Fixed for the whole chain, so it is a time-homogeneous Markov chain whose stationary
        distribution is the adjusted posterior.
    n_draws : int
    n_warmup : int
        The chain discards ``n_warmup // 4`` burn-in sweeps after its overdispersed start
        (the adaptation itself ran in :func:`adapt_chain`).
    rng : numpy.random.Generator
    progress : callable or None
        Called with the number of sweeps done since its previous call; when it raises
        :class:`~sksubsample._utils.ChainInterrupted` (Ctrl-C), the chain stops there and
        returns the draws it finished (continuable; ``state`` None when there are none).

    Returns
    -------
    ChainResult
        ``draws`` of shape (n_draws, n_orders + Σ_j (j + 2)): the indicators ``1{q = j}``
        followed by the natural parameters ``(α_0, …, α_j, ν)`` of every order ``j``; ``stats``
        per draw: ``order`` (index into the orders), ``log_adjusted_prior`` (``log π̃_q`` of the
        drawn order), ``acceptance_rate``, ``accepted``, ``step_size``, ``batch_size`` (terms
        of the MH test), ``gibbs_evaluations`` and ``n_evaluations`` (all terms of the sweep),
        ``n_raced`` (of the sweep's Gibbs step and MH test, those decided by a race),
        ``n_finished_exactly`` (those whose race stopped paying and was finished by exact
        sums) and ``n_guarded`` (races the guard of the normal approximation held back).
        The result's ``step_size`` is NaN (each order has its own, in the stats); its ``state``
        continues the chain (:func:`continue_chain`).
    """
    xs = initial_state(model, rng)
    result = _run(model, log_adjusted_prior, log_step_size, xs, n_warmup // 4, n_draws, rng,
                  progress, True)
    if n_warmup and result.draws.shape[0] == n_draws:
        # (the bar's steps of the warm-up, which ran in adapt_chain; the chain has finished)
        stop_asked(progress, n_warmup)
    return result


def continue_chain(model, log_adjusted_prior, log_step_size, n_draws, state, progress=None):
    """``n_draws`` more sweeps of a chain from its :class:`ChainState` (no burn-in)."""
    return _run(model, log_adjusted_prior, log_step_size, state.xs.copy(), 0, n_draws,
                state.rng, progress, False)


def race_checks(model, states, log_adjusted_prior, log_step_size, seeds):
    """Racing decisions against exact ones with shared randomness, at given chain states.

    For each state ``xs`` (softplus coordinates of every order) and seed: the racing Gibbs draw
    of ``q`` against the exact draw with the same Gumbel perturbations (both from a generator
    seeded alike), then, for the order the racing draw selected, the racing MH decision on one
    SGLD proposal against the exact decision on the same proposal and uniform.

    Returns
    -------
    ndarray of shape (n_states, 5)
        Per state: racing ``q``, exact ``q``, racing MH decision, exact MH decision (1/0; -1
        when the proposal was rejected before any test), Gibbs evaluations.
    """
    model = read_only_model(model)
    work, races = _workspace(model)
    log_pi = np.ascontiguousarray(log_adjusted_prior, dtype=np.float64)
    log_eps = np.ascontiguousarray(log_step_size, dtype=np.float64)
    out = np.zeros((len(states), 5), dtype=np.int64)
    for k, (xs, seed) in enumerate(zip(states, seeds, strict=True)):
        xs = np.ascontiguousarray(xs, dtype=np.float64)
        q, evaluations, _, _ = gibbs_step(np.random.default_rng(seed), model, xs, log_pi, work,
                                          races, True)
        q_exact = gibbs_step(np.random.default_rng(seed), model, xs, log_pi, work, races,
                             False)[0]
        rng = np.random.default_rng(seed + 1)
        rest, _ = propose(rng, model, q, xs, log_eps, work)
        decisions = (-1, -1)
        if rest > -math.inf:
            log_u = -float(rng.standard_exponential())
            accepted = mh_race(rng, model, q, work, races, log_u, rest)[0]
            exact = mh_test_exact_ratio(model, q, work, races) + rest
            decisions = (int(accepted), int(log_u < exact))
        out[k] = (q, q_exact, *decisions, evaluations)
    return out


def reward_spreads(model, states):
    """Variance over the terms of the Gibbs step's log-factors, raw and as control-variate
    residuals, at given chain states.

    Returns
    -------
    dict
        ``per_order_raw``, ``per_order_cv`` of shape (n_states, n_orders): the variance of
        ``ℓ_t(x^(j))`` and of its residual; ``pairwise_raw``, ``pairwise_cv`` of shape
        (n_states, n_pairs): the variance of the differences between two orders' factors, what
        the pairwise race's bound sees.
    """
    n = model.n_orders
    i, j = np.triu_indices(n, 1)
    out = {"per_order_raw": [], "per_order_cv": [], "pairwise_raw": [], "pairwise_cv": []}
    for xs in states:
        for cv, key in ((False, "raw"), (True, "cv")):
            values = order_factors(model, xs, cv)
            out[f"per_order_{key}"].append(values.var(axis=1))
            out[f"pairwise_{key}"].append((values[i] - values[j]).var(axis=1))
    return {key: np.array(value) for key, value in out.items()}
