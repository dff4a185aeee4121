"""The MH chains of the estimators that sample with :func:`sksubsample.algorithms.run_kernel`.

:meth:`~sksubsample._base.MCMCEstimator._sample` runs a module-level chain function once per
chain (in parallel, on any joblib backend) and :meth:`~sksubsample._base.MCMCEstimator.sample_more`
a continuation function; these are the two of an MH kernel.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._base import ChainResult
from ..algorithms import run_kernel

__all__ = ["ADAPT_PRECONDITIONER", "MHChainState", "mh_chain", "mh_chain_continue"]

#: How the chains adapt their preconditioner in warm-up (:func:`~sksubsample.algorithms.
#: run_kernel`), in the Laplace-whitened coordinates: the dense covariance where the warm-up
#: window's whitened variances show the Laplace approximation a poor fit of the posterior's
#: scales, else the diagonal (:data:`~sksubsample.algorithms.mh._adaptation.DENSE_ABOVE`).
#: Data terms read per unit of min bulk ESS (``benchmarks/path_length.py
#: --adapt-preconditioner``, default fits): on digits 3 vs 8 (d = 55) the dense covariance
#: reads 0.75-0.80 times what the diagonal reads, on breast cancer about as much; but where
#: the Laplace approximation is already the posterior's shape (the synthetic 10⁵ × 20 set), the
#: dense covariance's d(d+1)/2 entries, estimated from a few hundred autocorrelated warm-up
#: draws, only add noise: it read 1.2-1.4 times the diagonal's rows per effective draw there.
ADAPT_PRECONDITIONER = "auto"


class MHChainState(NamedTuple):
    """Where an MH chain stopped: enough to continue it as if it had not stopped.

    Attributes
    ----------
    theta : ndarray of shape (n_params,)
        The last draw.
    step_size : float
        The step size frozen at the end of warm-up.
    rng : numpy.random.Generator
        The chain's generator, in the state the last step left it.
    path_length : float, default nan
        The integration time frozen at the end of warm-up (NaN for a proposal without one).
    preconditioner : ndarray of shape (n_params, n_params) or None, default None
        The lower Cholesky factor of the preconditioner frozen at the end of warm-up (None:
        the kernel's).
    """

    theta: np.ndarray
    step_size: float
    rng: np.random.Generator
    path_length: float = float("nan")
    preconditioner: np.ndarray | None = None


def _chain_result(res, rng):
    stats = {"acceptance_rate": res.acceptance_probabilities,
             "accepted": res.accepted,
             "step_size": np.full(res.draws.shape[0], res.step_size),
             "path_length": np.full(res.draws.shape[0], res.path_length),
             "batch_size": res.batch_sizes,
             "n_evaluations": res.evaluations_per_draw}
    # A chain stopped in warm-up (Ctrl-C) has no draw to continue from: it is run again.
    state = (MHChainState(res.draws[-1].copy(), res.step_size, rng, res.path_length,
                          res.preconditioner)
             if res.draws.shape[0] else None)
    return ChainResult(res.draws, stats, res.n_evaluations, res.step_size, state,
                       res.preconditioner)


def mh_chain(kernel, center, init_chol, n_draws, n_warmup, rng, progress=None):
    """One MH chain of ``kernel`` from an overdispersed start, as a :class:`ChainResult`.

    The start ``θ0 = center + 2 L z`` (``L = init_chol``, z standard normal) is drawn from a
    Gaussian twice as wide as the posterior's Laplace approximation, so that split R-hat can
    detect chains that have not forgotten their start (Vehtari et al. 2021, Section 2).
    Module-level so that process backends can pickle it. ``progress`` is called with the
    number of steps finished as the chain runs. The statistic ``acceptance_rate`` is the
    acceptance probability of each step's proposal (ArviZ's meaning), ``accepted`` the
    decision.
    """
    theta0 = center + 2.0 * (init_chol @ rng.standard_normal(center.size))
    res = run_kernel(kernel, theta0, n_draws=n_draws, n_warmup=n_warmup, random_state=rng,
                     callback=progress, adapt_preconditioner=ADAPT_PRECONDITIONER)
    return _chain_result(res, rng)


def mh_chain_continue(kernel, center, init_chol, n_draws, state, progress=None):
    """``n_draws`` more draws of the chain that stopped in ``state`` (an :class:`MHChainState`).

    No warm-up: the chain runs from its last draw with its frozen step size (and integration
    time) on its own generator, so the draws are those the first run would have given had it
    been longer.
    (``center`` and ``init_chol``, which only set the first start, are accepted so that
    :func:`mh_chain` and this function take the same arguments.)
    """
    path_length = state.path_length if np.isfinite(state.path_length) else None
    res = run_kernel(kernel, state.theta, n_draws=n_draws, n_warmup=0,
                     step_size=state.step_size, random_state=state.rng, callback=progress,
                     path_length=path_length, preconditioner=state.preconditioner)
    return _chain_result(res, state.rng)


def _chain_started(kernel, rng, steps):
    """What the kernel's target starts gathering for a chain run by ``rng`` before it runs
    (``start_chain``, e.g. a GLM's rows in a store), or None."""
    start = getattr(kernel.target, "start_chain", None)
    return None if start is None else start(kernel, rng, steps)


def _mh_chain_started(kernel, center, init_chol, n_draws, n_warmup, rng, progress=None):
    return _chain_started(kernel, rng, (n_warmup, n_draws))


def _mh_chain_continue_started(kernel, center, init_chol, n_draws, state, progress=None):
    return _chain_started(kernel, state.rng, (0, n_draws))


# (read by sksubsample._progress.run_tasks: what a chain gathers can start before it runs)
mh_chain.start_ahead = _mh_chain_started
mh_chain_continue.start_ahead = _mh_chain_continue_started
