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
Every per-term quantity is computed by the compiled kernels of :mod:`._arch_kernels`, which the
compiled Carlin–Chib chain calls too; the methods here gather their arguments.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from . import _arch_kernels as kernels

__all__ = ["ARCHControlVariates", "ARCHTarget", "arch_design", "inverse_softplus", "softplus"]


def softplus(x):
    """``log(1 + e^x)`` without overflow."""
    return np.logaddexp(0.0, x)


def inverse_softplus(v):
    """``x`` with ``softplus(x) = v`` for ``v > 0`` (``v + log(1 - e^{-v})``, stable)."""
    v = np.asarray(v, dtype=np.float64)
    return v + np.log(-np.expm1(-v))


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


def _indices(idx):
    return np.ascontiguousarray(idx, dtype=np.int64)


class ARCHTarget:
    """Posterior of ARCH(``order``) with Student-t innovations in softplus coordinates.

    ``θ = x ∈ R^{order+2}``: ``α_i = softplus(x_i)`` for ``i = 0..order`` and
    ``ν = softplus(x_{order+1})``. Implements the subsampled-target protocol of
    :mod:`sksubsample.algorithms.mh._target` (``n_data``, ``log_prior``, ``loglik_terms``,
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
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.y2 = self.y * self.y
        self.z = np.ascontiguousarray(z, dtype=np.float64)
        self.order = int(order)
        self.dim = self.order + 2
        self.n_data = int(self.y.size)
        self.prior_shape = float(prior_shape)
        self.prior_rate = float(prior_rate)
        self.log_prior_norm = self.dim * (self.prior_shape * math.log(self.prior_rate)
                                          - math.lgamma(self.prior_shape))

    # ----------------------------------------------------------------- parameters

    def natural(self, x):
        """``(α, ν)`` of ``x``: ``α`` of shape (order + 1,) and ``ν`` a float."""
        v = softplus(np.asarray(x, dtype=np.float64))
        return v[: self.order + 1], float(v[self.order + 1])

    def params_rows(self, xs, reference=None):
        """Parameter rows (:mod:`._arch_kernels`) of the rows of ``xs`` (shape (M, dim)),
        relative to the natural ``reference`` (zeros by default)."""
        xs = np.atleast_2d(np.asarray(xs, dtype=np.float64))
        q1 = self.order + 1
        ref = np.zeros(self.dim) if reference is None else reference
        rows = np.zeros((xs.shape[0], kernels.row_width(q1)))
        for m in range(xs.shape[0]):
            kernels.fill_params(np.ascontiguousarray(xs[m]), q1, ref, rows[m])
        return rows

    # ----------------------------------------------------------------- prior

    def log_prior(self, x):
        """Log Gamma prior density of ``softplus(x)`` times the Jacobian ``Π sigmoid(x_k)``."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        return kernels.log_prior(x, self.dim, self.prior_shape, self.prior_rate,
                                 self.log_prior_norm)

    def grad_log_prior(self, x):
        out = np.empty(self.dim)
        kernels.grad_log_prior(np.ascontiguousarray(x, dtype=np.float64), self.dim,
                               self.prior_shape, self.prior_rate, out)
        return out

    def hess_log_prior(self, x):
        x = np.asarray(x, dtype=np.float64)
        v, sig = softplus(x), special.expit(x)
        dsig = sig * (1.0 - sig)
        diag = ((self.prior_shape - 1.0) * (dsig / v - sig**2 / v**2)
                - self.prior_rate * dsig - dsig)
        return np.diag(diag)

    def log_prior_batch(self, xs):
        """:meth:`log_prior` of each row of ``xs`` (shape (M, dim)) -> (M,)."""
        xs = np.atleast_2d(np.asarray(xs, dtype=np.float64))
        return np.array([self.log_prior(x) for x in xs])

    # ----------------------------------------------------------------- likelihood

    def loglik_terms(self, x, idx):
        """``ℓ_t(x)`` for the terms ``idx``."""
        idx = _indices(idx)
        out = np.empty(idx.size)
        kernels.loglik_terms(self.y2, self.z, self.order + 1, self.params_rows(x), idx, out)
        return out

    def loglik_sums(self, xs):
        """``Σ_t ℓ_t(x)`` for each row of ``xs`` (shape (M, dim)), over all terms -> (M,)."""
        rows = self.params_rows(xs)
        out = np.empty(rows.shape[0])
        kernels.loglik_sums(self.y2, self.z, self.order + 1, rows, out)
        return out

    def _scalars(self, x, idx):
        """``s`` and the derivatives ``f_s, f_ν, f_ss, f_sν, f_νν`` of ``ℓ`` in ``(s, ν)``."""
        idx = _indices(idx)
        out = np.empty((6, idx.size))
        kernels.term_derivatives(self.y2, self.z, self.order + 1, self.params_rows(x), idx,
                                 out)
        return tuple(out)

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
        _, f_s, f_nu, f_ss, f_snu, f_nunu = self._scalars(x, idx)
        loglik = float(self.loglik_sums(x[None])[0])
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
    what the Gibbs step of ``q`` needs (``residual_at``, ``sum_value``); the per-term values come
    from the compiled kernels the chain uses.

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
        # (1, N, 5) and (1, N): the layout of the chain's per-order arrays, for one order.
        self.coef = np.ascontiguousarray(np.stack([f_s, f_nu, f_ss, f_snu, f_nunu], axis=1)[None])
        self.theta_ref = softplus(self.reference)
        self.loglik_sum = float(self.loglik_ref.sum())
        self.grad_theta, self.hess_theta = _theta_sums(target.z[:, : target.order + 1], f_s,
                                                       f_nu, f_ss, f_snu, f_nunu)
        self.n_setup_evaluations = target.n_data

    @property
    def n_data(self):
        return self.target.n_data

    def rows(self, *xs):
        """Parameter rows of the points ``xs`` relative to the reference."""
        return self.target.params_rows(np.stack(xs), self.theta_ref)

    def sum_value(self, x):
        """``Σ_t h_t(x)`` in O(d²), no data."""
        return kernels.proxy_value(self.rows(x)[0], self.target.order + 1, self.loglik_sum,
                                   self.grad_theta, self.hess_theta)

    def sum_diff(self, x, x_new):
        """``Σ_t [h_t(x') - h_t(x)]`` exactly, without data."""
        return self.sum_value(x_new) - self.sum_value(x)

    def residual_at(self, x, idx):
        """``ℓ_t(x) - h_t(x)`` for the terms ``idx``: the Gibbs step's log-factors."""
        idx = _indices(idx)
        out = np.empty(idx.size)
        t = self.target
        kernels.residual_terms(t.y2, t.z, self.coef, self.loglik_ref[None], 0, t.order + 1,
                               self.rows(x), idx, out)
        return out

    def residual_terms(self, x, x_new, idx):
        """``[ℓ_t(x') - ℓ_t(x)] - [h_t(x') - h_t(x)]``: the MH test's terms."""
        idx = _indices(idx)
        out = np.empty(idx.size)
        t = self.target
        kernels.ratio_terms(t.y2, t.z, self.coef, self.loglik_ref[None], 0, t.order + 1,
                            self.rows(x, x_new), True, idx, out)
        return out
