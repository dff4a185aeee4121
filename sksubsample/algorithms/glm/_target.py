"""A reusable subsampled target for generalised linear models.

:class:`GLMTarget` holds a design matrix (dense, or scipy CSR for sparse data), a response, case
weights and an isotropic Gaussian prior; a :class:`~._family.GLMFamily` says how a datum's
log-likelihood depends on its linear predictor ``z = xᵀθ``. The logistic family has compiled
kernels (:mod:`._kernels`): every per-datum quantity of the logistic target is computed by them,
whether an interpreted MH step or the compiled MH step asks, and the target lends the MH driver
a compiled model (:meth:`GLMTarget.compiled_model`, :mod:`._model`) so that its chains run in
machine code.

The target's :meth:`GLMTarget.taylor_expansion` builds the control-variate proxies
(:class:`~._expansion.GLMTaylorExpansion`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import sparse

from ..._utils import check_positive, check_rows, check_vector
from . import _kernels as kernels
from ._expansion import GLMTaylorExpansion
from ._family import BERNOULLI_LOGIT, GLMFamily
from ._kernels import as_indices
from ._model import glm_model

__all__ = ["Design", "GLMTarget", "GaussianPrior", "summed_grams"]


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
    dense = np.ascontiguousarray(check_rows(X, "X"))
    return dense, Design(dense, np.empty(0), np.empty(0, dtype=np.int64),
                         np.empty(0, dtype=np.int64), False)


class GaussianPrior:
    """The isotropic Gaussian prior ``N(0, prior_scale² I)`` of a GLM target's ``n_features``
    coefficients: ``log_prior`` and its derivatives.

    Parameters
    ----------
    prior_scale : float > 0
    n_features : int
    """

    def __init__(self, prior_scale, n_features):
        self.prior_scale = check_positive(prior_scale, "prior_scale")
        self.prior_precision = 1.0 / self.prior_scale**2
        self.log_norm = -n_features * (np.log(self.prior_scale) + 0.5 * np.log(2.0 * np.pi))

    def log_prior(self, theta):
        return self.log_norm - 0.5 * self.prior_precision * float(theta @ theta)

    def grad_log_prior(self, theta):
        return -self.prior_precision * theta

    def hess_log_prior(self, theta):
        return -self.prior_precision * np.eye(theta.size)


def summed_grams(blocks, weights, d):
    """``sum_i v_i x_i x_iᵀ`` for each weight vector ``v`` of ``weights`` (None: all ones),
    over the dense ``(start, block)`` pairs of ``blocks`` (the weights indexed from ``start``).

    Parameters
    ----------
    blocks : iterable of (int, ndarray of shape (n_rows, d))
    weights : list of ndarray or None
    d : int

    Returns
    -------
    ndarray of shape (len(weights), d, d)
    """
    out = np.zeros((len(weights), d, d))
    for start, block in blocks:
        stop = start + block.shape[0]
        for j, w in enumerate(weights):
            scaled = block.T if w is None else block.T * w[start:stop]
            out[j] += scaled @ block
    return out


class GLMTarget(GaussianPrior):
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
        if not isinstance(family, GLMFamily):
            raise TypeError(f"family must be a GLMFamily such as BERNOULLI_LOGIT, got "
                            f"{type(family).__name__}")
        self.X, self.design = _as_design(X)
        self.n_data, self.n_features = self.X.shape
        self.y = np.ascontiguousarray(check_vector(y, "y", self.n_data, per="X"))
        if family.kernel == "logistic" and not np.all(np.abs(self.y) == 1.0):
            raise ValueError("y must hold +1 or -1 for the Bernoulli-logit family (labels in "
                             "{0, 1} code as 2 * y - 1)")
        self.family = family
        self.weights = None if weights is None else check_vector(weights, "weights",
                                                                 self.n_data, per="X")
        if self.weights is not None and not np.all(self.weights >= 0):
            raise ValueError("weights must be non-negative, one per row of X")
        self.kernel_weights = np.empty(0) if self.weights is None else self.weights
        super().__init__(prior_scale, self.n_features)
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
        """``sum_i v_i x_i x_iᵀ`` over ``rows`` with the weights ``v`` of those rows.

        Parameters
        ----------
        row_weights : ndarray of shape (n_rows,) or None
            The weights ``v_i``, aligned with ``rows`` (with all rows when ``rows`` is None);
            None for all ones.
        rows : ndarray of int of shape (n_rows,) or None, default None
            Indices of the rows summed over; None for all ``n_data`` rows.

        Returns
        -------
        ndarray of shape (d, d)
        """
        weights = None if row_weights is None else [row_weights]
        return self.weighted_grams(weights, rows)[0]

    #: Sparse designs with at most this many columns are summed over in dense blocks.
    _DENSE_BLOCK_COLUMNS = 256

    @property
    def block_rows(self):
        # Rows per block of the set-up sums: a block of ~2 MB stays in cache.
        return max(256, min(16384, (1 << 18) // max(self.n_features, 1)))

    def row_blocks(self, rows=None):
        """``(start, block)`` pairs covering the design (or ``rows`` of it) in order.

        Each block is a dense array of consecutive rows. Every sum of the set-up over rows goes
        through these blocks, so a dense design and the same design in CSR form (up to
        ``_DENSE_BLOCK_COLUMNS`` columns) are summed by the same BLAS calls on the same
        numbers: the sums, hence the proxies and the chains, are bit-identical whichever form
        the data came in.

        Parameters
        ----------
        rows : ndarray of int of shape (n_rows,) or None, default None
            Indices of the rows to cover, in that order; None for all ``n_data`` rows.

        Yields
        ------
        start : int
            Position of the block's first row among the rows covered.
        block : ndarray of shape (n_block_rows, d)
            The block's rows, dense.
        """
        X = self.X if rows is None else self.X[rows]
        size = self.block_rows
        for start in range(0, X.shape[0], size):
            block = X[start:start + size]
            yield start, (block.toarray() if self.design.sparse else block)

    def _summed_in_blocks(self):
        return not self.design.sparse or self.n_features <= self._DENSE_BLOCK_COLUMNS

    def weighted_grams(self, row_weights, rows=None):
        """``sum_i v_i x_i x_iᵀ`` over ``rows`` for each weight vector ``v``, in one pass.

        Parameters
        ----------
        row_weights : list of ndarray of shape (n_rows,) or None
            The weight vectors ``v``, each aligned with ``rows`` (with all rows when ``rows``
            is None); None for one unweighted sum.
        rows : ndarray of int of shape (n_rows,) or None, default None
            Indices of the rows summed over; None for all ``n_data`` rows.

        Returns
        -------
        ndarray of shape (len(row_weights), d, d)
            One Gram matrix per weight vector (shape ``(1, d, d)`` when ``row_weights`` is
            None).
        """
        weights = [None] if row_weights is None else list(row_weights)
        d = self.n_features
        if not self._summed_in_blocks():
            X = self.X if rows is None else self.X[rows]
            return np.stack([np.asarray((X.T @ (X if w is None else sparse.diags(w) @ X))
                                        .toarray()) for w in weights])
        return summed_grams(self.row_blocks(rows), weights, d)

    def transpose_dot(self, values):
        """``Xᵀ v`` for a vector ``v`` of one value per row.

        Parameters
        ----------
        values : ndarray of shape (n_data,)
            The vector ``v``.

        Returns
        -------
        ndarray of shape (d,)
        """
        if not self._summed_in_blocks():
            return np.asarray(self.X.T @ values).ravel()
        out = np.zeros(self.n_features)
        for start, block in self.row_blocks():
            out += block.T @ values[start:start + block.shape[0]]
        return out

    def dense_rows(self, idx):
        """The rows ``idx`` of the design as a dense array.

        Parameters
        ----------
        idx : array_like of int of shape (n_rows,) or slice
            The rows to gather.

        Returns
        -------
        ndarray of shape (n_rows, d)
        """
        rows = self.X[idx if isinstance(idx, slice) else np.asarray(idx)]
        return rows.toarray() if self.design.sparse else rows

    def predict(self, theta):
        """``X θ`` for one or several parameter vectors.

        Parameters
        ----------
        theta : array_like of shape (d,) or (d, n_vectors)
            One parameter vector, or several as the columns.

        Returns
        -------
        ndarray of shape (n_data,) or (n_data, n_vectors)
            The linear predictors of every row.
        """
        theta = np.asarray(theta, dtype=np.float64)
        if not self._summed_in_blocks():
            return np.asarray(self.X @ theta)
        out = np.empty((self.n_data, *theta.shape[1:]))
        for start, block in self.row_blocks():
            out[start:start + block.shape[0]] = block @ theta
        return out

    def weight_terms(self, values, idx=None):
        """Per-row values multiplied by the case weights ``w_i`` of their rows.

        Parameters
        ----------
        values : ndarray of shape (n_rows,) or (n_rows, ...)
            One value (or one array along the trailing axes) per row of ``idx``.
        idx : array_like of int of shape (n_rows,) or None, default None
            The rows the values belong to; None for all ``n_data`` rows.

        Returns
        -------
        ndarray of the shape of ``values``
            ``w_i × values``; ``values`` itself when the target has no case weights.
        """
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

    def loglik_terms(self, theta, idx):
        if self.compiled:
            idx = as_indices(idx)
            out = np.empty(idx.size)
            kernels.loglik_terms(*self.design, self.y, self.kernel_weights,
                                 np.asarray(theta, dtype=np.float64), idx, out)
            return out
        z, y = self._linear_predictors(np.asarray(theta, dtype=np.float64), idx)
        return self.weight_terms(self.family.loglik(z, y), idx)

    def loglik_ratio_terms(self, theta, theta_new, idx):
        if self.compiled:
            idx = as_indices(idx)
            out = np.empty(idx.size)
            kernels.loglik_ratio_terms(*self.design, self.y, self.kernel_weights,
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
        """``sum_i ∇ℓ_i(θ)`` over all N data (N gradient terms).

        Parameters
        ----------
        theta : array_like of shape (d,)
            The parameter vector θ.

        Returns
        -------
        ndarray of shape (d,)
        """
        theta = np.asarray(theta, dtype=np.float64)
        if self.compiled:
            out = np.empty(theta.size)
            kernels.grad_sum(*self.design, self.y, self.kernel_weights, theta, self.n_data,
                             out)
            return out
        z = self.predict(theta)
        return self.transpose_dot(self.weight_terms(self.family.d1(z, self.y)))

    def compiled_model(self, kernel):
        """The :class:`~._model.GLMModel` this target lends the compiled MH step, or None.

        See :class:`sksubsample.algorithms.mh.SupportsCompiledModel`. A model exists for the
        logistic family only, and only when the kernel's Taylor proxy, if it needs one, is this
        target's own expansion.

        Parameters
        ----------
        kernel : MHKernel
            A kernel of this target (built by :func:`sksubsample.algorithms.build_kernel`).

        Returns
        -------
        GLMModel or None
        """
        return glm_model(self, kernel)

    def taylor_expansion(self, reference, order="auto", n_steps=None, n_warmup_steps=0):
        """The Taylor proxies around ``reference`` (see :class:`GLMTaylorExpansion`).

        Parameters
        ----------
        reference : array_like of shape (d,)
            The expansion point θ̂.
        order : {"auto", 2, 3}, default "auto"
            Order of the proxies in the linear predictor; ``"auto"`` lets the expansion plan
            it.
        n_steps : int or None, default None
            MH steps the expansion will serve, warm-up included, which its plan weighs against
            the set-up; None means many.
        n_warmup_steps : int, default 0
            How many of those steps are warm-up steps (which read more rows).

        Returns
        -------
        GLMTaylorExpansion
        """
        return GLMTaylorExpansion(self, np.asarray(reference, dtype=np.float64), order=order,
                                  n_steps=n_steps, n_warmup_steps=n_warmup_steps)

    def loglik_ratio_bound(self, theta, theta_new):
        """A bound ``C >= max_i |ℓ_i(θ') - ℓ_i(θ)|`` over all N data, without touching them.

        ``C = L max_i w_i‖x_i‖ ‖θ' - θ‖`` for an L-Lipschitz family.

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The current state θ.
        theta_new : ndarray of shape (d,)
            The proposal θ'.

        Returns
        -------
        float or None
            None when the family has no Lipschitz constant L.
        """
        if self.family.lipschitz is None:
            return None
        step = float(np.linalg.norm(np.asarray(theta_new) - theta))
        return self.family.lipschitz * self.max_row_norm * step

    def loglik_ratio_variance_bound(self, theta, theta_new):
        """A bound ``V >= (1/N) sum_i (ℓ_i(θ') - ℓ_i(θ))²`` over all N data, without them.

        ``V = L² (θ' - θ)ᵀ (Xᵀ W² X / N) (θ' - θ)`` for an L-Lipschitz family, since
        ``|ℓ_i(θ') - ℓ_i(θ)| <= w_i L |x_iᵀ(θ' - θ)|``.

        Parameters
        ----------
        theta : ndarray of shape (d,)
            The current state θ.
        theta_new : ndarray of shape (d,)
            The proposal θ'.

        Returns
        -------
        float or None
            None when the family has no Lipschitz constant L.
        """
        if self.family.lipschitz is None:
            return None
        step = np.asarray(theta_new, dtype=np.float64) - theta
        return self.family.lipschitz**2 * float(step @ self.gram @ step) / self.n_data
