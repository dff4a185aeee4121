"""A reusable subsampled target for generalised linear models, with its Taylor proxies.

:class:`GLMTarget` holds a design matrix (dense, or scipy CSR for sparse data), a response, case
weights and an isotropic Gaussian prior; :class:`GLMFamily` says how a datum's log-likelihood
depends on its linear predictor ``z = xᵀθ``. The logistic family has compiled kernels
(:mod:`._glm_kernels`): every per-datum quantity of the logistic target is computed by them,
whether an interpreted MH step or the compiled chain (:mod:`._glm_chain`) asks.

The target's :meth:`GLMTarget.taylor_expansion` builds the control-variate proxies (second or
third order in ``z``) with an O(d²) bound on the second moment of their residuals, which the
bounded Barker test turns into a minibatch size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import linalg, sparse, special

from ..mh._acceptance import bounded_batch_size
from ..mh._strata import Strata
from . import _kernels as kernels

__all__ = ["BERNOULLI_LOGIT", "GLMFamily", "GLMTarget"]


class GLMFamily(NamedTuple):
    """A per-datum log-likelihood ``ℓ(z, y)`` of the linear predictor ``z = xᵀθ``.

    Attributes
    ----------
    loglik : callable
        ``loglik(z, y) -> ndarray``, elementwise.
    d1, d2 : callable
        ``∂ℓ/∂z`` and ``∂²ℓ/∂z²``, elementwise.
    lipschitz : float or None
        A constant ``L`` with ``|ℓ(z', y) - ℓ(z, y)| <= L |z' - z|`` for all y, if one exists.
    name : str
    d3_bound : float or None, default None
        ``M3 >= sup_{z, y} |∂³ℓ/∂z³|``, if finite.
    d3 : callable or None, default None
        ``∂³ℓ/∂z³``, elementwise (third-order proxies need it).
    local_derivative_bound : callable or None, default None
        ``local_derivative_bound(k, z, radius) -> ndarray``: for ``k`` in {3, 4}, a bound of
        ``|∂^k ℓ|`` on ``[z - radius, z + radius]`` for every element of ``z`` (``radius`` may
        be ``inf``). The residual bounds of the control variates need it.
    kernel : str or None, default None
        ``"logistic"`` when the family's per-datum work runs in the compiled kernels.
    """

    loglik: Callable
    d1: Callable
    d2: Callable
    lipschitz: float | None
    name: str
    d3_bound: float | None = None
    d3: Callable | None = None
    local_derivative_bound: Callable | None = None
    kernel: str | None = None


def _log_sigmoid(z):
    """``log σ(z) = min(z, 0) - log1p(exp(-|z|))``: no overflow for any z."""
    out = np.exp(-np.abs(z))
    np.log1p(out, out=out)
    return np.minimum(z, 0.0) - out


def _bernoulli_logit_loglik(z, s):
    return _log_sigmoid(s * z)


def _bernoulli_logit_d1(z, s):
    return s * special.expit(-s * z)


def _bernoulli_logit_d2(z, s):
    return -special.expit(z) * special.expit(-z)


def _bernoulli_logit_d3(z, s):
    p = special.expit(s * z)
    return -s * p * (1.0 - p) * (1.0 - 2.0 * p)


def _log_sigmoid_derivative_abs(k, t):
    """``|d^k/dt^k log σ(t)|`` for k in {3, 4}: even functions of t."""
    p = special.expit(t)
    if k == 3:
        return p * (1.0 - p) * np.abs(1.0 - 2.0 * p)
    return p * (1.0 - p) * np.abs(1.0 - 6.0 * p + 6.0 * p * p)


#: Grid of the envelopes: |t| in [0, 60] with step 2⁻¹⁰.
_ENVELOPE_STEP = 2.0**-10
_ENVELOPE_END = 60.0


@lru_cache(maxsize=2)
def _log_sigmoid_envelope(k):
    """``E(t) >= sup_{t' >= t} |(log σ)^{(k)}(t')|`` tabulated on a grid of ``t >= 0``.

    A suffix maximum of the derivative on the grid, raised by its largest change between two
    neighbouring grid points (a bound of the derivative's variation inside a grid cell; the
    functions are smooth with slopes below 0.2). Beyond the grid the functions decrease, so
    the last grid value holds.
    """
    t = np.arange(0.0, _ENVELOPE_END + _ENVELOPE_STEP, _ENVELOPE_STEP)
    g = _log_sigmoid_derivative_abs(k, t)
    slope = np.abs(np.diff(g)).max()
    suffix = np.maximum.accumulate(g[::-1])[::-1]
    return suffix + 2.0 * slope


def _bernoulli_logit_local_bound(k, z, radius):
    """Bound of ``|∂^k ℓ|`` on ``[z - radius, z + radius]`` for ``ℓ = log σ(s z)``."""
    envelope = _log_sigmoid_envelope(k)
    nearest = np.maximum(np.abs(np.asarray(z, dtype=np.float64)) - radius, 0.0)
    cell = np.minimum(nearest / _ENVELOPE_STEP, envelope.size - 1).astype(np.int64)
    return envelope[cell]


#: Logistic regression with the response coded as a sign ``s = 2y - 1``: ``ℓ = log σ(s z)``;
#: log σ is 1-Lipschitz, and ``|∂³ log σ| = σ(1-σ)|1-2σ| <= 1/(6√3)`` (attained at
#: ``σ = (3 ± √3)/6``). (Module-level functions, so targets pickle for process backends.)
BERNOULLI_LOGIT = GLMFamily(_bernoulli_logit_loglik, _bernoulli_logit_d1, _bernoulli_logit_d2,
                            lipschitz=1.0, name="bernoulli-logit",
                            d3_bound=1.0 / (6.0 * np.sqrt(3.0)), d3=_bernoulli_logit_d3,
                            local_derivative_bound=_bernoulli_logit_local_bound,
                            kernel="logistic")


class Design(NamedTuple):
    """A design matrix in the five arguments of the compiled kernels."""

    X: np.ndarray
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    sparse: bool


def _as_design(X):
    if sparse.issparse(X):
        csr = sparse.csr_matrix(X, dtype=np.float64)
        csr.sum_duplicates()
        csr.sort_indices()
        return csr, Design(np.empty((0, csr.shape[1])), csr.data,
                           csr.indices.astype(np.int64), csr.indptr.astype(np.int64), True)
    dense = np.ascontiguousarray(X, dtype=np.float64)
    return dense, Design(dense, np.empty(0), np.empty(0, dtype=np.int64),
                         np.empty(0, dtype=np.int64), False)


def _indices(idx):
    return np.ascontiguousarray(idx, dtype=np.int64).reshape(-1)


class GLMTarget:
    """Subsampled target of a generalised linear model with an isotropic Gaussian prior.

    ``ℓ_i(θ) = w_i family.loglik(x_iᵀθ, y_i)`` and ``log p0(θ) = log N(θ; 0, prior_scale² I)``.
    Implements every protocol of :mod:`sksubsample.algorithms.mh._target` (an intercept is a
    column of ones in ``X``).

    Parameters
    ----------
    X : ndarray or scipy sparse matrix of shape (n_data, d)
        Dense, or sparse (kept in CSR form: minibatches gather sparse rows, nothing is
        densified).
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
        self.X, self.design = _as_design(X)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.family = family
        self.n_data, self.n_features = self.X.shape
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        if self.weights is not None and (self.weights.shape != (self.n_data,)
                                         or not np.all(self.weights >= 0)
                                         or not np.all(np.isfinite(self.weights))):
            raise ValueError("weights must be finite, non-negative, one per row of X")
        self._kernel_weights = np.empty(0) if self.weights is None else self.weights
        self.prior_scale = float(prior_scale)
        self.prior_precision = 1.0 / self.prior_scale**2
        self._log_norm = -self.n_features * (np.log(self.prior_scale)
                                             + 0.5 * np.log(2.0 * np.pi))
        if self.design.sparse:
            row_norms = np.sqrt(np.asarray(self.X.multiply(self.X).sum(axis=1)).ravel())
        else:
            row_norms = np.sqrt(np.einsum("ij,ij->i", self.X, self.X))
        self.max_row_norm = float(np.max(self.weight_terms(row_norms)))
        # Xᵀ diag(w²) X: the data's part of every O(d²) variance bound (weights enter squared).
        self.gram = self.weighted_gram(None if self.weights is None else self.weights**2)

    @property
    def compiled(self):
        """Whether the family's per-datum work runs in compiled kernels."""
        return self.family.kernel == "logistic"

    def weighted_gram(self, row_weights, rows=None):
        """``sum_i v_i x_i x_iᵀ`` over ``rows`` (all when None) with the weights ``v`` of
        those rows (``row_weights`` aligned with ``rows``; all ones when None)."""
        weights = None if row_weights is None else [row_weights]
        return self.weighted_grams(weights, rows)[0]

    #: Sparse designs with at most this many columns are summed over in dense blocks.
    _DENSE_BLOCK_COLUMNS = 256

    @property
    def _block_rows(self):
        # Rows per block of the set-up sums: a block of ~2 MB stays in cache.
        return max(256, min(16384, (1 << 18) // max(self.n_features, 1)))

    def row_blocks(self, rows=None):
        """``(start, block)`` pairs covering the design (or ``rows`` of it) in order, each
        block a dense array of consecutive rows.

        Every sum of the set-up over rows goes through these blocks, so a dense design and the
        same design in CSR form (up to ``_DENSE_BLOCK_COLUMNS`` columns) are summed by the same
        BLAS calls on the same numbers: the sums, hence the proxies and the chains, are
        bit-identical whichever form the data came in.
        """
        X = self.X if rows is None else self.X[rows]
        size = self._block_rows
        for start in range(0, X.shape[0], size):
            block = X[start:start + size]
            yield start, (block.toarray() if self.design.sparse else block)

    def _summed_in_blocks(self):
        return not self.design.sparse or self.n_features <= self._DENSE_BLOCK_COLUMNS

    def weighted_grams(self, row_weights, rows=None):
        """``sum_i v_i x_i x_iᵀ`` for each weight vector ``v`` of ``row_weights`` (a list of
        arrays aligned with ``rows``, or None for one unweighted sum), over ``rows`` (all when
        None).

        Returns an array of shape ``(len(row_weights), d, d)``; one pass over the design.
        """
        weights = [None] if row_weights is None else list(row_weights)
        d = self.n_features
        if not self._summed_in_blocks():
            X = self.X if rows is None else self.X[rows]
            return np.stack([np.asarray((X.T @ (X if w is None else sparse.diags(w) @ X))
                                        .toarray()) for w in weights])
        out = np.zeros((len(weights), d, d))
        for start, block in self.row_blocks(rows):
            stop = start + block.shape[0]
            for j, w in enumerate(weights):
                scaled = block.T if w is None else block.T * w[start:stop]
                out[j] += scaled @ block
        return out

    def transpose_dot(self, values):
        """``Xᵀ v`` for a vector of one value per row."""
        if not self._summed_in_blocks():
            return np.asarray(self.X.T @ values).ravel()
        out = np.zeros(self.n_features)
        for start, block in self.row_blocks():
            out += block.T @ values[start:start + block.shape[0]]
        return out

    def dense_rows(self, idx):
        """The rows ``idx`` (an index array or a slice) of the design as a dense array."""
        rows = self.X[idx if isinstance(idx, slice) else np.asarray(idx)]
        return rows.toarray() if self.design.sparse else rows

    def predict(self, theta):
        """``X θ`` for one or several parameter vectors (columns of ``theta``)."""
        theta = np.asarray(theta, dtype=np.float64)
        if not self._summed_in_blocks():
            return np.asarray(self.X @ theta)
        out = np.empty((self.n_data, *theta.shape[1:]))
        for start, block in self.row_blocks():
            out[start:start + block.shape[0]] = block @ theta
        return out

    def weight_terms(self, values, idx=None):
        """``w_i × values`` for the rows ``idx`` (all rows when None); values when unweighted."""
        if self.weights is None:
            return values
        w = self.weights if idx is None else self.weights[np.asarray(idx)]
        return values * (w if values.ndim == 1 else w.reshape((-1,) + (1,) * (values.ndim - 1)))

    def _linear_predictors(self, thetas, idx):
        idx = np.asarray(idx)
        if idx.size == self.n_data:
            # idx is then a permutation of all data: reorder the products, not the matrix.
            return self.predict(thetas)[idx], self.y[idx]
        return np.asarray(self.X[idx] @ thetas), self.y[idx]

    def log_prior(self, theta):
        return self._log_norm - 0.5 * self.prior_precision * float(theta @ theta)

    def grad_log_prior(self, theta):
        return -self.prior_precision * theta

    def hess_log_prior(self, theta):
        return -self.prior_precision * np.eye(theta.size)

    def loglik_terms(self, theta, idx):
        if self.compiled:
            idx = _indices(idx)
            out = np.empty(idx.size)
            kernels.loglik_terms(*self.design, self.y, self._kernel_weights,
                                 np.asarray(theta, dtype=np.float64), idx, out)
            return out
        z, y = self._linear_predictors(np.asarray(theta, dtype=np.float64), idx)
        return self.weight_terms(self.family.loglik(z, y), idx)

    def loglik_ratio_terms(self, theta, theta_new, idx):
        if self.compiled:
            idx = _indices(idx)
            out = np.empty(idx.size)
            kernels.loglik_ratio_terms(*self.design, self.y, self._kernel_weights,
                                       np.asarray(theta, dtype=np.float64),
                                       np.asarray(theta_new, dtype=np.float64), idx, out)
            return out
        thetas = np.array((theta, theta_new), dtype=np.float64).T
        z, y = self._linear_predictors(thetas, idx)
        loglik = self.family.loglik(z, y[:, None])
        return self.weight_terms(loglik[:, 1] - loglik[:, 0], idx)

    def grad_terms(self, theta, idx):
        z, y = self._linear_predictors(np.asarray(theta, dtype=np.float64), idx)
        return self.weight_terms(self.family.d1(z, y), idx)[:, None] * self.dense_rows(idx)

    def hess_terms(self, theta, idx):
        z, y = self._linear_predictors(np.asarray(theta, dtype=np.float64), idx)
        rows = self.dense_rows(idx)
        d2 = self.weight_terms(self.family.d2(z, y), idx)
        return d2[:, None, None] * (rows[:, :, None] * rows[:, None, :])

    def grad_loglik_sum(self, theta):
        """``sum_i ∇ℓ_i(θ)`` over all N data (N gradient terms)."""
        theta = np.asarray(theta, dtype=np.float64)
        if self.compiled:
            out = np.empty(theta.size)
            kernels.grad_sum(*self.design, self.y, self._kernel_weights, theta, self.n_data,
                             out)
            return out
        z = self.predict(theta)
        return self.transpose_dot(self.weight_terms(self.family.d1(z, self.y)))

    def taylor_expansion(self, reference, order="auto", n_steps=None):
        """The Taylor proxies around ``reference`` (see :class:`GLMTaylorExpansion`)."""
        return GLMTaylorExpansion(self, np.asarray(reference, dtype=np.float64), order=order,
                                  n_steps=n_steps)

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


class ResidualBound(NamedTuple):
    """The constants of :func:`sksubsample.algorithms.glm._kernels.residual_bound`.

    Attributes
    ----------
    order : int
        Order of the Taylor proxies (2 or 3).
    rho : float
        Largest ``‖K⁻¹x_i‖`` over the sampled rows.
    chol : ndarray of shape (d, d)
        Lower Cholesky factor ``K`` of the Laplace precision at the expansion point.
    radii : ndarray of shape (n_radii,)
        Ascending radii of the local derivative bounds.
    grams : ndarray of shape (n_radii + 1, d, d)
        ``sum_{i sampled} M_i(R)² x_i x_iᵀ`` for each radius, then for the global bound.
    n_sampled : int
        Rows of the sampled stratum.
    """

    order: int
    rho: float
    chol: np.ndarray
    radii: np.ndarray
    grams: np.ndarray
    n_sampled: int


class GLMTaylorExpansion:
    """Taylor proxies of a GLM's terms around ``reference``, per row in O(1), with a bound.

    ``h_i(θ) = ℓ_i(θ̂) + c_i u + ½ w_i u² (+ t_i u³ / 6)`` with ``u = x_iᵀ(θ - θ̂)`` and
    ``c_i, w_i, t_i`` the derivatives of ``ℓ_i`` in ``z`` at ``ẑ_i = x_iᵀθ̂``: the per-datum
    gradient is ``c_i x_i``, the Hessian ``w_i x_i x_iᵀ``, so the sums over all N data are
    ``Xᵀc``, ``Xᵀ diag(w) X`` and ``T = sum_i t_i x_i ⊗ x_i ⊗ x_i``, and no ``(N, d, d)``
    array is formed. The control-variate residuals are what is left of ``ℓ_i(θ') - ℓ_i(θ)``.

    **Bound.** When the family bounds its derivatives locally, the second moment of the
    residuals over the sampled rows is bounded in O(d²) per step
    (:meth:`residual_variance_bound`, :func:`~sksubsample.algorithms.glm._kernels.residual_bound`).
    How tight that bound is decides the bounded Barker test's minibatch, so the expansion plans
    three choices once, at typical pairs of posterior draws from the Laplace approximation (a
    fixed internal seed: the plan is deterministic; every choice keeps the bound valid):

    * the **order** (2, or 3 for a design with ``d <= 32``): the third-order remainder is
      smaller by about ``max_i |u_i|`` but each step pays a cubic form of ``O(d³/6)``;
    * **strata**: the ``k`` rows of largest leverage ``‖K⁻¹x_i‖`` are summed exactly at every
      step, since the bound grows with the largest leverage among the sampled rows and a few
      outlying rows would otherwise force whole-data minibatches (``k`` on the grid
      ``0, 1, 2, 4, ...``);
    * the **radii** at which local derivative bounds ``M_i(R)`` weight the Gram matrix (rows far
      from the logistic curve's bend have tiny higher derivatives).

    The plan minimises the expected time, set-up plus ``n_steps`` times the work of a step
    (``k`` exact rows, ``E[b]`` random rows, the cubic form), with ``b`` the bounded test's
    minibatch at the planning tolerance; its Gram matrices are estimated on a subsample of
    rows, and only the chosen plan's are computed on every row.

    Parameters
    ----------
    target : GLMTarget
    reference : ndarray of shape (d,)
    order : {"auto", 2, 3}, default "auto"
    n_steps : int or None, default None
        MH steps the expansion will serve (the plan weighs the third order's set-up, which
        costs ``O(N d³)``, against its savings per step); None means many (10⁵).

    Attributes
    ----------
    order : int
    table : ndarray of shape (n_data, 4)
        ``(c_i, w_i, ẑ_i, t_i)`` per row (``t_i = 0`` at order 2).
    loglik_sum, grad_sum, hess_sum
        ``sum_i ℓ_i(θ̂)``, ``Xᵀc``, ``Xᵀ diag(w) X``.
    strata : Strata or None
    bound : ResidualBound or None
    planned_terms : float
        The plan's expected data terms per bounded test (exact stratum and minibatch), at
        typical pairs of posterior draws; N when there is no bound.
    """

    #: Efficiency only: the tolerance and the number of pairs of the plan.
    _PLANNING_DELTA = 0.01
    _PLANNING_PAIRS = 8
    #: Radii of the local derivative bounds, as multiples of the median ``max_i |u_i|`` of the
    #: planning pairs.
    _RADII = (0.7, 1.0, 1.4, 2.0, 2.8)
    _MAX_CUBIC_DIM = 32
    #: Steps the plan amortises its set-up over when not told.
    _DEFAULT_STEPS = 100_000

    def __init__(self, target, reference, order="auto", n_steps=None):
        if order not in ("auto", 2, 3):
            raise ValueError(f"order must be 'auto', 2 or 3, got {order!r}")
        self.target = target
        self.reference = reference
        family, y = target.family, target.y
        z = target.predict(reference)
        c = target.weight_terms(family.d1(z, y))
        w = target.weight_terms(family.d2(z, y))
        self.loglik_sum = float(np.sum(target.weight_terms(family.loglik(z, y))))
        self.grad_sum = target.transpose_dot(c)
        self.hess_sum = target.weighted_gram(w)
        self.table = np.column_stack([c, w, z, np.zeros_like(z)])
        self.strata = None
        self.bound = None
        self.order = 2
        self.planned_terms = float(target.n_data)
        self._packed_coef = np.empty(0)
        orders = self._candidate_orders(order)
        if orders:
            self._plan(orders, z, self._DEFAULT_STEPS if n_steps is None else int(n_steps))
        elif order == 3:
            raise ValueError(f"order=3 needs a design with at most {self._MAX_CUBIC_DIM} "
                             "columns and a family with d3")
        if self.order == 3:
            self.table[:, 3] = target.weight_terms(family.d3(z, y))
            self._pack_cubic_sum()

    # ------------------------------------------------------------------ planning

    def _candidate_orders(self, order):
        target = self.target
        family = target.family
        if family.local_derivative_bound is None:
            return ()
        cubic_ok = family.d3 is not None and target.n_features <= self._MAX_CUBIC_DIM
        if order == 2 or not cubic_ok:
            return (2,) if order != 3 else ()
        return (3,) if order == 3 else (2, 3)

    def _plan(self, orders, z, n_steps):
        target = self.target
        n, d = target.n_data, target.n_features
        precision = -self.hess_sum + target.prior_precision * np.eye(d)
        try:
            chol = linalg.cholesky(0.5 * (precision + precision.T), lower=True)
        except linalg.LinAlgError:
            return
        leverage = self._leverage(chol)
        rows_by_leverage = np.argsort(-leverage, kind="stable")
        rng = np.random.default_rng(0)
        pairs = [linalg.solve_triangular(chol.T, rng.standard_normal((d, 2)), lower=False).T
                 for _ in range(self._PLANNING_PAIRS)]
        whitened = np.array([[np.linalg.norm(chol.T @ a) for a in pair] for pair in pairs])
        typical = float(np.median(whitened.max(axis=1))) * float(leverage.max())
        radii = typical * np.asarray(self._RADII)
        weights2 = None if target.weights is None else target.weights**2
        # The plan's Gram matrices are estimated on a uniform subsample of the rows (exact
        # when N is small); only the chosen plan's are computed on every row.
        subsample = np.arange(n)
        if n > self._PLANNING_ROWS:
            subsample = np.sort(rng.choice(n, self._PLANNING_ROWS, replace=False))
        rank = np.empty(n, dtype=np.int64)
        rank[rows_by_leverage] = np.arange(n)
        costs = self._step_costs(n_steps)
        best = None
        for k_order in orders:
            row_weights = self._bound_weights(k_order, z, radii, weights2, subsample)
            sub_grams = target.weighted_grams(row_weights, subsample)
            setup, per_step = costs[k_order]
            taken = 0
            for k in [0] + [1 << j for j in range(max(1, n.bit_length() - 2))]:
                if k > n // 4:
                    break
                if k > taken:
                    # Subsampled rows among the k of largest leverage leave the estimate.
                    leaving = np.flatnonzero((rank[subsample] >= taken) & (rank[subsample] < k))
                    if leaving.size:
                        sub_grams -= target.weighted_grams(
                            [w[leaving] for w in row_weights], subsample[leaving])
                    taken = k
                kept = int(np.sum(rank[subsample] >= k))
                grams = sub_grams * ((n - k) / max(kept, 1))
                bound = ResidualBound(k_order, float(leverage[rows_by_leverage[k]]), chol,
                                      radii, grams, n - k)
                sizes = [bounded_batch_size(n - k, self._bound_value(bound, a, b),
                                            self._PLANNING_DELTA) for a, b in pairs]
                cost = setup + n_steps * (per_step[0] * k + per_step[1] * float(np.mean(sizes))
                                          + per_step[2])
                if best is None or cost < best[0]:
                    best = (cost, k, k_order, k + float(np.mean(sizes)))
        _, k, order, self.planned_terms = best
        row_weights = self._bound_weights(order, z, radii, weights2, None)
        grams = target.weighted_grams(row_weights)
        if k:
            top = rows_by_leverage[:k]
            grams -= target.weighted_grams([w[top] for w in row_weights], top)
            self.strata = Strata(np.sort(rows_by_leverage[:k]), np.sort(rows_by_leverage[k:]))
        self.order = order
        self.bound = ResidualBound(order, float(leverage[rows_by_leverage[k]]), chol, radii,
                                   grams, n - k)

    #: Rows on which the plan estimates its Gram matrices.
    _PLANNING_ROWS = 1 << 15

    def _bound_weights(self, order, z, radii, weights2, rows):
        """``M_i(R)² w_i²`` per row (of ``rows``, all when None) for each radius, then for the
        global derivative bound: the weights of the bound's Gram matrices."""
        z = z if rows is None else z[rows]
        if weights2 is not None and rows is not None:
            weights2 = weights2[rows]
        out = []
        for radius in (*radii, math.inf):
            scale = self.target.family.local_derivative_bound(order + 1, z, radius)
            out.append(scale**2 if weights2 is None else scale**2 * weights2)
        return out

    def _step_costs(self, n_steps):
        """Rough nanoseconds of the plan's alternatives: ``{order: (set-up, (per exact row,
        per sampled row, per step))}``. Efficiency only (every plan keeps the bound valid)."""
        target = self.target
        n, d = target.n_data, target.n_features
        design = target.design
        nnz = design.data.size / n if design.sparse else d
        compute = 40.0 + 4.0 * nnz  # two dot products and two log σ
        # A random row of a design larger than the caches waits for memory.
        footprint = (design.data.size * 16 if design.sparse else n * d * 8)
        memory = 150.0 if footprint > (64 << 20) else 0.0
        packed = d * (d + 1) * (d + 2) // 6
        return {2: (0.0, (compute, compute + memory, 0.0)),
                # The cubic sum costs N d (d(d+1)/2) multiply-adds once (BLAS), and two
                # cubic forms per step.
                3: (n * d * d * (d + 1) / 2 * 0.25, (compute, compute + memory, 3.0 * packed))}

    def _leverage(self, chol):
        """``‖K⁻¹ x_i‖`` for every row: how far row i's predictor moves per unit of ``‖Kᵀa‖``."""
        target = self.target
        leverage = np.empty(target.n_data)
        for start, rows in target.row_blocks():
            whitened = linalg.solve_triangular(chol, rows.T, lower=True)
            leverage[start:start + rows.shape[0]] = np.sqrt(
                np.einsum("ij,ij->j", whitened, whitened))
        return leverage

    @staticmethod
    def _bound_value(bound, a, a_new):
        return kernels.residual_bound(bound.order, bound.rho, bound.chol, bound.radii,
                                      bound.grams, a, a_new) / bound.n_sampled

    def _pack_cubic_sum(self):
        """``T = sum_i t_i x_i⊗x_i⊗x_i`` by its entries ``j <= k <= l`` (BLAS, by blocks)."""
        target, t = self.target, self.table[:, 3]
        n, d = target.n_data, target.n_features
        upper_j, upper_k = np.triu_indices(d)
        # by_pair[l, p] = sum_i t_i x_il x_ij x_ik for the pair p = (j, k), j <= k (the pairs
        # in the row-major order of triu_indices, built by slices rather than a gather).
        by_pair = np.zeros((d, upper_j.size))
        pairs = np.empty((min(target._block_rows, n), upper_j.size))
        for start, rows in target.row_blocks():
            column = 0
            for j in range(d):
                np.multiply(rows[:, j:j + 1], rows[:, j:], out=pairs[:rows.shape[0],
                                                                    column:column + d - j])
                column += d - j
            by_pair += (rows * t[start:start + rows.shape[0], None]).T @ pairs[:rows.shape[0]]
        index = np.array([(j, k, m) for j in range(d) for k in range(j, d)
                          for m in range(k, d)], dtype=np.int64).reshape(-1, 3)
        pair_of = np.full((d, d), -1, dtype=np.int64)
        pair_of[upper_j, upper_k] = np.arange(upper_j.size)
        permutations = np.array([6 if j < k < m else (1 if j == m else 3)
                                 for j, k, m in index], dtype=np.float64)
        self._packed_coef = by_pair[index[:, 2], pair_of[index[:, 0], index[:, 1]]] * permutations

    # ------------------------------------------------------------------ proxies

    @property
    def cubic_sum(self):
        """The third-order sum packed for :func:`~._glm_kernels.cubic_form` (empty at
        order 2)."""
        return self._packed_coef

    def sum_diff(self, a, a_new):
        """``sum_i [h_i(θ') - h_i(θ)]`` from the offsets, in O(d²) (+ O(d³/6) at order 3)."""
        return (kernels.proxy_value(self.grad_sum, self.hess_sum, self._packed_coef,
                                    self.order, np.asarray(a_new, dtype=np.float64))
                - kernels.proxy_value(self.grad_sum, self.hess_sum, self._packed_coef,
                                      self.order, np.asarray(a, dtype=np.float64)))

    def residual_variance_bound(self, theta, theta_new):
        """``V >= (1/N_s) sum_{i sampled} r_i²`` for the residuals of :meth:`residual_terms`.

        See :func:`sksubsample.algorithms.glm._kernels.residual_bound` for the bound; the sum
        runs over the sampled stratum (all N rows unless :attr:`strata` sets some high-leverage
        rows apart to be summed exactly), ``N_s`` its size. Symmetric in ``(θ, θ')``. Returns
        None when the family has no local derivative bound.
        """
        if self.bound is None:
            return None
        return self._bound_value(self.bound, np.asarray(theta) - self.reference,
                                 np.asarray(theta_new) - self.reference)

    def diff_terms(self, a, a_new, idx):
        """``h_i(θ') - h_i(θ)`` from the offsets ``a = θ - θ̂``, ``a_new = θ' - θ̂``."""
        rows = self.target.dense_rows(idx)
        c, w, _, t = self.table[np.asarray(idx)].T
        u, v = rows @ a, rows @ a_new
        return (v - u) * (c + 0.5 * w * (v + u) + t * (v * v + u * v + u * u) / 6.0)

    def residual_terms(self, theta, theta_new, idx):
        """``[ℓ_i(θ') - ℓ_i(θ)] - [h_i(θ') - h_i(θ)]`` with the rows gathered once."""
        target = self.target
        theta = np.asarray(theta, dtype=np.float64)
        theta_new = np.asarray(theta_new, dtype=np.float64)
        if target.compiled:
            idx = _indices(idx)
            out = np.empty(idx.size)
            kernels.residual_terms(*target.design, target.y, target._kernel_weights,
                                   self.table, theta, theta_new, idx, out)
            return out
        raw = target.loglik_ratio_terms(theta, theta_new, idx)
        return raw - self.diff_terms(theta - self.reference, theta_new - self.reference, idx)
