"""Carlin–Chib model selection over ARCH orders: Laplace pseudo-priors and the compiled sweep.

The state holds the order ``q`` and a parameter vector ``x^(j)`` (softplus coordinates) for
*every* candidate order ``j`` (Carlin & Chib 1995). Given ``q`` the selected model's parameters
have their posterior, the others their pseudo-prior ``g_j`` (here the Laplace approximation of
``p(x^(j) | q = j, r)`` at the MAP, Appendix C.2), so the full conditional of ``q`` is

``p(q = j | x) ∝ π̃_j p0_j(x^(j)) Π_t p(r_t | x^(j), j) / g_j(x^(j))``    (Eq. 25)

and the chain never changes dimension. One sweep composes three steps:

1. ``q | x`` by the Gibbs step of :func:`sksubsample.algorithms.sample_discrete`: the
   Gumbel-max race of Alg. 1 over the orders on the per-term log-likelihoods (``"racing"``) or
   the exact argmax (``"exact"``);
2. ``x^(q) | q`` by one MH step with the SGLD-type proposal of :mod:`._sgld` and the racing MH
   test of :func:`sksubsample.algorithms.racing` (Eq. 12) or the exact Metropolis test;
3. ``x^(j) ~ g_j`` independently for ``j ≠ q``.

Control variates (§3.4): with ``method="racing"`` the factor of order ``j`` at term ``t`` is the
residual ``ℓ_t(x^(j)) - h_{j,t}(x^(j))`` of a second-order Taylor proxy around the order's MAP,
and the proxies' exact sum enters the state's prior term, so the conditionals are unchanged
while the racing rewards' variance falls by orders of magnitude. The exact method sums the raw
terms (the same numbers up to rounding, at a lower cost per term).

The sweeps are compiled. The exact sweep (:func:`_sweep_exact`) needs no race. The racing sweep
(:func:`_sweep_compiled`) runs the races of :func:`sksubsample.algorithms.race` on the laws of
:mod:`sksubsample.algorithms.bandits._kernels` (index draws, accumulation, decisions) with the
rewards of :func:`gibbs_reward` and :func:`mh_reward` computed inline, so that the whole chain
is one compiled loop cached on disk; :func:`_sweep_racing` is the same sweep through the
public functions (``sample_discrete`` and ``race`` on
:class:`~sksubsample.algorithms.CompiledRewards`), which the test suite compares it with. The
per-term quantities come from
:mod:`._arch_kernels`, and the random numbers are drawn from the chain's generator in the
order of the interpreted composition of the package's pieces, :func:`reference_sweep`
(``sample_discrete``, ``mh_step`` with :func:`~._sgld.sgld_proposal` and the ``racing`` or
``metropolis`` test): for the same generator state all give the same sweep, which the test
suite checks. One difference is not of law: the exact MH test reuses ``Σ_t ℓ_t(x^(q))`` from
the exact Gibbs step of the same sweep instead of summing the ratio terms (the same number up
to rounding, at half the evaluations).

During warm-up (:func:`adapt_chain`) each chain adapts the adjusted prior ``π̃`` by
Wang–Landau: after each draw of ``q``, ``log π̃_q`` decreases by ``γ_t = 1 / (1 + t/100)``,
which drives ``p̃(q | r) ∝ π̃_q p(r | q)`` towards uniform so that every order is visited. The
chains' adapted ``log π̃`` (and step sizes) are then averaged and fixed, so every sampling chain
(:func:`sample_chain`) is time-homogeneous with the *same* stationary distribution (which is
what lets R-hat compare chains), and ``p(q | r) ∝ π_q p̃(q | r) / π̃_q``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import linalg, optimize, special

from .._base import ChainResult
from ..algorithms._numba import next_uint64, njit, read_only
from ..algorithms.bandits import _kernels as rk
from ..algorithms.bandits._bounds import b_normal
from ..algorithms.bandits._discrete import sample_discrete
from ..algorithms.bandits._race import CompiledRewards, race
from ..algorithms.mh._kernel import build_kernel, init_state, mh_step
from . import _arch_kernels as kernels
from ._arch_kernels import gibbs_reward, mh_reward
from ._sgld import SGLD_TARGET_ACCEPT, sgld_proposal, sgld_step_size

__all__ = ["Adaptation", "ChainModel", "ChainState", "LaplaceFit", "adapt_chain", "build_model",
           "continue_chain", "laplace_fit", "race_checks", "reference_sweep", "reward_spreads",
           "sample_chain"]

_LOG_2PI = math.log(2.0 * math.pi)


class LaplaceFit(NamedTuple):
    """MAP and Laplace approximation of one order's posterior in softplus coordinates.

    Attributes
    ----------
    mean : ndarray of shape (d,)
        The MAP ``x̂``.
    cov : ndarray of shape (d, d)
        ``(-∇² log p(x̂ | r))⁻¹``.
    chol : ndarray of shape (d, d)
        Lower Cholesky factor of ``cov``.
    log_evidence : float
        Laplace estimate ``log p(r, x̂) + d/2 log 2π + ½ log |cov|`` of ``log p(r | q)``.
    n_iter : int
        Iterations of the optimiser.
    """

    mean: np.ndarray
    cov: np.ndarray
    chol: np.ndarray
    log_evidence: float
    n_iter: int


def laplace_fit(target, x0):
    """MAP of ``target``'s posterior by a trust-region Newton method, and its Laplace Gaussian.

    Parameters
    ----------
    target : ARCHTarget
    x0 : ndarray of shape (d,)
        Starting point.

    Returns
    -------
    LaplaceFit

    Raises
    ------
    RuntimeError
        When the optimiser fails or the Hessian at the optimum is not negative definite.
    """
    def sums(x):
        loglik, grad, hess = target.derivative_sums(x)
        return (-(loglik + target.log_prior(x)), -(grad + target.grad_log_prior(x)),
                -(hess + target.hess_log_prior(x)))

    res = optimize.minimize(lambda x: sums(x)[0], x0, jac=lambda x: sums(x)[1],
                            hess=lambda x: sums(x)[2], method="trust-exact",
                            options={"gtol": 1e-8, "maxiter": 500})
    f, _, h = sums(res.x)
    if not (np.isfinite(f) and np.all(np.isfinite(h))):
        raise RuntimeError(f"MAP search of ARCH({target.order}) failed: {res.message}")
    try:
        chol_prec = linalg.cholesky(0.5 * (h + h.T), lower=True)
    except linalg.LinAlgError as exc:
        raise RuntimeError(
            f"the posterior of ARCH({target.order}) has no negative definite Hessian at the "
            f"optimiser's end point ({res.message}); the Laplace pseudo-prior is undefined"
        ) from exc
    inv = linalg.solve_triangular(chol_prec, np.eye(res.x.size), lower=True)
    cov = inv.T @ inv
    cov = 0.5 * (cov + cov.T)
    chol = linalg.cholesky(cov, lower=True)
    d = res.x.size
    log_ev = float(-f + 0.5 * d * _LOG_2PI + np.sum(np.log(np.diag(chol))))
    return LaplaceFit(res.x, cov, chol, log_ev, int(res.nit))




# ----------------------------------------------------------------------------- the model


class ChainModel(NamedTuple):
    """Everything the compiled sweep reads (arrays contiguous; one row or block per order).

    Attributes
    ----------
    y2, z : ndarray
        Squared responses ``r_t²`` (N,) and lags ``(1, r_{t-1}², …)`` (N, max_order + 1).
    q1, dims : ndarray of int
        ``q + 1`` and ``q + 2`` of each order.
    coef, loglik_ref : ndarray
        Control-variate coefficients (n_orders, N, 5) and ``ℓ_t(x̂_j)`` (n_orders, N).
    theta_ref : ndarray of shape (n_orders, D)
        Natural parameters of each order's MAP (``D = max_order + 2``, zero-padded).
    ref_sum, grad_sum, hess_sum : ndarray
        ``Σ_t ℓ_t(x̂_j)`` and the gradient and Hessian sums in ``θ`` at the MAP: the proxies'
        quadratic sum.
    mean, chol : ndarray
        Pseudo-priors ``N(mean_j, L_j L_jᵀ)`` (zero-padded).
    prior_shape, prior_rate : float
    prior_log_norm : ndarray of shape (n_orders,)
    log_adjusted_prior0 : ndarray of shape (n_orders,)
        Starting ``log π̃``: minus the Laplace log evidences, normalised.
    racing : bool
        Racing Gibbs and racing MH (else exact).
    gibbs_cv, mh_cv : bool
        Whether the Gibbs factors and the MH terms are control-variate residuals.
    batch_size : int
        Minibatch of the SGLD gradient.
    gibbs_first, mh_first : int
        First minibatch of the Gibbs race and of the MH race.
    gibbs_whole : bool
        The Gibbs race would take every term in its first round (``sample_discrete`` then
        draws exactly).
    gibbs_config, gibbs_bconf, mh_config, mh_bconf : ndarray
        The compiled races' configurations, as :func:`sksubsample.algorithms.race` builds
        them (:func:`_race_setup`).
    gibbs_stored : int
        Rewards per arm a pairwise Gibbs race may store.
    target_accept : float
        Acceptance rate of the warm-up's step-size adaptation.
    delta : float
        Error bound of every race.
    """

    y2: np.ndarray
    z: np.ndarray
    q1: np.ndarray
    dims: np.ndarray
    coef: np.ndarray
    loglik_ref: np.ndarray
    theta_ref: np.ndarray
    ref_sum: np.ndarray
    grad_sum: np.ndarray
    hess_sum: np.ndarray
    mean: np.ndarray
    chol: np.ndarray
    prior_shape: float
    prior_rate: float
    prior_log_norm: np.ndarray
    log_adjusted_prior0: np.ndarray
    racing: bool
    gibbs_cv: bool
    mh_cv: bool
    batch_size: int
    gibbs_first: int
    mh_first: int
    gibbs_whole: bool
    gibbs_config: np.ndarray
    gibbs_bconf: np.ndarray
    gibbs_stored: int
    mh_config: np.ndarray
    mh_bconf: np.ndarray
    target_accept: float
    delta: float

    @property
    def n_terms(self):
        return int(self.y2.size)

    @property
    def n_orders(self):
        return int(self.q1.size)

    def exact_evaluations_per_sweep(self):
        """Terms an exact sweep evaluates: every order's N in the Gibbs step, N in the MH test,
        and the SGLD gradient's two minibatches."""
        return (self.n_orders + 1) * self.n_terms + 2 * self.batch_size


def _race_setup(n_arms, n_population, delta, first_batch):
    """``(config, bconf, n_stored)`` of the pairwise Racing-Normal race on one shared doubling
    schedule, as :func:`sksubsample.algorithms.race` builds it for these options (computed once
    per model instead of once per race; the test suite checks that the compiled sweep draws
    what the public functions draw)."""
    n_rounds = int(rk.shared_rounds(n_population, first_batch))
    b_const = 0.0
    if n_rounds > 1 and n_arms > 1:
        b_const = b_normal(delta / (n_arms - 1), first_batch / n_population)
    config = np.array([n_population, first_batch, True, rk.NORMAL], dtype=np.int64)
    n_stored = int(rk.shared_stored(n_population, first_batch)) if n_arms > 2 else 0
    return config, np.array([b_const, 0.0]), n_stored


def _padded(blocks, shape):
    out = np.zeros(shape)
    for j, block in enumerate(blocks):
        block = np.asarray(block)
        out[(j, *tuple(slice(0, n) for n in block.shape))] = block
    return out


def build_model(targets, laplace, *, method, delta, batch_size, control_variates):
    """The :class:`ChainModel` of the orders' targets and Laplace fits.

    Parameters
    ----------
    targets : sequence of ARCHTarget
        One per candidate order, all over the same terms.
    laplace : sequence of LaplaceFit
        Pseudo-priors and the control variates' reference points.
    method : {"racing", "exact"}
    delta : float in (0, 1)
        Error bound of every race.
    batch_size : int
        First minibatch of the races and minibatch of the SGLD gradient (at most N).
    control_variates : bool
        Whether the races see control-variate residuals.
    """
    first = targets[0]
    n, n_orders = first.n_data, len(targets)
    max_d = max(t.dim for t in targets)
    proxies = [t.control_variates(fit.mean) for t, fit in zip(targets, laplace, strict=True)]
    log_ev = np.array([fit.log_evidence for fit in laplace])
    log_pi0 = -(log_ev - special.logsumexp(log_ev))
    log_pi0 -= special.logsumexp(log_pi0)
    racing = method == "racing"
    batch_size = int(min(batch_size, n))
    # The races need first minibatches of at least 2 (and at most N).
    first_batch = min(max(2, batch_size), n)
    sizes = np.full(n_orders, n, dtype=np.int64)
    gibbs_whole = bool(rk.whole_in_first_round(sizes, first_batch))
    gibbs_config, gibbs_bconf, gibbs_stored = _race_setup(n_orders, n, delta, first_batch)
    mh_config, mh_bconf, _ = _race_setup(2, n, delta, first_batch)
    return read_only_model(ChainModel(
        first.y2, first.z, np.array([t.order + 1 for t in targets], dtype=np.int64),
        np.array([t.dim for t in targets], dtype=np.int64),
        np.ascontiguousarray(np.concatenate([p.coef for p in proxies])),
        np.ascontiguousarray(np.stack([p.loglik_ref for p in proxies])),
        _padded([p.theta_ref for p in proxies], (n_orders, max_d)),
        np.array([p.loglik_sum for p in proxies]),
        _padded([p.grad_theta for p in proxies], (n_orders, max_d)),
        _padded([p.hess_theta for p in proxies], (n_orders, max_d, max_d)),
        _padded([f.mean for f in laplace], (n_orders, max_d)),
        _padded([f.chol for f in laplace], (n_orders, max_d, max_d)),
        first.prior_shape, first.prior_rate,
        np.array([t.log_prior_norm for t in targets]), log_pi0, racing,
        bool(racing and control_variates), bool(racing and control_variates), batch_size,
        first_batch, first_batch, gibbs_whole, gibbs_config, gibbs_bconf, gibbs_stored,
        mh_config, mh_bconf, float(SGLD_TARGET_ACCEPT[0]), float(delta)))


def read_only_model(model):
    """``model`` with read-only arrays (:func:`~sksubsample.algorithms._numba.read_only`: the
    sweeps only read them). Applied when the model is built and again where a chain starts,
    since a worker process may receive writable copies of the small arrays."""
    fields = {name: read_only(value) for name, value in zip(model._fields, model, strict=True)
              if isinstance(value, np.ndarray) and value.flags.writeable}
    return model._replace(**fields) if fields else model


class _Work(NamedTuple):
    """Buffers of one chain's sweeps, and the compiled rewards of its races (whose data are
    these buffers, updated in place)."""

    params: np.ndarray
    params2: np.ndarray
    lp: np.ndarray
    sums: np.ndarray
    offset2: np.ndarray
    idx: np.ndarray
    x: np.ndarray
    x_new: np.ndarray
    grad: np.ndarray
    grad_new: np.ndarray
    xi: np.ndarray
    drift: np.ndarray


def _buffers(model):
    """The :class:`_Work` buffers of one chain's compiled sweeps."""
    n = model.n_orders
    width = kernels.row_width(int(model.z.shape[1]))
    max_d = model.mean.shape[1]
    return _Work(np.zeros((n, width)), np.zeros((2, width)), np.zeros(n), np.zeros(n),
                 np.zeros(2), np.zeros(model.batch_size, dtype=np.int64), np.zeros(max_d),
                 np.zeros(max_d), np.zeros(max_d), np.zeros(max_d), np.zeros(max_d),
                 np.zeros(max_d))


def _work(model):
    """The buffers and the reward objects of the sweep through the public functions
    (:func:`_sweep_racing`, :func:`reference_sweep`)."""
    w = _buffers(model)
    params, params2, offset2 = w.params, w.params2, w.offset2
    arrays = (model.y2, model.z, model.q1, model.coef, model.loglik_ref)
    # The reject arm of the MH race (Eq. 12) has the constant reward log(u) / N (scale 0, never
    # evaluated); the accept arm the terms plus the rest of the log ratio over N. One reward
    # object per order (the data name the order).
    gibbs = CompiledRewards(gibbs_reward, (*arrays, params, model.gibbs_cv))
    mh = [CompiledRewards(mh_reward, (*arrays, params2, q, model.mh_cv), np.array([0.0, 1.0]),
                          offset2) for q in range(model.n_orders)]
    return w, gibbs, mh


# ----------------------------------------------------------------------------- compiled steps


@njit
def _gibbs_log_prior(m, xs, log_pi, params, lp):
    """Parameter rows of every order and the data-free part of the conditional of ``q``
    (Eq. 25): ``log π̃_j + log p0_j(x^(j)) - log g_j(x^(j))`` (+ the proxies' sum)."""
    for j in range(m.q1.size):
        q1 = m.q1[j]
        d = m.dims[j]
        kernels.fill_params(xs[j], q1, m.theta_ref[j], params[j])
        value = (log_pi[j] + kernels.log_prior(xs[j], d, m.prior_shape, m.prior_rate,
                                               m.prior_log_norm[j])
                 - kernels.gaussian_logpdf(xs[j], m.mean[j], m.chol[j], d))
        if m.gibbs_cv:
            value += kernels.proxy_value(params[j], q1, m.ref_sum[j], m.grad_sum[j],
                                         m.hess_sum[j])
        lp[j] = value


@njit
def _order_sums(m, params, sums):
    """``sums[j] = Σ_t`` of order ``j``'s Gibbs factors, with the four partial sums of
    ``sample_discrete``'s exact path (so both give the same numbers)."""
    n = m.y2.size
    for j in range(m.q1.size):
        q1 = m.q1[j]
        s0 = s1 = s2 = s3 = 0.0
        t = 0
        while t + 4 <= n:
            s0 += 1.0 * kernels._term(m.y2, m.z, m.coef, m.loglik_ref, j, q1, params, j, t,
                                      m.gibbs_cv) + 0.0
            s1 += 1.0 * kernels._term(m.y2, m.z, m.coef, m.loglik_ref, j, q1, params, j, t + 1,
                                      m.gibbs_cv) + 0.0
            s2 += 1.0 * kernels._term(m.y2, m.z, m.coef, m.loglik_ref, j, q1, params, j, t + 2,
                                      m.gibbs_cv) + 0.0
            s3 += 1.0 * kernels._term(m.y2, m.z, m.coef, m.loglik_ref, j, q1, params, j, t + 3,
                                      m.gibbs_cv) + 0.0
            t += 4
        while t < n:
            s0 += 1.0 * kernels._term(m.y2, m.z, m.coef, m.loglik_ref, j, q1, params, j, t,
                                      m.gibbs_cv) + 0.0
            t += 1
        sums[j] = (s0 + s1) + (s2 + s3)


@njit
def _gibbs_exact(rng, m, xs, log_pi, params, lp, sums):
    """``q | x`` exactly, by the law of ``sample_discrete(method="exact")``: Gumbel
    perturbations drawn first (Eq. 2), then the argmax of the perturbed log-probabilities.
    Returns ``(q, evaluations)``; ``sums`` holds every order's sum of factors."""
    _gibbs_log_prior(m, xs, log_pi, params, lp)
    n = m.q1.size
    offsets = np.empty(n)
    for j in range(n):
        offsets[j] = lp[j] - math.log(rng.standard_exponential())
    _order_sums(m, params, sums)
    for j in range(n):
        if not (sums[j] < math.inf):  # NaN or +inf: the racing sweep raises the same error
            raise ValueError("the Gibbs race over the orders found no order of positive "
                             "probability (a NaN or infinite log-likelihood term)")
    best = 0
    for j in range(1, n):
        if offsets[j] + sums[j] > offsets[best] + sums[best]:
            best = j
    return best, n * m.y2.size


@njit(inline="always")
def _lower_t_mat_vec(chol, v, d, out):
    """``out = Lᵀ v`` for lower-triangular ``L = chol[:d, :d]``."""
    for k in range(d):
        s = 0.0
        for j in range(k, d):
            s += chol[j, k] * v[j]
        out[k] = s


@njit
def _propose(rng, m, q, xs, log_eps, w):
    """The SGLD proposal of ``x^(q)`` (the law of :func:`~._sgld.sgld_proposal`) and the part
    of the MH log ratio without data: prior ratio, proposal ratio, and the proxies' sum.

    Returns ``(rest, gradient evaluations)``; ``rest`` is ``-inf`` for a proposal rejected
    before any test (not finite, or outside the prior's support). ``w.params2`` holds the
    parameter rows of ``x`` and ``x' = w.x_new``.
    """
    d = m.dims[q]
    q1 = m.q1[q]
    n_terms = m.y2.size
    chol = m.chol[q]
    eps = math.exp(log_eps[q])
    x, x_new, grad, xi, drift = w.x, w.x_new, w.grad, w.xi, w.drift
    for k in range(d):
        x[k] = xs[q, k]
    for k in range(w.idx.size):
        w.idx[k] = rng.integers(0, n_terms)
    kernels.fill_params(x, q1, m.theta_ref[q], w.params2[0])
    kernels.stochastic_gradient(m.y2, m.z, m.coef, q, q1, x, w.params2[0:1], m.prior_shape,
                                m.prior_rate, m.grad_sum[q], m.hess_sum[q], w.idx, grad)
    for k in range(d):
        xi[k] = rng.standard_normal()
    _lower_t_mat_vec(chol, grad, d, drift)
    for k in range(d):
        drift[k] *= 0.5 * eps
    finite = True
    for j in range(d):
        s = 0.0
        for k in range(j + 1):
            s += chol[j, k] * (xi[k] + drift[k])
        x_new[j] = x[j] + eps * s
        finite = finite and math.isfinite(x_new[j])
    gradient_evaluations = w.idx.size
    if not finite:
        return -math.inf, gradient_evaluations
    log_prior = kernels.log_prior(x, d, m.prior_shape, m.prior_rate, m.prior_log_norm[q])
    log_prior_new = kernels.log_prior(x_new, d, m.prior_shape, m.prior_rate,
                                      m.prior_log_norm[q])
    if not log_prior_new > -math.inf:
        return -math.inf, gradient_evaluations
    rest = log_prior_new - log_prior
    kernels.fill_params(x_new, q1, m.theta_ref[q], w.params2[1])
    kernels.stochastic_gradient(m.y2, m.z, m.coef, q, q1, x_new, w.params2[1:2],
                                m.prior_shape, m.prior_rate, m.grad_sum[q], m.hess_sum[q],
                                w.idx, w.grad_new)
    gradient_evaluations += w.idx.size
    _lower_t_mat_vec(chol, w.grad_new, d, grad)
    xx = 0.0
    bb = 0.0
    for k in range(d):
        back = xi[k] + drift[k] + (0.5 * eps) * grad[k]
        xx += xi[k] * xi[k]
        bb += back * back
    rest += 0.5 * (xx - bb)
    if m.mh_cv:
        rest += (kernels.proxy_value(w.params2[1], q1, m.ref_sum[q], m.grad_sum[q],
                                     m.hess_sum[q])
                 - kernels.proxy_value(w.params2[0], q1, m.ref_sum[q], m.grad_sum[q],
                                       m.hess_sum[q]))
    return rest, gradient_evaluations


@njit
def _log_ratio(m, q, params2):
    """``Σ_t`` over every term of the MH log-ratio terms (:func:`mh_reward`)."""
    q1 = m.q1[q]
    total = 0.0
    for t in range(m.y2.size):
        total += (kernels._term(m.y2, m.z, m.coef, m.loglik_ref, q, q1, params2, 1, t, m.mh_cv)
                  - kernels._term(m.y2, m.z, m.coef, m.loglik_ref, q, q1, params2, 0, t,
                                  m.mh_cv))
    return total


@njit
def _new_sum(m, q, params2):
    """``Σ_t ℓ_t(x')`` over every term (raw terms)."""
    q1 = m.q1[q]
    total = 0.0
    for t in range(m.y2.size):
        total += kernels._term(m.y2, m.z, m.coef, m.loglik_ref, q, q1, params2, 1, t, False)
    return total


@njit
def _redraw(rng, m, xs, q):
    """``x^(j) ~ g_j`` for every ``j ≠ q``, in order."""
    for j in range(m.q1.size):
        if j != q:
            kernels.gaussian_draw(rng, m.mean[j], m.chol[j], m.dims[j], 1.0, xs[j])


@njit
def _accept(m, q, xs, w, accepted):
    if accepted:
        for k in range(m.dims[q]):
            xs[q, k] = w.x_new[k]


@njit
def _sweep_exact(rng, m, xs, log_pi, log_eps, w):
    """One exact sweep (Eq. 25), compiled. Returns ``(q, accepted, test evaluations, Gibbs
    evaluations, all evaluations)``.

    The Metropolis test uses ``Σ_t ℓ_t(x^(q))`` from the Gibbs step's sums (the same state).
    """
    q, gibbs_evaluations = _gibbs_exact(rng, m, xs, log_pi, w.params, w.lp, w.sums)
    rest, gradient_evaluations = _propose(rng, m, q, xs, log_eps, w)
    accepted = False
    test_evaluations = 0
    if rest > -math.inf:
        delta = _new_sum(m, q, w.params2) - w.sums[q] + rest
        if delta != delta or delta == math.inf:
            raise ValueError("an ARCH log-likelihood ratio term is NaN or +inf")
        test_evaluations = m.y2.size
        accepted = -rng.standard_exponential() < delta
    _accept(m, q, xs, w, accepted)
    _redraw(rng, m, xs, q)
    return (q, accepted, test_evaluations, gibbs_evaluations,
            gibbs_evaluations + test_evaluations + gradient_evaluations)


@njit
def _start(rng, m, xs):
    """The overdispersed start ``x^(j) = x̂_j + 2 L_j ξ`` of every order, in order."""
    for j in range(m.q1.size):
        kernels.gaussian_draw(rng, m.mean[j], m.chol[j], m.dims[j], 2.0, xs[j])


@njit
def _normalise(log_pi):
    top = log_pi.max()
    total = 0.0
    for j in range(log_pi.size):
        total += math.exp(log_pi[j] - top)
    shift = top + math.log(total)
    for j in range(log_pi.size):
        log_pi[j] -= shift


@njit
def _adapt_update(m, t, q, accepted, n_warmup, log_pi, log_eps, counts, tail_sum):
    """After warm-up sweep ``t`` (from 1): Wang–Landau lowers ``log π̃_q`` by
    ``1 / (1 + t/100)``, Robbins–Monro moves the order's ``log ε`` towards the target
    acceptance rate; the second half of the warm-up accumulates ``log ε`` for its average."""
    log_pi[q] -= 1.0 / (1.0 + t / 100.0)
    _normalise(log_pi)
    counts[0, q] += 1
    log_eps[q] += ((1.0 if accepted else 0.0) - m.target_accept) / counts[0, q] ** 0.6
    if t > n_warmup // 2:
        tail_sum[q] += log_eps[q]
        counts[1, q] += 1


@njit
def _record(m, xs, i, q, accepted, test_used, gibbs_used, used, draws, ints):
    """Row ``i`` of the draws (indicators of ``q``, then every order's natural parameters)
    and of the per-draw statistics ``ints`` (order, accepted, test, Gibbs, all evaluations)."""
    n = m.q1.size
    col = n
    for j in range(n):
        draws[i, j] = 1.0 if j == q else 0.0
        for k in range(m.dims[j]):
            draws[i, col] = kernels.softplus(xs[j, k])
            col += 1
    ints[0, i] = q
    ints[1, i] = accepted
    ints[2, i] = test_used
    ints[3, i] = gibbs_used
    ints[4, i] = used


@njit
def _exact_sweeps(rng, m, xs, log_pi, log_eps, start, stop, n_skip, adapt, n_warmup, counts,
                  tail_sum, trace_log_pi, trace_evaluations, draws, ints, evaluations, w):
    """Exact sweeps ``start … stop - 1``, compiled: warm-up (``adapt``, with the trace of
    ``log π̃`` and of the evaluations) or sampling (recording from sweep ``n_skip`` on).
    Returns the running evaluation count."""
    for t in range(start, stop):
        q, accepted, test_used, gibbs_used, used = _sweep_exact(rng, m, xs, log_pi, log_eps, w)
        evaluations += used
        if adapt:
            _adapt_update(m, t + 1, q, accepted, n_warmup, log_pi, log_eps, counts, tail_sum)
            trace_log_pi[t] = log_pi
            trace_evaluations[t] = evaluations
        elif t >= n_skip:
            _record(m, xs, t - n_skip, q, accepted, test_used, gibbs_used, used, draws, ints)
    return evaluations


# ----------------------------------------------------------------------------- compiled races


class _Races(NamedTuple):
    """Buffers of the compiled races of one chain: the Gibbs race over the orders, the MH
    race's two arms, and the index buffers both share (as :func:`sksubsample.algorithms.race`
    keeps them across races)."""

    ints: np.ndarray
    alive: np.ndarray
    out_round: np.ndarray
    n_sampled: np.ndarray
    stats: np.ndarray
    store: np.ndarray
    dead: np.ndarray
    scale: np.ndarray
    shift: np.ndarray
    ranges: np.ndarray
    ints2: np.ndarray
    alive2: np.ndarray
    out_round2: np.ndarray
    n_sampled2: np.ndarray
    stats2: np.ndarray
    store2: np.ndarray
    dead2: np.ndarray
    scale2: np.ndarray
    ranges2: np.ndarray
    drawn: np.ndarray
    before: np.ndarray
    idx: np.ndarray
    work: np.ndarray


def _races(model):
    n, n_terms = model.n_orders, model.n_terms
    return _Races(
        np.zeros(rk.N_INTS, dtype=np.int64), np.zeros(n, dtype=np.int64),
        np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros((rk.N_STATS, n)),
        np.empty((n, model.gibbs_stored)), np.zeros(n, dtype=np.bool_), np.ones(n),
        np.zeros(n), np.zeros(n), np.zeros(rk.N_INTS, dtype=np.int64),
        np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64),
        np.zeros((rk.N_STATS, 2)), np.empty((2, 0)), np.zeros(2, dtype=np.bool_),
        np.array([0.0, 1.0]), np.zeros(2), np.zeros((n_terms + 63) >> 6, dtype=np.int64),
        np.zeros((n_terms + 63) >> 6, dtype=np.int64), np.empty(n_terms, dtype=np.int64),
        np.empty(rk.work_size(n)))


@njit
def _block(m, gibbs, q, params, alive, n_alive, scale, idx, block):
    """The values of the surviving arms at a block of indices, as the compiled rewards of
    :func:`gibbs_reward` (``gibbs``) or :func:`mh_reward` (of order ``q``) give them to a race
    (the race checks them); returns the evaluations. An arm with ``scale == 0`` is not
    evaluated."""
    n_evaluations = 0
    for a in range(n_alive):
        arm = alive[a]
        if scale[arm] == 0.0:
            block[a, :] = 0.0
            continue
        n_evaluations += idx.size
        for k in range(idx.size):
            if gibbs:
                v = kernels._term(m.y2, m.z, m.coef, m.loglik_ref, arm, m.q1[arm], params, arm,
                                  idx[k], m.gibbs_cv)
            else:
                v = (kernels._term(m.y2, m.z, m.coef, m.loglik_ref, q, m.q1[q], params, 1,
                                   idx[k], m.mh_cv)
                     - kernels._term(m.y2, m.z, m.coef, m.loglik_ref, q, m.q1[q], params, 0,
                                     idx[k], m.mh_cv))
            block[a, k] = v
    return n_evaluations


@njit
def _race(rng, m, gibbs, q, params, config, bconf, scale, offset, ranges, ints, alive,
          out_round, n_sampled, stats, store, dead, r):
    """A race of :func:`sksubsample.algorithms.race` on the compiled rewards of
    :func:`_block`: its round loop over the laws of
    :mod:`sksubsample.algorithms.bandits._kernels` (draw, accumulate, decide), compiled with
    the rewards inline so that it is cached on disk (the package's loop,
    ``_racing_kernels._shared_race``, takes the reward function as a value, and numba does not
    cache a function that passes a function as a value: it counts it as a dynamic global).
    Like :func:`~sksubsample.algorithms.race`, it takes one 64-bit word of ``rng`` as the seed
    of its index draws. Returns ``(status, evaluations)``."""
    ints[:] = 0
    ints[rk.N_ALIVE] = alive.size
    ints[rk.LEADER] = -1
    for a in range(alive.size):
        alive[a] = a
    out_round[:] = 0
    n_sampled[:] = 0
    stats[:, :] = 0.0
    dead[:] = False
    state = next_uint64(rng)
    saved = np.empty_like(stats)
    n_evaluations = 0
    status = rk.CONTINUE
    while status == rk.CONTINUE:
        batch, state = rk.shared_draw(state, ints, config, r.drawn, r.before, r.idx)
        n_alive = ints[rk.N_ALIVE]
        columns = rk.chunk_columns(n_alive)
        for start in range(0, batch.size, columns):
            stop = min(start + columns, batch.size)
            block = r.work[:n_alive * (stop - start)].reshape((n_alive, stop - start))
            n_evaluations += _block(m, gibbs, q, params, alive, n_alive, scale,
                                    batch[start:stop], block)
            status = rk.shared_accumulate(block, ints, config, scale, offset, alive, n_sampled,
                                          stats, store, dead, saved)
            if status != rk.CONTINUE:
                break
        if status == rk.CONTINUE:
            status = rk.shared_decide(ints, config, bconf, ranges, alive, out_round, stats,
                                      store, dead)
    rk.end_draws(ints, config, r.drawn, r.idx)
    return status, n_evaluations


@njit
def _sweep_compiled(rng, m, xs, log_pi, log_eps, w, r):
    """One racing sweep (Eq. 25), compiled: the law of :func:`_sweep_racing`.

    The Gibbs step is ``sample_discrete``'s racing path (Gumbel perturbations, then the race
    with rewards ``factor + offset_j / N``, or the exact argmax when the first round would take
    every term); the MH test is the two-armed race of Eq. 12.
    """
    n = m.q1.size
    n_terms = m.y2.size
    _gibbs_log_prior(m, xs, log_pi, w.params, w.lp)
    offsets = np.empty(n)
    for j in range(n):
        offsets[j] = w.lp[j] - math.log(rng.standard_exponential())
    if n == 1 or m.gibbs_whole:
        _order_sums(m, w.params, w.sums)
        q = 0
        for j in range(1, n):
            if offsets[j] + w.sums[j] > offsets[q] + w.sums[q]:
                q = j
        gibbs_evaluations = n * n_terms
    else:
        for j in range(n):
            r.shift[j] = offsets[j] / n_terms
        status, gibbs_evaluations = _race(rng, m, True, 0, w.params, m.gibbs_config,
                                          m.gibbs_bconf, r.scale, r.shift, r.ranges, r.ints,
                                          r.alive, r.out_round, r.n_sampled, r.stats, r.store,
                                          r.dead, r)
        if status != rk.DONE:
            raise ValueError("the Gibbs race over the orders found no order of positive "
                             "probability (a NaN or infinite log-likelihood term)")
        q = r.ints[rk.BEST]
    rest, gradient_evaluations = _propose(rng, m, q, xs, log_eps, w)
    accepted = False
    test_evaluations = 0
    if rest > -math.inf:
        log_u = -rng.standard_exponential()
        w.offset2[0] = log_u / n_terms
        w.offset2[1] = rest / n_terms
        status, test_evaluations = _race(rng, m, False, q, w.params2, m.mh_config, m.mh_bconf,
                                         r.scale2, w.offset2, r.ranges2, r.ints2, r.alive2,
                                         r.out_round2, r.n_sampled2, r.stats2, r.store2,
                                         r.dead2, r)
        if status == rk.BAD_VALUE:
            raise ValueError("an ARCH log-likelihood ratio term is NaN or +inf")
        accepted = r.ints2[rk.BEST] == 1
    _accept(m, q, xs, w, accepted)
    _redraw(rng, m, xs, q)
    return (q, accepted, test_evaluations, gibbs_evaluations,
            gibbs_evaluations + test_evaluations + gradient_evaluations)


@njit
def _compiled_sweeps(rng, m, xs, log_pi, log_eps, start, stop, n_skip, adapt, n_warmup, counts,
                     tail_sum, trace_log_pi, trace_evaluations, draws, ints, evaluations, work):
    """:func:`_exact_sweeps` for the compiled racing sweep (``work = (w, races)``)."""
    w, r = work
    for t in range(start, stop):
        q, accepted, test_used, gibbs_used, used = _sweep_compiled(rng, m, xs, log_pi, log_eps,
                                                                   w, r)
        evaluations += used
        if adapt:
            _adapt_update(m, t + 1, q, accepted, n_warmup, log_pi, log_eps, counts, tail_sum)
            trace_log_pi[t] = log_pi
            trace_evaluations[t] = evaluations
        elif t >= n_skip:
            _record(m, xs, t - n_skip, q, accepted, test_used, gibbs_used, used, draws, ints)
    return evaluations


# ----------------------------------------------------------------------------- racing sweep


def _sweep_racing(rng, m, xs, log_pi, log_eps, w, gibbs_rewards, mh_rewards):
    """One racing sweep (Eq. 25): the compiled steps above around the package's races.

    ``q | x`` by :func:`~sksubsample.algorithms.sample_discrete` on compiled log-factors
    (:func:`gibbs_reward`); the MH test of ``x^(q)`` by :func:`~sksubsample.algorithms.race`
    on two arms (Eq. 12, the law of :func:`sksubsample.algorithms.racing`): the reject arm's
    constant reward ``log(u) / N`` and the accept arm's compiled terms (:func:`mh_reward`)
    plus ``rest / N``. Returns what :func:`_sweep_exact` returns.
    """
    n = m.n_terms
    _gibbs_log_prior(m, xs, log_pi, w.params, w.lp)
    gibbs = sample_discrete(gibbs_rewards, n, w.lp, method="racing", delta=m.delta,
                            first_batch=m.gibbs_first, random_state=rng)
    q = gibbs.sample
    rest, gradient_evaluations = _propose(rng, m, q, xs, log_eps, w)
    accepted = False
    test_evaluations = 0
    if rest > -math.inf:
        log_u = -float(rng.standard_exponential())
        w.offset2[0] = log_u / n
        w.offset2[1] = rest / n
        result = race(mh_rewards[q], 2, n, delta=m.delta, first_batch=m.mh_first, random_state=rng)
        accepted = result.best == 1
        test_evaluations = result.n_evaluations
    _accept(m, q, xs, w, accepted)
    _redraw(rng, m, xs, q)
    return (q, accepted, test_evaluations, gibbs.n_evaluations,
            gibbs.n_evaluations + test_evaluations + gradient_evaluations)


# ----------------------------------------------------------------------------- chains


class Adaptation(NamedTuple):
    """Outcome of the warm-up of one chain (:func:`adapt_chain`).

    Attributes
    ----------
    log_adjusted_prior : ndarray of shape (n_orders,)
        ``log π̃`` after Wang–Landau, normalised over the orders.
    log_step_size : ndarray of shape (n_orders,)
        Each order's ``log ε`` averaged over its updates in the second half of the warm-up
        sweeps (an order not selected then keeps its last ``log ε``).
    n_visits : ndarray of shape (n_orders,)
        Warm-up sweeps that selected each order.
    n_evaluations : int
        Data terms evaluated during warm-up.
    trace_log_adjusted_prior : ndarray of shape (n_warmup, n_orders)
        ``log π̃`` after each warm-up sweep (Fig. 2b of the paper plots ``-log π̃``).
    trace_evaluations : ndarray of int, shape (n_warmup,)
        Data terms evaluated up to each warm-up sweep.
    """

    log_adjusted_prior: np.ndarray
    log_step_size: np.ndarray
    n_visits: np.ndarray
    n_evaluations: int
    trace_log_adjusted_prior: np.ndarray
    trace_evaluations: np.ndarray


class ChainState(NamedTuple):
    """Where a sampling chain stopped: every order's parameters and the chain's generator."""

    xs: np.ndarray
    rng: np.random.Generator


#: Sweeps between two progress reports of a chain.
_SEGMENT = 250


def _segments(n, progress):
    step = n if progress is None else _SEGMENT
    return [(a, min(a + step, n)) for a in range(0, n, max(step, 1))]


def initial_state(model, rng):
    """The overdispersed start of a chain (drawn from ``rng``)."""
    xs = np.zeros(model.mean.shape)
    _start(rng, model, xs)
    return xs


def _sweeps(model):
    """The compiled loop over sweeps of the model's method, and its workspace."""
    w = _buffers(model)
    if not model.racing:
        return _exact_sweeps, w
    return _compiled_sweeps, (w, _races(model))


def adapt_chain(model, n_warmup, rng, progress=None):
    """Warm-up of one chain: Wang–Landau on ``log π̃`` and Robbins–Monro step sizes.

    From an overdispersed start (every order's parameters at ``x̂ + 2 L ξ``), each sweep draws
    ``q``, lowers ``log π̃_q`` by ``1 / (1 + t/100)`` (Wang & Landau 2001 with the annealed step
    of Appendix C.2) and adapts the selected order's ``log ε`` by
    ``(accepted - a*) / k^0.6`` (its ``k``-th update; Andrieu & Thoms 2008), ``a*`` the SGLD
    proposal's target acceptance rate.

    Returns
    -------
    Adaptation
    """
    model = read_only_model(model)
    n = model.n_orders
    xs = initial_state(model, rng)
    log_pi = model.log_adjusted_prior0.copy()
    log_eps = np.log([sgld_step_size(int(d)) for d in model.dims])
    counts = np.zeros((2, n), dtype=np.int64)
    tail_sum = np.zeros(n)
    trace_log_pi = np.zeros((n_warmup, n))
    trace_evaluations = np.zeros(n_warmup, dtype=np.int64)
    no_draws, no_ints = np.zeros((0, 0)), np.zeros((5, 0), dtype=np.int64)
    loop, work = _sweeps(model)
    evaluations = 0
    for start, stop in _segments(n_warmup, progress):
        evaluations = loop(rng, model, xs, log_pi, log_eps, start, stop, 0, True, n_warmup,
                           counts, tail_sum, trace_log_pi, trace_evaluations, no_draws, no_ints,
                           evaluations, work)
        if progress is not None:
            progress(stop - start)
    seen = counts[1] > 0
    log_eps[seen] = tail_sum[seen] / counts[1][seen]
    return Adaptation(log_pi, log_eps, counts[0].copy(), int(evaluations), trace_log_pi,
                      trace_evaluations)


def _run(model, log_pi, log_eps, xs, n_burn, n_draws, rng, progress):
    model = read_only_model(model)
    n = model.n_orders
    draws = np.zeros((n_draws, n + int(model.dims.sum())))
    ints = np.zeros((5, n_draws), dtype=np.int64)
    # Writable copies: the sweep loop is compiled once for warm-up, which adapts them.
    log_pi = np.array(log_pi, dtype=np.float64)
    log_eps = np.array(log_eps, dtype=np.float64)
    counts, tail_sum, no_trace = np.zeros((2, n), dtype=np.int64), np.zeros(n), np.zeros((0, n))
    no_evaluations = np.zeros(0, dtype=np.int64)
    loop, work = _sweeps(model)
    total = 0
    for start, stop in [(0, n_burn)] + [(n_burn + a, n_burn + b)
                                       for a, b in _segments(n_draws, progress)]:
        if stop > start:
            total = loop(rng, model, xs, log_pi, log_eps, start, stop, n_burn, False, 0, counts,
                         tail_sum, no_trace, no_evaluations, draws, ints, total, work)
        if progress is not None and start >= n_burn:
            progress(stop - start)
    orders = ints[0]
    accepted = ints[1].astype(bool)
    stats = {"order": orders, "log_adjusted_prior": log_pi[orders],
             "acceptance_rate": accepted.astype(np.float64), "accepted": accepted,
             "step_size": np.exp(log_eps[orders]), "batch_size": ints[2],
             "gibbs_evaluations": ints[3], "n_evaluations": ints[4]}
    return ChainResult(draws, stats, int(total), math.nan, ChainState(xs, rng))


def sample_chain(model, log_adjusted_prior, log_step_size, n_draws, n_warmup, rng,
                 progress=None):
    """One Carlin–Chib chain at fixed ``π̃`` and step sizes: burn-in, then ``n_draws`` sweeps.

    Parameters
    ----------
    model : ChainModel
    log_adjusted_prior, log_step_size : ndarray of shape (n_orders,)
        Fixed for the whole chain, so it is a time-homogeneous Markov chain whose stationary
        distribution is the adjusted posterior.
    n_draws : int
    n_warmup : int
        The chain discards ``n_warmup // 4`` burn-in sweeps after its overdispersed start
        (the adaptation itself ran in :func:`adapt_chain`).
    rng : numpy.random.Generator
    progress : callable or None
        Called with the number of sweeps done since its previous call.

    Returns
    -------
    ChainResult
        ``draws`` of shape (n_draws, n_orders + Σ_j (j + 2)): the indicators ``1{q = j}``
        followed by the natural parameters ``(α_0, …, α_j, ν)`` of every order ``j``; ``stats``
        per draw: ``order`` (index into the orders), ``log_adjusted_prior`` (``log π̃_q`` of the
        drawn order), ``acceptance_rate``, ``accepted``, ``step_size``, ``batch_size`` (terms
        of the MH test), ``gibbs_evaluations`` and ``n_evaluations`` (all terms of the sweep).
        The result's ``step_size`` is NaN (each order has its own, in the stats); its ``state``
        continues the chain (:func:`continue_chain`).
    """
    xs = initial_state(model, rng)
    result = _run(model, log_adjusted_prior, log_step_size, xs, n_warmup // 4, n_draws, rng,
                  progress)
    if progress is not None and n_warmup:
        progress(n_warmup)
    return result


def continue_chain(model, log_adjusted_prior, log_step_size, n_draws, state, progress=None):
    """``n_draws`` more sweeps of a chain from its :class:`ChainState` (no burn-in)."""
    return _run(model, log_adjusted_prior, log_step_size, state.xs.copy(), 0, n_draws,
                state.rng, progress)


# ----------------------------------------------------------------------------- checks


def reference_sweep(model, targets, laplace, xs, log_pi, log_eps, rng):
    """One sweep composed of the package's interpreted pieces: the law of :func:`_sweep_exact`
    and :func:`_sweep_racing`.

    ``q | x`` by :func:`~sksubsample.algorithms.sample_discrete` on
    :class:`~sksubsample.algorithms.CompiledRewards` (:func:`gibbs_reward`); ``x^(q)`` by
    :func:`~sksubsample.algorithms.mh_step` with :func:`~._sgld.sgld_proposal`, the order's
    control variates and the ``racing`` (or ``metropolis``) test; the pseudo-prior draws.
    ``xs`` (n_orders, D) is updated in place; returns ``(q, accepted)``.
    """
    w, gibbs_rewards, _ = _work(model)
    _gibbs_log_prior(model, xs, log_pi, w.params, w.lp)
    n = model.n_terms
    gibbs = sample_discrete(gibbs_rewards, n, w.lp.copy(),
                            method="racing" if model.racing else "exact",
                            delta=model.delta, first_batch=model.gibbs_first,
                            random_state=rng)
    q = gibbs.sample
    target, fit = targets[q], laplace[q]
    d = target.dim
    q1 = target.order + 1

    def gradient(x, idx):
        out = np.empty(d)
        rows = target.params_rows(x, model.theta_ref[q])
        kernels.stochastic_gradient(model.y2, model.z, model.coef, q, q1,
                                    np.ascontiguousarray(x), rows, model.prior_shape,
                                    model.prior_rate, model.grad_sum[q], model.hess_sum[q],
                                    np.ascontiguousarray(idx, dtype=np.int64), out)
        return out

    proposal = sgld_proposal(gradient, n, model.batch_size)
    if model.racing:
        options = {"test": "racing", "batch_size": model.mh_first, "delta": model.delta}
    else:
        options = {"test": "metropolis"}
    kernel = build_kernel(target, dim=d, proposal=proposal,
                          proxy=target.control_variates(fit.mean),
                          control_variates=bool(model.mh_cv), preconditioner=fit.cov,
                          **options)
    state, info = mh_step(rng, init_state(kernel, xs[q, :d]), kernel,
                          math.exp(log_eps[q]))
    xs[q, :d] = state.theta
    _redraw(rng, model, xs, q)
    return q, bool(info.accepted)


def race_checks(model, states, log_adjusted_prior, log_step_size, seeds):
    """Racing decisions against exact ones with shared randomness, at given chain states.

    For each state ``xs`` (softplus coordinates of every order) and seed: the racing Gibbs draw
    of ``q`` (:func:`~sksubsample.algorithms.sample_discrete`) against the exact draw with the
    same Gumbel perturbations (both from a generator seeded alike), then, for the order the
    racing draw selected, the racing MH decision on one SGLD proposal against the exact
    decision on the same proposal and uniform.

    Returns
    -------
    ndarray of shape (n_states, 5)
        Per state: racing ``q``, exact ``q``, racing MH decision, exact MH decision (1/0; -1
        when the proposal was rejected before any test), Gibbs evaluations.
    """
    w, gibbs_rewards, mh_rewards = _work(model)
    n = model.n_terms
    out = np.zeros((len(states), 5), dtype=np.int64)
    for k, (xs, seed) in enumerate(zip(states, seeds, strict=True)):
        xs = np.ascontiguousarray(xs, dtype=np.float64)
        _gibbs_log_prior(model, xs, log_adjusted_prior, w.params, w.lp)
        draws = [sample_discrete(gibbs_rewards, n, w.lp, method=method, delta=model.delta,
                                 first_batch=model.gibbs_first,
                                 random_state=np.random.default_rng(seed))
                 for method in ("racing", "exact")]
        q = draws[0].sample
        rng = np.random.default_rng(seed + 1)
        rest, _ = _propose(rng, model, q, xs, log_step_size, w)
        decisions = (-1, -1)
        if rest > -math.inf:
            log_u = -float(rng.standard_exponential())
            w.offset2[:] = log_u / n, rest / n
            result = race(mh_rewards[q], 2, n, delta=model.delta, first_batch=model.mh_first,
                          random_state=rng)
            decisions = (int(result.best == 1), int(log_u < _log_ratio(model, q, w.params2)
                                                    + rest))
        out[k] = (q, draws[1].sample, *decisions, draws[0].n_evaluations)
    return out


@njit
def _all_terms(m, xs, cv, params, out):
    for j in range(m.q1.size):
        kernels.fill_params(xs[j], m.q1[j], m.theta_ref[j], params[j])
        for t in range(m.y2.size):
            out[j, t] = kernels._term(m.y2, m.z, m.coef, m.loglik_ref, j, m.q1[j], params, j,
                                      t, cv)


def reward_spreads(model, states):
    """Variance over the terms of the Gibbs step's log-factors, raw and as control-variate
    residuals, at given chain states.

    Returns
    -------
    dict
        ``per_order_raw``, ``per_order_cv`` of shape (n_states, n_orders): the variance of
        ``ℓ_t(x^(j))`` and of its residual; ``pairwise_raw``, ``pairwise_cv`` of shape
        (n_states, n_pairs): the variance of the differences between two orders' factors, what
        the pairwise race's bound sees.
    """
    params = _work(model)[0].params
    n = model.n_orders
    i, j = np.triu_indices(n, 1)
    out = {"per_order_raw": [], "per_order_cv": [], "pairwise_raw": [], "pairwise_cv": []}
    values = np.empty((n, model.n_terms))
    for xs in states:
        xs = np.ascontiguousarray(xs, dtype=np.float64)
        for cv, key in ((False, "raw"), (True, "cv")):
            _all_terms(model, xs, cv, params, values)
            out[f"per_order_{key}"].append(values.var(axis=1))
            out[f"pairwise_{key}"].append((values[i] - values[j]).var(axis=1))
    return {key: np.array(value) for key, value in out.items()}
