"""Metropolis–Hastings kernels with an injectable acceptance test, and a chain driver.

The kernel is "proposal + acceptance test" (the shape of BlackJAX's ``rmh`` and emcee's
``MHMove``): :func:`build_kernel` fixes the static configuration (target, test, proposal,
preconditioner, control variates, temperature) in a :class:`MHKernel`; :func:`mh_step` is a pure
function ``mh_step(rng, state, kernel, step_size) -> (state, info)`` over the small
:class:`MHState`; :func:`sample_mh` runs warm-up (step-size adaptation) and sampling.

Targets
-------
A target follows :class:`sksubsample.algorithms.SubsampledTarget` (``n_data``, ``log_prior``,
``loglik_terms``). The optional methods of :mod:`sksubsample.algorithms.mh._target` are used when
present: ``loglik_ratio_terms`` (one gather of a minibatch's rows per step), per-datum
derivatives and ``grad_log_prior`` / ``hess_log_prior`` (control variates, the Langevin proposal,
the Laplace preconditioner), ``taylor_expansion`` (fused control-variate residuals) and
``loglik_ratio_bound`` (passed, divided by the temperature, to the tests that need a range bound
when control variates are off; otherwise those tests compute it from all N terms).

Proposals are values (:class:`sksubsample.algorithms.Proposal`); acceptance tests are callables
of the signature of :mod:`sksubsample.algorithms.mh._acceptance` that carry their kind as data.

The chain targets the tempered posterior ``π_T(θ) ∝ p0(θ) exp(sum_i ℓ_i(θ) / T)`` (only the
likelihood is tempered, as in Seita et al. 2017, Section 6).

Which combinations are exact
----------------------------
*Exact* (π_T is the stationary distribution): tests ``"metropolis"`` and ``"barker"`` with either
proposal, with or without control variates (the proxies' sum is added back exactly, so Δ is
unchanged), any fixed preconditioner and step size, any temperature. The Langevin drift comes from
the Taylor proxy, a deterministic function of θ, so ``q(θ|θ')/q(θ'|θ)`` is computed exactly without
data and does not bias the chain.

*Approximate, with a per-step error bound* (the stationary distribution is within a total-variation
distance of π_T controlled by the per-step error, Mitrophanov 2005 / Pillai & Smith 2014):

* ``"minibatch_barker"``: per-step acceptance-probability error at most the Novak bound ε
  (Seita et al. Cor. 2) when ``delta`` is set, plus the correction's ``cdf_error``; with
  ``delta=None`` only the variance condition ``s² < σ²`` is enforced and the error is that of the
  normal approximation of the minibatch mean (small for the moderate skewness of smooth models,
  not bounded);
* ``"austerity"``: per-look error ``epsilon`` under the t-test's normality assumption;
* ``"adaptive_subsampling"``: decision error at most ``delta`` (distribution-free, given a valid
  ``term_bound`` or the honest one);
* ``"racing"``: decision error at most ``delta`` (``"ebs"``: distribution-free; ``"normal"``: under
  the normal assumption of Chen & Ghahramani, Assumption 6).

Control variates do not change these statements: the tests see residual terms whose mean is the
same Δ up to the exactly added proxy sum; they only shrink the variance and hence the batches.

*Not stationary for π_T*: the warm-up phase (the step size adapts on the chain's own history;
warm-up draws are discarded and the step size is frozen afterwards), and any acceptance callable
that feeds the noisy Δ* to an exact test without correction (e.g. Barker with ``Δ*`` in place of
``Δ``, the negative control of the test suite).

References
----------
Seita et al. (2017), Algorithm 1; Roberts & Rosenthal (2001) and Agrawal, Vats, Łatuszyński &
Roberts (2021) for the target acceptance rates; Hoffman & Gelman (2014), Algorithm 5, for the
dual-averaging step-size adaptation.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np
from scipy import linalg, special

from ..._utils import as_generator, check_int, check_open_unit_interval, check_positive
from ..glm._chain import compiled_laws, run_glm_chain
from ._acceptance import acceptance_kind, get_acceptance_test
from ._adaptation import DualAveraging, adaptation_statistic, restart_steps
from ._control_variates import TaylorProxy, check_derivative_target
from ._proposals import get_proposal

__all__ = ["DualAveraging", "MHInfo", "MHKernel", "MHResult", "MHState", "build_kernel",
           "init_state", "mh_step", "run_kernel", "sample_mh"]


class MHState(NamedTuple):
    """State of an MH chain.

    Attributes
    ----------
    theta : ndarray of shape (d,)
    log_prior : float
        ``log p0(theta)``.
    grad : ndarray of shape (d,) or None
        Proxy gradient of ``log π_T`` at ``theta`` (proposals with ``uses_gradient`` only).
    """

    theta: np.ndarray
    log_prior: float
    grad: np.ndarray | None


class MHInfo(NamedTuple):
    """What one MH step did.

    Attributes
    ----------
    accepted : bool
    n_evaluations : int
        Data terms evaluated by the acceptance test (0 for a proposal rejected before any data,
        e.g. a NaN proposal or one outside the prior's support).
    batch_size : int
        Size of the minibatch the decision was based on.
    step_size : float
    acceptance_probability : float
        The acceptance probability of the rule that decided, at the test's estimate of Δ
        (``min(1, e^Δ̂)`` or ``expit(Δ̂)``; the 0/1 decision when the test reports no
        estimate).
    rule : {"metropolis", "barker"}
        The rule that decided (the test's kind unless the test reports otherwise).
    log_ratio : float
        The test's estimate ``Δ̂`` of the log acceptance ratio (NaN when it reports none):
        what step-size adaptation averages (:func:`adaptation_statistic`).
    """

    accepted: bool
    n_evaluations: int
    batch_size: int
    step_size: float
    acceptance_probability: float = math.nan
    rule: str = "metropolis"
    log_ratio: float = math.nan


class MHKernel(NamedTuple):
    """Static configuration of an MH kernel (built by :func:`build_kernel`).

    Attributes
    ----------
    target : object
    test : callable
        The acceptance test.
    proposal : Proposal
    proxy : TaylorProxy or None
    control_variates : bool
    temperature : float
    chol : ndarray of shape (d, d)
        Lower Cholesky factor ``L`` of the preconditioner ``M = L Lᵀ``.
    kind : AcceptanceKind
        The test's kind (Metropolis- or Barker-type, exact or not).
    exact_gradient : bool
        Whether gradient-based proposals use the full-data gradient of ``log π_T`` (N
        gradient terms per proposal, counted as data evaluations) instead of the proxy's.
    """

    target: object
    test: object
    proposal: object
    proxy: TaylorProxy | None
    control_variates: bool
    temperature: float
    chol: np.ndarray
    kind: object
    exact_gradient: bool = False


class MHResult(NamedTuple):
    """Output of :func:`sample_mh`.

    Attributes
    ----------
    draws : ndarray of shape (n_draws, d)
    accepted : ndarray of bool, shape (n_draws,)
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
    acceptance_probabilities : ndarray of shape (n_draws,) or None
        The acceptance probability of every retained step (see
        :attr:`MHInfo.acceptance_probability`).
    """

    draws: np.ndarray
    accepted: np.ndarray
    batch_sizes: np.ndarray
    evaluations_per_draw: np.ndarray
    n_evaluations: int
    step_size: float
    acceptance_probabilities: np.ndarray | None = None

    @property
    def acceptance_rate(self):
        """Fraction of accepted proposals over the sampling phase."""
        return float(self.accepted.mean())

    @property
    def mean_batch_size(self):
        """Mean decision minibatch size over the sampling phase."""
        return float(self.batch_sizes.mean())


def _check_target(target):
    missing = [n for n in ("n_data", "log_prior", "loglik_terms") if not hasattr(target, n)]
    if missing:
        raise TypeError(
            "target must expose n_data, log_prior(theta) and loglik_terms(theta, idx); "
            f"missing: {missing}"
        )
    return check_int(int(target.n_data), "target.n_data", low=1)


def _preconditioner_cholesky(preconditioner, d, proxy, target, temperature):
    """Cholesky factor L (M = L Lᵀ) of the proposal covariance shape M."""
    if isinstance(preconditioner, str):
        if preconditioner == "identity":
            return np.eye(d)
        if preconditioner != "auto":
            raise ValueError(
                "preconditioner must be 'auto', 'identity', a (d,) array of variances or a "
                f"(d, d) covariance, got {preconditioner!r}"
            )
        if proxy is None:
            return np.eye(d)
        prior_hess = None
        if hasattr(target, "hess_log_prior"):
            prior_hess = target.hess_log_prior(proxy.reference)
        precision = proxy.laplace_precision(temperature, prior_hess)
        try:
            # Laplace covariance at the reference point: the natural shape of the posterior.
            # (The factor must be lower triangular: log q solves with it as such.)
            chol_prec = linalg.cholesky(precision, lower=True)
            inv = linalg.solve_triangular(chol_prec, np.eye(d), lower=True)
            cov = inv.T @ inv
            return linalg.cholesky(0.5 * (cov + cov.T), lower=True)
        except linalg.LinAlgError:
            return np.eye(d)
    m = np.asarray(preconditioner, dtype=np.float64)
    if m.shape == (d,):
        if not (np.all(np.isfinite(m)) and np.all(m > 0)):
            raise ValueError("a diagonal preconditioner must hold positive finite variances")
        return np.diag(np.sqrt(m))
    if m.shape == (d, d):
        if not np.all(np.isfinite(m)) or not np.allclose(m, m.T):
            raise ValueError("preconditioner must be a finite symmetric (d, d) matrix")
        try:
            return linalg.cholesky(m, lower=True)
        except linalg.LinAlgError as exc:
            raise ValueError("preconditioner must be positive definite") from exc
    raise ValueError(f"preconditioner must have shape ({d},) or ({d}, {d}), got {m.shape}")


def build_kernel(target, *, dim, test="minibatch_barker", proposal="random-walk",
                 control_variates=False, reference=None, proxy=None, temperature=1.0,
                 preconditioner="auto", batch_size=None, delta=None, test_options=None,
                 gradient="proxy"):
    """Fix the static configuration of an MH kernel.

    Parameters
    ----------
    target : object
        A :class:`sksubsample.algorithms.SubsampledTarget` (+ derivatives for control variates
        and gradient-based proposals).
    dim : int
        Dimension d of θ.
    test : str or callable, default "minibatch_barker"
        An acceptance test name (see :func:`get_acceptance_test`) or a test callable.
    proposal : {"random-walk", "langevin"} or Proposal, default "random-walk"
        ``"random-walk"``: ``θ' = θ + ε L ξ``. ``"langevin"``:
        ``θ' = θ + (ε²/2) M ∇̃ log π_T(θ) + ε L ξ`` with ``M = L Lᵀ`` and ``∇̃`` the gradient of
        the Taylor proxy (exact q ratio, no data). Any :class:`Proposal`.
    control_variates : bool, default False
        Let the test see residuals of the Taylor proxies and add their sum back exactly.
    reference : array_like of shape (d,), optional
        Expansion point of the proxies (needed for control variates or a gradient-based
        proposal unless ``proxy`` is given).
    proxy : TaylorProxy, optional
        A prebuilt proxy (shared between chains to avoid recomputing its sums).
    temperature : float > 0, default 1.0
    preconditioner : "auto", "identity", (d,) variances or (d, d) covariance, default "auto"
        Shape M of the proposal covariance ``ε² M``. ``"auto"`` is the Laplace covariance at the
        reference point when a proxy exists, the identity otherwise.
    batch_size, delta : optional
        Forwarded to the test factory (``batch_size`` is racing's ``first_batch``).
    test_options : dict, optional
        Further options of the test factory (``sigma``, ``epsilon``, ``gamma``, ``bound``, ...).
    gradient : {"proxy", "exact"}, default "proxy"
        Gradient of gradient-based proposals: the Taylor proxy's (O(d²), no data; exact
        enough where the posterior is concentrated, i.e. for large N) or the full-data one
        (N gradient terms per proposal, counted; better proposals where the posterior is not
        Gaussian, at a cost that only small data sets can afford). Either way the proposal
        ratio is computed exactly, so the choice never biases the chain.

    Returns
    -------
    MHKernel

    Examples
    --------
    >>> import numpy as np
    >>> class Gauss:
    ...     n_data = 1000
    ...     x = np.random.default_rng(0).normal(size=1000)
    ...     def log_prior(self, th): return -0.5 * float(th @ th) / 100
    ...     def loglik_terms(self, th, idx): return -0.5 * (self.x[idx] - th[0]) ** 2
    >>> kernel = build_kernel(Gauss(), dim=1, test="metropolis")
    >>> kernel.proposal.name, kernel.kind.rule
    ('random-walk', 'metropolis')
    """
    n_data = _check_target(target)
    d = check_int(dim, "dim", low=1)
    proposal = get_proposal(proposal)
    if not isinstance(control_variates, bool):
        raise TypeError(f"control_variates must be a bool, got {type(control_variates)}")
    temperature = check_positive(temperature, "temperature")
    if batch_size is not None:
        batch_size = check_int(batch_size, "batch_size", low=2, high=n_data)
    if delta is not None:
        delta = check_open_unit_interval(delta, "delta")
    test_fn = get_acceptance_test(test, batch_size=batch_size, delta=delta,
                                  **dict(test_options or {}))
    needs_proxy = control_variates or proposal.uses_gradient
    if proxy is None and needs_proxy:
        if reference is None:
            raise ValueError(
                "control variates and gradient-based proposals (e.g. 'langevin') need a "
                "reference point (e.g. the MAP) or a prebuilt proxy"
            )
        check_derivative_target(target)
        proxy = TaylorProxy(target, reference)
    if proxy is not None and proxy.reference.shape != (d,):
        raise ValueError(f"the proxy's reference has shape {proxy.reference.shape}, not ({d},)")
    if proposal.uses_gradient and not hasattr(target, "grad_log_prior"):
        raise TypeError(f"proposal {proposal.name!r} needs target.grad_log_prior(theta)")
    if gradient not in ("proxy", "exact"):
        raise ValueError(f"gradient must be 'proxy' or 'exact', got {gradient!r}")
    if gradient == "exact" and proposal.uses_gradient:
        check_derivative_target(target)
    chol = _preconditioner_cholesky(preconditioner, d, proxy, target, temperature)
    return MHKernel(target, test_fn, proposal, proxy, control_variates, temperature, chol,
                    acceptance_kind(test_fn), gradient == "exact")


def _log_pi_grad(kernel, theta):
    """``(∇ log π_T(θ), data terms evaluated)`` from the proxy or from all N data."""
    target = kernel.target
    if kernel.exact_gradient:
        n_data = int(target.n_data)
        terms = np.asarray(target.grad_terms(theta, np.arange(n_data)), dtype=np.float64)
        return target.grad_log_prior(theta) + terms.sum(axis=0) / kernel.temperature, n_data
    return target.grad_log_prior(theta) + kernel.proxy.grad(theta) / kernel.temperature, 0


def init_state(kernel, theta):
    """The chain state at ``theta``.

    Raises
    ------
    ValueError
        If ``theta`` is not finite or has zero prior density.
    """
    theta = np.array(theta, dtype=np.float64, copy=True)
    if theta.shape != (kernel.chol.shape[0],) or not np.isfinite(theta).all():
        raise ValueError(f"theta must be a finite array of shape ({kernel.chol.shape[0]},)")
    log_prior = float(kernel.target.log_prior(theta))
    if not math.isfinite(log_prior):
        raise ValueError(f"log_prior(theta) must be finite at the initial state, got {log_prior}")
    grad = _log_pi_grad(kernel, theta)[0] if kernel.proposal.uses_gradient else None
    return MHState(theta, log_prior, grad)


def _log_ratio_terms(kernel, theta, theta_new):
    """The per-datum terms the test sees, and the model's bounds on them.

    Returns ``(terms, bounds)`` where ``bounds`` holds the keyword arguments the test declares
    it uses (``term_bound``: ``C >= max_i |l_i|``; ``variance_bound``:
    ``V >= (1/N) sum_i l_i²``, over the sampled rows of ``strata`` when the proxy sets some rows
    apart), each None when the model cannot supply it. Bounds are computed only for tests that
    use them.
    """
    target = kernel.target
    temperature = kernel.temperature
    wants = getattr(kernel.test, "uses_bounds", ("term_bound",))
    bounds = {}
    if kernel.control_variates:
        residuals = kernel.proxy.residual_terms
        if "variance_bound" in wants:
            bounds["variance_bound"] = _scaled(
                _symmetric(kernel.proxy.residual_variance_bound, theta, theta_new),
                temperature**2)
            if kernel.proxy.strata is not None:
                bounds["strata"] = kernel.proxy.strata
        if "term_bound" in wants:
            bounds["term_bound"] = None
        if temperature == 1.0:
            return (lambda idx: residuals(theta, theta_new, idx)), bounds
        return (lambda idx: residuals(theta, theta_new, idx) / temperature), bounds
    if "term_bound" in wants:
        bound = (target.loglik_ratio_bound(theta, theta_new)
                 if hasattr(target, "loglik_ratio_bound") else None)
        bounds["term_bound"] = _scaled(bound, temperature)
    if "variance_bound" in wants:
        bound = (_symmetric(target.loglik_ratio_variance_bound, theta, theta_new)
                 if hasattr(target, "loglik_ratio_variance_bound") else None)
        bounds["variance_bound"] = _scaled(bound, temperature**2)
    if hasattr(target, "loglik_ratio_terms"):
        def terms(idx):
            return target.loglik_ratio_terms(theta, theta_new, idx) / temperature
    else:
        def terms(idx):
            return (np.asarray(target.loglik_terms(theta_new, idx), dtype=np.float64)
                    - np.asarray(target.loglik_terms(theta, idx), dtype=np.float64)) / temperature
    return terms, bounds


def _symmetric(variance_bound, theta, theta_new):
    """``max(V(θ, θ'), V(θ', θ))``: a bound that is the same for both directions of a move, so
    a test that switches rules on it does so for both directions alike."""
    forward = variance_bound(theta, theta_new)
    backward = variance_bound(theta_new, theta)
    if forward is None or backward is None:
        return None
    return max(float(forward), float(backward))


def _scaled(bound, divisor):
    return None if bound is None else float(bound) / divisor


def mh_step(rng, state, kernel, step_size):
    """One MH step: propose, then let the acceptance test decide.

    Parameters
    ----------
    rng : None, int or numpy.random.Generator
    state : MHState
    kernel : MHKernel
    step_size : float > 0
        ε: the proposal covariance is ``ε² M``.

    Returns
    -------
    (MHState, MHInfo)

    Examples
    --------
    >>> import numpy as np
    >>> class Gauss:
    ...     n_data = 100
    ...     x = np.zeros(100)
    ...     def log_prior(self, th): return 0.0
    ...     def loglik_terms(self, th, idx): return -0.5 * (self.x[idx] - th[0]) ** 2
    >>> kernel = build_kernel(Gauss(), dim=1, test="metropolis")
    >>> state, info = mh_step(0, init_state(kernel, [0.0]), kernel, 0.1)
    >>> info.n_evaluations
    100
    """
    rng = as_generator(rng)
    proposal = kernel.proposal
    gradient_evaluations = 0
    if proposal.uses_gradient_function:
        def grad_fn(theta):
            nonlocal gradient_evaluations
            grad, n_evaluations = _log_pi_grad(kernel, theta)
            gradient_evaluations += n_evaluations
            return grad

        theta_new, aux = proposal.propose(rng, state, step_size, kernel.chol, grad_fn)
    else:
        theta_new, aux = proposal.propose(rng, state, step_size, kernel.chol)
    theta_new = np.asarray(theta_new, dtype=np.float64)
    reject = MHInfo(False, gradient_evaluations, 0, step_size, 0.0, kernel.kind.rule)
    # NaN/inf proposals (e.g. an overflowing drift) are rejected before touching data.
    if theta_new.shape != state.theta.shape or not np.isfinite(theta_new).all():
        return state, reject
    log_prior_new = float(kernel.target.log_prior(theta_new))
    if not log_prior_new > -math.inf:  # -inf or NaN: outside the support
        return state, reject
    rest = log_prior_new - state.log_prior
    grad_new = None
    if proposal.uses_gradient:
        grad_new, n_evaluations = _log_pi_grad(kernel, theta_new)
        gradient_evaluations += n_evaluations
        if not np.isfinite(grad_new).all():
            return state, reject._replace(n_evaluations=gradient_evaluations)
    if proposal.log_q_ratio is not None:
        rest += float(proposal.log_q_ratio(state, theta_new, grad_new, aux, step_size,
                                           kernel.chol))
    if kernel.control_variates:
        rest += kernel.proxy.sum_diff(state.theta, theta_new) / kernel.temperature
    terms, bounds = _log_ratio_terms(kernel, state.theta, theta_new)
    info = kernel.test(terms, int(kernel.target.n_data), rest, rng, **bounds)
    rule = getattr(info, "rule", None) or kernel.kind.rule
    out = MHInfo(bool(info.accepted), int(info.n_evaluations) + gradient_evaluations,
                 int(info.batch_size), step_size,
                 _acceptance_probability(rule, info.log_ratio, info.accepted), rule,
                 float(info.log_ratio))
    if info.accepted:
        return MHState(theta_new, log_prior_new, grad_new), out
    return state, out


def _acceptance_probability(rule, log_ratio, accepted):
    if math.isnan(log_ratio):
        return float(accepted)
    if rule == "barker":
        return float(special.expit(log_ratio))
    return math.exp(min(0.0, log_ratio))


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
    test, proposal, control_variates, reference, proxy, temperature, preconditioner,
    batch_size, delta, test_options
        See :func:`build_kernel`.
    step_size, target_accept
        See :func:`run_kernel`.
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
    theta0 = np.asarray(theta0, dtype=np.float64)
    if theta0.ndim != 1:
        raise ValueError(f"theta0 must be a 1-D array, got shape {theta0.shape}")
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
               target_accept=None, random_state=None, compiled=None, callback=None):
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

    A chain continues where a run stopped when it is run again from the run's last draw, with
    ``n_warmup=0``, the run's frozen ``step_size`` and the same generator: the step's state is
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
        Whether the chain runs as one compiled loop (:mod:`._glm_chain`: a logistic
        :class:`GLMTarget` with a built-in proposal and the test ``metropolis``, ``barker`` or
        ``bounded_barker``) or step by step through :func:`mh_step`. ``None`` compiles when the
        kernel allows it; ``True`` raises ``ValueError`` when it does not. Both run the same
        law on the same random stream.
    callback : callable or None, default None
        Called as ``callback(k)`` about every 0.2 s with the number ``k`` of steps (warm-up
        and sampling) finished since its previous call, e.g. to advance a progress bar. It
        does not change the draws.

    Returns
    -------
    MHResult
        ``n_evaluations`` counts the steps' data terms only.
    """
    n_draws = check_int(n_draws, "n_draws", low=1)
    n_warmup = check_int(n_warmup, "n_warmup", low=0)
    rng = as_generator(random_state)
    state = init_state(kernel, theta0)
    d = state.theta.size
    proposal = kernel.proposal
    if step_size is None:
        eps = float(proposal.default_step_size(d))
    else:
        eps = check_positive(step_size, "step_size")
    if target_accept is None:
        metropolis_rate, barker_rate = proposal.target_accept
        targets = {"metropolis": metropolis_rate, "barker": barker_rate}
    else:
        target_accept = check_open_unit_interval(target_accept, "target_accept")
        targets = {"metropolis": target_accept, "barker": target_accept}
    target_rates = (targets["metropolis"], targets["barker"])
    laws = None if compiled is False else compiled_laws(kernel)
    if compiled and laws is None:
        raise ValueError(
            "compiled=True needs a logistic GLMTarget, a built-in proposal and the test "
            "'metropolis', 'barker' or 'bounded_barker'"
        )
    if laws is not None:
        rate = np.array([targets["metropolis"], targets["barker"]])
        draws, accepted, batch_sizes, evaluations, probabilities, total, eps = run_glm_chain(
            kernel, laws, state.theta, n_draws=n_draws, n_warmup=n_warmup, step_size=eps,
            max_step_size=proposal.max_step_size, targets=rate, rng=rng, callback=callback)
        return MHResult(draws, accepted, batch_sizes, evaluations, total, eps, probabilities)
    total_evaluations = 0
    adaptation = DualAveraging(eps, targets[kernel.kind.rule],
                               max_step_size=getattr(proposal, "max_step_size", math.inf))
    restarts = set(restart_steps(n_warmup).tolist())
    report = _Reporter(callback)
    for i in range(n_warmup):
        if i in restarts:
            adaptation.restart()
        state, info = mh_step(rng, state, kernel, adaptation.step_size)
        total_evaluations += info.n_evaluations
        statistic, rule = adaptation_statistic(info.log_ratio, info.accepted,
                                               info.rule == "barker")
        adaptation.update(statistic, target_rates[rule])
        report.step()
    if n_warmup:
        eps = adaptation.final_step_size
    draws = np.empty((n_draws, d))
    accepted = np.zeros(n_draws, dtype=bool)
    batch_sizes = np.zeros(n_draws, dtype=np.int64)
    evaluations = np.zeros(n_draws, dtype=np.int64)
    probabilities = np.zeros(n_draws)
    for i in range(n_draws):
        state, info = mh_step(rng, state, kernel, eps)
        draws[i] = state.theta
        accepted[i] = info.accepted
        batch_sizes[i] = info.batch_size
        evaluations[i] = info.n_evaluations
        probabilities[i] = info.acceptance_probability
        report.step()
    report.flush()
    total_evaluations += int(evaluations.sum())
    return MHResult(draws, accepted, batch_sizes, evaluations, int(total_evaluations), float(eps),
                    probabilities)


class _Reporter:
    """Calls ``callback(k)`` with the steps finished since its previous call, about every
    :data:`_REPORT_SECONDS` (a no-op without a callback)."""

    __slots__ = ("callback", "last", "pending")

    def __init__(self, callback):
        self.callback = callback
        self.pending = 0
        self.last = time.perf_counter()

    def step(self):
        if self.callback is None:
            return
        self.pending += 1
        now = time.perf_counter()
        if now - self.last >= _REPORT_SECONDS:
            self.callback(self.pending)
            self.pending, self.last = 0, now

    def flush(self):
        if self.callback is not None and self.pending:
            self.callback(self.pending)
            self.pending = 0


#: Seconds between two progress reports of an interpreted chain.
_REPORT_SECONDS = 0.2
