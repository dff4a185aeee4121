"""Metropolis–Hastings kernels with an injectable acceptance test, and a chain driver.

The kernel is "proposal + acceptance test" (the shape of BlackJAX's ``rmh`` and emcee's
``MHMove``): :func:`build_kernel` fixes the static configuration (target, test, proposal,
preconditioner, control variates, temperature) in a :class:`MHKernel`; :func:`mh_step` is a pure
function ``mh_step(rng, state, kernel, step_size) -> (state, info)`` over the small
:class:`MHState`; :func:`sample_mh` runs warm-up (step-size adaptation) and sampling.

Targets
-------
A target exposes ``n_data``, ``log_prior(theta) -> float`` and
``loglik_terms(theta, idx) -> (len(idx),)`` (DESIGN.md). Optional methods:

* ``grad_terms``, ``hess_terms`` (and optionally ``taylor_diff_terms``): per-datum
  derivatives, needed for control variates and for the Langevin proposal
  (see :mod:`sksubsample.algorithms._control_variates`);
* ``grad_log_prior(theta)``: needed by the Langevin proposal; ``hess_log_prior(theta)``: used
  for the default (Laplace) preconditioner;
* ``loglik_ratio_bound(theta, theta_new)``: a bound ``C >= max_i |ℓ_i(θ') - ℓ_i(θ)|``, passed
  (divided by the temperature) to the tests that need it when control variates are off
  (``adaptive_subsampling``, ``racing-ebs``); otherwise those tests compute it from all N terms.

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
Roberts (2021) for the target acceptance rates; Andrieu & Thoms (2008) for the Robbins–Monro
step-size adaptation.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import linalg

from .._utils import as_generator, check_int, check_open_unit_interval, check_positive
from ._acceptance import get_acceptance_test
from ._control_variates import TaylorProxy, check_derivative_target

__all__ = ["MHInfo", "MHKernel", "MHResult", "MHState", "build_kernel", "init_state",
           "mh_step", "sample_mh"]

_PROPOSALS = ("random-walk", "langevin")
_BARKER_TESTS = ("barker", "minibatch_barker")


class MHState(NamedTuple):
    """State of an MH chain.

    Attributes
    ----------
    theta : ndarray of shape (d,)
    log_prior : float
        ``log p0(theta)``.
    grad : ndarray of shape (d,) or None
        Proxy gradient of ``log π_T`` at ``theta`` (Langevin proposal only).
    """

    theta: np.ndarray
    log_prior: float
    grad: np.ndarray | None


class MHInfo(NamedTuple):
    """What one MH step did.

    Attributes
    ----------
    accepted : bool
    n_evaluated : int
        Data terms evaluated by the acceptance test (0 for a proposal rejected before any data,
        e.g. a NaN proposal or one outside the prior's support).
    batch_size : int
        Size of the minibatch the decision was based on.
    step_size : float
    """

    accepted: bool
    n_evaluated: int
    batch_size: int
    step_size: float


class MHKernel(NamedTuple):
    """Static configuration of an MH kernel (built by :func:`build_kernel`)."""

    target: object
    test: object
    proposal: str
    proxy: TaylorProxy | None
    control_variates: bool
    temperature: float
    chol: np.ndarray
    cov: np.ndarray
    barker_type: bool


class MHResult(NamedTuple):
    """Output of :func:`sample_mh`.

    Attributes
    ----------
    draws : ndarray of shape (n_samples, d)
    acceptance_rate : float
        Over the sampling phase.
    mean_batch_size : float
        Mean decision minibatch size over the sampling phase (steps rejected before touching
        data, e.g. proposals outside the prior's support, count as 0).
    n_data_evaluations : int
        Data terms evaluated by the acceptance tests, warm-up and sampling together.
    step_size : float
        The frozen step size used after warm-up.
    accepted : ndarray of bool, shape (n_samples,)
    batch_sizes : ndarray of int, shape (n_samples,)
    n_evaluated : ndarray of int, shape (n_samples,)
    n_setup_evaluations : int
        Terms touched once to build the control-variate proxy (N if built here, else 0).
    """

    draws: np.ndarray
    acceptance_rate: float
    mean_batch_size: float
    n_data_evaluations: int
    step_size: float
    accepted: np.ndarray
    batch_sizes: np.ndarray
    n_evaluated: np.ndarray
    n_setup_evaluations: int


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
                 preconditioner="auto", batch_size=None, delta=None, test_options=None):
    """Fix the static configuration of an MH kernel.

    Parameters
    ----------
    target : object
        ``n_data``, ``log_prior``, ``loglik_terms`` (+ derivatives for control variates and
        Langevin; see the module docstring).
    dim : int
        Dimension d of θ.
    test : str or callable, default "minibatch_barker"
        An acceptance test name (see :func:`get_acceptance_test`) or a test callable.
    proposal : {"random-walk", "langevin"}, default "random-walk"
        ``"random-walk"``: ``θ' = θ + ε L ξ``. ``"langevin"``:
        ``θ' = θ + (ε²/2) M ∇̃ log π_T(θ) + ε L ξ`` with ``M = L Lᵀ`` and ``∇̃`` the gradient of
        the Taylor proxy (exact q ratio, no data).
    control_variates : bool, default False
        Let the test see residuals of the Taylor proxies and add their sum back exactly.
    reference : array_like of shape (d,), optional
        Expansion point of the proxies (needed for control variates or Langevin unless
        ``proxy`` is given).
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
    >>> kernel.proposal
    'random-walk'
    """
    n_data = _check_target(target)
    d = check_int(dim, "dim", low=1)
    if proposal not in _PROPOSALS:
        raise ValueError(f"proposal must be one of {_PROPOSALS}, got {proposal!r}")
    if not isinstance(control_variates, bool):
        raise TypeError(f"control_variates must be a bool, got {type(control_variates)}")
    temperature = check_positive(temperature, "temperature")
    options = dict(test_options or {})
    if batch_size is not None:
        batch_size = check_int(batch_size, "batch_size", low=2, high=n_data)
    if delta is not None:
        delta = check_open_unit_interval(delta, "delta")
    test_fn = get_acceptance_test(test, batch_size=batch_size, delta=delta, **options)
    name = test if isinstance(test, str) else getattr(test, "name", "")
    needs_proxy = control_variates or proposal == "langevin"
    if proxy is None and needs_proxy:
        if reference is None:
            raise ValueError(
                "control_variates=True and proposal='langevin' need a reference point "
                "(e.g. the MAP) or a prebuilt proxy"
            )
        check_derivative_target(target)
        proxy = TaylorProxy(target, reference)
    if proxy is not None and proxy.reference.shape != (d,):
        raise ValueError(f"the proxy's reference has shape {proxy.reference.shape}, not ({d},)")
    if proposal == "langevin" and not hasattr(target, "grad_log_prior"):
        raise TypeError("proposal='langevin' needs target.grad_log_prior(theta)")
    chol = _preconditioner_cholesky(preconditioner, d, proxy, target, temperature)
    return MHKernel(target, test_fn, proposal, proxy, control_variates, temperature, chol,
                    chol @ chol.T, name in _BARKER_TESTS)


def _log_pi_grad(kernel, theta):
    return kernel.target.grad_log_prior(theta) + kernel.proxy.grad(theta) / kernel.temperature


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
    grad = _log_pi_grad(kernel, theta) if kernel.proposal == "langevin" else None
    return MHState(theta, log_prior, grad)


def _langevin_log_q(kernel, to, frm, grad_frm, step_size):
    """log q(to | frm) up to a constant that cancels in the ratio (reference implementation;
    :func:`mh_step` uses the equivalent closed form of the ratio, see there)."""
    mean = frm + 0.5 * step_size * step_size * (kernel.cov @ grad_frm)
    z = linalg.solve_triangular(kernel.chol, to - mean, lower=True)
    return -0.5 * float(z @ z) / (step_size * step_size)


def _langevin_log_q_ratio(chol, xi, drift, grad_new, step_size):
    """``log q(θ|θ') - log q(θ'|θ)`` of the Langevin proposal, without a triangular solve.

    With ``θ' = θ + ε L (ξ + drift)``, ``drift = (ε/2) Lᵀ g``: ``L⁻¹(θ' - mean(θ)) = ε ξ`` and
    ``L⁻¹(θ - mean(θ')) = -ε (ξ + drift + (ε/2) Lᵀ g')``, so the ratio is
    ``½|ξ|² - ½|ξ + drift + (ε/2) Lᵀ g'|²``: the value of
    ``_langevin_log_q(θ, θ') - _langevin_log_q(θ', θ)`` up to rounding, for two matrix-vector
    products instead of two solves (the solves' input checks dominated a step's cost).
    """
    back = xi + drift + (0.5 * step_size) * (chol.T @ grad_new)
    return 0.5 * (float(xi @ xi) - float(back @ back))


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
    >>> info.n_evaluated
    100
    """
    rng = as_generator(rng)
    target = kernel.target
    theta = state.theta
    chol = kernel.chol
    xi = rng.standard_normal(theta.size)
    langevin = kernel.proposal == "langevin"
    if langevin:
        # θ' = θ + (ε²/2) M g + ε L ξ = θ + ε L (ξ + (ε/2) Lᵀ g), with M = L Lᵀ and g the proxy
        # gradient at θ.
        half_eps = 0.5 * step_size
        drift = half_eps * (chol.T @ state.grad)
        theta_new = theta + step_size * (chol @ (xi + drift))
    else:
        theta_new = theta + step_size * (chol @ xi)
    reject = MHInfo(False, 0, 0, step_size)
    # NaN/inf proposals (e.g. an overflowing drift) are rejected before touching data.
    if not np.isfinite(theta_new).all():
        return state, reject
    log_prior_new = float(target.log_prior(theta_new))
    if not log_prior_new > -math.inf:  # -inf or NaN: outside the support
        return state, reject
    rest = log_prior_new - state.log_prior
    grad_new = None
    if langevin:
        grad_new = _log_pi_grad(kernel, theta_new)
        if not np.isfinite(grad_new).all():
            return state, reject
        rest += _langevin_log_q_ratio(chol, xi, drift, grad_new, step_size)
    temperature = kernel.temperature
    proxy = kernel.proxy if kernel.control_variates else None
    term_bound = None
    if proxy is not None:
        rest += proxy.sum_diff(theta, theta_new) / temperature
        if temperature == 1.0:
            def log_ratio_terms(idx):
                return proxy.residual_terms(theta, theta_new, idx)
        else:
            def log_ratio_terms(idx):
                return proxy.residual_terms(theta, theta_new, idx) / temperature
    else:
        if hasattr(target, "loglik_ratio_bound"):
            term_bound = float(target.loglik_ratio_bound(theta, theta_new)) / temperature

        def log_ratio_terms(idx):
            return (np.asarray(target.loglik_terms(theta_new, idx), dtype=np.float64)
                    - np.asarray(target.loglik_terms(theta, idx), dtype=np.float64)) / temperature

    info = kernel.test(log_ratio_terms, int(target.n_data), rest, rng, term_bound=term_bound)
    out = MHInfo(bool(info.accepted), int(info.n_evaluated), int(info.batch_size), step_size)
    if info.accepted:
        return MHState(theta_new, log_prior_new, grad_new), out
    return state, out


def _default_step_size(kernel, d):
    # Optimal scalings for a preconditioner close to the posterior covariance: 2.38 / sqrt(d)
    # for random walks, ~1.65 d^{-1/6} for MALA (Roberts & Rosenthal 2001); warm-up adapts.
    if kernel.proposal == "langevin":
        return 1.65 * d ** (-1.0 / 6.0)
    return 2.38 / math.sqrt(d)


def _default_target_accept(kernel):
    if kernel.barker_type:
        # Barker's acceptance tends to 1/2 as the step shrinks and its optimal random-walk
        # rate is 0.158 (Agrawal et al. 2021); 0.4 for Langevin is a heuristic below 1/2.
        return 0.4 if kernel.proposal == "langevin" else 0.158
    return 0.574 if kernel.proposal == "langevin" else 0.234


def sample_mh(target, theta0, *, n_samples=1000, n_warmup=500, test="minibatch_barker",
              proposal="random-walk", control_variates=False, reference=None, proxy=None,
              temperature=1.0, step_size=None, preconditioner="auto", target_accept=None,
              batch_size=None, delta=None, test_options=None, random_state=None):
    """Run one MH chain: warm-up with step-size adaptation, then ``n_samples`` draws.

    During warm-up ``log ε`` follows the Robbins–Monro recursion
    ``log ε ← log ε + (accepted - target_accept) / t^0.6``; afterwards ε is frozen at the
    geometric mean of its values over the second half of the warm-up, so the sampling phase is
    a time-homogeneous Markov chain (warm-up draws are discarded). ``n_warmup=0`` keeps
    ``step_size`` as given.

    Parameters
    ----------
    target : object
        See the module docstring.
    theta0 : array_like of shape (d,)
        Initial state (finite, inside the prior's support).
    n_samples : int >= 1, default 1000
    n_warmup : int >= 0, default 500
    test, proposal, control_variates, reference, proxy, temperature, preconditioner,
    batch_size, delta, test_options
        See :func:`build_kernel`.
    step_size : float > 0, optional
        Initial ε (defaults to 2.38/sqrt(d) for random walks and 1.65 d^{-1/6} for Langevin,
        relative to the preconditioner).
    target_accept : float in (0, 1), optional
        Defaults: random walk 0.234 (Metropolis-type tests) / 0.158 (Barker-type); Langevin
        0.574 / 0.4.
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
    >>> res = sample_mh(Gauss(1000), [1.0], n_samples=200, n_warmup=100, test="metropolis",
    ...                 random_state=0)
    >>> res.draws.shape
    (200, 1)
    """
    theta0 = np.asarray(theta0, dtype=np.float64)
    if theta0.ndim != 1:
        raise ValueError(f"theta0 must be a 1-D array, got shape {theta0.shape}")
    n_samples = check_int(n_samples, "n_samples", low=1)
    n_warmup = check_int(n_warmup, "n_warmup", low=0)
    rng = as_generator(random_state)
    kernel = build_kernel(target, dim=theta0.size, test=test, proposal=proposal,
                          control_variates=control_variates, reference=reference, proxy=proxy,
                          temperature=temperature, preconditioner=preconditioner,
                          batch_size=batch_size, delta=delta, test_options=test_options)
    built_here = kernel.proxy is not None and proxy is None
    n_setup = kernel.proxy.n_setup_evaluations if built_here else 0
    d = theta0.size
    eps = _default_step_size(kernel, d) if step_size is None else check_positive(
        step_size, "step_size")
    if target_accept is None:
        target_accept = _default_target_accept(kernel)
    else:
        target_accept = check_open_unit_interval(target_accept, "target_accept")
    state = init_state(kernel, theta0)
    total_evaluations = 0
    log_eps = math.log(eps)
    tail = []
    for t in range(1, n_warmup + 1):
        state, info = mh_step(rng, state, kernel, math.exp(log_eps))
        total_evaluations += info.n_evaluated
        log_eps += (float(info.accepted) - target_accept) / t**0.6
        if t > n_warmup // 2:
            tail.append(log_eps)
    if tail:
        eps = math.exp(float(np.mean(tail)))
    draws = np.empty((n_samples, d))
    accepted = np.zeros(n_samples, dtype=bool)
    batch_sizes = np.zeros(n_samples, dtype=np.int64)
    n_evaluated = np.zeros(n_samples, dtype=np.int64)
    for i in range(n_samples):
        state, info = mh_step(rng, state, kernel, eps)
        draws[i] = state.theta
        accepted[i] = info.accepted
        batch_sizes[i] = info.batch_size
        n_evaluated[i] = info.n_evaluated
    total_evaluations += int(n_evaluated.sum())
    return MHResult(draws, float(accepted.mean()), float(batch_sizes.mean()),
                    int(total_evaluations), float(eps), accepted, batch_sizes, n_evaluated,
                    int(n_setup))

