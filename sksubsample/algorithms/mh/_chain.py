"""The MH chain driver, written once: warm-up, frozen step size, draws and their statistics.

:func:`run_kernel` runs every chain of the package through one compiled loop
(:func:`run_segment`): dual-averaging warm-up with its restarts (and ChEES adaptation of a
Hamiltonian proposal's integration time), the step size (and time) frozen after it,
the draws and per-step statistics recorded, in segments between progress reports. The loop is
generic over a *stepper* (:func:`~._model.chain_step`, :func:`~._model.chain_theta`):

* a :class:`~._step.CompiledStepper` when the kernel's target lends a compiled model and its
  proposal and test have compiled laws: the whole chain runs in machine code;
* an :class:`InterpretedStepper` otherwise: each step calls :func:`~._kernel.mh_step` back in
  Python (numba's object mode), for any target, proposal and test callable.

References
----------
Hoffman & Gelman (2014), Algorithm 5, for the dual-averaging step-size adaptation.
Hoffman, Radul & Sountsov (2021), "An adaptive MCMC scheme for setting trajectory lengths in
Hamiltonian Monte Carlo", AISTATS, Algorithm 1 and Eq. 5, for the integration time.
"""

from __future__ import annotations

import math
import time
from contextlib import ExitStack
from typing import NamedTuple

import numpy as np
from numba import objmode

from ..._utils import (
    ChainInterrupted,
    as_generator,
    check_int,
    check_open_unit_interval,
    check_point,
    check_positive,
)
from .._numba import njit, read_only
from ._acceptance import acceptance_probability
from ._adaptation import (
    adaptation_statistic,
    chees_path_length,
    chees_restart,
    chees_state,
    chees_update,
    dual_averaging_restart,
    dual_averaging_state,
    dual_averaging_update,
    metric_adapt,
    metric_state,
    metric_update,
    restart_steps,
)
from ._callbacks import call, registered
from ._kernel import build_kernel, init_state, mh_step
from ._model import chain_step, chain_theta, chain_trajectory
from ._proposals import MAX_PATH_LENGTH
from ._step import compiled_stepper

__all__ = ["InterpretedStepper", "MHResult", "run_chain", "run_kernel", "run_segment",
           "sample_mh"]


class MHResult(NamedTuple):
    """Output of :func:`sample_mh`.

    The parameters are the tuple's fields, also read as the attributes of the same names.

    Parameters
    ----------
    draws : ndarray of shape (n_draws, d)
        The retained draws, one per sampling step.
    accepted : ndarray of bool, shape (n_draws,)
        Whether each retained step accepted its proposal.
    batch_sizes : ndarray of int, shape (n_draws,)
        Decision minibatch size of every retained step (0 for a step rejected before touching
        data, e.g. a proposal outside the prior's support).
    evaluations_per_draw : ndarray of int, shape (n_draws,)
        Data terms the acceptance test evaluated at each retained step.
    n_evaluations : int
        All data terms evaluated: warm-up and sampling steps, plus the terms touched to build
        the control-variate proxy when :func:`sample_mh` built it.
    step_size : float
        The frozen step size used after warm-up.
    acceptance_probabilities : ndarray of shape (n_draws,) or None, default None
        The acceptance probability of every retained step (see
        :attr:`MHInfo.acceptance_probability`).
    path_length : float, default nan
        The frozen integration time T of a proposal that has one (NaN otherwise).
    preconditioner : ndarray of shape (d, d) or None, default None
        The lower Cholesky factor ``L`` of the preconditioner the draws used: the kernel's, or
        the one warm-up adapted (see :func:`run_kernel`).
    """

    draws: np.ndarray
    accepted: np.ndarray
    batch_sizes: np.ndarray
    evaluations_per_draw: np.ndarray
    n_evaluations: int
    step_size: float
    acceptance_probabilities: np.ndarray | None = None
    path_length: float = math.nan
    preconditioner: np.ndarray | None = None

    @property
    def acceptance_rate(self):
        """Fraction of accepted proposals over the sampling phase."""
        return float(self.accepted.mean())

    @property
    def mean_batch_size(self):
        """Mean decision minibatch size over the sampling phase."""
        return float(self.batch_sizes.mean())



@njit
def run_segment(stepper, rng, adaptation, restarts, next_restart, n_warmup, start, stop,
                step_size, targets, draws, accepted_out, batch_out, evaluations_out,
                probability_out, path, path_length, metric, chol):
    """Steps ``start, ..., stop - 1`` of a chain of ``n_warmup`` warm-up steps then draws.

    ``stepper`` holds the chain's state and ``adaptation`` the dual-averaging state
    (:func:`~._adaptation.dual_averaging_state`), both updated in place, so that consecutive
    calls over ``[0, k)``, ``[k, n)`` run the steps of one call over ``[0, n)`` on the same
    random stream. ``step_size`` is the step size of steps at or after ``n_warmup`` (unless
    warm-up runs, whose end freezes it at ``ε̄``); ``next_restart`` indexes the first entry of
    ``restarts`` (:func:`~._adaptation.restart_steps`) not before ``start``; ``targets`` holds
    the acceptance rates warm-up aims at with the Metropolis and the Barker statistic
    (:func:`~._adaptation.adaptation_statistic`). ``path`` is the ChEES state
    (:func:`~._adaptation.chees_state`) of a Hamiltonian proposal's integration time, adapted
    in warm-up (and restarted with the step size) and frozen at ``T̄`` after it, or an empty
    array for a proposal without one, whose ``path_length`` is passed through unchanged;
    ``path_length`` is the time of steps at or after ``n_warmup``. ``metric`` is the state
    (:func:`~._adaptation.metric_state`) of the preconditioner's adaptation, or an empty array
    for none: from the first restart on, warm-up positions fill a window, and each later
    restart first ends it (:func:`~._adaptation.metric_adapt`), writing the new factor into
    ``chol``, the array of the lower Cholesky factor the stepper's proposals read (the
    restarts of ε and T that follow adapt them to it). Returns ``(data terms evaluated, step
    size, path length)``.
    """
    total = 0
    eps = step_size
    time_ = path_length
    adapt_path = path.size > 0
    adapt_metric = metric.size > 0
    for step in range(start, stop):
        warm = step < n_warmup
        if warm and next_restart < restarts.size and step == restarts[next_restart]:
            if adapt_metric and next_restart > 0:
                metric_adapt(metric, chol)
            dual_averaging_restart(adaptation)
            if adapt_path:
                chees_restart(path)
            next_restart += 1
        if warm:
            eps = math.exp(adaptation[3])
            if adapt_path:
                time_ = chees_path_length(path, False)
        elif step == n_warmup and n_warmup > 0:
            eps = math.exp(adaptation[4])
            if adapt_path:
                time_ = chees_path_length(path, True)
        accepted, evaluations, size, estimate, barker = chain_step(stepper, rng, eps, time_)
        probability = acceptance_probability(barker, estimate, accepted)
        if warm:
            statistic, rule = adaptation_statistic(estimate, accepted, barker)
            dual_averaging_update(adaptation, statistic, targets[rule])
            if adapt_path:
                # The Metropolis probability of the move whatever the test (as for ε): ChEES
                # weighs each proposal by how likely it is to be taken. T learns only once
                # the chain has settled (the first restart): from an overdispersed start the
                # running mean lags behind the chain, every move towards the bulk lengthens
                # the distance from it, and the criterion would lengthen the trajectories
                # (hence the cost) of every early step.
                learn = restarts.size == 0 or step >= restarts[0]
                chees_update(path, chain_trajectory(stepper), statistic, accepted, eps, learn)
            if adapt_metric and next_restart > 0:
                metric_update(metric, chain_theta(stepper))
        else:
            i = step - n_warmup
            accepted_out[i] = accepted
            batch_out[i] = size
            evaluations_out[i] = evaluations
            probability_out[i] = probability
            draws[i] = chain_theta(stepper)
        total += evaluations
    if n_warmup > 0 and stop >= n_warmup:
        eps = math.exp(adaptation[4])
        if adapt_path:
            time_ = chees_path_length(path, True)
    return total, eps, time_


#: Wall time a segment of a chain that reports its progress aims at.
_SEGMENT_SECONDS = 0.2


def _next_segment(steps, seconds):
    """Steps of the next segment, so that a segment lasts about :data:`_SEGMENT_SECONDS`
    (at most 4 times longer than the last one, so that one fast segment cannot make the next
    one last long)."""
    if seconds <= 0.0:
        return 4 * steps
    return max(1, min(4 * steps, int(steps * _SEGMENT_SECONDS / seconds)))


def run_chain(stepper, rng, *, n_draws, n_warmup, step_size, max_step_size, targets,
              callback=None, path_length=math.nan, adapt_path_length=False, chol=None,
              adapt_preconditioner=None):
    """Run the chain ``stepper`` holds: ``n_warmup`` warm-up steps, then ``n_draws`` draws.

    With a ``callback``, the steps run in segments of about :data:`_SEGMENT_SECONDS` each and
    ``callback(k)`` is called after each with the number ``k`` of steps it ran; a segment
    continues the previous one's state, adaptation and random stream, so the draws do not
    depend on the segments. When ``callback`` raises :class:`ChainInterrupted` (the run was
    asked to stop), the chain stops there, its state whole, and the arrays returned hold the
    draws finished so far (none when it stopped in warm-up). With ``adapt_path_length``,
    warm-up adapts the integration time ``path_length`` of a Hamiltonian proposal
    (:func:`~._adaptation.chees_update`, at most :data:`~._proposals.MAX_PATH_LENGTH`).
    ``chol`` is the (writable, C-contiguous) lower Cholesky factor of the preconditioner that
    the stepper's proposals read; with ``adapt_preconditioner`` (``"diagonal"``, ``"dense"``
    or ``"auto"``, and a warm-up long enough to restart) warm-up adapts it in place from the
    warm-up positions (:func:`~._adaptation.metric_adapt`).

    Returns ``(draws, accepted, batch_sizes, evaluations, acceptance_probabilities,
    n_evaluations, step_size, path_length)``.
    """
    d = stepper.theta.size
    draws = np.empty((n_draws, d))
    accepted = np.zeros(n_draws, dtype=np.bool_)
    batch_sizes = np.zeros(n_draws, dtype=np.int64)
    evaluations = np.zeros(n_draws, dtype=np.int64)
    probabilities = np.zeros(n_draws)
    adaptation = dual_averaging_state(step_size, max_step_size=max_step_size)
    if chol is None:
        chol = np.eye(d)
    restarts = restart_steps(n_warmup, adapt_preconditioner is not None)
    metric = (metric_state(chol, adapt_preconditioner)
              if adapt_preconditioner is not None and restarts.size > 1 else np.empty(0))
    targets = read_only(np.ascontiguousarray(targets, dtype=np.float64))
    n_steps = int(n_warmup) + int(n_draws)
    eps, total, start = float(step_size), 0, 0
    time_ = float(path_length)
    path = (chees_state(time_, d, MAX_PATH_LENGTH) if adapt_path_length and n_warmup > 0
            else np.empty(0))
    segment = n_steps if callback is None else 1
    while start < n_steps:
        stop = min(n_steps, start + segment)
        began = time.perf_counter()
        evaluations_run, eps, time_ = run_segment(
            stepper, rng, adaptation, restarts, int(np.searchsorted(restarts, start)),
            int(n_warmup), start, stop, eps, targets, draws, accepted, batch_sizes,
            evaluations, probabilities, path, time_, metric, chol)
        total += evaluations_run
        ran, start = stop - start, stop
        if callback is not None:
            try:
                callback(ran)
            except ChainInterrupted:
                # Between segments the chain's state is whole: keep the draws so far.
                break
            segment = _next_segment(segment, time.perf_counter() - began)
    done = max(0, start - int(n_warmup))
    return (draws[:done], accepted[:done], batch_sizes[:done], evaluations[:done],
            probabilities[:done], int(total), float(eps), float(time_))


# ----------------------------------------------------------------------------- interpreted


class InterpretedStepper(NamedTuple):
    """A chain whose steps are :func:`~._kernel.mh_step` calls, made back in Python.

    ``handle`` names (:mod:`._callbacks`) the Python object that keeps the kernel, the
    generator and the :class:`~._kernel.MHState`, and copies each step's θ into ``theta``
    and a Hamiltonian proposal's trajectory record into ``trajectory``.
    """

    handle: int
    theta: np.ndarray
    trajectory: np.ndarray


@chain_step.implement(InterpretedStepper)
@njit(nogil=False)  # (object mode holds the GIL)
def _interpreted_step(stepper, rng, step_size, path_length):
    handle = stepper.handle
    with objmode(accepted="boolean", evaluations="int64", size="int64", estimate="float64",
                 barker="boolean"):
        accepted, evaluations, size, estimate, barker = call(handle, step_size, path_length)
    return accepted, evaluations, size, estimate, barker


@chain_theta.implement(InterpretedStepper)
@njit
def _interpreted_theta(stepper):
    return stepper.theta


@chain_trajectory.implement(InterpretedStepper)
@njit
def _interpreted_trajectory(stepper):
    return stepper.trajectory


class _InterpretedChain:
    """The Python side of an :class:`InterpretedStepper`."""

    __slots__ = ("kernel", "rng", "state", "theta", "trajectory")

    def __init__(self, kernel, rng, state, theta, trajectory):
        self.kernel, self.rng, self.state, self.theta = kernel, rng, state, theta
        self.trajectory = trajectory

    def __call__(self, step_size, path_length):
        length = path_length if math.isfinite(path_length) else None
        self.state, info = mh_step(self.rng, self.state, self.kernel, step_size,
                                   path_length=length, trajectory=self.trajectory)
        self.theta[:] = self.state.theta
        return (bool(info.accepted), int(info.n_evaluations), int(info.batch_size),
                float(info.log_ratio), info.rule == "barker")


def sample_mh(target, theta0, *, n_draws=1000, n_warmup=500, test="minibatch_barker",
              proposal="random-walk", control_variates=False, reference=None, proxy=None,
              temperature=1.0, step_size=None, preconditioner="auto", target_accept=None,
              batch_size=None, delta=None, test_options=None, random_state=None):
    """Run one MH chain: warm-up with step-size adaptation, then ``n_draws`` draws.

    Builds the kernel (:func:`build_kernel`) and runs :func:`run_kernel`.

    Parameters
    ----------
    target : object
        See the module docstring.
    theta0 : array_like of shape (d,)
        Initial state (finite, inside the prior's support).
    n_draws : int >= 1, default 1000
    n_warmup : int >= 0, default 500
    test, proposal, control_variates, reference, proxy, temperature
        See :func:`build_kernel`.
    step_size : float > 0, optional
        Initial step size ε; see :func:`run_kernel`.
    preconditioner : "auto", "identity", (d,) variances or (d, d) covariance, default "auto"
        See :func:`build_kernel`.
    target_accept : float in (0, 1), optional
        See :func:`run_kernel`.
    batch_size, delta, test_options
        See :func:`build_kernel`.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    MHResult

    Examples
    --------
    >>> import numpy as np
    >>> class Gauss:
    ...     def __init__(self, n, seed=0):
    ...         self.x = np.random.default_rng(seed).normal(1.0, 1.0, n); self.n_data = n
    ...     def log_prior(self, th): return -0.5 * float(th @ th) / 100.0
    ...     def loglik_terms(self, th, idx): return -0.5 * (self.x[idx] - th[0]) ** 2
    >>> res = sample_mh(Gauss(1000), [1.0], n_draws=200, n_warmup=100, test="metropolis",
    ...                 random_state=0)
    >>> res.draws.shape
    (200, 1)
    """
    theta0 = check_point(theta0, "theta0")
    kernel = build_kernel(target, dim=theta0.size, test=test, proposal=proposal,
                          control_variates=control_variates, reference=reference, proxy=proxy,
                          temperature=temperature, preconditioner=preconditioner,
                          batch_size=batch_size, delta=delta, test_options=test_options)
    result = run_kernel(kernel, theta0, n_draws=n_draws, n_warmup=n_warmup,
                        step_size=step_size, target_accept=target_accept,
                        random_state=random_state)
    built_here = kernel.proxy is not None and proxy is None
    if built_here:
        result = result._replace(
            n_evaluations=result.n_evaluations + kernel.proxy.n_setup_evaluations)
    return result



def run_kernel(kernel, theta0, *, n_draws=1000, n_warmup=500, step_size=None,
               target_accept=None, random_state=None, compiled=None, callback=None,
               path_length=None, preconditioner=None, adapt_preconditioner=None):
    """Run one chain of a built kernel: warm-up with step-size adaptation, then sampling.

    During warm-up the step size follows the dual-averaging recursion of Hoffman & Gelman
    (2014, Algorithm 5, with their γ = 0.05, t0 = 10, κ = 0.75 and ``μ = log(10 ε0)``) driven
    by each step's Metropolis acceptance probability ``min(1, e^Δ̂)``
    (:func:`~sksubsample.algorithms.mh._adaptation.adaptation_statistic`): it steers the *average*
    acceptance to ``target_accept`` whatever the start. The recursion restarts
    from its current ``ε̄`` after 15 % and 50 % of warm-up (:func:`restart_steps`), so that the
    first steps of a chain started far out cannot strand it with a step too small, and no
    step exceeds the proposal's ``max_step_size``. Afterwards ε is frozen at ``ε̄``, so the
    sampling phase is a time-homogeneous Markov chain (warm-up draws are discarded).
    ``n_warmup=0`` keeps ``step_size`` as given.

    A proposal with an integration time T (``proposal.path_length`` not None, the built-in
    ``"hamiltonian"``) has T adapted alongside ε, by ChEES (Hoffman, Radul & Sountsov 2021,
    Algorithm 1): each warm-up step's trajectory, of jittered duration ``u T`` with
    ``u ~ U(0, 1]``, gives an estimate of the gradient of the change in squared distance from
    the chain's running mean (Eq. 5; :func:`~sksubsample.algorithms.mh._adaptation.chees_update`),
    in the preconditioner's whitened coordinates, which only positions and momenta enter, so
    that it serves exact and subsampled tests alike; Adam moves ``log T`` up it. T is frozen at
    its average after warm-up (the jitter then makes the fixed-T move reversible) and never
    exceeds :data:`~sksubsample.algorithms.mh._proposals.MAX_PATH_LENGTH`.

    With ``adapt_preconditioner``, warm-up also adapts the preconditioner ``M = L Lᵀ`` (the
    inverse mass matrix of a Hamiltonian proposal) to the warm-up positions, in the windows of
    Stan's adaptation (Stan Reference Manual, "HMC algorithm parameters"): from the first
    restart of ε to the second, the chain's positions ``w = L0⁻¹θ`` in the coordinates the
    kernel's factor ``L0`` whitens are collected; at the second restart ``L`` becomes
    ``L0 A``, with ``A Aᵀ`` their regularised covariance (the whole of it, ``"dense"``, or
    its diagonal, ``"diagonal"``; or, ``"auto"``, the whole of it where the window's whitened
    variances show the kernel's factor a poor fit of the posterior's scales, else its diagonal:
    :func:`~sksubsample.algorithms.mh._adaptation.metric_adapt`),
    and ε and T adapt to it afresh in the rest of warm-up. Where the kernel's preconditioner
    fits the posterior (e.g. a Laplace approximation of a large data set's posterior), ``A ≈ I``
    and little changes; where it does not, the proposal moves in the shape of the posterior
    the chain found. The factor is frozen after warm-up (``MHResult.preconditioner``).

    A chain continues where a run stopped when it is run again from the run's last draw, with
    ``n_warmup=0``, the run's frozen ``step_size`` (and ``path_length`` and
    ``preconditioner``) and the same generator: the step's state is
    a function of θ (its log prior and gradient are recomputed from it, to the same bits), so
    runs of ``a`` then ``b`` draws give the draws of one run of ``a + b``. (The minibatch
    Barker test draws its noise in blocks kept per process and generator: its continuation is
    draw-for-draw the same only in the process and with the generator object of the first run;
    elsewhere it follows the same law on another stretch of the stream.)

    Parameters
    ----------
    kernel : MHKernel
    theta0 : array_like of shape (d,)
    n_draws : int >= 1, default 1000
    n_warmup : int >= 0, default 500
    step_size : float > 0, optional
        Initial ε; defaults to the proposal's ``default_step_size(d)`` (relative to the
        preconditioner).
    target_accept : float in (0, 1), optional
        The Metropolis acceptance probability warm-up aims at; defaults to the proposal's
        ``target_accept[0]`` (its ``target_accept[1]`` serves Barker-type tests that report no
        estimate of Δ).
    random_state : None, int or numpy.random.Generator
    compiled : bool or None, default None
        Whether the steps run in machine code (:mod:`._step`: a target that lends a compiled
        model, e.g. a logistic :class:`~sksubsample.algorithms.glm.GLMTarget`, a built-in
        proposal and the test ``metropolis``, ``barker`` or ``bounded_barker``) or one by one
        through :func:`mh_step`. ``None`` compiles when the kernel allows it; ``True`` raises
        ``ValueError`` when it does not. Both run the same law on the same random stream, in
        the same chain driver.
    callback : callable or None, default None
        Called as ``callback(k)`` about every 0.2 s with the number ``k`` of steps (warm-up
        and sampling) finished since its previous call, e.g. to advance a progress bar. It
        does not change the draws. It may raise
        :class:`~sksubsample._utils.ChainInterrupted` to stop the chain early (Ctrl-C):
        the result then holds the draws finished so far, fewer than ``n_draws`` (none when
        the chain stopped in warm-up), and continues as any run does (see above).
    path_length : float > 0 or None, default None
        Initial integration time T of a proposal that has one (its ``path_length`` when None),
        e.g. the ``path_length`` of a previous run to continue it with ``n_warmup=0``.
        Ignored by other proposals.
    preconditioner : ndarray of shape (d, d) or None, default None
        The lower Cholesky factor ``L`` to start from instead of the kernel's (e.g. the
        ``preconditioner`` of a previous run, to continue it with ``n_warmup=0``).
    adapt_preconditioner : {"diagonal", "dense", "auto"} or None, default None
        Adapt the preconditioner in warm-up (above), or keep it (None, or a warm-up shorter
        than 50 steps, which does not restart).

    Returns
    -------
    MHResult
        ``n_evaluations`` counts the steps' data terms only.
    """
    n_draws = check_int(n_draws, "n_draws", low=1)
    n_warmup = check_int(n_warmup, "n_warmup", low=0)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
    rng = as_generator(random_state)
    state = init_state(kernel, theta0, gradient=False)
    proposal = kernel.proposal
    if step_size is None:
        eps = float(proposal.default_step_size(state.theta.size))
    else:
        eps = check_positive(step_size, "step_size")
    if target_accept is None:
        targets = np.array(proposal.target_accept, dtype=np.float64)
    else:
        target_accept = check_open_unit_interval(target_accept, "target_accept")
        targets = np.array([target_accept, target_accept])
    if adapt_preconditioner not in (None, "diagonal", "dense", "auto"):
        raise ValueError(f"adapt_preconditioner must be 'diagonal', 'dense', 'auto' or None, got "
                         f"{adapt_preconditioner!r}")
    d = state.theta.size
    # The factor the proposals read, a writable copy: warm-up may adapt it in place.
    chol = np.array(kernel.chol if preconditioner is None else preconditioner,
                    dtype=np.float64, order="C")
    if chol.shape != (d, d) or not np.all(np.isfinite(chol)):
        raise ValueError(f"preconditioner must be a finite ({d}, {d}) lower Cholesky factor")
    kernel = kernel._replace(chol=chol)
    initial_path = getattr(proposal, "path_length", None)
    has_path = initial_path is not None
    if has_path and path_length is not None:
        initial_path = check_positive(path_length, "path_length")
    options = {"n_draws": n_draws, "n_warmup": n_warmup, "step_size": eps,
               "max_step_size": getattr(proposal, "max_step_size", math.inf),
               "targets": targets, "callback": callback,
               "path_length": float(initial_path) if has_path else math.nan,
               "adapt_path_length": has_path, "chol": chol,
               "adapt_preconditioner": adapt_preconditioner}
    # ``resources`` keeps what a compiled chain calls back (e.g. the row stream of data out of
    # core) registered while it runs.
    with ExitStack() as resources:
        stepper = (None if compiled is False
                   else compiled_stepper(kernel, state.theta, rng, resources,
                                         (n_warmup, n_draws)))
        if compiled and stepper is None:
            raise ValueError(
                "compiled=True needs a target that lends a compiled model (compiled_model, e.g. "
                "a logistic GLMTarget), a built-in proposal and the test 'metropolis', "
                "'barker' or 'bounded_barker'"
            )
        if stepper is not None:
            out = run_chain(stepper, rng, **options)
        else:
            state = init_state(kernel, state.theta)
            theta = state.theta.copy()
            trajectory = np.zeros((6, theta.size))
            with registered(_InterpretedChain(kernel, rng, state, theta, trajectory)) as handle:
                out = run_chain(InterpretedStepper(handle, theta, trajectory), rng, **options)
    draws, accepted, batch_sizes, evaluations, probabilities, total, eps, time_ = out
    return MHResult(draws, accepted, batch_sizes, evaluations, total, eps, probabilities, time_,
                    chol.copy())
