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
    number of steps covering a duration ``u T``, ``u ~ U(0, 1]`` (jittered, so no fixed period
    of a near-Gaussian posterior is hit), with the integration time T adapted in warm-up by
    ChEES (Hoffman, Radul & Sountsov 2021; :func:`~._adaptation.chees_update`) from 2 and
    fixed afterwards; one step is ``LANGEVIN``. The leapfrog map is
    reversible and volume preserving, so ``log q(θ|θ') - log q(θ'|θ)`` is the change of kinetic
    energy ``½|p_0|² - ½|p_L|²``: exact, with any gradient (proxy or full-data). Long moves at
    the cost of one acceptance test make it the efficient choice when the gradient is cheap.

A user-written proposal is a ``Proposal(propose, log_q_ratio)``: see the example of
:class:`Proposal`.

Compiled laws
-------------
Each built-in move and its ratio is written once, as a compiled function
(:func:`random_walk_propose`, :func:`langevin_propose` / :func:`langevin_log_q_ratio`,
:func:`hamiltonian_propose` / :func:`hamiltonian_log_q_ratio`): the compiled MH step calls them
(:func:`propose`, :func:`log_q_ratio`), and so do the built-in :class:`Proposal` values that
interpreted kernels call. Where a law needs ``∇ log π_T`` away from θ (a leapfrog trajectory)
it calls the model operation :func:`~._model.log_pi_gradient`; an interpreted kernel's gradient
reaches it as a :class:`~._model.CallbackGradient`. Another sampler reuses the Langevin move
with its own gradient (e.g. a minibatch gradient for SGLD) by calling
:func:`langevin_propose` with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .._numba import njit
from ._callbacks import registered
from ._model import CallbackGradient, log_pi_gradient

__all__ = ["HAMILTONIAN", "HAMILTONIAN_CODE", "LANGEVIN", "LANGEVIN_CODE", "MAX_PATH_LENGTH",
           "PLANNED_STEP_SIZE", "PROPOSALS", "PROPOSAL_CODES", "RANDOM_WALK", "RANDOM_WALK_CODE",
           "Proposal", "expected_gradients", "finite",
           "get_proposal", "hamiltonian_log_q_ratio", "hamiltonian_propose",
           "langevin_log_q_ratio", "langevin_propose", "log_q_ratio", "lower_mat_vec",
           "lower_t_mat_vec", "propose", "random_walk_propose"]

# The integration time T that warm-up starts from, in the preconditioned coordinates: about a
# third of a period (2π) of a standardised Gaussian, close to where ChEES ends on one
# (T ≈ 2.25, where tan 2T = 2T: with t = uT, u ~ U(0, 1], ChEES ∝ E sin²(uT) = ½ - sin 2T / 4T).
_HMC_PATH_LENGTH = 2.0
# Warm-up never sets T above this: ChEES can grow T without end on a posterior with heavy
# tails or a flat direction (the squared jump keeps growing along it), and every unit of T
# costs T/ε leapfrog steps, i.e. gradients, per proposal. Ten is about 4.5 times the
# Gaussian optimum: room for a posterior up to about 4.5 times wider than its Laplace
# approximation (whose covariance preconditions the proposal), with at most 10/ε gradients.
MAX_PATH_LENGTH = 10.0
# At most this many leapfrog steps per trajectory (a path of at least 1000 ε): the number of
# steps is still a function of the uniform draw alone, so the proposal stays reversible, and a
# step size that warm-up drives towards zero on a hostile posterior cannot make one proposal
# run without end.
_HMC_MAX_STEPS = 1000


def _random_walk_step_size(dim):
    # Optimal random-walk scaling 2.38 / sqrt(d) for a preconditioner close to the posterior
    # covariance (Roberts & Rosenthal 2001); warm-up adapts from there.
    return 2.38 / math.sqrt(dim)


class Proposal(NamedTuple):
    """An MH proposal ``q(θ' | θ)`` given as functions.

    The parameters are the tuple's fields, also read as the attributes of the same names.

    Parameters
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
        Name of the proposal (``"random-walk"``, ``"langevin"`` and ``"hamiltonian"`` are the
        built-in ones).
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
    path_length : float or None, default None
        For a proposal with an integration time (the built-in ``"hamiltonian"``), the time T
        warm-up starts from; ``propose`` then takes a keyword ``path_length`` and returns as
        ``aux`` the trajectory record of :func:`hamiltonian_propose` (after ``log_q_ratio``),
        from which warm-up adapts T (:func:`~._adaptation.chees_update`). None for a proposal
        without one.

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
    path_length: float | None = None


# ----------------------------------------------------------------------------- compiled laws
#
# Scratch: every law takes ``work``, an array of shape (6, d). Row 0 receives the standard
# normal variates ξ (the momentum of a Hamiltonian move), row 1 what the proposal ratio needs
# besides them (Langevin's drift, the leapfrog's momentum), rows 2 and 3 are scratch. The
# ratios read rows 0 and 1 of the ``work`` their proposal filled. A Hamiltonian move also
# records its trajectory for the adaptation of its length: the end momentum in row 3, the
# whitened displacement in row 4, the duration at [5, 0].


@njit(inline="always")
def lower_mat_vec(chol, v, out):
    """``out = L v`` for lower-triangular L."""
    d = v.size
    for j in range(d):
        s = 0.0
        for k in range(j + 1):
            s += chol[j, k] * v[k]
        out[j] = s


@njit(inline="always")
def lower_t_mat_vec(chol, v, out):
    """``out = Lᵀ v`` for lower-triangular L: ``out[k] = sum_{j >= k} L[j, k] v[j]``, summed in
    the order of ``j``, as ``out += v[j] L[j, :j+1]`` for each row ``j`` of L in turn (a loop
    along a row, which LLVM packs, rather than down a column: the same sums in the same order,
    about three times faster for d = 55). ``out`` is not ``v``."""
    d = v.size
    for k in range(d):
        out[k] = 0.0
    for j in range(d):
        vj = v[j]
        for k in range(j + 1):
            out[k] += chol[j, k] * vj


@njit(inline="always")
def finite(v):
    """Whether every entry of ``v`` is finite."""
    for j in range(v.size):
        if not math.isfinite(v[j]):
            return False
    return True


@njit(inline="always")
def _standard_normals(rng, out):
    # One variate at a time: the stream of ``rng.standard_normal(out.size)``.
    for j in range(out.size):
        out[j] = rng.standard_normal()


@njit
def random_walk_propose(rng, theta, step_size, chol, theta_new, work):
    """``θ' = θ + ε L ξ``, ``ξ ~ N(0, I)`` (symmetric: no ratio)."""
    xi, tmp = work[0], work[2]
    _standard_normals(rng, xi)
    lower_mat_vec(chol, xi, tmp)
    for j in range(theta.size):
        theta_new[j] = theta[j] + step_size * tmp[j]


@njit
def langevin_propose(rng, theta, grad, step_size, chol, theta_new, work):
    """Preconditioned MALA: ``θ' = θ + (ε²/2) M g + ε L ξ = θ + ε L (ξ + (ε/2) Lᵀ g)``, with
    ``g = ∇ log π_T(θ)`` (any gradient: a proxy's, the full data's, a minibatch's) and
    ``M = L Lᵀ`` (Roberts & Rosenthal 2001). Leaves ξ in ``work[0]`` and the drift
    ``(ε/2) Lᵀ g`` in ``work[1]`` for :func:`langevin_log_q_ratio`."""
    xi, drift, tmp, moved = work[0], work[1], work[2], work[3]
    _standard_normals(rng, xi)
    lower_t_mat_vec(chol, grad, tmp)
    for j in range(theta.size):
        drift[j] = 0.5 * step_size * tmp[j]  # the drift, in the whitened coordinates
        tmp[j] = xi[j] + drift[j]
    lower_mat_vec(chol, tmp, moved)
    for j in range(theta.size):
        theta_new[j] = theta[j] + step_size * moved[j]


@njit
def langevin_log_q_ratio(step_size, chol, grad_new, work):
    """``log q(θ|θ') - log q(θ'|θ)`` of :func:`langevin_propose`, without a triangular solve.

    With ``θ' = θ + ε L (ξ + drift)``, ``drift = (ε/2) Lᵀ g``: ``L⁻¹(θ' - mean(θ)) = ε ξ`` and
    ``L⁻¹(θ - mean(θ')) = -ε (ξ + drift + (ε/2) Lᵀ g')``, so with the Gaussian density
    ``log q(a | b) = -|L⁻¹(a - mean(b))|² / (2ε²) + const`` the ratio is
    ``½|ξ|² - ½|ξ + drift + (ε/2) Lᵀ g'|²``: two matrix-vector products, no solve.
    """
    xi, drift, tmp = work[0], work[1], work[2]
    lower_t_mat_vec(chol, grad_new, tmp)
    total = 0.0
    for j in range(grad_new.size):
        back = xi[j] + drift[j] + 0.5 * step_size * tmp[j]
        total += xi[j] * xi[j] - back * back
    return 0.5 * total


@njit
def hamiltonian_propose(model, rng, theta, grad, step_size, path_length, chol, theta_new,
                        grad_new, work):
    """A jittered leapfrog trajectory of ``model``'s ``log π_T`` (Neal 2011) from θ with
    momentum ``p ~ N(0, I)`` in the coordinates ``L⁻¹θ``.

    The number of steps covers a duration ``u T`` with ``u ~ U(0, 1]`` and ``T = path_length``
    (Hoffman, Radul & Sountsov 2021, Section 3.3: the jitter keeps the move reversible for a
    fixed T and keeps a near-Gaussian posterior's period from being hit), at most
    ``_HMC_MAX_STEPS``. Leaves the momentum in ``work[0]``, the momentum before the last
    half step in ``work[1]``, the whitened displacement ``L⁻¹(θ' - θ)`` in ``work[4]``, the
    duration ``n_steps ε`` in ``work[5, 0]`` and ``∇ log π_T(θ')`` in ``grad_new`` (stopping
    early, θ' then rejected by the caller, when a gradient is not finite). Returns the data
    terms the gradients read (:func:`~._model.log_pi_gradient`).
    """
    momentum, p, tmp, displacement = work[0], work[1], work[2], work[4]
    d = theta.size
    _standard_normals(rng, momentum)
    n_steps = min(max(1, math.ceil(rng.uniform(0.0, path_length) / step_size)),
                  _HMC_MAX_STEPS)
    work[5, 0] = n_steps * step_size
    lower_t_mat_vec(chol, grad, tmp)
    for j in range(d):
        p[j] = momentum[j] + 0.5 * step_size * tmp[j]
        theta_new[j] = theta[j]
        displacement[j] = 0.0
    evaluations = 0
    for step in range(n_steps):
        lower_mat_vec(chol, p, tmp)
        for j in range(d):
            theta_new[j] += step_size * tmp[j]
            displacement[j] += step_size * p[j]
        evaluations += log_pi_gradient(model, rng, theta_new, grad_new)
        if not finite(grad_new):
            return evaluations
        if step < n_steps - 1:
            lower_t_mat_vec(chol, grad_new, tmp)
            for j in range(d):
                p[j] += step_size * tmp[j]
    return evaluations


@njit
def hamiltonian_log_q_ratio(step_size, chol, grad_new, work):
    """``½|p_0|² - ½|p_L|²`` of :func:`hamiltonian_propose`, with the last half momentum step
    taken at ``grad_new``: the leapfrog map is reversible and volume preserving, so this is
    ``log q(θ|θ') - log q(θ'|θ)``, exact with any gradient. Leaves the end momentum in
    ``work[3]``."""
    momentum, p, tmp, end = work[0], work[1], work[2], work[3]
    lower_t_mat_vec(chol, grad_new, tmp)
    total = 0.0
    for j in range(grad_new.size):
        end[j] = p[j] + 0.5 * step_size * tmp[j]
        total += momentum[j] * momentum[j] - end[j] * end[j]
    return 0.5 * total


#: Codes of the built-in proposals in compiled code.
RANDOM_WALK_CODE, LANGEVIN_CODE, HAMILTONIAN_CODE = 0, 1, 2


@njit
def propose(model, code, rng, theta, grad, step_size, path_length, chol, theta_new, grad_new,
            work):
    """Draw θ' from the built-in proposal ``code`` and, for the gradient proposals, write
    ``∇ log π_T(θ')`` into ``grad_new``; returns the data terms the gradients read.
    ``path_length`` is the Hamiltonian move's integration time (ignored by the others)."""
    if code == RANDOM_WALK_CODE:
        random_walk_propose(rng, theta, step_size, chol, theta_new, work)
        return 0
    if code == LANGEVIN_CODE:
        langevin_propose(rng, theta, grad, step_size, chol, theta_new, work)
        return log_pi_gradient(model, rng, theta_new, grad_new)
    return hamiltonian_propose(model, rng, theta, grad, step_size, path_length, chol, theta_new,
                               grad_new, work)


@njit
def log_q_ratio(code, step_size, chol, grad_new, work):
    """``log q(θ|θ') - log q(θ'|θ)`` of the proposal :func:`propose` just drew."""
    if code == RANDOM_WALK_CODE:
        return 0.0
    if code == LANGEVIN_CODE:
        return langevin_log_q_ratio(step_size, chol, grad_new, work)
    return hamiltonian_log_q_ratio(step_size, chol, grad_new, work)


# ----------------------------------------------------------------------------- built-in values
#
# The ``propose`` and ``log_q_ratio`` of the built-in :class:`Proposal` values call the
# compiled laws above (``aux`` is their ``work``), so an interpreted kernel draws the moves of
# the compiled chain.


def _work(theta):
    return np.empty((6, theta.size))


def _random_walk_propose(rng, state, step_size, chol):
    theta_new, work = np.empty(state.theta.size), _work(state.theta)
    random_walk_propose(rng, state.theta, float(step_size), chol, theta_new, work)
    return theta_new, None


def _langevin_propose(rng, state, step_size, chol):
    theta_new, work = np.empty(state.theta.size), _work(state.theta)
    langevin_propose(rng, state.theta, state.grad, float(step_size), chol, theta_new, work)
    return theta_new, work


def _langevin_log_q_ratio(state, theta_new, grad_new, aux, step_size, chol):
    return langevin_log_q_ratio(float(step_size), chol, grad_new, aux)


def _langevin_step_size(dim):
    # ~1.65 d^{-1/6} is MALA's optimal scaling (Roberts & Rosenthal 2001).
    return 1.65 * dim ** (-1.0 / 6.0)


def _hamiltonian_propose(rng, state, step_size, chol, grad_fn, path_length=_HMC_PATH_LENGTH):
    theta = state.theta
    theta_new, grad_new, work = np.empty(theta.size), np.empty(theta.size), _work(theta)

    def gradient(at, out):
        out[:] = grad_fn(at.copy())

    with registered(gradient) as handle:
        hamiltonian_propose(CallbackGradient(handle), rng, theta, state.grad, float(step_size),
                            float(path_length), chol, theta_new, grad_new, work)
    return theta_new, work


def _hamiltonian_log_q_ratio(state, theta_new, grad_new, aux, step_size, chol):
    return hamiltonian_log_q_ratio(float(step_size), chol, grad_new, aux)


def _hamiltonian_step_size(dim):
    # Leapfrog steps of HMC scale as d^{-1/4} (Beskos et al. 2013); warm-up adapts from here.
    return 1.0 * dim ** (-0.25)


RANDOM_WALK = Proposal(_random_walk_propose, None, False, "random-walk")
# A leapfrog step (Langevin is one) is unstable beyond ε = 2 on a Gaussian whose covariance is
# the preconditioner (the harmonic oscillator's limit): warm-up need not try larger steps, whose
# far-flung proposals only cost data to reject. The cap keeps a margin below that limit: where
# the posterior is narrower than the preconditioner in some direction (its tails, or a metric
# adapted from a few hundred warm-up draws) ε = 2 is past it, and dual averaging's iterates
# reach the cap on about one warm-up step in twenty. At 10⁷ rows, capped at 2, those steps'
# proposals flew far enough that a few of them read 10⁴-4.6 × 10⁵ rows each (20 000-520 000
# rows a chain's warm-up, against about 5 a step); capped at 1.7, no warm-up step read more
# than 3 815 (about 10 000 a chain), with the same step size after warm-up (about 0.8).
_LEAPFROG_STABILITY = 1.7

# Barker's acceptance tends to 1/2 as the step shrinks, so a Langevin target below 1/2 (0.4)
# keeps warm-up from shrinking the step forever; 0.574 is MALA's optimum under Metropolis.
LANGEVIN = Proposal(_langevin_propose, _langevin_log_q_ratio, True, "langevin",
                    _langevin_step_size, (0.574, 0.4), max_step_size=_LEAPFROG_STABILITY)

# 0.65 under Metropolis is HMC's usual target (Beskos et al. 2013 find 0.651 optimal); Barker's
# acceptance is lower for the same move, hence the lower Barker target.
HAMILTONIAN = Proposal(_hamiltonian_propose, _hamiltonian_log_q_ratio, True, "hamiltonian",
                       _hamiltonian_step_size, (0.65, 0.45), uses_gradient_function=True,
                       max_step_size=_LEAPFROG_STABILITY, path_length=_HMC_PATH_LENGTH)

#: The step size at which :func:`expected_gradients` counts a Hamiltonian move's leapfrog
#: steps: where the posterior is close to its Laplace approximation (the preconditioner), as at
#: large N, warm-up ends near it (0.81-0.87 on 10⁵ rows x 20 features, about 0.8 at 10⁷).
PLANNED_STEP_SIZE = 0.8
#: The built-in proposals by name.
PROPOSALS = {p.name: p for p in (RANDOM_WALK, LANGEVIN, HAMILTONIAN)}
#: The compiled code of each built-in proposal (:func:`propose`), by name.
PROPOSAL_CODES = {"random-walk": RANDOM_WALK_CODE, "langevin": LANGEVIN_CODE,
                  "hamiltonian": HAMILTONIAN_CODE}


def expected_gradients(proposal, step_size=PLANNED_STEP_SIZE):
    """Gradients of ``log π`` a move of ``proposal`` is expected to take at ``step_size``.

    A Hamiltonian move takes one per leapfrog step, ``n = min(⌈u T / ε⌉, _HMC_MAX_STEPS)``
    with ``u ~ U(0, 1]`` (:func:`hamiltonian_propose`), whose mean at ``r = T / ε`` is
    ``(Σ_{k ≤ ⌊r⌋} k + ⌈r⌉ (r - ⌊r⌋)) / r``, at the integration time T warm-up starts from; a
    proposal that uses a gradient otherwise takes one (Langevin's, at the current point); one
    without takes none.

    Parameters
    ----------
    proposal : str or Proposal
    step_size : float, default PLANNED_STEP_SIZE

    Returns
    -------
    float

    Examples
    --------
    >>> expected_gradients("hamiltonian", step_size=0.8)  # T = 2: 1, 2 or 3 steps
    1.8
    >>> expected_gradients("random-walk")
    0.0
    """
    proposal = get_proposal(proposal)
    if proposal.path_length is not None:
        r = proposal.path_length / step_size
        whole = math.floor(r)
        mean = (whole * (whole + 1) / 2 + math.ceil(r) * (r - whole)) / r
        return float(min(mean, _HMC_MAX_STEPS))
    return 1.0 if proposal.uses_gradient else 0.0


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
