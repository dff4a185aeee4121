"""Compiled per-term kernels of the ARCH(q) Student-t likelihood and its control variates.

Every quantity of a likelihood term is computed here, once: the log-likelihood term
``ℓ_t = log t_ν(r_t / σ_t) - ½ log σ_t²`` of the scale-1 Student t (Chen & Ghahramani 2016,
§5.2), its derivatives in the two scalars it depends on, ``s = σ_t²`` and ``ν``, the residual of
the second-order Taylor control variate (§3.4, Eq. 11), the per-datum rewards of the racing
Gibbs step over the orders (Eq. 3, Eq. 25) and of the racing MH test (Eq. 12), and the
variance-reduced stochastic gradient of the SGLD proposal (Appendix C.2). The target's Python
methods (:class:`~sksubsample.time_series._arch_target.ARCHTarget`) and the compiled sweep
(:mod:`._sweep`) both call these functions, so they compute the same numbers.

Data layout. ``y2`` holds the squared responses ``r_t²`` and ``z`` of shape
``(N, max_order + 1)`` the lags ``(1, r_{t-1}², …)`` (row ``t`` contiguous). The parameters of
an order at a state enter the kernels as one *parameter row* of width ``3 + 2 (max_order + 1)``
filled by :func:`fill_params`: ``(ν, log c(ν), ν - ν̂, α_0 … α_q, α_0 - α̂_0 … α_q - α̂_q)``
(``c(ν)`` the Student-t normaliser, hatted values the control variates' reference point), so a
term costs one pass over its ``q + 1`` lags and no special function. Control-variate
coefficients ``coef[j, t] = (f_s, f_ν, f_ss, f_sν, f_νν)`` are the derivatives of ``ℓ_t`` at
order ``j``'s reference point.
"""

from __future__ import annotations

import math

import numpy as np

from ..algorithms.kernels import njit

__all__ = [
    "digamma",
    "fill_params",
    "gaussian_draw",
    "gaussian_logpdf",
    "grad_log_prior",
    "log_predictive",
    "log_prior",
    "loglik_sums",
    "loglik_terms",
    "pointwise_log_density",
    "proxy_value",
    "ratio_terms",
    "residual_terms",
    "softplus",
    "stochastic_gradient",
    "t_log_norm",
    "term_derivatives",
    "trigamma",
]

# Fields of a parameter row.
NU, LOG_NORM, D_NU, ALPHA = 0, 1, 2, 3
_LOG_2PI = math.log(2.0 * math.pi)


def row_width(max_q1):
    """Width of a parameter row for orders with at most ``max_q1`` coefficients."""
    return ALPHA + 2 * max_q1


# ----------------------------------------------------------------------------- scalars


@njit(inline="always")
def softplus(x):
    """``log(1 + e^x)`` without overflow."""
    if x > 0.0:
        return x + math.log1p(math.exp(-x))
    return math.log1p(math.exp(x))


@njit(inline="always")
def _expit(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(inline="always")
def _log_softplus(x):
    # softplus(x) ≈ e^x for x << 0, where log(log1p(e^x)) would underflow to log(0).
    if x < -30.0:
        return x
    return math.log(softplus(x))


@njit
def digamma(x):
    """``ψ(x)`` for ``x > 0``: recurrence up to ``x >= 6``, then the asymptotic series
    (absolute error below 1e-13)."""
    out = 0.0
    while x < 6.0:
        out -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (-1.0 / 12.0 + f * (1.0 / 120.0 + f * (-1.0 / 252.0 + f * (
        1.0 / 240.0 + f * (-1.0 / 132.0 + f * (691.0 / 32760.0 + f * (-1.0 / 12.0)))))))
    return out + math.log(x) - 0.5 / x + series


@njit
def trigamma(x):
    """``ψ'(x)`` for ``x > 0``: recurrence up to ``x >= 6``, then the asymptotic series."""
    out = 0.0
    while x < 6.0:
        out += 1.0 / (x * x)
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1.0 / 6.0 + f * (-1.0 / 30.0 + f * (1.0 / 42.0 + f * (
        -1.0 / 30.0 + f * (5.0 / 66.0 + f * (-691.0 / 2730.0 + f * (7.0 / 6.0)))))))
    return out + 1.0 / x + 0.5 * f + series / x


@njit(inline="always")
def t_log_norm(nu):
    """``log c(ν) = lgamma((ν+1)/2) - lgamma(ν/2) - ½ log(νπ)``: the scale-1 t's normaliser."""
    return math.lgamma(0.5 * (nu + 1.0)) - math.lgamma(0.5 * nu) - 0.5 * math.log(nu * math.pi)


@njit(inline="always")
def t_log_density(y2, s, nu, log_norm):
    """``ℓ_t = log c(ν) - ½ log s - (ν+1)/2 log(1 + r_t² / (ν s))`` with ``s = σ_t²``: the
    only place the Student-t log density is written."""
    return log_norm - 0.5 * math.log(s) - 0.5 * (nu + 1.0) * math.log1p(y2 / (nu * s))


# ----------------------------------------------------------------------------- parameters


@njit
def fill_params(x, q1, theta_ref, row):
    """The parameter row of softplus coordinates ``x`` (``q1 + 1`` entries) of an order with
    ``q1`` coefficients, relative to the natural reference point ``theta_ref``."""
    nu = softplus(x[q1])
    row[NU] = nu
    row[LOG_NORM] = t_log_norm(nu)
    row[D_NU] = nu - theta_ref[q1]
    for i in range(q1):
        a = softplus(x[i])
        row[ALPHA + i] = a
        row[ALPHA + q1 + i] = a - theta_ref[i]


@njit
def log_prior(x, d, shape, rate, log_norm):
    """Log Gamma(shape, rate) density of ``softplus(x_k)`` times the Jacobian ``sigmoid(x_k)``,
    summed over the first ``d`` coordinates, plus the normaliser ``log_norm``."""
    total = 0.0
    for k in range(d):
        total += ((shape - 1.0) * _log_softplus(x[k]) - rate * softplus(x[k])
                  - softplus(-x[k]))
    return log_norm + total


@njit
def grad_log_prior(x, d, shape, rate, out):
    """Gradient of :func:`log_prior` in ``x`` (first ``d`` coordinates) into ``out``."""
    for k in range(d):
        sig = _expit(x[k])
        out[k] = (shape - 1.0) * sig / softplus(x[k]) - rate * sig + (1.0 - sig)


@njit
def gaussian_logpdf(x, mean, chol, d):
    """``log N(x; mean, L Lᵀ)`` over the first ``d`` coordinates (``L = chol[:d, :d]``)."""
    total = 0.0
    u = np.empty(d)
    for j in range(d):
        s = x[j] - mean[j]
        for k in range(j):
            s -= chol[j, k] * u[k]
        u[j] = s / chol[j, j]
        total += u[j] * u[j] + 2.0 * math.log(chol[j, j])
    return -0.5 * total - 0.5 * d * _LOG_2PI


@njit
def gaussian_draw(rng, mean, chol, d, scale, out):
    """``out = mean + scale L ξ`` with ``ξ ~ N(0, I_d)`` drawn in order from ``rng``."""
    xi = np.empty(d)
    for k in range(d):
        xi[k] = rng.standard_normal()
    for j in range(d):
        s = 0.0
        for k in range(j + 1):
            s += chol[j, k] * xi[k]
        out[j] = mean[j] + scale * s


@njit
def proxy_value(row, q1, ref_sum, grad_sum, hess_sum):
    """``Σ_t h_t`` of the Taylor proxies at the parameter row: the quadratic
    ``Σ ℓ_t(θ̂) + gᵀ Δθ + ½ Δθᵀ H Δθ`` in the natural parameters, without data."""
    d = q1 + 1
    delta = np.empty(d)
    for i in range(q1):
        delta[i] = row[ALPHA + q1 + i]
    delta[q1] = row[D_NU]
    total = 0.0
    for j in range(d):
        hd = 0.0
        for k in range(d):
            hd += hess_sum[j, k] * delta[k]
        total += delta[j] * (grad_sum[j] + 0.5 * hd)
    return ref_sum + total


# ----------------------------------------------------------------------------- one term


@njit(inline="always")
def _variance(z, t, params, r, q1):
    s = 0.0
    for i in range(q1):
        s += z[t, i] * params[r, ALPHA + i]
    return s


@njit(inline="always")
def term(y2, z, coef, loglik_ref, j, q1, params, r, t, cv):
    """``ℓ_t`` (``cv`` false) or its control-variate residual ``ℓ_t - h_{j,t}`` (``cv`` true)
    of order ``j`` at the parameter row ``params[r]``."""
    if not cv:
        return t_log_density(y2[t], _variance(z, t, params, r, q1), params[r, NU],
                             params[r, LOG_NORM])
    s = 0.0
    ds = 0.0
    for i in range(q1):
        zi = z[t, i]
        s += zi * params[r, ALPHA + i]
        ds += zi * params[r, ALPHA + q1 + i]
    dnu = params[r, D_NU]
    proxy = (coef[j, t, 0] * ds + coef[j, t, 1] * dnu
             + 0.5 * (coef[j, t, 2] * ds * ds + 2.0 * coef[j, t, 3] * ds * dnu
                      + coef[j, t, 4] * dnu * dnu))
    return (t_log_density(y2[t], s, params[r, NU], params[r, LOG_NORM]) - loglik_ref[j, t]
            - proxy)


# ----------------------------------------------------------------------------- vectors


@njit
def loglik_terms(y2, z, q1, params, idx, out):
    """``out[k] = ℓ_{idx[k]}`` at the parameter row ``params[0]``."""
    for k in range(idx.size):
        t = idx[k]
        out[k] = t_log_density(y2[t], _variance(z, t, params, 0, q1), params[0, NU],
                               params[0, LOG_NORM])


@njit
def residual_terms(y2, z, coef, loglik_ref, j, q1, params, idx, out):
    """``out[k] = ℓ_t - h_{j,t}`` at ``params[0]`` for ``t = idx[k]``."""
    for k in range(idx.size):
        out[k] = term(y2, z, coef, loglik_ref, j, q1, params, 0, idx[k], True)


@njit
def ratio_terms(y2, z, coef, loglik_ref, j, q1, params, cv, idx, out):
    """``out[k] = ℓ_t(x') - ℓ_t(x)`` (or the difference of the residuals with ``cv``) for
    ``t = idx[k]``, ``x`` and ``x'`` at the parameter rows ``params[0]`` and ``params[1]``."""
    for k in range(idx.size):
        t = idx[k]
        out[k] = (term(y2, z, coef, loglik_ref, j, q1, params, 1, t, cv)
                  - term(y2, z, coef, loglik_ref, j, q1, params, 0, t, cv))


@njit
def loglik_sums(y2, z, q1, params, out):
    """``out[m] = Σ_t ℓ_t`` over every term at each parameter row ``params[m]``."""
    for m in range(params.shape[0]):
        s0 = s1 = 0.0
        n = y2.size
        t = 0
        while t + 2 <= n:
            s0 += t_log_density(y2[t], _variance(z, t, params, m, q1), params[m, NU],
                                params[m, LOG_NORM])
            s1 += t_log_density(y2[t + 1], _variance(z, t + 1, params, m, q1), params[m, NU],
                                params[m, LOG_NORM])
            t += 2
        if t < n:
            s0 += t_log_density(y2[t], _variance(z, t, params, m, q1), params[m, NU],
                                params[m, LOG_NORM])
        out[m] = s0 + s1


@njit
def term_derivatives(y2, z, q1, params, idx, out):
    """``(s, f_s, f_ν, f_ss, f_sν, f_νν)`` of each term ``idx[k]`` into ``out[:, k]``: the
    variance ``s = σ_t²`` and the derivatives of ``ℓ_t`` in ``(s, ν)`` at ``params[0]``."""
    nu = params[0, NU]
    dconst = 0.5 * (digamma(0.5 * (nu + 1.0)) - digamma(0.5 * nu)) - 0.5 / nu
    d2const = 0.25 * (trigamma(0.5 * (nu + 1.0)) - trigamma(0.5 * nu)) + 0.5 / (nu * nu)
    for k in range(idx.size):
        t = idx[k]
        s = _variance(z, t, params, 0, q1)
        w = y2[t] / (nu * s)
        h = w / (1.0 + w)
        h2 = w / ((1.0 + w) * (1.0 + w))
        out[0, k] = s
        out[1, k] = 0.5 / s * ((nu + 1.0) * h - 1.0)
        out[2, k] = dconst - 0.5 * math.log1p(w) + 0.5 * (nu + 1.0) / nu * h
        out[3, k] = -0.5 / (s * s) * ((nu + 1.0) * h - 1.0 + (nu + 1.0) * h2)
        out[4, k] = 0.5 / s * (h - (nu + 1.0) / nu * h2)
        out[5, k] = (d2const + 0.5 * h / nu - 0.5 * h / (nu * nu)
                     - 0.5 * (nu + 1.0) / (nu * nu) * h2)


@njit
def stochastic_gradient(y2, z, coef, j, q1, x, params, shape, rate, grad_sum, hess_sum, idx,
                        out):
    """Variance-reduced minibatch estimate of ``∇_x log p(x | q = j, r)`` into ``out``.

    ``∇ log p0(x) + ∇ Σ_t h_t(x) + (N / |S|) Σ_{t ∈ S} [∇ℓ_t(x) - ∇h_t(x)]`` (Baker et al.
    2019) with the Taylor proxies ``h`` of order ``j`` and the minibatch ``S = idx``; in the
    softplus coordinates each gradient in ``θ = (α, ν)`` is multiplied by ``sigmoid(x)``.
    ``params[0]`` is the parameter row of ``x``.
    """
    d = q1 + 1
    n = y2.size
    nu = params[0, NU]
    dnu = params[0, D_NU]
    dconst = 0.5 * (digamma(0.5 * (nu + 1.0)) - digamma(0.5 * nu)) - 0.5 / nu
    acc = np.zeros(d)
    for k in range(idx.size):
        t = idx[k]
        s = 0.0
        ds = 0.0
        for i in range(q1):
            zi = z[t, i]
            s += zi * params[0, ALPHA + i]
            ds += zi * params[0, ALPHA + q1 + i]
        w = y2[t] / (nu * s)
        h = w / (1.0 + w)
        f_s = 0.5 / s * ((nu + 1.0) * h - 1.0)
        f_nu = dconst - 0.5 * math.log1p(w) + 0.5 * (nu + 1.0) / nu * h
        g_s = f_s - (coef[j, t, 0] + coef[j, t, 2] * ds + coef[j, t, 3] * dnu)
        acc[q1] += f_nu - (coef[j, t, 1] + coef[j, t, 3] * ds + coef[j, t, 4] * dnu)
        for i in range(q1):
            acc[i] += g_s * z[t, i]
    grad_log_prior(x, d, shape, rate, out)
    scale = n / idx.size
    delta = np.empty(d)
    for i in range(q1):
        delta[i] = params[0, ALPHA + q1 + i]
    delta[q1] = dnu
    for a in range(d):
        hd = 0.0
        for b in range(d):
            hd += hess_sum[a, b] * delta[b]
        out[a] += _expit(x[a]) * (grad_sum[a] + hd + scale * acc[a])


@njit(inline="always")
def _draw_density(y2, z, alphas, nus, log_norms, m, t):
    """The t log density of term ``t`` under draw ``m`` (``log_norms[m]`` its normaliser)."""
    s = 0.0
    for i in range(alphas.shape[1]):
        s += z[t, i] * alphas[m, i]
    return t_log_density(y2[t], s, nus[m], log_norms[m])


@njit
def log_predictive(y2, z, alphas, nus, log_w, out):
    """``out[t] = log Σ_m w_m t-density(r_t | α_m, ν_m)``: the posterior predictive log density
    of each term over weighted draws (``alphas`` of shape (M, max_order + 1), padded with
    zeros; ``log_w`` normalised log weights)."""
    n_draws = nus.size
    log_norms = np.empty(n_draws)
    for m in range(n_draws):
        log_norms[m] = t_log_norm(nus[m]) + log_w[m]
    dens = np.empty(n_draws)
    for t in range(y2.size):
        top = -math.inf
        for m in range(n_draws):
            dens[m] = _draw_density(y2, z, alphas, nus, log_norms, m, t)
            top = max(top, dens[m])
        total = 0.0
        for m in range(n_draws):
            total += math.exp(dens[m] - top)
        out[t] = top + math.log(total)


@njit
def pointwise_log_density(y2, z, alphas, nus, out):
    """``out[m, t]``: the t log density of every term under every draw (``alphas`` of shape
    (M, max_order + 1), padded with zeros)."""
    log_norms = np.empty(nus.size)
    for m in range(nus.size):
        log_norms[m] = t_log_norm(nus[m])
    for m in range(nus.size):
        for t in range(y2.size):
            out[m, t] = _draw_density(y2, z, alphas, nus, log_norms, m, t)
