"""The MH step of a model that lends compiled operations, written once as a compiled law.

:func:`compiled_stepper` builds a :class:`CompiledStepper` when every piece of a kernel has a
compiled law: the target lends a model (``target.compiled_model(kernel)``, see
:class:`~._target.SupportsCompiledModel`), the proposal is a built-in one and the test is
``metropolis``, ``barker`` or ``bounded_barker``. The chain driver (:mod:`._chain`) then runs
its steps (:func:`~._model.chain_step`) in machine code; any other kernel runs
:func:`~._kernel.mh_step` step by step.

The step is the law of :func:`~._kernel.mh_step` with those pieces: the same proposals and
proposal ratios (:mod:`._proposals`), control variates and tests (:mod:`._exact_tests`),
drawing from the same random stream in the same order. Two differences are not of law: a
Hamiltonian trajectory's last gradient is computed once (the interpreted step computes it again
for the proposal ratio), and an exact test sums the raw log-likelihood ratios instead of the
control-variate residuals plus the proxies' sum (the same number up to rounding).
"""

from __future__ import annotations

import inspect
import math
from contextlib import ExitStack
from typing import NamedTuple

import numpy as np

from .._numba import njit, read_only
from ._exact_tests import (
    BARKER_CODE,
    BOUNDED_BARKER_CODE,
    METROPOLIS_CODE,
    TEST_CODES,
    bounded_barker_law,
    full_data_law,
)
from ._minibatches import shuffled_minibatches
from ._model import (
    chain_step,
    chain_theta,
    chain_trajectory,
    log_pi_gradient,
    log_prior_at,
    proxy_sum,
    variance_bound,
)
from ._proposals import (
    PROPOSAL_CODES,
    PROPOSALS,
    RANDOM_WALK_CODE,
    finite,
    log_q_ratio,
    propose,
)

__all__ = ["CompiledStepper", "compiled_stepper"]


class CompiledStepper(NamedTuple):
    """A chain of a model with compiled operations: its configuration, state and scratch.

    Attributes
    ----------
    model : NamedTuple
        The model the target lends (its class implements the operations of :mod:`._model`).
    chol : ndarray of shape (d, d)
        Lower Cholesky factor of the preconditioner (adapted in place in warm-up when the
        chain driver adapts it).
    proposal, test : int
        Codes of the built-in proposal and test (``PROPOSAL_CODES``, ``TEST_CODES``).
    delta : float
        The bounded test's tolerance (NaN for the exact tests).
    n_data : int
    temperature : float
    control_variates : bool
        Whether the bounded test sees control-variate residuals.
    minibatches : NamedTuple
        The bounded test's strata and minibatches (a minibatch source, :mod:`._minibatches`).
    theta, grad : ndarray of shape (d,)
        The state θ and ``∇ log π_T(θ)`` (gradient proposals), updated in place.
    scalars : ndarray of shape (2,)
        ``log p0(θ)`` and the proxies' sum at θ (control variates of the bounded test).
    theta_new, grad_new : ndarray of shape (d,)
    work : ndarray of shape (6, d)
        The proposals' scratch, with the Hamiltonian trajectory's record (:mod:`._proposals`).
    """

    model: object
    chol: np.ndarray
    proposal: int
    test: int
    delta: float
    n_data: int
    temperature: float
    control_variates: bool
    minibatches: object
    theta: np.ndarray
    grad: np.ndarray
    scalars: np.ndarray
    theta_new: np.ndarray
    grad_new: np.ndarray
    work: np.ndarray


@chain_step.implement(CompiledStepper)
@njit
def _compiled_step(stepper, rng, step_size, path_length):
    """Propose; reject a non-finite θ' or gradient without data; else the test decides on
    ``rest = log p0(θ') - log p0(θ) + log q(θ|θ') - log q(θ'|θ)`` (plus the proxies' exact
    sum when the bounded test sees residuals)."""
    s = stepper
    model = s.model
    uses_gradient = s.proposal != RANDOM_WALK_CODE
    evaluations = propose(model, s.proposal, rng, s.theta, s.grad, step_size, path_length,
                          s.chol, s.theta_new, s.grad_new, s.work)
    accepted = False
    size = 0
    estimate = -math.inf
    barker = s.test != METROPOLIS_CODE
    proxy_new = 0.0
    bounded_cv = s.test == BOUNDED_BARKER_CODE and s.control_variates
    if finite(s.theta_new) and (not uses_gradient or finite(s.grad_new)):
        log_prior_new = log_prior_at(model, s.theta_new)
        rest = log_prior_new - s.scalars[0]
        if uses_gradient:
            rest += log_q_ratio(s.proposal, step_size, s.chol, s.grad_new, s.work)
        temperature = s.temperature
        if s.test == BOUNDED_BARKER_CODE:
            if bounded_cv:
                proxy_new = proxy_sum(model, s.theta_new)
                rest += (proxy_new - s.scalars[1]) / temperature
            variance = (variance_bound(model, s.theta, s.theta_new, s.control_variates)
                        / (temperature * temperature))
            accepted, used, size, estimate, barker = bounded_barker_law(
                model, s.control_variates, rng, s.theta, s.theta_new, s.n_data, rest, variance,
                s.delta, temperature, s.minibatches)
        else:
            accepted, used, size, estimate, barker = full_data_law(
                model, False, rng, s.theta, s.theta_new, s.n_data, rest, temperature,
                s.test == BARKER_CODE)
        evaluations += used
        if accepted:
            s.theta[:] = s.theta_new
            s.grad[:] = s.grad_new
            s.scalars[0] = log_prior_new
            if bounded_cv:
                s.scalars[1] = proxy_new
    return accepted, evaluations, size, estimate, barker


@chain_theta.implement(CompiledStepper)
@njit
def _compiled_theta(stepper):
    return stepper.theta


@chain_trajectory.implement(CompiledStepper)
@njit
def _compiled_trajectory(stepper):
    return stepper.work


@njit
def _start(stepper, rng):
    """The state's log prior, gradient and proxies' sum at θ."""
    s = stepper
    s.scalars[0] = log_prior_at(s.model, s.theta)
    if s.proposal != RANDOM_WALK_CODE:
        log_pi_gradient(s.model, rng, s.theta, s.grad)
    if s.test == BOUNDED_BARKER_CODE and s.control_variates:
        s.scalars[1] = proxy_sum(s.model, s.theta)


def _rows(rows):
    return read_only(np.ascontiguousarray(rows, dtype=np.int64))


def compiled_stepper(kernel, theta, rng, resources=None, steps=None):
    """The :class:`CompiledStepper` of ``kernel`` started at ``theta``, or None when a piece
    of the kernel has no compiled law (the kernel then runs through :func:`mh_step`).

    A target that lends its model per chain (``compiled_chain(kernel, rng, resources, steps)``,
    see :class:`~._target.SupportsCompiledChain`) gives the model and the minibatch source
    itself; ``resources`` (a :class:`contextlib.ExitStack` held open while the chain runs) keeps
    what they call back registered, and ``steps`` (the chain's warm-up steps and draws) tells it
    how long the chain runs. Otherwise the target lends its model (``compiled_model``) and the
    minibatches are shuffles of its strata.
    """
    lend = getattr(kernel.target, "compiled_model", None)
    lend_chain = getattr(kernel.target, "compiled_chain", None)
    proposal = kernel.proposal
    law = getattr(kernel.test, "compiled_law", None)
    if ((lend is None and lend_chain is None)
            or PROPOSALS.get(proposal.name) != proposal  # (by value: kernels are
            or law is None or law[0] not in TEST_CODES):  # pickled to workers)
        return None
    if lend_chain is not None:
        lent = lend_chain(kernel, rng, ExitStack() if resources is None else resources,
                          **_steps_for(lend_chain, steps))
        if lent is None:
            return None
        model, minibatches = lent
    else:
        model = lend(kernel)
        if model is None:
            return None
        minibatches = _shuffled_strata(kernel)
    d = theta.size
    stepper = CompiledStepper(
        model, _factor(kernel.chol),
        PROPOSAL_CODES[proposal.name], TEST_CODES[law[0]], float(law[1]),
        int(kernel.target.n_data), float(kernel.temperature), bool(kernel.control_variates),
        minibatches, np.array(theta, dtype=np.float64), np.zeros(d), np.zeros(2), np.empty(d),
        np.zeros(d), np.zeros((6, d)))
    _start(stepper, rng)
    return stepper


def _steps_for(lend_chain, steps):
    """``{"steps": steps}`` for a ``compiled_chain`` that takes them (one written before they
    were passed takes three arguments), else ``{}``."""
    if steps is None:
        return {}
    try:
        parameters = inspect.signature(lend_chain).parameters.values()
    except (TypeError, ValueError):
        return {}
    takes = any(p.name == "steps" or p.kind is p.VAR_KEYWORD for p in parameters)
    return {"steps": steps} if takes else {}


def _factor(chol):
    """The preconditioner's factor as the stepper reads it: the caller's array itself when it
    is C-contiguous float64 (so that warm-up adapting it in place reaches the proposals)."""
    chol = np.ascontiguousarray(chol, dtype=np.float64)
    return chol if chol.flags.writeable else chol.copy()


def _shuffled_strata(kernel):
    """The :class:`~._minibatches.ShuffledMinibatches` of the kernel's strata (none without
    control variates)."""
    strata = kernel.proxy.strata if kernel.control_variates else None
    exact = np.empty(0, dtype=np.int64) if strata is None else np.sort(strata.exact)
    return shuffled_minibatches(exact, int(kernel.target.n_data))
