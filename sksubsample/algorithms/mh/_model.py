"""The compiled operations through which a model lends its posterior to the MH laws.

The compiled MH laws (the proposals of :mod:`._proposals`, the tests of :mod:`._exact_tests`,
the step of :mod:`._step` and the chain driver of :mod:`._chain`) are written once and read a
model only through the :func:`~sksubsample.algorithms._numba.generic` operations below. A model
is a :class:`typing.NamedTuple` whose class registers its compiled implementations with
``@operation.implement(ItsClass)``; the laws are then compiled (and cached on disk) once per
model class. :class:`sksubsample.algorithms.glm.GLMTarget` lends such a model for logistic
regression (:meth:`~sksubsample.algorithms.glm.GLMTarget.compiled_model`); a model that only
wants the Langevin law with its own gradient (e.g. a stochastic gradient) registers
:func:`log_pi_gradient` alone and calls :func:`~._proposals.langevin_propose`.

Interpreted users reach the same laws through callback models (:class:`CallbackTerms`,
:class:`CallbackGradient`), whose implementations call Python back in numba's object mode
(:mod:`._callbacks`).

Temperature: :func:`log_pi_gradient` is the gradient of the tempered ``log π_T`` (what a
proposal follows); :func:`terms_sum` and :func:`variance_bound` are of the untempered
log-likelihood ratios, which the laws divide by T (and T²) themselves.
"""

from __future__ import annotations

from typing import NamedTuple

from numba import objmode

from .._numba import generic, njit
from ._callbacks import call

__all__ = ["CallbackGradient", "CallbackTerms", "chain_step", "chain_theta", "chain_trajectory",
           "log_pi_gradient",
           "log_prior_at", "proxy_sum", "terms_sum", "variance_bound"]


@generic
def log_prior_at(model, theta):
    """``log p0(θ)`` (``-inf`` outside the support)."""


@generic
def log_pi_gradient(model, rng, theta, out):
    """Write ``∇ log π_T(θ)`` into ``out``; return the data terms read (0 for a gradient that
    reads none). ``rng`` is the chain's generator, for a model whose gradient is stochastic
    (e.g. drawn on a minibatch); a deterministic model ignores it."""


@generic
def terms_sum(model, theta, theta_new, rows, every_row, residuals):
    """``sum_i l_i`` over the data rows ``rows`` (over all N rows when ``every_row``) of the
    per-datum log-likelihood ratios ``l_i = ℓ_i(θ') - ℓ_i(θ)``, or of their control-variate
    residuals when ``residuals``; ``-inf`` when a term is ``-inf``."""


@generic
def proxy_sum(model, theta):
    """The control variates' proxies summed over all data at θ, up to a constant: what the
    residual terms leave out of the log-likelihood (a difference of two of these is added back
    exactly)."""


@generic
def variance_bound(model, theta, theta_new, residuals):
    """``V >= (1/N_s) sum_i l_i²`` over the sampled rows, without data, symmetric in
    ``(θ, θ')``, of the residuals when ``residuals`` else of the raw ratios; NaN when the model
    bounds nothing."""


@generic
def chain_step(stepper, rng, step_size, path_length):
    """One MH step of the chain ``stepper`` holds, its state updated in place; returns
    ``(accepted, data terms evaluated, decision batch size, estimate of Δ, barker)`` with the
    estimate NaN when the test reports none and ``barker`` the rule that decided.
    ``path_length`` is the integration time of a Hamiltonian proposal (ignored by others)."""


@generic
def chain_trajectory(stepper):
    """The array of shape (6, d) holding the trajectory record of the chain's last
    Hamiltonian proposal (:func:`~._proposals.hamiltonian_propose`)."""


@generic
def chain_theta(stepper):
    """The array holding the current state θ of the chain ``stepper`` holds."""


class CallbackTerms(NamedTuple):
    """:func:`terms_sum` of a Python function ``sum(rows, every_row) -> float`` registered
    under ``handle`` (:func:`~._callbacks.registered`); θ, θ' and ``residuals`` are the
    function's business."""

    handle: int


@terms_sum.implement(CallbackTerms)
@njit(nogil=False)  # (object mode holds the GIL)
def _callback_terms_sum(model, theta, theta_new, rows, every_row, residuals):
    handle = model.handle
    with objmode(total="float64"):
        total = call(handle, rows, every_row)
    return total


class CallbackGradient(NamedTuple):
    """:func:`log_pi_gradient` of a Python function ``gradient(theta, out)`` registered under
    ``handle``; it counts its own data terms (the operation returns 0)."""

    handle: int


@log_pi_gradient.implement(CallbackGradient)
@njit(nogil=False)
def _callback_gradient(model, rng, theta, out):
    handle = model.handle
    with objmode():
        call(handle, theta, out)
    return 0
