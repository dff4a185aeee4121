"""The ARCH(q) likelihood with Student-t innovations as a subsampled target.

Model (Chen & Ghahramani 2016, §5.2): ``r_t = σ_t z_t`` with ``z_t ~ t_ν(0, 1)`` (location 0,
**scale 1**, not unit variance), ``σ_t² = α_0 + Σ_{i=1..q} α_i r_{t-i}²`` and independent
``Gamma(shape, rate)`` priors on ``α_0, …, α_q, ν``. The log-likelihood is a sum of per-term
log densities ``ℓ_t = log t_ν(r_t / σ_t) - ½ log σ_t²`` over a term range that every candidate
order shares, ``t = max(orders), …, N - 1``, so that the evidences of the orders are comparable
and a race between orders compares arms over one common population of factors.

Coordinates (Appendix C.2): every positive parameter is written ``v = softplus(x) =
log(1 + e^x)`` so that ``x ∈ R^{q+2}``; the prior density carries the Jacobian
``dv/dx = sigmoid(x)``. Several independent series sharing the parameters contribute their
terms to one population.

Per-term derivatives are computed through the two scalars the term depends on, ``s = σ_t²`` and
``ν``: ``∇_x ℓ = J (f_s z, f_ν)`` and ``∇²_x ℓ = J H_θ J + diag(∇_θ ℓ · sigmoid')`` with
``J = diag(sigmoid(x))`` and ``z = (1, r_{t-1}², …)``. The same five scalars at a reference point
give second-order Taylor control variates in ``(σ_t², ν)`` (§3.4, Eq. 11) in O(q) per term.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = ["ARCHTarget", "arch_design", "inverse_softplus", "softplus"]

_CHUNK = 1 << 21


def softplus(x):
    """``log(1 + e^x)`` without overflow."""
    return np.logaddexp(0.0, x)


def inverse_softplus(v):
    """``x`` with ``softplus(x) = v`` for ``v > 0`` (``v + log(1 - e^{-v})``, stable)."""
    v = np.asarray(v, dtype=np.float64)
    return v + np.log(-np.expm1(-v))


def _log_softplus(x):
    # softplus(x) ≈ e^x for x << 0, where log(log1p(e^x)) would underflow to log(0).
    x = np.asarray(x, dtype=np.float64)
    safe = np.maximum(x, -30.0)
    return np.where(x < -30.0, x, np.log(softplus(safe)))


def arch_design(returns, max_order):
    """Responses and squared-lag design shared by every order ``q <= max_order``.

    Parameters
    ----------
    returns : ndarray of shape (n_samples, n_series)
        Demeaned returns, one series per column.
    max_order : int >= 0
        Largest candidate order; terms start at ``t = max_order`` in every series.

    Returns
    -------
    y : ndarray of shape (n_series * (n_samples - max_order),)
        ``r_t``, series after series.
    z : ndarray of shape (len(y), max_order + 1)
        ``(1, r_{t-1}², …, r_{t-max_order}²)``; ARCH(q) uses the first ``q + 1`` columns.
    """
    returns = np.asarray(returns, dtype=np.float64)
    n, n_series = returns.shape
    m = n - max_order
    y = returns[max_order:].T.reshape(-1)
    z = np.ones((n_series * m, max_order + 1))
    for i in range(1, max_order + 1):
        z[:, i] = (returns[max_order - i: n - i] ** 2).T.reshape(-1)
    return y, z


def _t_const(nu):
    """Log normaliser of the scale-1 Student t: ``lgamma((ν+1)/2) - lgamma(ν/2) - ½ log(νπ)``."""
    return special.gammaln(0.5 * (nu + 1.0)) - special.gammaln(0.5 * nu) - 0.5 * np.log(
        nu * math.pi)


class ARCHTarget:
    """Posterior of ARCH(``order``) with Student-t innovations in softplus coordinates.

    ``θ = x ∈ R^{order+2}``: ``α_i = softplus(x_i)`` for ``i = 0..order`` and
    ``ν = softplus(x_{order+1})``. Implements the subsampled-target protocol of
    :mod:`sksubsample.algorithms._target` (``n_data``, ``log_prior``, ``loglik_terms``,
    ``grad_terms``, ``hess_terms``, ``grad_log_prior``, ``hess_log_prior``), so the generic
    :class:`~sksubsample.algorithms.TaylorProxy` applies to it; :meth:`control_variates` builds
    the better proxies of :class:`ARCHControlVariates`.

    Parameters
    ----------
    y, z : ndarray
        From :func:`arch_design` (``z`` may have more columns than ``order + 1``).
    order : int >= 0
    prior_shape, prior_rate : float > 0
        Gamma prior of every ``α_i`` and of ``ν``.

    References
    ----------
    Chen & Ghahramani (2016), §5.2 (model) and Appendix C.2 (softplus coordinates).
    """

    def __init__(self, y, z, order, prior_shape=1.0, prior_rate=1.0):
        self.y = y
        self.z = z
        self.order = int(order)
        self.dim = self.order + 2
        self.n_data = int(y.size)
        self.prior_shape = float(prior_shape)
        self.prior_rate = float(prior_rate)
        self._log_norm = self.dim * (self.prior_shape * math.log(self.prior_rate)
                                     - math.lgamma(self.prior_shape))

    # ----------------------------------------------------------------- parameters

    def natural(self, x):
        """``(α, ν)`` of ``x``: ``α`` of shape (order + 1,) and ``ν`` a float."""
        v = softplus(np.asarray(x, dtype=np.float64))
        return v[: self.order + 1], float(v[self.order + 1])

    # ----------------------------------------------------------------- prior

    def log_prior(self, x):
        """Log Gamma prior density of ``softplus(x)`` times the Jacobian ``Π sigmoid(x_k)``."""
        x = np.asarray(x, dtype=np.float64)
        v = softplus(x)
        return float(self._log_norm + np.sum((self.prior_shape - 1.0) * _log_softplus(x)
                                             - self.prior_rate * v + special.log_expit(x)))

    def grad_log_prior(self, x):
        x = np.asarray(x, dtype=np.float64)
        v, sig = softplus(x), special.expit(x)
        return (self.prior_shape - 1.0) * sig / v - self.prior_rate * sig + (1.0 - sig)

    def hess_log_prior(self, x):
        x = np.asarray(x, dtype=np.float64)
        v, sig = softplus(x), special.expit(x)
        dsig = sig * (1.0 - sig)
        diag = ((self.prior_shape - 1.0) * (dsig / v - sig**2 / v**2)
                - self.prior_rate * dsig - dsig)
        return np.diag(diag)

    def log_prior_batch(self, xs):
        """:meth:`log_prior` of each row of ``xs`` (shape (M, dim)) -> (M,)."""
        xs = np.asarray(xs, dtype=np.float64)
        return self._log_norm + np.sum((self.prior_shape - 1.0) * _log_softplus(xs)
                                       - self.prior_rate * softplus(xs)
                                       + special.log_expit(xs), axis=1)

    # ----------------------------------------------------------------- likelihood

    def _variance(self, alpha, idx):
        return self.z[idx, : self.order + 1] @ alpha

    def loglik_terms(self, x, idx):
        """``ℓ_t(x)`` for the terms ``idx``."""
        alpha, nu = self.natural(x)
        s = self._variance(alpha, idx)
        return (_t_const(nu) - 0.5 * np.log(s)
                - 0.5 * (nu + 1.0) * np.log1p(self.y[idx] ** 2 / (nu * s)))

    def loglik_sums(self, xs):
        """``Σ_t ℓ_t(x)`` for each row of ``xs`` (shape (M, dim)), over all terms -> (M,)."""
        xs = np.atleast_2d(np.asarray(xs, dtype=np.float64))
        v = softplus(xs)
        alpha, nu = v[:, : self.order + 1], v[:, self.order + 1]
        out = self.n_data * _t_const(nu)
        step = max(1, _CHUNK // xs.shape[0])  # bounds the (terms, M) block at _CHUNK entries
        for start in range(0, self.n_data, step):
            sl = slice(start, min(start + step, self.n_data))
            s = self.z[sl, : self.order + 1] @ alpha.T  # (chunk, M)
            w = (self.y[sl, None] ** 2) / (s * nu)
            out = out - 0.5 * np.log(s).sum(axis=0) - 0.5 * (nu + 1.0) * np.log1p(w).sum(axis=0)
        return out

    def _scalars(self, x, idx):
        """``s`` and the derivatives ``f_s, f_ν, f_ss, f_sν, f_νν`` of ``ℓ`` in ``(s, ν)``."""
        alpha, nu = self.natural(x)
        s = self._variance(alpha, idx)
        w = self.y[idx] ** 2 / (nu * s)
        h = w / (1.0 + w)
        h2 = w / (1.0 + w) ** 2
        f_s = 0.5 / s * ((nu + 1.0) * h - 1.0)
        f_ss = -0.5 / s**2 * ((nu + 1.0) * h - 1.0 + (nu + 1.0) * h2)
        f_snu = 0.5 / s * (h - (nu + 1.0) / nu * h2)
        dconst = 0.5 * (special.digamma(0.5 * (nu + 1.0)) - special.digamma(0.5 * nu)) - 0.5 / nu
        d2const = (0.25 * (special.polygamma(1, 0.5 * (nu + 1.0))
                           - special.polygamma(1, 0.5 * nu)) + 0.5 / nu**2)
        f_nu = dconst - 0.5 * np.log1p(w) + 0.5 * (nu + 1.0) / nu * h
        f_nunu = (d2const + 0.5 * h / nu - 0.5 * h / nu**2
                  - 0.5 * (nu + 1.0) / nu**2 * h2)
        return s, f_s, f_nu, f_ss, f_snu, f_nunu

    def grad_terms(self, x, idx):
        """Per-term gradients ``∇_x ℓ_t``, shape (len(idx), dim)."""
        x = np.asarray(x, dtype=np.float64)
        _, f_s, f_nu, *_ = self._scalars(x, idx)
        sig = special.expit(x)
        zq = self.z[idx, : self.order + 1]
        return np.column_stack([f_s[:, None] * zq, f_nu]) * sig

    def hess_terms(self, x, idx):
        """Per-term Hessians ``∇²_x ℓ_t``, shape (len(idx), dim, dim)."""
        x = np.asarray(x, dtype=np.float64)
        _, f_s, f_nu, f_ss, f_snu, f_nunu = self._scalars(x, idx)
        sig = special.expit(x)
        dsig = sig * (1.0 - sig)
        zq = self.z[idx, : self.order + 1]
        q1 = self.order + 1
        h = np.empty((len(f_s), self.dim, self.dim))
        h[:, :q1, :q1] = f_ss[:, None, None] * zq[:, :, None] * zq[:, None, :]
        h[:, :q1, q1] = f_snu[:, None] * zq
        h[:, q1, :q1] = h[:, :q1, q1]
        h[:, q1, q1] = f_nunu
        h *= sig[:, None] * sig[None, :]
        grad_theta = np.column_stack([f_s[:, None] * zq, f_nu])
        diag = np.arange(self.dim)
        h[:, diag, diag] += grad_theta * dsig
        return h

    def derivative_sums(self, x):
        """``(Σ_t ℓ_t, Σ_t ∇_x ℓ_t, Σ_t ∇²_x ℓ_t)`` over all terms, without per-term matrices."""
        x = np.asarray(x, dtype=np.float64)
        idx = np.arange(self.n_data)
        s, f_s, f_nu, f_ss, f_snu, f_nunu = self._scalars(x, idx)
        nu = self.natural(x)[1]
        loglik = float(np.sum(_t_const(nu) - 0.5 * np.log(s)
                              - 0.5 * (nu + 1.0) * np.log1p(self.y**2 / (nu * s))))
        grad_theta, hess_theta = _theta_sums(self.z[:, : self.order + 1], f_s, f_nu, f_ss,
                                             f_snu, f_nunu)
        sig = special.expit(x)
        grad = sig * grad_theta
        hess = hess_theta * np.outer(sig, sig) + np.diag(grad_theta * sig * (1.0 - sig))
        return loglik, grad, hess

    def control_variates(self, reference):
        """Taylor control variates around ``reference`` (:class:`ARCHControlVariates`)."""
        return ARCHControlVariates(self, reference)


def _theta_sums(zq, f_s, f_nu, f_ss, f_snu, f_nunu):
    """Gradient and Hessian sums in the natural parameters ``θ = (α, ν)``."""
    q1 = zq.shape[1]
    grad = np.concatenate([f_s @ zq, [f_nu.sum()]])
    hess = np.empty((q1 + 1, q1 + 1))
    hess[:q1, :q1] = (zq * f_ss[:, None]).T @ zq
    hess[:q1, q1] = hess[q1, :q1] = f_snu @ zq
    hess[q1, q1] = f_nunu.sum()
    return grad, hess


class ARCHControlVariates:
    """Second-order Taylor control variates of the ARCH terms in ``(σ_t², ν)``.

    Each term depends on the parameters only through ``s_t = z_tᵀ α`` (linear in ``α``) and
    ``ν``, so the proxy

    ``h_t(θ) = ℓ_t(θ̂) + f_s Δs_t + f_ν Δν + ½ (f_ss Δs_t² + 2 f_sν Δs_t Δν + f_νν Δν²)``,

    ``Δs_t = z_tᵀ (α - α̂)``, ``Δν = ν - ν̂``, is the expansion of Chen & Ghahramani (2016),
    Eq. 11, in the two summary quantities of the term (the 2-D space of Appendix C.2, with an
    exact reference point per term instead of bins). Its residual is third order in
    ``(Δs_t, Δν)`` whatever the softplus coordinates do near a zero coefficient, and its sum over
    all terms is a quadratic in ``θ`` with precomputed coefficients.

    The object offers what an MH kernel needs from a control-variate proxy (``reference``,
    ``sum_diff``, ``residual_terms``, ``n_setup_evaluations``; the sum is not a quadratic in the
    softplus coordinates, so :class:`~sksubsample.algorithms.TaylorProxy` does not apply) and
    what the racing Gibbs step needs (``residual_at``, ``sum_value``), plus per-term proxy
    gradients for a variance-reduced stochastic gradient.

    Parameters
    ----------
    target : ARCHTarget
    reference : ndarray of shape (d,)
        Softplus coordinates ``x̂`` of the reference point (the MAP).
    """

    def __init__(self, target, reference):
        self.target = target
        self.reference = np.asarray(reference, dtype=np.float64)
        idx = np.arange(target.n_data)
        _, f_s, f_nu, f_ss, f_snu, f_nunu = target._scalars(self.reference, idx)
        self.loglik_ref = target.loglik_terms(self.reference, idx)
        self.coef = np.stack([f_s, f_nu, f_ss, f_snu, f_nunu])
        self.theta_ref = softplus(self.reference)
        self.loglik_sum = float(self.loglik_ref.sum())
        self.grad_theta, self.hess_theta = _theta_sums(target.z[:, : target.order + 1], f_s,
                                                       f_nu, f_ss, f_snu, f_nunu)
        self.n_setup_evaluations = target.n_data

    @property
    def n_data(self):
        return self.target.n_data

    def _delta(self, x):
        return softplus(np.asarray(x, dtype=np.float64)) - self.theta_ref

    def sum_value(self, x):
        """``Σ_t h_t(x)`` in O(d²), no data."""
        d = self._delta(x)
        return self.loglik_sum + float(self.grad_theta @ d) + 0.5 * float(d @ self.hess_theta @ d)

    def sum_diff(self, x, x_new):
        """``Σ_t [h_t(x') - h_t(x)]`` exactly, without data."""
        return self.sum_value(x_new) - self.sum_value(x)

    def grad(self, x):
        """``∇_x Σ_t h_t(x)``."""
        d = self._delta(x)
        return special.expit(x) * (self.grad_theta + self.hess_theta @ d)

    def residual_at(self, x, idx):
        """``ℓ_t(x) - h_t(x)`` for the terms ``idx``: the racing Gibbs step's rewards."""
        target = self.target
        q1 = target.order + 1
        theta = softplus(np.asarray(x, dtype=np.float64))
        d = theta - self.theta_ref
        nu, dnu = theta[q1], d[q1]
        zq = target.z[idx, :q1]
        both = zq @ np.column_stack([theta[:q1], d[:q1]])  # one gather for s_t and Δs_t
        s, ds = both[:, 0], both[:, 1]
        y = target.y[idx]
        f_s, f_nu, f_ss, f_snu, f_nunu = self.coef[:, idx]
        loglik = _t_const(nu) - 0.5 * np.log(s) - 0.5 * (nu + 1.0) * np.log1p(y * y / (nu * s))
        proxy = (f_s * ds + f_nu * dnu
                 + 0.5 * (f_ss * ds * ds + 2.0 * f_snu * ds * dnu + f_nunu * dnu * dnu))
        return loglik - self.loglik_ref[idx] - proxy

    def residual_terms(self, x, x_new, idx):
        """``[ℓ_t(x') - ℓ_t(x)] - [h_t(x') - h_t(x)]``: the MH test's terms."""
        return self.residual_at(x_new, idx) - self.residual_at(x, idx)

    def grad_terms(self, x, idx):
        """Per-term ``∇_x h_t(x)``, shape (len(idx), d)."""
        target = self.target
        q1 = target.order + 1
        x = np.asarray(x, dtype=np.float64)
        d = self._delta(x)
        zq = target.z[idx, :q1]
        ds = zq @ d[:q1]
        dnu = d[q1]
        f_s, f_nu, f_ss, f_snu, f_nunu = self.coef[:, idx]
        g_alpha = (f_s + f_ss * ds + f_snu * dnu)[:, None] * zq
        g_nu = f_nu + f_snu * ds + f_nunu * dnu
        return np.column_stack([g_alpha, g_nu]) * special.expit(x)


class StackedControlVariates:
    """Residuals ``ℓ_t(x^(j)) - h_{j,t}(x^(j))`` of several orders on one minibatch.

    The racing Gibbs step asks for the rewards of several orders on the same terms; gathering
    the terms' data and every order's proxy coefficients once per minibatch (instead of once
    per order) and evaluating the orders together gives the same numbers as
    :meth:`ARCHControlVariates.residual_at` at a fraction of the per-call overhead.

    Parameters
    ----------
    proxies : sequence of ARCHControlVariates
        One per order, all over the same terms.
    """

    def __init__(self, proxies):
        first = proxies[0].target
        self.y, self.z = first.y, first.z
        self.q1 = [p.target.order + 1 for p in proxies]
        self.theta_ref = [p.theta_ref for p in proxies]
        self.coef = np.ascontiguousarray(np.stack([p.coef.T for p in proxies], axis=1))
        self.loglik_ref = np.ascontiguousarray(np.stack([p.loglik_ref for p in proxies], axis=1))

    def residuals(self, xs, states, idx):
        """Rewards of ``states`` (indices into the orders) at ``xs[state]`` on the terms ``idx``.

        Returns
        -------
        ndarray of shape (len(states), len(idx))
        """
        states = np.asarray(states)
        zi = self.z[idx]
        k = states.size
        s = np.empty((k, len(idx)))
        ds = np.empty((k, len(idx)))
        nu = np.empty((k, 1))
        dnu = np.empty((k, 1))
        for row, j in enumerate(states):
            q1 = self.q1[j]
            theta = softplus(np.asarray(xs[j], dtype=np.float64))
            d = theta - self.theta_ref[j]
            both = zi[:, :q1] @ np.column_stack([theta[:q1], d[:q1]])
            s[row], ds[row] = both[:, 0], both[:, 1]
            nu[row, 0], dnu[row, 0] = theta[q1], d[q1]
        coef = self.coef[idx][:, states]  # (m, k, 5)
        f_s, f_nu, f_ss, f_snu, f_nunu = np.moveaxis(coef, 2, 0).transpose(0, 2, 1)
        y2 = self.y[idx] ** 2
        loglik = _t_const(nu) - 0.5 * np.log(s) - 0.5 * (nu + 1.0) * np.log1p(y2 / (nu * s))
        proxy = (f_s * ds + f_nu * dnu
                 + 0.5 * (f_ss * ds * ds + 2.0 * f_snu * ds * dnu + f_nunu * dnu * dnu))
        return loglik - self.loglik_ref[idx][:, states].T - proxy
