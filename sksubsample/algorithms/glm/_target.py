"""The subsampled target of a generalised linear model, over rows wherever they are stored.

:class:`GLMTarget` reads its rows through a :class:`~sksubsample.algorithms.stores.RowStore`: a
NumPy array or a CSR matrix in memory, a memory map, a zarr array or a Dask array. Everything
that reads every row is a pass over the store (:mod:`._pass`, :mod:`._chain_sums`, in blocks
on the cores, or as Dask tasks where the rows live): the MAP (:mod:`._map`), the proxies' sums,
the leverages and the bound's Gram matrices of the control variates (:mod:`._expansion`). Only
how a chain reads its rows depends on where they are: rows in memory are read where they are,
by the compiled kernels (:mod:`._model`); rows in a store through a buffer of the chain's own,
filled ahead (:mod:`._buffered`).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from scipy import sparse

from ..._utils import check_point, check_positive, check_rows, check_vector
from .._numba import read_only
from ..mh import shuffled_minibatches
from ..stores import Block, RowStore, is_out_of_core
from . import _kernels as kernels
from ._bins import binning_for
from ._buffered import buffered_chain, started_chain
from ._chain_sums import add, cubic_sums, gradient_sum, largest_row_norm, weighted_gram
from ._expansion import GLMTaylorExpansion
from ._family import BERNOULLI_LOGIT, GLMFamily
from ._kernel_args import NO_ROWS, NO_VALUES, as_indices, kernel_array, kernel_dtype
from ._model import glm_model
from ._pass import PassRequest, design_of, merge_pass_sums, pass_sums
from ._setup import (
    CENTER_TOLERANCE,
    LEVERAGE_ROWS,
    MAP_TOLERANCE,
    START_FRACTION,
    START_ROWS,
    START_RUN,
    set_up,
    setup_at,
    start_rows,
    stored_row_bytes,
)

__all__ = ["GLMTarget", "GaussianPrior"]


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


class GLMTarget(GaussianPrior):
    """Subsampled target of a generalised linear model with an isotropic Gaussian prior.

    ``ℓ_i(θ) = w_i family.loglik(x_iᵀθ, y_i)`` and ``log p0(θ) = log N(θ; 0, prior_scale² I)``.
    Implements every protocol of :mod:`sksubsample.algorithms.mh._target`.

    Parameters
    ----------
    X : array of shape (n_data, p) or RowStore
        The rows: a NumPy array (float32 stays float32) or a SciPy sparse matrix (kept in CSR
        form, never densified), a memory map, a zarr or a Dask array (read in blocks, never
        whole), or a :class:`~sksubsample.algorithms.stores.RowStore` of them (then ``y`` and
        ``weights`` are the store's).
    y : array of shape (n_data,) or None
        The response, in the family's coding (e.g. signs ``±1`` for ``BERNOULLI_LOGIT``) or
        mapped to it by ``response``.
    prior_scale : float > 0
    family : GLMFamily, default BERNOULLI_LOGIT
    weights : array of shape (n_data,) or None, default None
        Non-negative case weights ``w_i``: the log-likelihood is ``sum_i w_i ℓ(x_iᵀθ, y_i)``,
        so an integer weight k is the same posterior as k copies of the row. Every per-datum
        quantity (terms, derivatives, proxies, residuals, bounds) carries its weight.
    intercept : bool, default False
        Append a column of ones to X (the design is ``[X, 1]``; the ones are not stored).
    response : callable or None, default None
        Maps the stored y to the family's coding (module-level, so that Dask's workers can
        run it).

    Attributes
    ----------
    n_data, n_features : int
        Rows, and columns of the design (intercept included).
    store : RowStore

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.5], [1.0, -1.0], [1.0, 2.0]])
    >>> target = GLMTarget(X, np.array([1.0, -1.0, 1.0]), prior_scale=2.0)
    >>> target.loglik_terms(np.zeros(2), np.arange(3)).round(4).tolist()
    [-0.6931, -0.6931, -0.6931]
    """

    #: The set-up's constants (:mod:`._setup`): rows of largest leverage kept, the MAP's and
    #: the expansion point's tolerances, the start subsample.
    LEVERAGE_ROWS = LEVERAGE_ROWS
    MAP_TOLERANCE = MAP_TOLERANCE
    CENTER_TOLERANCE = CENTER_TOLERANCE
    START_FRACTION, START_ROWS, START_RUN = START_FRACTION, START_ROWS, START_RUN

    def __init__(self, X, y, prior_scale, family=BERNOULLI_LOGIT, weights=None, *,
                 intercept=False, response=None):
        if not isinstance(family, GLMFamily):
            raise TypeError(f"family must be a GLMFamily such as BERNOULLI_LOGIT, got "
                            f"{type(family).__name__}")
        self.family = family
        self.intercept = bool(intercept)
        self.store = X if isinstance(X, RowStore) else self._in_store(X, y, weights, response)
        self.n_data = self.store.n_rows
        self.n_features = self.store.n_features + int(self.intercept)
        super().__init__(prior_scale, self.n_features)
        self.binning = binning_for(self.n_features) if self.bounded_family else None

    def _in_store(self, X, y, weights, response):
        """The :class:`RowStore` of rows given directly: checked here when they are in memory
        (X of finite numbers in its own float dtype, sparse kept CSR; y and weights of one
        finite value per row), by the passes that read them otherwise."""
        if is_out_of_core(X):
            return RowStore(X, y, weights, response=response)
        if sparse.issparse(X):
            X = sparse.csr_matrix(X)
            if not np.issubdtype(X.dtype, np.floating):
                X = X.astype(np.float64)
            check_vector(X.data, "X", X.data.size)
        else:
            if not (isinstance(X, np.ndarray) and X.dtype in (np.float32, np.float64)):
                X = check_rows(X, "X")  # (a float64 array of finite numbers, or an error)
            elif X.ndim != 2 or 0 in X.shape or not np.isfinite(X).all():
                check_rows(X, "X")  # (an error naming X)
            X = np.ascontiguousarray(X)
        if y is None:
            raise TypeError("y must be given with rows in memory (one response per row of X)")
        n = X.shape[0]
        y = check_vector(y if response is None else response(np.asarray(y)), "y", n, per="X")
        if self.family.kernel == "logistic" and not np.all(np.abs(y) == 1.0):
            raise ValueError("y must hold +1 or -1 for the Bernoulli-logit family (labels "
                             "in {0, 1} code as 2 * y - 1)")
        if weights is not None:
            weights = check_vector(weights, "weights", n, per="X")
            if not np.all(weights >= 0):
                raise ValueError("weights must be non-negative, one per row of X")
        return RowStore(X, y, weights)

    @property
    def compiled(self):
        """Whether the family's per-datum work runs in compiled kernels."""
        return self.family.kernel == "logistic"

    @property
    def bounded_family(self):
        """Whether the family bounds the control variates' residuals (its derivatives are
        bounded locally, and its curvature is the logistic one the bound's bins weigh by)."""
        return self.family.local_derivative_bound is not None and self.compiled

    @property
    def weights(self):
        """The case weights (in memory; read with the rows otherwise), or None."""
        w = self.store.weights
        return None if w is None or not self.store.in_memory else w

    # ------------------------------------------------------------------ rows in memory

    @cached_property
    def signs(self):
        """The response of rows in memory in the family's coding, as float64."""
        y = self.store.y
        return kernel_array(y if self.store.response is None
                            else self.store.response(np.asarray(y)))

    @property
    def y(self):
        """The response of rows in memory in the family's coding (:attr:`signs`)."""
        return self.signs

    @cached_property
    def design(self):
        """The rows in memory in the six design arguments of the compiled kernels."""
        X = self.store.X
        if self.store.kind == "csr":
            return (kernel_array(np.empty((0, X.shape[1]))), kernel_array(X.data),
                    kernel_array(X.indices, np.int64), kernel_array(X.indptr, np.int64), True,
                    self.intercept)
        X = X.astype(kernel_dtype(X.dtype, X.size), copy=False)
        return (read_only(X), NO_VALUES, NO_ROWS, NO_ROWS, False, self.intercept)

    @property
    def kernel_weights(self):
        """The case weights as the kernels read them (empty: all ones)."""
        w = self.weights
        return NO_VALUES if w is None else kernel_array(w)

    def _kernel_rows(self, idx):
        """``(design, signs, weights, positions)`` of the rows ``idx`` for the kernels: the
        rows in memory where they are, or the rows gathered from the store."""
        # (read-only arrays, as everywhere the kernels are called: one specialization each)
        idx = read_only(as_indices(idx))
        if self.store.in_memory:
            return self.design, self.signs, self.kernel_weights, idx
        block = self.store.take(idx)
        return ((kernel_array(block.X, None), NO_VALUES, NO_ROWS, NO_ROWS, False,
                 self.intercept),
                kernel_array(block.y), NO_VALUES if block.w is None else kernel_array(block.w),
                kernel_array(np.arange(idx.size, dtype=np.int64), np.int64))

    def rows(self, idx):
        """The rows ``idx`` (in that order) as a :class:`~sksubsample.algorithms.stores.Block`
        whose X is the design in float64 (dense) and y the response in the family's coding.

        Parameters
        ----------
        idx : array_like of int of shape (n_rows,) or slice

        Returns
        -------
        Block
        """
        if isinstance(idx, slice):
            start, stop, _ = idx.indices(self.n_data)
            block = self.store.read(start, stop, check=False)
        else:
            block = self.store.take(as_indices(idx))
        design = design_of(block.X, self.intercept)
        return Block(block.start, design if isinstance(design, np.ndarray) else design.toarray(),
                     block.y, block.w)

    def _point(self, theta, name="theta"):
        """``theta`` checked: a finite vector of one value per column of the design."""
        if not (isinstance(theta, np.ndarray) and theta.dtype == np.float64
                and theta.shape == (self.n_features,) and np.isfinite(theta).all()):
            theta = check_point(theta, name)
            if theta.size != self.n_features:
                raise ValueError(f"{name} must have one value per column of the design "
                                 f"({self.n_features}), got {theta.size}")
        return theta

    def _terms(self, theta, idx, function):
        block = self.rows(idx)
        values = function(block.X @ self._point(theta), block.y)
        if block.w is not None:
            values = values * (block.w if values.ndim == 1 else block.w[:, None])
        return values, block

    def loglik_terms(self, theta, idx):
        theta = self._point(theta)
        if self.compiled:
            design, signs, weights, positions = self._kernel_rows(idx)
            out = np.empty(positions.size)
            kernels.loglik_terms(*design, signs, weights, theta, positions, out)
            return out
        return self._terms(theta, idx, self.family.loglik)[0]

    def loglik_ratio_terms(self, theta, theta_new, idx):
        theta, theta_new = self._point(theta), self._point(theta_new, "theta_new")
        if self.compiled:
            design, signs, weights, positions = self._kernel_rows(idx)
            out = np.empty(positions.size)
            kernels.loglik_ratio_terms(*design, signs, weights, theta, theta_new, positions,
                                       out)
            return out
        new, _ = self._terms(theta_new, idx, self.family.loglik)
        return new - self._terms(theta, idx, self.family.loglik)[0]

    def grad_terms(self, theta, idx):
        d1, block = self._terms(theta, idx, self.family.d1)
        return d1[:, None] * block.X

    def hess_terms(self, theta, idx):
        d2, block = self._terms(theta, idx, self.family.d2)
        return d2[:, None, None] * (block.X[:, :, None] * block.X[:, None, :])

    # ------------------------------------------------------------------ passes

    def fold(self, function, combine, args, *, check=True):
        """:meth:`~sksubsample.algorithms.stores.RowStore.fold` of the rows.

        Parameters
        ----------
        function : callable
            ``function(unit, *args) -> summary`` of one read unit of rows.
        combine : callable
            ``combine(a, b) -> summary`` of two summaries (``a`` of earlier rows).
        args : tuple
            Further arguments of ``function`` (picklable).
        check : bool, default True
            Whether the rows are checked as they are read.

        Returns
        -------
        object
        """
        return self.store.fold(function, combine, args, check=check)

    def pass_at(self, point, **request):
        """One pass at ``point`` (:func:`~._pass.pass_sums`).

        Parameters
        ----------
        point : array_like of shape (d,)
        **request
            The further fields of its :class:`~._pass.PassRequest`.

        Returns
        -------
        PassSums
        """
        request = PassRequest(np.asarray(point, dtype=np.float64), self.family, self.intercept,
                              **request)
        return self.fold(pass_sums, merge_pass_sums, (request,), check=False)

    def grad_loglik_sum(self, theta):
        """``sum_i ∇ℓ_i(θ)`` over all N data (N gradient terms).

        Parameters
        ----------
        theta : array_like of shape (d,)

        Returns
        -------
        ndarray of shape (d,)
        """
        theta = self._point(theta)
        if self.compiled and self.store.in_memory:
            out = np.empty(theta.size)
            kernels.grad_sum(*self.design, self.signs, self.kernel_weights, theta, self.n_data,
                             out)
            return out
        if self.compiled:
            return self.fold(gradient_sum, add, (theta, self.intercept))
        return self.pass_at(theta).grad

    @cached_property
    def gram(self):
        """``Xᵀ diag(w²) X`` (one pass, when first needed): the Lipschitz variance bound's."""
        return self.fold(weighted_gram, add, (self.intercept,))

    @cached_property
    def max_row_norm(self):
        """``max_i w_i ‖x_i‖`` (one pass, when first needed)."""
        return self.fold(largest_row_norm, max, (self.intercept,))

    # ------------------------------------------------------------------ set-up

    def start_rows(self):
        """The rows of the subsample whose MAP starts Newton's method
        (:func:`~._setup.start_rows`)."""
        return start_rows(self.n_data, self.n_features, stored_row_bytes(self))

    def set_up(self, temperature=1.0):
        """The MAP and what the control variates need at the expansion point
        (:func:`~._setup.set_up`).

        Parameters
        ----------
        temperature : float > 0, default 1.0

        Returns
        -------
        Setup
        """
        return set_up(self, temperature)

    def setup_at(self, reference):
        """What :meth:`set_up` gives the control variates, at any expansion point
        (:func:`~._setup.setup_at`).

        Parameters
        ----------
        reference : ndarray of shape (d,)

        Returns
        -------
        Setup
        """
        return setup_at(self, reference)

    def cubic_sum(self, reference):
        """The third-order sums at ``reference`` by pairs (one pass).

        Parameters
        ----------
        reference : array_like of shape (d,)
            The expansion point.

        Returns
        -------
        ndarray of shape (d, d (d + 1) / 2)
        """
        return self.fold(cubic_sums, add, (np.asarray(reference, dtype=np.float64),
                                           self.family, self.intercept), check=False)

    def taylor_expansion(self, reference, order="auto", n_steps=None, n_warmup_steps=0,
                         setup=None, allow_exact=True, exact_gradients=0.0):
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
        setup : Setup or None, default None
            The set-up at ``reference`` (:meth:`set_up`), whose last pass the expansion takes
            instead of passing again.
        allow_exact : bool, default True
            Whether the plan may choose the exact test (False: the cheapest bounded plan).
        exact_gradients : float, default 0.0
            Full-data gradients an exact step's proposal is expected to take.

        Returns
        -------
        GLMTaylorExpansion
        """
        return GLMTaylorExpansion(self, np.asarray(reference, dtype=np.float64), order=order,
                                  n_steps=n_steps, n_warmup_steps=n_warmup_steps, setup=setup,
                                  allow_exact=allow_exact, exact_gradients=exact_gradients)

    # ------------------------------------------------------------------ bounds

    def loglik_ratio_bound(self, theta, theta_new):
        """A bound ``C >= max_i |ℓ_i(θ') - ℓ_i(θ)|`` over all N data, without touching them.

        ``C = L max_i w_i‖x_i‖ ‖θ' - θ‖`` for an L-Lipschitz family.

        Parameters
        ----------
        theta : ndarray of shape (d,)
        theta_new : ndarray of shape (d,)

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
        theta_new : ndarray of shape (d,)

        Returns
        -------
        float or None
            None when the family has no Lipschitz constant L.
        """
        if self.family.lipschitz is None:
            return None
        step = np.asarray(theta_new, dtype=np.float64) - theta
        return self.family.lipschitz**2 * float(step @ self.gram @ step) / self.n_data

    # ------------------------------------------------------------------ chains

    def compiled_model(self, kernel):
        """The :class:`~._model.GLMModel` this target lends the compiled MH step, or None.

        See :class:`sksubsample.algorithms.mh.SupportsCompiledModel`. A model exists for the
        logistic family with rows in memory, and only when the kernel's Taylor proxy, if it
        needs one, is this target's own expansion.

        Parameters
        ----------
        kernel : MHKernel

        Returns
        -------
        GLMModel or None
        """
        return glm_model(self, kernel) if self.store.in_memory else None

    def start_chain(self, kernel, rng, steps=None):
        """Start gathering the rows a chain of ``kernel`` run by ``rng`` reads first, in the
        background, before the chain runs (rows in a store: :func:`~._buffered.started_chain`;
        None for rows in memory, which have nothing to gather).

        Parameters
        ----------
        kernel : MHKernel
        rng : numpy.random.Generator
        steps : (int, int) or None, default None
            The chain's warm-up steps and draws.

        Returns
        -------
        StreamStart or None
            To be closed when the chains are done.
        """
        return None if self.store.in_memory else started_chain(self, kernel, rng, steps)

    def compiled_chain(self, kernel, rng, resources, steps=None):
        """The compiled model and minibatch source of one chain of ``kernel`` (see
        :class:`sksubsample.algorithms.mh.SupportsCompiledChain`), or None.

        Rows in memory: the :class:`~._model.GLMModel` and minibatches drawn by Fisher–Yates
        shuffles of the sampled stratum. Rows in a store: a model on a buffer of the chain's
        own, filled ahead from a stream of row draws whose seed comes from ``rng``
        (:mod:`._buffered`; the stream is registered in ``resources`` while the chain runs; a
        Dask array's first gather takes twice the rows the plan expects the chain's ``steps``
        to read).

        Parameters
        ----------
        kernel : MHKernel
        rng : numpy.random.Generator
        resources : contextlib.ExitStack
        steps : (int, int) or None, default None
            The chain's warm-up steps and draws.

        Returns
        -------
        (model, minibatches) or None
        """
        if not self.store.in_memory:
            return buffered_chain(self, kernel, rng, resources, steps)
        model = glm_model(self, kernel)
        if model is None:
            return None
        strata = kernel.proxy.strata if kernel.control_variates else None
        exact = np.empty(0, dtype=np.int64) if strata is None else strata.exact
        return model, shuffled_minibatches(exact, self.n_data)
