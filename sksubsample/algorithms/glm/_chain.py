"""The MH chain of a logistic GLM target, compiled: warm-up and sampling in one machine loop.

:func:`sksubsample.algorithms.run_kernel` hands a kernel to :func:`run_glm_chain` when every
piece of it has a compiled law here: a :class:`~sksubsample.algorithms.GLMTarget` of the
logistic family (dense or CSR design), a built-in proposal (``RANDOM_WALK``, ``LANGEVIN``,
``HAMILTONIAN``, with the proxy's or the full-data gradient) and the test ``metropolis``,
``barker`` or ``bounded_barker``. Any other kernel (a user's proposal or test, another target)
runs step by step through :func:`sksubsample.algorithms.mh_step`.

The compiled step is the law of :func:`~sksubsample.algorithms.mh_step` with those pieces: the
same proposals, proposal ratios, control variates, tests, decision rules and dual-averaging
warm-up, drawing from the same random stream in the same order, so for the same generator
state both give the same draws (up to floating-point rounding; the test suite checks it). Two
differences are not of law: a Hamiltonian trajectory's last gradient is computed once (the
interpreted step computes it again for the proposal ratio), and an exact test sums the raw
log-likelihood ratios instead of the control-variate residuals plus the proxies' sum (the same
number up to rounding).
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from .._numba import njit, read_only
from ..mh._acceptance import _decided_by_bound_compiled, bounded_batch_size_compiled
from ..mh._adaptation import (
    adaptation_statistic,
    dual_averaging_restart,
    dual_averaging_state,
    dual_averaging_update,
    restart_steps,
)
from ..mh._proposals import _HMC_MAX_PATH, _HMC_MAX_STEPS
from ..sampling import new_shuffle, shuffle_draw, shuffle_restart
from . import _kernels as kernels

__all__ = ["compiled_laws", "run_glm_chain"]

# Proposal and test codes of the compiled laws.
_RANDOM_WALK, _LANGEVIN, _HAMILTONIAN = 0, 1, 2
_METROPOLIS, _BARKER, _BOUNDED_BARKER = 0, 1, 2
_PROPOSAL_CODES = {"random-walk": _RANDOM_WALK, "langevin": _LANGEVIN,
                   "hamiltonian": _HAMILTONIAN}
_TEST_CODES = {"metropolis": _METROPOLIS, "barker": _BARKER, "bounded_barker": _BOUNDED_BARKER}


class GLMModel(NamedTuple):
    """The posterior as the compiled chain sees it (arrays contiguous, as the kernels want)."""

    X: np.ndarray
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    sparse: bool
    signs: np.ndarray
    weights: np.ndarray
    n_data: int
    prior_precision: float
    log_norm: float
    temperature: float
    # The Taylor proxies' expansion point and sums (for the proxy gradient and the proxies'
    # exact sum), and whether gradients are instead summed over all data.
    reference: np.ndarray
    grad_sum: np.ndarray
    hess_sum: np.ndarray
    exact_gradient: bool


class ControlVariates(NamedTuple):
    """The control variates of the compiled chain and the bounds of the bounded test."""

    enabled: bool
    order: int
    cubic_coef: np.ndarray
    table: np.ndarray
    exact_rows: np.ndarray
    sampled_rows: np.ndarray
    has_bound: bool
    bound: tuple  # a ResidualBound
    # The Lipschitz bound of the raw terms (without control variates): L and Xᵀ W² X.
    lipschitz: float
    gram: np.ndarray


@njit(inline="always")
def _ratio_sum(model, theta, theta_new, rows, n_all):
    return kernels.loglik_ratio_sum(model.X, model.data, model.indices, model.indptr,
                                    model.sparse, model.signs, model.weights, theta, theta_new,
                                    rows, n_all)


@njit(inline="always")
def _residual_sum(model, table, theta, theta_new, rows, n_all):
    return kernels.residual_sum(model.X, model.data, model.indices, model.indptr, model.sparse,
                                model.signs, model.weights, table, theta, theta_new, rows,
                                n_all)


# ----------------------------------------------------------------------------- the model


@njit(inline="always")
def _mat_vec(matrix, v, out):
    d = v.size
    for j in range(d):
        s = 0.0
        for k in range(d):
            s += matrix[j, k] * v[k]
        out[j] = s


@njit(inline="always")
def _lower_mat_vec(chol, v, out):
    """``out = L v`` for lower-triangular L."""
    d = v.size
    for j in range(d):
        s = 0.0
        for k in range(j + 1):
            s += chol[j, k] * v[k]
        out[j] = s


@njit(inline="always")
def _lower_t_mat_vec(chol, v, out):
    """``out = Lᵀ v`` for lower-triangular L."""
    d = v.size
    for k in range(d):
        s = 0.0
        for j in range(k, d):
            s += chol[j, k] * v[j]
        out[k] = s


@njit(inline="always")
def _dot(a, b):
    s = 0.0
    for j in range(a.size):
        s += a[j] * b[j]
    return s


@njit
def _log_prior(theta, prior_precision, log_norm):
    return log_norm - 0.5 * prior_precision * _dot(theta, theta)


@njit
def _log_pi_grad(model, theta, out, work):
    """Gradient of ``log π_T`` (prior + likelihood / T) at θ; returns the data terms it read."""
    if model.exact_gradient:
        kernels.grad_sum(model.X, model.data, model.indices, model.indptr, model.sparse,
                         model.signs, model.weights, theta, model.n_data, out)
        for j in range(theta.size):
            out[j] = out[j] / model.temperature - model.prior_precision * theta[j]
        return model.n_data
    for j in range(theta.size):
        work[j] = theta[j] - model.reference[j]
    _mat_vec(model.hess_sum, work, out)
    for j in range(theta.size):
        out[j] = ((model.grad_sum[j] + out[j]) / model.temperature
                  - model.prior_precision * theta[j])
    return 0


# ----------------------------------------------------------------------------- proposals


@njit
def _propose(rng, model, proposal, theta, grad, eps, chol, theta_new, grad_new, work):
    """Draw θ' (and, for gradient proposals, ∇ log π_T(θ')); returns
    ``(log q(θ|θ') - log q(θ'|θ) without the final gradient's share, data terms read,
    finite)``: see :func:`_proposal_ratio`."""
    d = theta.size
    xi = work[0]
    p = work[1]
    tmp = work[2]
    for j in range(d):
        xi[j] = rng.standard_normal()
    if proposal == _RANDOM_WALK:
        _lower_mat_vec(chol, xi, tmp)
        for j in range(d):
            theta_new[j] = theta[j] + eps * tmp[j]
        return 0
    if proposal == _LANGEVIN:
        _lower_t_mat_vec(chol, grad, tmp)
        for j in range(d):
            p[j] = 0.5 * eps * tmp[j]  # the drift, in the whitened coordinates
            tmp[j] = xi[j] + p[j]
        _lower_mat_vec(chol, tmp, work[3])
        for j in range(d):
            theta_new[j] = theta[j] + eps * work[3][j]
        return _log_pi_grad(model, theta_new, grad_new, work[4])
    # Hamiltonian: momentum xi, a jittered number of leapfrog steps.
    n_steps = min(max(1, math.ceil(rng.uniform(0.0, _HMC_MAX_PATH) / eps)), _HMC_MAX_STEPS)
    _lower_t_mat_vec(chol, grad, tmp)
    for j in range(d):
        p[j] = xi[j] + 0.5 * eps * tmp[j]
        theta_new[j] = theta[j]
    evaluations = 0
    for step in range(n_steps):
        _lower_mat_vec(chol, p, tmp)
        for j in range(d):
            theta_new[j] += eps * tmp[j]
        evaluations += _log_pi_grad(model, theta_new, grad_new, work[4])
        if not _finite(grad_new):
            return evaluations
        if step < n_steps - 1:
            _lower_t_mat_vec(chol, grad_new, tmp)
            for j in range(d):
                p[j] += eps * tmp[j]
    return evaluations


@njit
def _proposal_ratio(proposal, eps, chol, grad_new, work):
    """``log q(θ|θ') - log q(θ'|θ)`` of the proposal just drawn by :func:`_propose`."""
    if proposal == _RANDOM_WALK:
        return 0.0
    d = grad_new.size
    xi = work[0]
    p = work[1]
    tmp = work[2]
    _lower_t_mat_vec(chol, grad_new, tmp)
    total = 0.0
    if proposal == _LANGEVIN:
        # back = ξ + drift + (ε/2) Lᵀ g'
        for j in range(d):
            back = xi[j] + p[j] + 0.5 * eps * tmp[j]
            total += xi[j] * xi[j] - back * back
        return 0.5 * total
    for j in range(d):
        end = p[j] + 0.5 * eps * tmp[j]
        total += xi[j] * xi[j] - end * end
    return 0.5 * total


@njit(inline="always")
def _finite(v):
    for j in range(v.size):
        if not math.isfinite(v[j]):
            return False
    return True


# ----------------------------------------------------------------------------- tests


@njit(inline="always")
def _log_uniform(rng):
    return -rng.standard_exponential()


@njit(inline="always")
def _log_expit(x):
    return kernels.log_sigmoid(x)


@njit
def _bound_value(bound, a, a_new):
    return kernels.residual_bound(bound.order, bound.rho, bound.chol, bound.radii, bound.grams,
                                  a, a_new) / bound.n_sampled


@njit
def _test(rng, model, cvs, test, delta, theta, theta_new, rest, rest_cv, buffers):
    """The acceptance test: ``(accepted, data terms, batch size, Δ̂, rule)``.

    ``rest`` is ``log_ratio_rest`` of the raw terms (prior and proposal ratios), ``rest_cv``
    that of the control-variate residuals (``rest`` plus the proxies' sum). The bounded test
    is the law of the interpreted ``bounded_barker`` (its terms are the residuals with control
    variates); the full-data tests sum the raw ratios.
    """
    n_data, temperature = model.n_data, model.temperature
    if test != _BOUNDED_BARKER:
        if not rest > -math.inf:
            return False, 0, 0, -math.inf, _BARKER if test == _BARKER else _METROPOLIS
        full = _ratio_sum(model, theta, theta_new, cvs.exact_rows, n_data) / temperature + rest
        accepted = _log_uniform(rng) < (_log_expit(full) if test == _BARKER else full)
        return accepted, n_data, n_data, full, _BARKER if test == _BARKER else _METROPOLIS
    cv = cvs.enabled
    base = rest_cv if cv else rest
    if not base > -math.inf:
        return False, 0, 0, -math.inf, _BARKER
    a, a_new, shuffle, batch = buffers
    log_u = _log_uniform(rng)
    variance = math.nan
    if cv and cvs.has_bound:
        for j in range(theta.size):
            a[j] = theta[j] - model.reference[j]
            a_new[j] = theta_new[j] - model.reference[j]
        variance = _bound_value(cvs.bound, a, a_new) / (temperature * temperature)
    elif not cv and cvs.lipschitz > 0.0:
        for j in range(theta.size):
            a[j] = theta_new[j] - theta[j]
        variance = (cvs.lipschitz**2 * _quadratic(cvs.gram, a) / n_data
                    / (temperature * temperature))
    strata = cv and cvs.exact_rows.size > 0
    if variance != variance:  # nothing bounds the terms: the exact test on every term
        estimate = _sum_terms(model, cvs, theta, theta_new, cvs.sampled_rows, True)
        estimate = estimate / temperature + base
        return log_u < estimate, n_data, n_data, estimate, _METROPOLIS
    n_sampled = cvs.sampled_rows.size if strata else n_data
    size = bounded_batch_size_compiled(n_sampled, variance, delta)
    exact = size == n_sampled
    rule = _METROPOLIS if exact else _BARKER
    fixed = 0.0
    if strata:
        fixed = _residual_sum(model, cvs.table, theta, theta_new, cvs.exact_rows,
                              0) / temperature
    centre = base + fixed
    reported = size + n_data - n_sampled
    decided = _decided_by_bound_compiled(log_u, centre, n_sampled, variance, size)
    if decided >= 0:
        return decided == 1, cvs.exact_rows.size if strata else 0, reported, math.nan, rule
    if exact:
        estimate = centre + _sum_terms(model, cvs, theta, theta_new, cvs.sampled_rows,
                                       not strata) / temperature
        return log_u < estimate, n_data, n_data, estimate, _METROPOLIS
    shuffle_restart(shuffle, n_sampled)
    shuffle_draw(shuffle, rng, batch[:size])
    if strata:
        for k in range(size):
            batch[k] = cvs.sampled_rows[batch[k]]
    total = _sum_terms(model, cvs, theta, theta_new, batch[:size], False)
    estimate = centre + n_sampled * (total / size) / temperature
    used = size + (cvs.exact_rows.size if strata else 0)
    return log_u < _log_expit(estimate), used, reported, estimate, _BARKER


@njit
def _sum_terms(model, cvs, theta, theta_new, rows, every_row):
    """Sum of the terms a test sees (residuals with control variates, raw log-likelihood
    ratios without) over ``rows``, or over every row when ``every_row``."""
    n_all = model.n_data if every_row else 0
    if cvs.enabled:
        return _residual_sum(model, cvs.table, theta, theta_new, rows, n_all)
    return _ratio_sum(model, theta, theta_new, rows, n_all)


@njit(inline="always")
def _quadratic(matrix, a):
    total = 0.0
    for j in range(a.size):
        row = 0.0
        for k in range(a.size):
            row += matrix[j, k] * a[k]
        total += a[j] * row
    return total


# ----------------------------------------------------------------------------- the chain


@njit(inline="always")
def _acceptance_probability(rule, estimate, accepted):
    if estimate != estimate:
        return 1.0 if accepted else 0.0
    if rule == _BARKER:
        return math.exp(_log_expit(estimate))
    return math.exp(min(0.0, estimate))


@njit
def _proxy_value(model, cvs, theta, a):
    """The proxies' sum at θ (``GLMTaylorExpansion.sum_diff`` takes differences of it)."""
    for j in range(theta.size):
        a[j] = theta[j] - model.reference[j]
    return kernels.proxy_value(model.grad_sum, model.hess_sum, cvs.cubic_coef, cvs.order, a)


@njit
def _glm_chain(rng, model, cvs, chol, proposal, test, delta, theta, grad, eps0, targets,
               adaptation, restarts, next_restart, n_warmup, start, stop, draws, accepted_out,
               batch_out, evaluations_out, probability_out):
    """Steps ``start, ..., stop - 1`` of a chain of ``n_warmup`` warm-up steps then draws.

    ``theta`` and ``grad`` (∇ log π_T at θ, computed here when ``start == 0``) hold the state
    and are updated in place, and ``adaptation`` holds the dual-averaging state, so that
    consecutive calls over ``[0, k)``, ``[k, n)`` run the steps of one call over ``[0, n)``
    on the same random stream. ``eps0`` is the step size of steps at or after ``n_warmup``
    (unless warm-up runs, whose end freezes it); ``next_restart`` indexes the first entry of
    ``restarts`` not before ``start``. Returns ``(data terms evaluated, step size)``.
    """
    d = theta.size
    theta_new = np.empty(d)
    grad_new = np.zeros(d)
    work = np.empty((5, d))
    uses_gradient = proposal != _RANDOM_WALK
    log_prior = _log_prior(theta, model.prior_precision, model.log_norm)
    if uses_gradient and start == 0:
        _log_pi_grad(model, theta, grad, work[4])
    a = np.empty(d)
    a_new = np.empty(d)
    n_sampled = cvs.sampled_rows.size if cvs.sampled_rows.size else model.n_data
    batch = np.empty(n_sampled, dtype=np.int64)
    buffers = (a, a_new, new_shuffle(n_sampled), batch)
    bounded_cv = cvs.enabled and test == _BOUNDED_BARKER
    # The proxies' sum at the current state, kept with it (it changes only on acceptance).
    proxy = proxy_new = _proxy_value(model, cvs, theta, a) if bounded_cv else 0.0
    total_evaluations = 0
    eps = eps0
    for step in range(start, stop):
        warm = step < n_warmup
        if warm and next_restart < restarts.size and step == restarts[next_restart]:
            dual_averaging_restart(adaptation)
            next_restart += 1
        if warm:
            eps = math.exp(adaptation[3])
        elif step == n_warmup and n_warmup > 0:
            eps = math.exp(adaptation[4])
        evaluations = _propose(rng, model, proposal, theta, grad, eps, chol, theta_new,
                               grad_new, work)
        accepted = False
        size = 0
        estimate = -math.inf
        rule = _BARKER if test != _METROPOLIS else _METROPOLIS
        if _finite(theta_new) and (not uses_gradient or _finite(grad_new)):
            log_prior_new = _log_prior(theta_new, model.prior_precision, model.log_norm)
            rest = log_prior_new - log_prior
            if uses_gradient:
                rest += _proposal_ratio(proposal, eps, chol, grad_new, work)
            rest_cv = rest
            if bounded_cv:
                proxy_new = _proxy_value(model, cvs, theta_new, a_new)
                rest_cv += (proxy_new - proxy) / model.temperature
            accepted, used, size, estimate, rule = _test(
                rng, model, cvs, test, delta, theta, theta_new, rest, rest_cv, buffers)
            evaluations += used
        probability = _acceptance_probability(rule, estimate, accepted)
        if warm:
            statistic, statistic_rule = adaptation_statistic(estimate, accepted,
                                                             rule == _BARKER)
            dual_averaging_update(adaptation, statistic, targets[statistic_rule])
        else:
            i = step - n_warmup
            accepted_out[i] = accepted
            batch_out[i] = size
            evaluations_out[i] = evaluations
            probability_out[i] = probability
        if accepted:
            for j in range(d):
                theta[j] = theta_new[j]
                grad[j] = grad_new[j]
            log_prior = _log_prior(theta, model.prior_precision, model.log_norm)
            if bounded_cv:
                proxy = proxy_new
        if not warm:
            draws[step - n_warmup] = theta
        total_evaluations += evaluations
    if n_warmup > 0 and stop >= n_warmup:
        eps = math.exp(adaptation[4])
    return total_evaluations, eps


# ----------------------------------------------------------------------------- entry point


def compiled_laws(kernel):
    """``(proposal code, test code, delta)`` when the compiled chain implements ``kernel``,
    else None (the kernel then runs through the interpreted :func:`mh_step`)."""
    from ..mh._proposals import PROPOSALS
    from ._target import GLMTarget, GLMTaylorExpansion

    target = kernel.target
    if not (isinstance(target, GLMTarget) and target.compiled):
        return None
    proposal = kernel.proposal
    if PROPOSALS.get(proposal.name) != proposal:  # (by value: kernels are pickled to workers)
        return None
    law = getattr(kernel.test, "compiled_law", None)
    if law is None or law[0] not in _TEST_CODES:
        return None
    needs_proxy = kernel.control_variates or (proposal.uses_gradient
                                              and not kernel.exact_gradient)
    if needs_proxy:
        proxy = kernel.proxy
        if proxy is None or proxy.target is not target or not isinstance(
                getattr(proxy, "_expansion", None), GLMTaylorExpansion):
            return None
    return _PROPOSAL_CODES[proposal.name], _TEST_CODES[law[0]], float(law[1])


def _c(array, dtype=np.float64):
    """``array`` as a C-contiguous array of ``dtype``, read-only (:func:`._numba.read_only`:
    the chain only reads it)."""
    return read_only(np.ascontiguousarray(array, dtype=dtype))


def _control_variates(kernel, expansion, d):
    """The :class:`ControlVariates` of ``kernel`` (placeholders where it has none).

    Placeholders are read-only like the arrays they stand for (:func:`_c`), so that every plan
    (with or without strata, a bound, third-order proxies) passes arguments of the same types
    and the chain is compiled once, not once per plan.
    """
    from ._target import ResidualBound

    no_rows = _c(np.empty(0), np.int64)
    target = kernel.target
    enabled = bool(kernel.control_variates)
    bound = ResidualBound(2, 0.0, _c(np.zeros((d, d))), _c(np.empty(0)),
                          _c(np.zeros((1, d, d))), 1)
    order, table = 2, _c(np.empty((0, 4)))
    cubic_coef = _c(np.empty(0))
    exact_rows = sampled_rows = no_rows
    if enabled:
        order = int(expansion.order)
        cubic_coef = _c(expansion.cubic_sum)
        table = _c(expansion.table)
        if expansion.bound is not None:
            b = expansion.bound
            bound = ResidualBound(int(b.order), float(b.rho), _c(b.chol), _c(b.radii),
                                  _c(b.grams), int(b.n_sampled))
        if expansion.strata is not None:
            exact_rows = _c(expansion.strata.exact, np.int64)
            sampled_rows = _c(expansion.strata.sampled, np.int64)
    has_bound = enabled and expansion.bound is not None
    return ControlVariates(enabled, order, cubic_coef, table, exact_rows,
                           sampled_rows, has_bound, bound,
                           float(target.family.lipschitz or 0.0), _c(target.gram))


def run_glm_chain(kernel, laws, theta0, *, n_draws, n_warmup, step_size, max_step_size,
                  targets, rng, callback=None):
    """Run the compiled chain of ``kernel`` (see :func:`compiled_laws`).

    With a ``callback``, the steps run in segments of about :data:`_SEGMENT_SECONDS` each and
    ``callback(k)`` is called after each with the number ``k`` of steps it ran; a segment
    continues the previous one's state, adaptation and random stream, so the draws do not
    depend on the segments.

    Returns ``(draws, accepted, batch_sizes, evaluations, acceptance_probabilities,
    n_evaluations, step_size)``.
    """

    proposal, test, delta = laws
    target = kernel.target
    d = theta0.size
    expansion = None if kernel.proxy is None else kernel.proxy._expansion
    if expansion is not None:
        reference, grad_sum, hess_sum = (_c(expansion.reference), _c(expansion.grad_sum),
                                         _c(expansion.hess_sum))
    else:
        # Read-only placeholders, of the types of the arrays they stand for (one compilation).
        reference, grad_sum, hess_sum = _c(np.zeros(d)), _c(np.zeros(d)), _c(np.zeros((d, d)))
    design = target.design
    model = GLMModel(_c(design.X), _c(design.data), _c(design.indices, np.int64),
                     _c(design.indptr, np.int64), bool(design.sparse), _c(target.y),
                     _c(target._kernel_weights), int(target.n_data),
                     float(target.prior_precision), float(target._log_norm),
                     float(kernel.temperature), reference, grad_sum, hess_sum,
                     bool(kernel.exact_gradient))
    cvs = _control_variates(kernel, expansion, d)
    draws = np.empty((n_draws, d))
    accepted = np.zeros(n_draws, dtype=np.bool_)
    batch_sizes = np.zeros(n_draws, dtype=np.int64)
    evaluations = np.zeros(n_draws, dtype=np.int64)
    probabilities = np.zeros(n_draws)
    adaptation = dual_averaging_state(step_size, max_step_size=max_step_size)
    restarts = restart_steps(n_warmup)
    theta = np.array(theta0, dtype=np.float64)  # the chain's state, updated in place
    grad = np.zeros(d)
    chol, targets = _c(kernel.chol), _c(targets)
    n_steps = int(n_warmup) + int(n_draws)
    eps, total, start = float(step_size), 0, 0
    segment = n_steps if callback is None else 1
    while start < n_steps:
        stop = min(n_steps, start + segment)
        began = time.perf_counter()
        evaluations_run, eps = _glm_chain(
            rng, model, cvs, chol, proposal, test, delta, theta, grad, eps, targets,
            adaptation, restarts, int(np.searchsorted(restarts, start)), int(n_warmup), start,
            stop, draws, accepted, batch_sizes, evaluations, probabilities)
        total += evaluations_run
        if callback is not None:
            callback(stop - start)
            segment = _next_segment(segment, time.perf_counter() - began)
        start = stop
    return draws, accepted, batch_sizes, evaluations, probabilities, int(total), float(eps)


#: Wall time a segment of a chain that reports its progress aims at.
_SEGMENT_SECONDS = 0.2


def _next_segment(steps, seconds):
    """Steps of the next segment, so that a segment lasts about :data:`_SEGMENT_SECONDS`
    (at most 4 times longer than the last one, so that one fast segment cannot make the next
    one last long)."""
    if seconds <= 0.0:
        return 4 * steps
    return max(1, min(4 * steps, int(steps * _SEGMENT_SECONDS / seconds)))
