"""Metropolis–Hastings kernels with an injectable acceptance test, and their step.

The kernel is "proposal + acceptance test" (the shape of BlackJAX's ``rmh`` and emcee's
``MHMove``): :func:`build_kernel` fixes the static configuration (target, test, proposal,
preconditioner, control variates, temperature) in a :class:`MHKernel`; :func:`mh_step` is a pure
function ``mh_step(rng, state, kernel, step_size) -> (state, info)`` over the small
:class:`MHState`; :func:`~._chain.sample_mh` and :func:`~._chain.run_kernel` run warm-up
(step-size adaptation) and sampling in the chain driver of :mod:`._chain`.

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
from typing import NamedTuple

import numpy as np
from scipy import linalg

from ..._utils import (
    as_float_array,
    as_generator,
    check_int,
    check_open_unit_interval,
    check_options,
    check_positive,
)
from ._acceptance import acceptance_kind, acceptance_probability
from ._control_variates import TaylorProxy, check_derivative_target, check_proxy
from ._proposals import get_proposal
from ._registry import get_acceptance_test

__all__ = ["MHInfo", "MHKernel", "MHState", "build_kernel", "init_state", "mh_step"]


class MHState(NamedTuple):
    """State of an MH chain.

    The parameters are the tuple's fields, also read as the attributes of the same names.

    Parameters
    ----------
    theta : ndarray of shape (d,)
        The current state θ.
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

    The parameters are the tuple's fields, also read as the attributes of the same names.

    Parameters
    ----------
    accepted : bool
        Whether the proposal was accepted.
    n_evaluations : int
        Data terms evaluated by the acceptance test (0 for a proposal rejected before any data,
        e.g. a NaN proposal or one outside the prior's support).
    batch_size : int
        Size of the minibatch the decision was based on.
    step_size : float
        The step size ε of the proposal.
    acceptance_probability : float, default nan
        The acceptance probability of the rule that decided, at the test's estimate of Δ
        (``min(1, e^Δ̂)`` or ``expit(Δ̂)``; the 0/1 decision when the test reports no
        estimate).
    rule : {"metropolis", "barker"}, default "metropolis"
        The rule that decided (the test's kind unless the test reports otherwise).
    log_ratio : float, default nan
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

    The parameters are the tuple's fields, also read as the attributes of the same names.

    Parameters
    ----------
    target : object
        The subsampled target (see :class:`sksubsample.algorithms.SubsampledTarget`).
    test : callable
        The acceptance test.
    proposal : Proposal
        The proposal.
    proxy : TaylorProxy or None
        The Taylor proxies (control variates and gradient-based proposals need them), or None.
    control_variates : bool
        Whether the test sees the residuals of the proxies (their sum added back exactly).
    temperature : float
        The temperature T dividing the log-likelihood.
    chol : ndarray of shape (d, d)
        Lower Cholesky factor ``L`` of the preconditioner ``M = L Lᵀ``.
    kind : AcceptanceKind
        The test's kind (Metropolis- or Barker-type, exact or not).
    exact_gradient : bool, default False
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
    m = as_float_array(preconditioner, "preconditioner", finite=False)
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
                                  **check_options(test_options, "test_options"))
    proxy = check_proxy(proxy)
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


def _check_kernel(kernel):
    if not isinstance(kernel, MHKernel):
        raise TypeError(f"kernel must be an MHKernel built by build_kernel, got "
                        f"{type(kernel).__name__}")


def init_state(kernel, theta, *, gradient=True):
    """The chain state at ``theta``.

    Parameters
    ----------
    kernel : MHKernel
        The kernel whose chain starts at ``theta``.
    theta : array_like of shape (d,)
        The initial state (copied).
    gradient : bool, default True
        Whether to compute the state's gradient (a compiled chain computes its own).

    Returns
    -------
    MHState
        Its ``grad`` is the gradient of ``log π_T`` at ``theta`` when the proposal uses one and
        ``gradient`` is true, else None.

    Raises
    ------
    ValueError
        If ``theta`` is not finite or has zero prior density.
    """
    _check_kernel(kernel)
    try:
        theta = np.array(theta, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise TypeError(f"theta must be an array of real numbers, got {theta!r}") from None
    if theta.shape != (kernel.chol.shape[0],) or not np.isfinite(theta).all():
        raise ValueError(f"theta must be a finite array of shape ({kernel.chol.shape[0]},)")
    log_prior = float(kernel.target.log_prior(theta))
    if not math.isfinite(log_prior):
        raise ValueError(f"log_prior(theta) must be finite at the initial state, got {log_prior}")
    uses_gradient = gradient and kernel.proposal.uses_gradient
    grad = _log_pi_grad(kernel, theta)[0] if uses_gradient else None
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


#: What a test's answer must carry (the fields of :class:`~._acceptance.AcceptInfo` a step reads).
_INFO_FIELDS = ("accepted", "n_evaluations", "batch_size", "log_ratio")


def _checked_info(info):
    """A test's answer, or a ``TypeError`` that says what a test must return (a test callable
    that returns a bare decision would otherwise fail on a missing attribute)."""
    if not all(hasattr(info, name) for name in _INFO_FIELDS):
        raise TypeError(
            f"an acceptance test must return an AcceptInfo(accepted, n_evaluations, batch_size, "
            f"log_ratio, exact, n_rounds) (sksubsample.algorithms.AcceptInfo), got "
            f"{type(info).__name__}: {info!r}")
    return info


def mh_step(rng, state, kernel, step_size, *, path_length=None, trajectory=None):
    """One MH step: propose, then let the acceptance test decide.

    Parameters
    ----------
    rng : None, int or numpy.random.Generator
    state : MHState
    kernel : MHKernel
    step_size : float > 0
        ε: the proposal covariance is ``ε² M``.
    path_length : float > 0 or None, default None
        The integration time of a proposal that has one (``proposal.path_length`` not None,
        e.g. ``"hamiltonian"``); None for the proposal's initial one.
    trajectory : ndarray of shape (6, d) or None, default None
        Receives the trajectory record such a proposal returns as its ``aux``
        (:func:`~._proposals.hamiltonian_propose`), for the adaptation of its length.

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
    _check_kernel(kernel)
    if not isinstance(state, MHState):
        raise TypeError(f"state must be an MHState (from init_state or a previous mh_step), "
                        f"got {type(state).__name__}")
    # +inf is a step like any other: its proposal is rejected as not finite
    step_size = check_positive(step_size, "step_size", allow_inf=True)
    proposal = kernel.proposal
    options = {}
    if getattr(proposal, "path_length", None) is not None:
        options["path_length"] = check_positive(
            proposal.path_length if path_length is None else path_length, "path_length")
    state, info, aux = _step(rng, state, kernel, step_size, options)
    if trajectory is not None and isinstance(aux, np.ndarray) and aux.shape == trajectory.shape:
        trajectory[...] = aux
    return state, info


def _step(rng, state, kernel, step_size, options):
    """:func:`mh_step` after its checks; also returns the proposal's ``aux``."""
    proposal = kernel.proposal
    gradient_evaluations = 0
    if proposal.uses_gradient_function:
        def grad_fn(theta):
            nonlocal gradient_evaluations
            grad, n_evaluations = _log_pi_grad(kernel, theta)
            gradient_evaluations += n_evaluations
            return grad

        theta_new, aux = proposal.propose(rng, state, step_size, kernel.chol, grad_fn,
                                          **options)
    else:
        theta_new, aux = proposal.propose(rng, state, step_size, kernel.chol, **options)
    theta_new = np.asarray(theta_new, dtype=np.float64)
    reject = MHInfo(False, gradient_evaluations, 0, step_size, 0.0, kernel.kind.rule)
    # NaN/inf proposals (e.g. an overflowing drift) are rejected before touching data.
    if theta_new.shape != state.theta.shape or not np.isfinite(theta_new).all():
        return state, reject, aux
    log_prior_new = float(kernel.target.log_prior(theta_new))
    if not log_prior_new > -math.inf:  # -inf or NaN: outside the support
        return state, reject, aux
    rest = log_prior_new - state.log_prior
    grad_new = None
    if proposal.uses_gradient:
        grad_new, n_evaluations = _log_pi_grad(kernel, theta_new)
        gradient_evaluations += n_evaluations
        if not np.isfinite(grad_new).all():
            return state, reject._replace(n_evaluations=gradient_evaluations), aux
    if proposal.log_q_ratio is not None:
        rest += float(proposal.log_q_ratio(state, theta_new, grad_new, aux, step_size,
                                           kernel.chol))
    if kernel.control_variates:
        rest += kernel.proxy.sum_diff(state.theta, theta_new) / kernel.temperature
    terms, bounds = _log_ratio_terms(kernel, state.theta, theta_new)
    info = _checked_info(kernel.test(terms, int(kernel.target.n_data), rest, rng, **bounds))
    rule = getattr(info, "rule", None) or kernel.kind.rule
    out = MHInfo(bool(info.accepted), int(info.n_evaluations) + gradient_evaluations,
                 int(info.batch_size), step_size,
                 acceptance_probability(rule == "barker", float(info.log_ratio),
                                        bool(info.accepted)), rule,
                 float(info.log_ratio))
    if info.accepted:
        return MHState(theta_new, log_prior_new, grad_new), out, aux
    return state, out, aux

