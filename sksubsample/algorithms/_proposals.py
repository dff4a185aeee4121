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

A user-written proposal is a ``Proposal(propose, log_q_ratio)``: see the example of
:class:`Proposal`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["LANGEVIN", "PROPOSALS", "RANDOM_WALK", "Proposal", "get_proposal"]


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


RANDOM_WALK = Proposal(_random_walk_propose, None, False, "random-walk")
# Barker's acceptance tends to 1/2 as the step shrinks, so a Langevin target below 1/2 (0.4)
# keeps warm-up from shrinking the step forever; 0.574 is MALA's optimum under Metropolis.
LANGEVIN = Proposal(_langevin_propose, _langevin_log_q_ratio, True, "langevin",
                    _langevin_step_size, (0.574, 0.4))

#: The built-in proposals by name.
PROPOSALS = {p.name: p for p in (RANDOM_WALK, LANGEVIN)}


def get_proposal(proposal):
    """The :class:`Proposal` named ``proposal``, or ``proposal`` itself when it is one.

    Parameters
    ----------
    proposal : {"random-walk", "langevin"} or Proposal

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
