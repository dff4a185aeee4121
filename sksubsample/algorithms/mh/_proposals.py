"""Metropolis–Hastings proposals as values: a :class:`Proposal` and its two built-in instances.

A proposal is the pair of functions an MH kernel needs, in the shape of BlackJAX's
``proposal_generator`` and emcee's ``MHMove``: one that draws ``θ'`` from ``q(· | θ)`` and one
that returns ``log q(θ | θ') - log q(θ' | θ)`` (omitted for symmetric proposals). Both receive
the step size ``ε`` and the lower Cholesky factor ``L`` of the preconditioner ``M = L Lᵀ``, so a
proposal adapts to the posterior's scale and shape the way the built-in ones do.

Built-in instances
------------------
``RANDOM_WALK``
    ``θ' = θ + ε L ξ`` with ``ξ ~ N(0, I)``: symmetric.
``LANGEVIN``
    ``θ' = θ + (ε²/2) M g(θ) + ε L ξ`` (preconditioned MALA) with ``g`` the gradient of the
    *proxy* log-posterior the kernel keeps in its state (for a subsampled target: the gradient
    of the Taylor control-variate proxies, which needs no data). Its ``log_q_ratio`` is exact,
    so the proposal adds no error to an exact acceptance test.
``HAMILTONIAN``
    Hamiltonian Monte Carlo's leapfrog trajectory (Neal 2011) with the kernel's gradient and
    mass matrix ``M⁻¹`` (i.e. momentum ``p ~ N(0, I)`` in the coordinates ``L⁻¹θ``), of a random
    number of steps covering a path length uniform on (0, 2] (jittered, so no fixed period of
    a near-Gaussian posterior is hit); one step is ``LANGEVIN``. The leapfrog map is
    reversible and volume preserving, so ``log q(θ|θ') - log q(θ'|θ)`` is the change of kinetic
    energy ``½|p_0|² - ½|p_L|²``: exact, with any gradient (proxy or full-data). Long moves at
    the cost of one acceptance test make it the efficient choice when the gradient is cheap.

A user-written proposal is a ``Proposal(propose, log_q_ratio)``: see the example of
:class:`Proposal`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = ["HAMILTONIAN", "LANGEVIN", "PROPOSALS", "RANDOM_WALK", "Proposal", "get_proposal"]


def _random_walk_step_size(dim):
    # Optimal random-walk scaling 2.38 / sqrt(d) for a preconditioner close to the posterior
    # covariance (Roberts & Rosenthal 2001); warm-up adapts from there.
    return 2.38 / math.sqrt(dim)


class Proposal(NamedTuple):
    """An MH proposal ``q(θ' | θ)`` given as functions.

    Attributes
    ----------
    propose : callable
        ``propose(rng, state, step_size, chol) -> (theta_new, aux)``: draws ``θ'`` from
        ``q(· | state.theta)``. ``state`` is the chain's state (``theta``, ``log_prior`` and,
        when ``uses_gradient``, ``grad``: the proxy gradient of the log-posterior at ``theta``);
        ``chol`` is the lower Cholesky factor ``L`` of the preconditioner. ``aux`` is anything
        ``log_q_ratio`` needs from the draw (e.g. the standard normal variates), or None.
    log_q_ratio : callable or None, default None
        ``log_q_ratio(state, theta_new, grad_new, aux, step_size, chol) -> float``:
        ``log q(θ | θ') - log q(θ' | θ)``. ``grad_new`` is the proxy gradient at ``θ'`` when
        ``uses_gradient``, else None. ``None`` declares the proposal symmetric (ratio 0).
    uses_gradient : bool, default False
        Whether the kernel must keep the proxy gradient of the log-posterior in its state (it
        needs a Taylor proxy, i.e. a reference point such as the MAP).
    name : str, default "custom"
    default_step_size : callable, default ``2.38 / sqrt(d)``
        ``default_step_size(dim) -> float``: the initial ε of warm-up.
    target_accept : tuple of float, default (0.234, 0.158)
        Acceptance rates warm-up aims at with a Metropolis-type and with a Barker-type test.
    uses_gradient_function : bool, default False
        Whether ``propose`` takes a fifth argument ``grad_fn``, ``grad_fn(theta) -> ndarray``:
        the gradient of the log-posterior the kernel uses (proxy or full-data), for proposals
        that need it at points other than ``theta`` (e.g. a leapfrog trajectory).
    max_step_size : float, default inf
        The largest step size warm-up tries (relative to the preconditioner).

    Examples
    --------
    A symmetric proposal that moves one coordinate at a time (Metropolis-within-Gibbs):

    >>> import numpy as np
    >>> def one_coordinate(rng, state, step_size, chol):
    ...     theta_new = state.theta.copy()
    ...     k = rng.integers(theta_new.size)
    ...     theta_new[k] += step_size * chol[k, k] * rng.standard_normal()
    ...     return theta_new, None
    >>> proposal = Proposal(one_coordinate, name="one-coordinate")
    >>> proposal.log_q_ratio is None
    True
    """

    propose: Callable
    log_q_ratio: Callable | None = None
    uses_gradient: bool = False
    name: str = "custom"
    default_step_size: Callable = _random_walk_step_size
    target_accept: tuple = (0.234, 0.158)
    uses_gradient_function: bool = False
    max_step_size: float = math.inf


def _random_walk_propose(rng, state, step_size, chol):
    xi = rng.standard_normal(state.theta.size)
    return state.theta + step_size * (chol @ xi), None


def _langevin_propose(rng, state, step_size, chol):
    # θ' = θ + (ε²/2) M g + ε L ξ = θ + ε L (ξ + (ε/2) Lᵀ g), with M = L Lᵀ.
    xi = rng.standard_normal(state.theta.size)
    drift = (0.5 * step_size) * (chol.T @ state.grad)
    return state.theta + step_size * (chol @ (xi + drift)), (xi, drift)


def _langevin_log_q_ratio(state, theta_new, grad_new, aux, step_size, chol):
    """``log q(θ|θ') - log q(θ'|θ)`` of the Langevin proposal, without a triangular solve.

    With ``θ' = θ + ε L (ξ + drift)``, ``drift = (ε/2) Lᵀ g``: ``L⁻¹(θ' - mean(θ)) = ε ξ`` and
    ``L⁻¹(θ - mean(θ')) = -ε (ξ + drift + (ε/2) Lᵀ g')``, so with the Gaussian density
    ``log q(a | b) = -|L⁻¹(a - mean(b))|² / (2ε²) + const`` the ratio is
    ``½|ξ|² - ½|ξ + drift + (ε/2) Lᵀ g'|²``: two matrix-vector products, no solve.
    """
    xi, drift = aux
    back = xi + drift + (0.5 * step_size) * (chol.T @ grad_new)
    return 0.5 * (float(xi @ xi) - float(back @ back))


def _langevin_step_size(dim):
    # ~1.65 d^{-1/6} is MALA's optimal scaling (Roberts & Rosenthal 2001).
    return 1.65 * dim ** (-1.0 / 6.0)


# Path lengths uniform on (0, _HMC_MAX_PATH] in the preconditioned coordinates: up to about
# two-thirds of a period (2π) of a standardised Gaussian, so a move can reach the other side
# of a Gaussian-shaped posterior, and jittered so that no path returns near its start.
_HMC_MAX_PATH = 2.0
# At most this many leapfrog steps per trajectory (a path of at least 1000 ε): the number of
# steps is still a function of the uniform draw alone, so the proposal stays reversible, and a
# step size that warm-up drives towards zero on a hostile posterior cannot make one proposal
# run without end.
_HMC_MAX_STEPS = 1000


def _hamiltonian_propose(rng, state, step_size, chol, grad_fn):
    momentum = rng.standard_normal(state.theta.size)
    n_steps = min(max(1, math.ceil(rng.uniform(0.0, _HMC_MAX_PATH) / step_size)),
                  _HMC_MAX_STEPS)
    theta = state.theta
    p = momentum + (0.5 * step_size) * (chol.T @ state.grad)
    for step in range(n_steps):
        theta = theta + step_size * (chol @ p)
        grad = grad_fn(theta)
        if not np.isfinite(grad).all():
            return theta, (momentum, p)  # rejected by the kernel's finiteness check below
        if step < n_steps - 1:
            p = p + step_size * (chol.T @ grad)
    return theta, (momentum, p)


def _hamiltonian_log_q_ratio(state, theta_new, grad_new, aux, step_size, chol):
    """``½|p_0|² - ½|p_L|²`` with the last half momentum step taken at ``grad_new``."""
    momentum, p = aux
    p_end = p + (0.5 * step_size) * (chol.T @ grad_new)
    return 0.5 * (float(momentum @ momentum) - float(p_end @ p_end))


def _hamiltonian_step_size(dim):
    # Leapfrog steps of HMC scale as d^{-1/4} (Beskos et al. 2013); warm-up adapts from here.
    return 1.0 * dim ** (-0.25)


RANDOM_WALK = Proposal(_random_walk_propose, None, False, "random-walk")
# A leapfrog step (Langevin is one) is unstable beyond ε = 2 on a Gaussian whose covariance is
# the preconditioner (the harmonic oscillator's limit): warm-up need not try larger steps, whose
# far-flung proposals only cost data to reject.
_LEAPFROG_STABILITY = 2.0

# Barker's acceptance tends to 1/2 as the step shrinks, so a Langevin target below 1/2 (0.4)
# keeps warm-up from shrinking the step forever; 0.574 is MALA's optimum under Metropolis.
LANGEVIN = Proposal(_langevin_propose, _langevin_log_q_ratio, True, "langevin",
                    _langevin_step_size, (0.574, 0.4), max_step_size=_LEAPFROG_STABILITY)

# 0.65 under Metropolis is HMC's usual target (Beskos et al. 2013 find 0.651 optimal); Barker's
# acceptance is lower for the same move, hence the lower Barker target.
HAMILTONIAN = Proposal(_hamiltonian_propose, _hamiltonian_log_q_ratio, True, "hamiltonian",
                       _hamiltonian_step_size, (0.65, 0.45), uses_gradient_function=True,
                       max_step_size=_LEAPFROG_STABILITY)

#: The built-in proposals by name.
PROPOSALS = {p.name: p for p in (RANDOM_WALK, LANGEVIN, HAMILTONIAN)}


def get_proposal(proposal):
    """The :class:`Proposal` named ``proposal``, or ``proposal`` itself when it is one.

    Parameters
    ----------
    proposal : {"random-walk", "langevin", "hamiltonian"} or Proposal

    Returns
    -------
    Proposal

    Examples
    --------
    >>> get_proposal("langevin").uses_gradient
    True
    """
    if isinstance(proposal, Proposal):
        if not callable(proposal.propose):
            raise TypeError("Proposal.propose must be callable")
        if proposal.log_q_ratio is not None and not callable(proposal.log_q_ratio):
            raise TypeError("Proposal.log_q_ratio must be callable or None")
        return proposal
    if isinstance(proposal, str) and proposal in PROPOSALS:
        return PROPOSALS[proposal]
    raise ValueError(
        f"proposal must be one of {sorted(PROPOSALS)} or a Proposal, got {proposal!r}"
    )
