"""The subsampled-target protocol, and a reusable generalised-linear-model target.

Everything expensive in a posterior over N data is a sum of N per-datum terms. The algorithms of
this package see a model only through a *target*: an object with the methods below. A target is
a model, not a cache: it holds data and parameters, never state keyed on which arrays it was
last called with; when two quantities share work (the log-likelihoods at θ and θ' of one
minibatch), the protocol has one method that computes both.

Required (:class:`SubsampledTarget`)
    ``n_data`` (int), ``log_prior(theta) -> float``,
    ``loglik_terms(theta, idx) -> ndarray (len(idx),)`` for an integer array ``idx`` of
    distinct data indices.

Optional, each a protocol of its own so that a kernel can state what it needs:

* :class:`SupportsLoglikRatio` - ``loglik_ratio_terms(theta, theta_new, idx)``, the per-datum
  ``ℓ_i(θ') - ℓ_i(θ)`` with the rows of ``idx`` gathered once;
* :class:`SupportsTermBound` - ``loglik_ratio_bound(theta, theta_new)``, a bound
  ``C >= max_i |ℓ_i(θ') - ℓ_i(θ)|`` for the concentration-bound tests;
* :class:`SupportsVarianceBound` - ``loglik_ratio_variance_bound(theta, theta_new)``, a bound
  ``V >= (1/N) sum_i (ℓ_i(θ') - ℓ_i(θ))²`` for the bounded Barker test;
* :class:`DifferentiableTarget` - ``grad_terms``, ``hess_terms`` (per-datum derivatives),
  ``grad_log_prior``, ``hess_log_prior``: what Taylor control variates and the Langevin
  proposal need;
* :class:`SupportsTaylorExpansion` - ``taylor_expansion(reference)``, an object that sums the
  proxies' coefficients and computes control-variate residuals in one pass per minibatch (see
  :class:`sksubsample.algorithms.TaylorProxy`); the expansion may also bound the residuals'
  second moment (``residual_variance_bound(theta, theta_new)``).

:class:`GLMTarget` implements all of them for a generalised linear model with a Gaussian prior;
a model whose likelihood depends on θ only through ``x_iᵀθ`` needs only a new
:class:`GLMFamily`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np
from scipy import linalg, special

from ._acceptance import bounded_batch_size
from ._strata import Strata

__all__ = [
    "BERNOULLI_LOGIT",
    "DifferentiableTarget",
    "GLMFamily",
    "GLMTarget",
    "SubsampledTarget",
    "SupportsLoglikRatio",
    "SupportsTaylorExpansion",
    "SupportsTermBound",
    "SupportsVarianceBound",
]


@runtime_checkable
class SubsampledTarget(Protocol):
    """A posterior ``p0(θ) Π_i exp(ℓ_i(θ))`` whose likelihood is a sum of ``n_data`` terms."""

    n_data: int

    def log_prior(self, theta: np.ndarray) -> float:
        """``log p0(θ)`` (``-inf`` outside the support)."""

    def loglik_terms(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """``ℓ_i(θ)`` for ``i`` in ``idx``, shape ``(len(idx),)``."""


@runtime_checkable
class SupportsLoglikRatio(Protocol):
    def loglik_ratio_terms(self, theta: np.ndarray, theta_new: np.ndarray,
                           idx: np.ndarray) -> np.ndarray:
        """``ℓ_i(θ') - ℓ_i(θ)`` for ``i`` in ``idx``, shape ``(len(idx),)``."""


@runtime_checkable
class SupportsTermBound(Protocol):
    def loglik_ratio_bound(self, theta: np.ndarray, theta_new: np.ndarray) -> float:
        """A bound ``C >= max_i |ℓ_i(θ') - ℓ_i(θ)|`` over all N data."""


@runtime_checkable
class SupportsVarianceBound(Protocol):
    def loglik_ratio_variance_bound(self, theta: np.ndarray, theta_new: np.ndarray) -> float:
        """A bound ``V >= (1/N) sum_i (ℓ_i(θ') - ℓ_i(θ))²`` over all N data, computed without
        touching them (it bounds the variance of a minibatch estimate of the log ratio)."""


@runtime_checkable
class DifferentiableTarget(Protocol):
    def grad_terms(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Per-datum gradients ``∇ℓ_i(θ)``, shape ``(len(idx), d)``."""

    def hess_terms(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Per-datum Hessians ``∇²ℓ_i(θ)``, shape ``(len(idx), d, d)``."""

    def grad_log_prior(self, theta: np.ndarray) -> np.ndarray:
        """``∇ log p0(θ)``, shape ``(d,)``."""

    def hess_log_prior(self, theta: np.ndarray) -> np.ndarray:
        """``∇² log p0(θ)``, shape ``(d, d)``."""


@runtime_checkable
class SupportsTaylorExpansion(Protocol):
    def taylor_expansion(self, reference: np.ndarray):
        """An object with ``loglik_sum``, ``grad_sum`` (d,), ``hess_sum`` (d, d) and the
        methods ``diff_terms(a, a_new, idx)`` and ``residual_terms(theta, theta_new, idx)``
        of the second-order Taylor proxies around ``reference``."""


class GLMFamily(NamedTuple):
    """A per-datum log-likelihood ``ℓ(z, y)`` of the linear predictor ``z = xᵀθ``.

    Attributes
    ----------
    loglik : callable
        ``loglik(z, y) -> ndarray``, elementwise.
    d1 : callable
        ``∂ℓ/∂z``, elementwise.
    d2 : callable
        ``∂²ℓ/∂z²``, elementwise.
    lipschitz : float or None
        A constant ``L`` with ``|ℓ(z', y) - ℓ(z, y)| <= L |z' - z|`` for all y, if one exists.
    name : str
    d3_bound : float or None, default None
        ``M3 >= sup_{z, y} |∂³ℓ/∂z³|``, if finite: it bounds the remainder of the second-order
        Taylor proxies, hence the control-variate residuals.
    """

    loglik: Callable
    d1: Callable
    d2: Callable
    lipschitz: float | None
    name: str
    d3_bound: float | None = None


def _log_sigmoid(z):
    """``log σ(z) = min(z, 0) - log1p(exp(-|z|))``: no overflow for any z, and faster than
    ``scipy.special.log_expit`` on long vectors."""
    out = np.exp(-np.abs(z))
    np.log1p(out, out=out)
    return np.minimum(z, 0.0) - out


def _bernoulli_logit_loglik(z, s):
    return _log_sigmoid(s * z)


def _bernoulli_logit_d1(z, s):
    return s * special.expit(-s * z)


def _bernoulli_logit_d2(z, s):
    return -special.expit(z) * special.expit(-z)


#: Logistic regression with the response coded as a sign ``s = 2y - 1``: ``ℓ = log σ(s z)``;
#: log σ is 1-Lipschitz, and ``|∂³ log σ| = σ(1-σ)|1-2σ| <= 1/(6√3)`` (attained at
#: ``σ = (3 ± √3)/6``). (Module-level functions, so targets pickle for process backends.)
BERNOULLI_LOGIT = GLMFamily(_bernoulli_logit_loglik, _bernoulli_logit_d1, _bernoulli_logit_d2,
                            lipschitz=1.0, name="bernoulli-logit",
                            d3_bound=1.0 / (6.0 * np.sqrt(3.0)))


def _taylor_residual_bound(m3, chol, rho, gram, a, a_new):
    """``sum_i r_i²`` bound of :meth:`_GLMTaylorExpansion.residual_variance_bound` (not
    divided by the number of rows)."""
    step = a_new - a
    max_u = rho * np.linalg.norm(chol.T @ a)  # >= max_i |u_i| over the sampled rows
    max_v = rho * np.linalg.norm(chol.T @ a_new)
    cubic = 2.0 * (m3 / 6.0) ** 2 * (max_u**4 * float(a @ gram @ a)
                                      + max_v**4 * float(a_new @ gram @ a_new))
    slope = (m3 / 2.0) ** 2 * max(max_u, max_v) ** 4 * float(step @ gram @ step)
    return min(cubic, slope)


class _GLMTaylorExpansion:
    """Second-order Taylor proxies of a GLM's terms around ``reference``, per row in O(1).

    ``h_i(θ) = ℓ_i(θ̂) + c_i a_i + ½ w_i a_i²`` with ``a_i = x_iᵀ(θ - θ̂)``, ``c_i = ∂ℓ/∂z`` and
    ``w_i = ∂²ℓ/∂z²`` at ``z_i = x_iᵀθ̂``: the per-datum gradient is ``c_i x_i`` and the Hessian
    ``w_i x_i x_iᵀ``, so the sums over all N data are ``Xᵀc`` and ``Xᵀ diag(w) X`` and no
    ``(N, d, d)`` array is ever formed.

    When the family bounds ``|∂³ℓ/∂z³| <= M3``, the residuals' second moment is bounded in
    O(d²) per step (:meth:`residual_variance_bound`) from three numbers computed here in the
    same pass over the data: the Gram matrix ``G = XᵀX``, a Cholesky factor ``K`` of the
    Laplace precision ``P = -H + prior precision`` (``P = K Kᵀ``) and the largest whitened row
    norm ``ρ = max_i ‖K⁻¹ x_i‖``.
    """

    _CHUNK = 65536

    def __init__(self, target, reference):
        self.target = target
        X, y, family = target.X, target.y, target.family
        z = X @ reference
        c = target.weight_terms(family.d1(z, y))
        w = target.weight_terms(family.d2(z, y))
        self.loglik_sum = float(np.sum(target.weight_terms(family.loglik(z, y))))
        self.grad_sum = X.T @ c
        self.hess_sum = (X.T * w) @ X
        # The per-row numbers a residual needs, side by side: one gather per minibatch.
        self._table = np.column_stack([c, w, z])
        self.reference = reference
        self._bound = None
        self.strata = None
        if family.d3_bound is not None:
            self._bound = self._residual_bound_constants(X, family.d3_bound)

    def _residual_bound_constants(self, X, d3_bound):
        precision = -self.hess_sum + self.target._prior_precision * np.eye(X.shape[1])
        try:
            chol = linalg.cholesky(0.5 * (precision + precision.T), lower=True)
        except linalg.LinAlgError:
            return None
        leverage = np.empty(X.shape[0])  # ‖K⁻¹ x_i‖: how far row i can move its own z_i
        for start in range(0, X.shape[0], self._CHUNK):
            whitened = linalg.solve_triangular(chol, X[start:start + self._CHUNK].T,
                                               lower=True)
            leverage[start:start + whitened.shape[1]] = np.sqrt(
                np.einsum("ij,ij->j", whitened, whitened))
        n_exact, order, gram_rest = self._choose_exact_rows(X, d3_bound, chol, leverage)
        rho = float(leverage[order[n_exact]]) if n_exact < X.shape[0] else 0.0
        self.strata = None
        if n_exact:
            self.strata = Strata(np.sort(order[:n_exact]), np.sort(order[n_exact:]))
        return d3_bound, chol, rho, gram_rest, X.shape[0] - n_exact

    #: Efficiency only (any choice keeps every bound valid): the tolerance and the number of
    #: typical pairs of states at which the expected work of a bounded test is estimated.
    _PLANNING_DELTA = 0.01
    _PLANNING_PAIRS = 8

    def _choose_exact_rows(self, X, d3_bound, chol, leverage):
        """How many of the highest-leverage rows to evaluate exactly at every step.

        The residual bound grows as ``ρ⁴`` with the largest leverage ``ρ`` among the sampled
        rows, so a few outlying rows (heavy-tailed features) can force every minibatch to the
        whole data set. Taking the ``k`` rows of largest leverage out of the sampled stratum
        (and summing their residuals exactly) lowers ``ρ``; ``k`` is chosen on a grid
        ``0, 1, 2, 4, ...`` to minimise ``k + E[b_k]``, the expected terms per step, with
        ``b_k`` the bounded test's minibatch at typical pairs of posterior draws ``θ, θ'``
        from the Laplace approximation (a fixed internal seed: the choice is deterministic).

        Returns ``(k, order, G_rest)`` with ``order`` the rows by decreasing leverage and
        ``G_rest = Xᵀ W² X`` over the sampled rows.
        """
        n, d = X.shape
        order = np.argsort(-leverage, kind="stable")
        weights2 = None if self.target.weights is None else self.target.weights**2
        rng = np.random.default_rng(0)
        pairs = [linalg.solve_triangular(chol.T, rng.standard_normal((d, 2)), lower=False)
                 for _ in range(self._PLANNING_PAIRS)]
        gram = self.target.gram.copy()
        best = (math.inf, 0, gram.copy())
        taken = 0
        candidates = [0] + [1 << j for j in range(max(1, n.bit_length() - 2))]
        for k in candidates:
            if k > n // 4:
                break
            rows = order[taken:k]
            block = X[rows]
            gram -= (block.T * (1.0 if weights2 is None else weights2[rows])) @ block
            taken = k
            rho = float(leverage[order[k]])
            sizes = [bounded_batch_size(n - k, _taylor_residual_bound(
                d3_bound, chol, rho, gram, a, a_new) / (n - k), self._PLANNING_DELTA)
                for a, a_new in (pair.T for pair in pairs)]
            cost = k + float(np.mean(sizes))
            if cost < best[0]:
                best = (cost, k, gram.copy())
        return best[1], order, best[2]

    def residual_variance_bound(self, theta, theta_new):
        """``V >= (1/N_s) sum_{i sampled} r_i²`` for the residuals of :meth:`residual_terms`.

        The sum runs over the sampled stratum (all N rows unless :attr:`strata` sets some
        high-leverage rows apart to be summed exactly), ``N_s`` its size.

        With ``u_i = x_iᵀ(θ - θ̂)``, ``v_i = x_iᵀ(θ' - θ̂)`` and ``R(z)`` the Taylor remainder
        of ``ℓ`` around ``ẑ_i``, ``r_i = R(v_i) - R(u_i)``. Two bounds hold for every i:

        * ``|R(z)| <= M3 |z - ẑ|³ / 6`` gives ``r_i² <= 2 (M3/6)² (u_i⁶ + v_i⁶)``;
        * ``|R'(z)| <= M3 (z - ẑ)² / 2`` gives ``r_i² <= (M3/2)² max(u_i², v_i²)² (v_i - u_i)²``.

        By Cauchy–Schwarz in the Laplace metric, ``|x_iᵀa| <= ρ ‖Kᵀa‖`` with ``ρ`` the largest
        leverage ``‖K⁻¹x_i‖`` of a sampled row, so one factor ``u_i²`` stays under the sum while
        the others are bounded by their maximum: ``sum_i u_i⁶ <= (ρ ‖Kᵀa‖)⁴ aᵀGa``. With case
        weights, ``r_i`` carries ``w_i`` and ``G = Xᵀ diag(w²) X`` (over the sampled rows). Each
        bound costs O(d²); the smaller one is returned. Returns None when the family has no
        third-derivative bound.
        """
        if self._bound is None:
            return None
        m3, chol, rho, gram, n_sampled = self._bound
        a = theta - self.reference
        a_new = theta_new - self.reference
        return _taylor_residual_bound(m3, chol, rho, gram, a, a_new) / n_sampled

    def diff_terms(self, a, a_new, idx):
        """``h_i(θ') - h_i(θ)`` from the offsets ``a = θ - θ̂``, ``a_new = θ' - θ̂``."""
        rows = self.target.X[idx]
        c, w, _ = self._table[idx].T
        p_old, p_new = rows @ a, rows @ a_new
        return c * (p_new - p_old) + 0.5 * w * (p_new**2 - p_old**2)

    def residual_terms(self, theta, theta_new, idx):
        """``[ℓ_i(θ') - ℓ_i(θ)] - [h_i(θ') - h_i(θ)]`` with the rows gathered once.

        ``x_iᵀ(θ - θ̂) = x_iᵀθ - z_i`` reuses the linear predictors of the log-likelihoods, so
        the whole per-step data work is one ``(b, d) @ (d, 2)`` product.
        """
        target = self.target
        c, w, z_ref = self._table[idx].T
        z = target.X[idx] @ np.array((theta, theta_new)).T
        y = target.y[idx]
        z_old, z_new = z[:, 0], z[:, 1]
        loglik = target.family.loglik(z, y[:, None])
        # a'² - a² = (z' - z)(z' + z - 2 z_ref)
        dz = z_new - z_old
        taylor = dz * (c + 0.5 * w * (z_new + z_old - 2.0 * z_ref))
        return target.weight_terms(loglik[:, 1] - loglik[:, 0], idx) - taylor


class GLMTarget:
    """Subsampled target of a generalised linear model with an isotropic Gaussian prior.

    ``ℓ_i(θ) = w_i family.loglik(x_iᵀθ, y_i)`` and ``log p0(θ) = log N(θ; 0, prior_scale² I)``.
    Implements every protocol of this module (an intercept is a column of ones in ``X``).

    Parameters
    ----------
    X : ndarray of shape (n_data, d)
    y : ndarray of shape (n_data,)
        The response in the family's coding (e.g. signs ``±1`` for ``BERNOULLI_LOGIT``).
    prior_scale : float > 0
    family : GLMFamily, default BERNOULLI_LOGIT
    weights : ndarray of shape (n_data,) or None, default None
        Non-negative case weights ``w_i``: the log-likelihood is ``sum_i w_i ℓ(x_iᵀθ, y_i)``,
        so an integer weight k is the same posterior as k copies of the row. Every per-datum
        quantity (terms, derivatives, proxies, residuals, bounds) carries its weight.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.5], [1.0, -1.0], [1.0, 2.0]])
    >>> target = GLMTarget(X, np.array([1.0, -1.0, 1.0]), prior_scale=2.0)
    >>> target.loglik_terms(np.zeros(2), np.arange(3)).round(4).tolist()
    [-0.6931, -0.6931, -0.6931]
    """

    def __init__(self, X, y, prior_scale, family=BERNOULLI_LOGIT, weights=None):
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64)
        self.family = family
        self.n_data = self.X.shape[0]
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        if self.weights is not None and (self.weights.shape != (self.n_data,)
                                         or not np.all(self.weights >= 0)
                                         or not np.all(np.isfinite(self.weights))):
            raise ValueError("weights must be finite, non-negative, one per row of X")
        self.prior_scale = float(prior_scale)
        self._prior_precision = 1.0 / self.prior_scale**2
        self._log_norm = -self.X.shape[1] * (np.log(self.prior_scale)
                                             + 0.5 * np.log(2.0 * np.pi))
        row_norms = np.sqrt(np.einsum("ij,ij->i", self.X, self.X))
        self.max_row_norm = float(np.max(self.weight_terms(row_norms)))
        # Xᵀ diag(w²) X: the data's part of every O(d²) variance bound (weights enter squared).
        squared = None if self.weights is None else self.weights**2
        self.gram = self.X.T @ self.X if squared is None else (self.X.T * squared) @ self.X

    def weight_terms(self, values, idx=None):
        """``w_i × values`` for the rows ``idx`` (all rows when None); values when unweighted."""
        if self.weights is None:
            return values
        w = self.weights if idx is None else self.weights[np.asarray(idx)]
        return values * (w if values.ndim == 1 else w.reshape((-1,) + (1,) * (values.ndim - 1)))

    def _linear_predictors(self, thetas, idx):
        """``X[idx] @ thetas`` with the rows gathered once; all N rows are not copied."""
        idx = np.asarray(idx)
        if idx.size == self.n_data:
            # idx is then a permutation of all data: reorder the products, not the matrix.
            return (self.X @ thetas)[idx], self.y[idx]
        return self.X[idx] @ thetas, self.y[idx]

    def log_prior(self, theta):
        return self._log_norm - 0.5 * self._prior_precision * float(theta @ theta)

    def grad_log_prior(self, theta):
        return -self._prior_precision * theta

    def hess_log_prior(self, theta):
        return -self._prior_precision * np.eye(theta.size)

    def loglik_terms(self, theta, idx):
        z, y = self._linear_predictors(np.asarray(theta, dtype=np.float64), idx)
        return self.weight_terms(self.family.loglik(z, y), idx)

    def loglik_ratio_terms(self, theta, theta_new, idx):
        thetas = np.array((theta, theta_new), dtype=np.float64).T
        z, y = self._linear_predictors(thetas, idx)
        loglik = self.family.loglik(z, y[:, None])
        return self.weight_terms(loglik[:, 1] - loglik[:, 0], idx)

    def grad_terms(self, theta, idx):
        z, y = self._linear_predictors(np.asarray(theta, dtype=np.float64), idx)
        return self.weight_terms(self.family.d1(z, y), idx)[:, None] * self.X[np.asarray(idx)]

    def hess_terms(self, theta, idx):
        z, y = self._linear_predictors(np.asarray(theta, dtype=np.float64), idx)
        rows = self.X[np.asarray(idx)]
        d2 = self.weight_terms(self.family.d2(z, y), idx)
        return d2[:, None, None] * (rows[:, :, None] * rows[:, None, :])

    def taylor_expansion(self, reference):
        return _GLMTaylorExpansion(self, np.asarray(reference, dtype=np.float64))

    def loglik_ratio_bound(self, theta, theta_new):
        """``C = L max_i w_i‖x_i‖ ‖θ' - θ‖`` for an L-Lipschitz family (None when it has no
        L)."""
        if self.family.lipschitz is None:
            return None
        step = float(np.linalg.norm(np.asarray(theta_new) - theta))
        return self.family.lipschitz * self.max_row_norm * step

    def loglik_ratio_variance_bound(self, theta, theta_new):
        """``V = L² (θ' - θ)ᵀ (Xᵀ W² X / N) (θ' - θ) >= (1/N) sum_i (ℓ_i(θ') - ℓ_i(θ))²`` for
        an L-Lipschitz family (None when it has no L): ``|ℓ_i(θ') - ℓ_i(θ)| <= w_i L
        |x_iᵀ(θ' - θ)|``."""
        if self.family.lipschitz is None:
            return None
        step = np.asarray(theta_new, dtype=np.float64) - theta
        return self.family.lipschitz**2 * float(step @ self.gram @ step) / self.n_data
