"""Bayesian logistic regression sampled by (subsampled) Metropolis–Hastings."""

from __future__ import annotations

import threading
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from scipy import linalg, special
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from .._base import PosteriorSamplerMixin, effective_sample_size, split_rhat
from .._utils import check_positive
from ..algorithms._acceptance import ACCEPTANCE_TESTS
from ..algorithms._control_variates import TaylorProxy
from ..algorithms._mh import sample_mh

__all__ = ["BayesianLogisticRegressionMH"]

_EXACT_TESTS = ("metropolis", "barker")
_TESTS = (*sorted(ACCEPTANCE_TESTS), "racing-normal", "racing-ebs")
# Default initial minibatch (Seita et al. 2017, Sections 6.1-6.2 use m = 100 for every test).
_DEFAULT_BATCH = 100
# Bytes allowed to one (rows, d, d) Hessian block when summing the proxies once over the data.
_HESSIAN_CHUNK_BYTES = 1 << 25


def _log_sigmoid(z):
    """``log σ(z) = min(z, 0) - log1p(exp(-|z|))``: no overflow for any z, and several times
    faster than ``scipy.special.log_expit`` on long vectors (it dominates exact MH steps)."""
    out = np.exp(-np.abs(z))
    np.log1p(out, out=out)
    return np.minimum(z, 0.0) - out


class _LogisticTarget:
    """Subsampled target of a logistic regression with an isotropic Gaussian prior.

    ``θ = (w, b)`` (``b`` only with an intercept, stored as a trailing column of ones in ``X``),
    ``ℓ_i(θ) = log σ(s_i x_iᵀθ)`` with ``s_i = 2 y_i - 1`` and ``log p0(θ) = log N(θ; 0, τ² I)``.
    Implements the target protocol of :mod:`sksubsample.algorithms._mh` and of the Taylor
    control variates (``grad_terms``, ``hess_terms``, ``taylor_diff_terms`` and the fused
    ``taylor_residual_terms``), plus the Lipschitz bound ``loglik_ratio_bound`` used by the
    concentration-bound tests.

    The rows of one minibatch are gathered once per MH step. With control variates the step's
    data work is one ``taylor_residual_terms`` call. Without them the acceptance tests pass the
    same index array to ``loglik_terms(θ')`` and ``loglik_terms(θ)``, so the last gathered block
    is kept per thread (chains may run as threads) and reused while the index array is the same
    object. A log-likelihood over the whole data set is also kept for the last two θ, so an
    exact test computes one new matrix-vector product per step.
    """

    def __init__(self, X, sign, prior_scale):
        self.X = X
        self.sign = sign
        self.n_data = X.shape[0]
        self.prior_scale = float(prior_scale)
        self._prior_precision = 1.0 / self.prior_scale**2
        self._log_norm = -X.shape[1] * (np.log(self.prior_scale) + 0.5 * np.log(2.0 * np.pi))
        self.max_row_norm = float(np.sqrt(np.max(np.einsum("ij,ij->i", X, X))))
        self.reference = None
        self._local = threading.local()

    # pickling (process backends): the thread-local cache is not data
    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_local"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()

    def set_reference(self, reference):
        """Precompute per-datum gradient and curvature coefficients at the proxies' centre."""
        reference = np.array(reference, dtype=np.float64)
        z = self.X @ reference
        self.reference = reference
        # ∇ℓ_i = c_i x_i and ∇²ℓ_i = -w_i x_i x_iᵀ with c_i = s_i σ(-s_i z_i), w_i = σ(z)σ(-z).
        self._ref_grad_coef = self.sign * special.expit(-self.sign * z)
        self._ref_curv = special.expit(z) * special.expit(-z)
        # The per-row numbers a control-variate residual needs, side by side so that a
        # minibatch gathers them in one indexing operation (taylor_residual_terms).
        self._ref_table = np.column_stack([self.sign, self._ref_grad_coef, self._ref_curv, z])

    def _rows(self, idx):
        cache = self._local.__dict__
        if cache.get("idx") is idx:
            return cache["rows"], cache["sign"]
        rows = self.X[idx]
        sign = self.sign[idx]
        cache.update(idx=idx, rows=rows, sign=sign)
        return rows, sign

    def _full_loglik(self, theta):
        """``ℓ_i(θ)`` for all data in storage order, read-only so no caller can corrupt it.

        An MH step evaluates the proposal and the current state, and the next step's current
        state is one of those two; a least-recently-used cache of three θ therefore always
        holds it, whether the last proposal was accepted or not.
        """
        cache = self._local.__dict__.setdefault("full", {})
        key = theta.tobytes()
        value = cache.pop(key, None)
        if value is None:
            value = _log_sigmoid(self.sign * (self.X @ theta))
            value.flags.writeable = False
            if len(cache) >= 3:
                cache.pop(next(iter(cache)))
        cache[key] = value  # re-inserted last: most recently used
        return value

    def _is_identity(self, idx):
        """Whether a full-size index array is ``arange(n)`` (then no reordering is needed)."""
        arange = self._local.__dict__.get("arange")
        if arange is None:
            arange = self._local.arange = np.arange(self.n_data)
        return idx[0] == 0 and idx[-1] == self.n_data - 1 and np.array_equal(idx, arange)

    def log_prior(self, theta):
        return self._log_norm - 0.5 * self._prior_precision * float(theta @ theta)

    def grad_log_prior(self, theta):
        return -self._prior_precision * theta

    def hess_log_prior(self, theta):
        return -self._prior_precision * np.eye(theta.size)

    def loglik_terms(self, theta, idx):
        idx = np.asarray(idx)
        theta = np.asarray(theta, dtype=np.float64)
        if idx.size == self.n_data:
            # idx is then a permutation of all data: no row gathering, at most a reordering.
            values = self._full_loglik(theta)
            return values if self._is_identity(idx) else values[idx]
        rows, sign = self._rows(idx)
        return _log_sigmoid(sign * (rows @ theta))

    def grad_terms(self, theta, idx):
        idx = np.asarray(idx)
        rows, sign = self._rows(idx)
        z = rows @ np.asarray(theta, dtype=np.float64)
        return (sign * special.expit(-sign * z))[:, None] * rows

    def hess_terms(self, theta, idx):
        idx = np.asarray(idx)
        rows, _ = self._rows(idx)
        z = rows @ np.asarray(theta, dtype=np.float64)
        w = special.expit(z) * special.expit(-z)
        return -w[:, None, None] * (rows[:, :, None] * rows[:, None, :])

    def taylor_diff_terms(self, reference, idx, a_old, a_new):
        """``g_iᵀ(a' - a) + ½ (a'ᵀH_i a' - aᵀH_i a)`` with ``H_i = -w_i x_i x_iᵀ``, in O(d)."""
        idx = np.asarray(idx)
        reference = np.asarray(reference, dtype=np.float64)
        ab = np.column_stack([a_old, a_new])
        identity = idx.size == self.n_data and self._is_identity(idx)
        if idx.size == self.n_data:
            proj = self.X @ ab
            if not identity:
                proj = proj[idx]
            rows_ref = None
        else:
            rows, sign = self._rows(idx)
            proj = rows @ ab
            rows_ref = (rows, sign)
        if self.reference is not None and np.array_equal(reference, self.reference):
            grad_coef = self._ref_grad_coef if identity else self._ref_grad_coef[idx]
            curv = self._ref_curv if identity else self._ref_curv[idx]
        else:
            rows, sign = rows_ref if rows_ref is not None else (self.X[idx], self.sign[idx])
            z = rows @ reference
            grad_coef = sign * special.expit(-sign * z)
            curv = special.expit(z) * special.expit(-z)
        return grad_coef * (proj[:, 1] - proj[:, 0]) - 0.5 * curv * (
            proj[:, 1] ** 2 - proj[:, 0] ** 2
        )

    def taylor_residual_terms(self, reference, idx, theta, theta_new):
        """``[ℓ_i(θ') - ℓ_i(θ)] - [h_i(θ') - h_i(θ)]`` in one pass over the minibatch rows.

        The value of ``loglik_terms(θ') - loglik_terms(θ) - taylor_diff_terms(...)`` (the
        control-variate protocol's optional fused form): the rows and the per-row reference
        coefficients are gathered once, and ``x_iᵀ(θ - θ̂) = x_iᵀθ - x_iᵀθ̂`` reuses the products
        of the log-likelihoods, which makes this the whole per-step data work of the default
        minibatch test.
        """
        idx = np.asarray(idx)
        theta = np.asarray(theta, dtype=np.float64)
        theta_new = np.asarray(theta_new, dtype=np.float64)
        if (idx.size == self.n_data or self.reference is None
                or not (reference is self.reference or np.array_equal(reference, self.reference))):
            reference = np.asarray(reference, dtype=np.float64)
            return (self.loglik_terms(theta_new, idx) - self.loglik_terms(theta, idx)
                    - self.taylor_diff_terms(reference, idx, theta - reference,
                                             theta_new - reference))
        table = self._ref_table[idx]
        sign, grad_coef, curv, z_ref = table.T
        # z[:, 0] = x_iᵀθ, z[:, 1] = x_iᵀθ' (one product, one log-sigmoid for both states)
        z = self.X[idx] @ np.array((theta, theta_new)).T
        loglik = _log_sigmoid(z * sign[:, None])
        z_old, z_new = z.T
        # ℓ_i = log σ(s_i z_i); in the proxy a_i = z_i - z_ref_i = x_iᵀ(θ - θ̂), and
        # a'² - a² = (z' - z)(z' + z - 2 z_ref).
        dz = z_new - z_old
        taylor = dz * (grad_coef - 0.5 * curv * (z_new + z_old - 2.0 * z_ref))
        return (loglik[:, 1] - loglik[:, 0]) - taylor

    def loglik_ratio_bound(self, theta, theta_new):
        """``C >= max_i |ℓ_i(θ') - ℓ_i(θ)|``: log σ is 1-Lipschitz, so ``max‖x_i‖ ‖θ' - θ‖``."""
        return self.max_row_norm * float(np.linalg.norm(np.asarray(theta_new) - theta))


def _logistic_chain(target, proxy, center, init_chol, options, rng):
    """One chain (module level so that process backends can pickle it)."""
    # Start from an overdispersed Laplace draw: θ0 = MAP + 2 L z, so R-hat can detect chains
    # that have not forgotten their start (Vehtari et al. 2021, Section 2).
    theta0 = center + 2.0 * (init_chol @ rng.standard_normal(center.size))
    res = sample_mh(target, theta0, proxy=proxy, random_state=rng, **options)
    return (res.draws, res.accepted, res.batch_sizes, res.n_evaluated, res.n_data_evaluations,
            res.step_size, res.acceptance_rate, res.mean_batch_size)


class BayesianLogisticRegressionMH(PosteriorSamplerMixin, ClassifierMixin, BaseEstimator):
    """Bayesian binary logistic regression sampled by subsampled Metropolis–Hastings.

    The posterior ``π_T(θ) ∝ N(θ; 0, prior_scale² I) Π_i σ(s_i x_iᵀθ)^{1/T}`` over
    ``θ = (coef, intercept)`` is sampled by ``n_chains`` independent MH chains whose acceptance
    test may look at a minibatch only: by default the minibatch Barker test of Seita et al.
    (2017, Algorithm 1, Eq. 13) with second-order Taylor control variates around the MAP and a
    Langevin proposal preconditioned by the Laplace covariance. The MAP comes from
    :class:`sklearn.linear_model.LogisticRegression` with the L2 penalty that equals the prior
    (``C = prior_scale² / temperature``, intercept penalised as a coefficient).

    Predictions average over the posterior draws (posterior predictive probabilities).

    Parameters
    ----------
    prior_scale : float > 0, default 10.0
        Standard deviation τ of the N(0, τ²) prior of every coefficient and of the intercept.
    fit_intercept : bool, default True
        Whether to sample an intercept.
    test : str, default "minibatch_barker"
        The MH acceptance test (:mod:`sksubsample.algorithms._acceptance`):
        ``"metropolis"`` and ``"barker"`` are exact full-data tests; ``"minibatch_barker"``
        (Seita et al. 2017, Alg. 1), ``"austerity"`` (Korattikara et al. 2014),
        ``"adaptive_subsampling"`` (Bardenet et al. 2014, MHSubLhd), ``"racing"`` /
        ``"racing-normal"`` / ``"racing-ebs"`` (Chen & Ghahramani 2016, Eq. 12) look at
        minibatches.
    proposal : {"langevin", "random-walk"}, default "langevin"
        Langevin uses the gradient of the Taylor proxy (no data per step, exact proposal
        ratio); both are preconditioned by the Laplace covariance at the MAP.
    control_variates : bool, default True
        Let the test see the residuals of second-order Taylor proxies around the MAP (Chen &
        Ghahramani 2016, Eq. 11); the proxies' sum is added back exactly, so exact tests stay
        exact and minibatch tests need far smaller batches at temperature 1.
    temperature : float > 0, default 1.0
        T of the tempered posterior (only the likelihood is tempered, Seita et al. Section 6).
    batch_size : int >= 2 or None, default None
        Initial minibatch size (and increment) of the minibatch tests; ``None`` means
        ``min(100, n_samples_fit)``. Must be None for the exact tests.
    delta : float in (0, 1) or None, default None
        Error tolerance of the test: the Novak-bound tolerance of ``"minibatch_barker"``
        (Seita et al. Cor. 1), the decision error of ``"adaptive_subsampling"`` and
        ``"racing*"``, the per-look ε of ``"austerity"``. ``None`` keeps each test's default.
        Must be None for the exact tests.
    n_samples : int >= 1, default 1000
        Retained draws per chain.
    n_warmup : int >= 0, default 500
        Warm-up steps per chain (step-size adaptation; discarded).
    n_chains : int >= 1, default 4
        Independent chains, each with its own random stream from ``SeedSequence.spawn``.
    n_jobs : int or None, default None
        Chains run in parallel through joblib (any backend, e.g. ``parallel_config("dask")``);
        the draws do not depend on ``n_jobs`` or on the backend.
    random_state : None, int, numpy.random.Generator or SeedSequence, default None
    progress : bool or "notebook", default False
        Show a tqdm progress bar over chains.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    coef_ : ndarray of shape (1, n_features)
        Posterior mean of the coefficients (the shape of ``LogisticRegression.coef_``).
    intercept_ : ndarray of shape (1,)
        Posterior mean of the intercept (0 when ``fit_intercept=False``).
    coef_samples_ : ndarray of shape (n_chains, n_samples, n_features)
    intercept_samples_ : ndarray of shape (n_chains, n_samples)
        Zeros when ``fit_intercept=False``.
    posterior_names_ : ndarray of str, shape (n_params,)
        Names of the columns of :meth:`sample_posterior` (features, then ``"intercept"``).
    map_ : ndarray of shape (n_params,)
        MAP of the tempered posterior (centre of the control variates).
    ess_ : ndarray of shape (n_params,)
        Bulk effective sample size of each parameter (NaN with fewer than 4 draws per chain).
    rhat_ : ndarray of shape (n_params,)
        Rank-normalised split R-hat of each parameter (NaN with fewer than 4 draws per chain).
    acceptance_rate_ : float
        Mean acceptance rate over chains (sampling phase).
    mean_batch_size_ : float
        Mean size of the minibatch the decisions used (sampling phase, all chains).
    batch_sizes_ : ndarray of shape (n_chains, n_samples)
        Decision minibatch size of every retained step (Seita et al. Fig. 2/4).
    step_size_ : ndarray of shape (n_chains,)
        Step size of each chain after warm-up.
    n_data_evaluations_ : int
        Likelihood terms evaluated: by the acceptance tests over every warm-up and sampling
        step of every chain, plus N once to build the control-variate proxies. (The MAP
        optimisation is not counted; ``map_n_iter_`` reports its iterations.)
    fraction_data_touched_ : float
        ``n_data_evaluations_ / (N × steps)``: the work relative to exact MH, which evaluates
        all N terms at every step.
    map_n_iter_ : int
        Iterations of the MAP optimiser.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string feature names.

    See Also
    --------
    sklearn.linear_model.LogisticRegression : the MAP point estimate.
    sklearn.multiclass.OneVsRestClassifier : wrap this estimator for more than two classes.

    Notes
    -----
    Exactness: ``"metropolis"`` and ``"barker"`` leave π_T invariant for any proposal,
    control variates or temperature. ``"minibatch_barker"`` has a per-step error bounded by the
    Novak bound ε (Seita et al. Cor. 2) when ``delta`` is set; the other minibatch tests have
    the per-step decision errors of their papers. Data evaluations are counted, not estimated.

    References
    ----------
    .. [1] D. Seita, X. Pan, H. Chen, J. Canny. An Efficient Minibatch Acceptance Test for
       Metropolis-Hastings (2017). Algorithm 1, Eqs. 12-13; Section 6.2.
    .. [2] Y. Chen, Z. Ghahramani. Scalable Discrete Sampling as a Multi-Armed Bandit Problem.
       ICML 2016, Eqs. 11-12.
    .. [3] A. Vehtari et al. Rank-normalization, folding, and localization: an improved R-hat.
       Bayesian Analysis, 2021 (``ess_``, ``rhat_``).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sksubsample import BayesianLogisticRegressionMH
    >>> X, y = make_classification(n_samples=2000, n_features=3, n_informative=2,
    ...                            n_redundant=0, random_state=0)
    >>> clf = BayesianLogisticRegressionMH(n_samples=200, n_warmup=200, n_chains=2,
    ...                                    random_state=0).fit(X, y)
    >>> clf.coef_samples_.shape
    (2, 200, 3)
    >>> clf.sample_posterior(50, random_state=0).shape
    (50, 4)
    >>> bool(clf.score(X, y) > 0.8)
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        "prior_scale": [Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "test": [StrOptions(set(_TESTS))],
        "proposal": [StrOptions({"langevin", "random-walk"})],
        "control_variates": ["boolean"],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 2, None, closed="left"), None],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_warmup": [Interval(Integral, 0, None, closed="left")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Integral, None],
        "random_state": [Interval(Integral, 0, None, closed="left"), np.random.Generator,
                         np.random.SeedSequence, None],
        "progress": ["boolean", StrOptions({"notebook"})],
    }

    def __init__(self, *, prior_scale=10.0, fit_intercept=True, test="minibatch_barker",
                 proposal="langevin", control_variates=True, temperature=1.0, batch_size=None,
                 delta=None, n_samples=1000, n_warmup=500, n_chains=4, n_jobs=None,
                 random_state=None, progress=False):
        self.prior_scale = prior_scale
        self.fit_intercept = fit_intercept
        self.test = test
        self.proposal = proposal
        self.control_variates = control_variates
        self.temperature = temperature
        self.batch_size = batch_size
        self.delta = delta
        self.n_samples = n_samples
        self.n_warmup = n_warmup
        self.n_chains = n_chains
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.progress = progress

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Binary only: several classes go through OneVsRestClassifier.
        tags.classifier_tags.multi_class = False
        return tags

    def __sklearn_is_fitted__(self):
        # validate_data sets n_features_in_ before a fit can still fail (e.g. one class): only
        # the draws mean the estimator is fitted.
        return hasattr(self, "coef_samples_")

    # ------------------------------------------------------------------ configuration

    def _test_configuration(self, n_data):
        """Options of the acceptance test, validated against the data size before any work."""
        test = self.test
        if test in _EXACT_TESTS:
            for name in ("batch_size", "delta"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name} must be None with the exact test {test!r} (it looks at all "
                        f"N data), got {getattr(self, name)!r}"
                    )
            return {"batch_size": None, "delta": None, "test_options": None}
        if self.batch_size is None:
            batch_size = min(_DEFAULT_BATCH, n_data)
        elif self.batch_size > n_data:
            raise ValueError(
                f"batch_size={self.batch_size} exceeds the number of samples ({n_data})"
            )
        else:
            batch_size = int(self.batch_size)
        if test == "austerity":
            # Korattikara et al.'s tolerance is the per-look ε of the t-test.
            options = None if self.delta is None else {"epsilon": float(self.delta)}
            return {"batch_size": batch_size, "delta": None, "test_options": options}
        delta = None if self.delta is None else float(self.delta)
        return {"batch_size": batch_size, "delta": delta, "test_options": None}

    def _validate_y(self, y):
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of 2 classes in y; got 1 class "
                f"({classes[0]!r})"
            )
        if classes.size > 2:
            raise ValueError(
                f"Only binary classification is supported. The type of the target is "
                f"{type_of_target(y, input_name='y')} ({classes.size} classes): wrap "
                f"{type(self).__name__} in sklearn.multiclass.OneVsRestClassifier."
            )
        return classes

    # ------------------------------------------------------------------ fit

    def fit(self, X, y):
        """Sample the posterior of the coefficients given ``X`` and binary ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Finite values.
        y : array-like of shape (n_samples,)
            Two classes.

        Returns
        -------
        self : BayesianLogisticRegressionMH
        """
        self._validate_params()
        prior_scale = check_positive(self.prior_scale, "prior_scale")
        temperature = check_positive(self.temperature, "temperature")
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=False)
        classes = self._validate_y(y)
        n_data, n_features = X.shape
        test_config = self._test_configuration(n_data)

        y01 = (y == classes[1]).astype(np.float64)
        if self.fit_intercept:
            design = np.empty((n_data, n_features + 1))
            design[:, :n_features] = X
            design[:, n_features] = 1.0
        else:
            design = np.ascontiguousarray(X)
        d = design.shape[1]

        # MAP of π_T: sklearn minimises ½‖θ‖² + C Σ loss_i, i.e. Σ loss_i / T + ‖θ‖² / (2τ²)
        # times τ²/T; the column of ones makes the intercept penalised like the prior says.
        solver = "newton-cholesky" if d <= 200 else "lbfgs"
        lr = LogisticRegression(C=prior_scale**2 / temperature, fit_intercept=False,
                                solver=solver, tol=1e-10, max_iter=1000)
        lr.fit(design, y01)
        theta_map = np.asarray(lr.coef_, dtype=np.float64).ravel()
        self.map_n_iter_ = int(np.max(lr.n_iter_))

        target = _LogisticTarget(design, 2.0 * y01 - 1.0, prior_scale)
        target.set_reference(theta_map)
        chunk = max(1, _HESSIAN_CHUNK_BYTES // (8 * d * d))
        # The proxy shares the target's reference array, so the target recognises it by identity.
        proxy = TaylorProxy(target, target.reference, chunk_size=chunk)
        precision = proxy.laplace_precision(temperature, target.hess_log_prior(theta_map))
        # The Laplace covariance is passed explicitly as the preconditioner so the kernel
        # factors it itself (a lower Cholesky factor, which its Langevin density assumes).
        laplace_cov = linalg.cho_solve(linalg.cho_factor(precision, lower=True), np.eye(d))
        laplace_cov = 0.5 * (laplace_cov + laplace_cov.T)
        init_chol = linalg.cholesky(laplace_cov, lower=True)

        options = {
            "n_samples": int(self.n_samples),
            "n_warmup": int(self.n_warmup),
            "test": self.test,
            "proposal": self.proposal,
            "control_variates": bool(self.control_variates),
            "temperature": temperature,
            "preconditioner": laplace_cov,
            **test_config,
        }
        results = self._run_chains(_logistic_chain,
                                   (target, proxy, theta_map, init_chol, options))

        draws = np.stack([r[0] for r in results])  # (n_chains, n_samples, d)
        self.map_ = theta_map
        self.coef_samples_ = draws[:, :, :n_features].copy()
        if self.fit_intercept:
            self.intercept_samples_ = draws[:, :, n_features].copy()
        else:
            self.intercept_samples_ = np.zeros(draws.shape[:2])
        self.coef_ = self.coef_samples_.mean(axis=(0, 1))[None, :]
        self.intercept_ = np.array([self.intercept_samples_.mean()])
        self.classes_ = classes
        names = (list(map(str, self.feature_names_in_)) if hasattr(self, "feature_names_in_")
                 else [f"x{j}" for j in range(n_features)])
        self.posterior_names_ = np.array(names + (["intercept"] if self.fit_intercept else []),
                                         dtype=object)
        self._accepted = np.stack([r[1] for r in results])
        self.batch_sizes_ = np.stack([r[2] for r in results])
        self._n_evaluated = np.stack([r[3] for r in results])
        self.step_size_ = np.array([r[5] for r in results])
        self.acceptance_rate_ = float(np.mean([r[6] for r in results]))
        self.mean_batch_size_ = float(self.batch_sizes_.mean())
        self.n_data_evaluations_ = int(sum(r[4] for r in results) + proxy.n_setup_evaluations)
        n_steps = self.n_chains * (self.n_samples + self.n_warmup)
        self.fraction_data_touched_ = self.n_data_evaluations_ / (n_data * n_steps)
        if self.n_samples >= 4:
            self.ess_ = effective_sample_size(draws, method="bulk")
            self.rhat_ = split_rhat(draws, method="rank")
        else:
            self.ess_ = np.full(d, np.nan)
            self.rhat_ = np.full(d, np.nan)
        return self

    # ------------------------------------------------------------------ posterior hooks

    def _posterior_variables(self):
        out = {"coef": self.coef_samples_}
        if self.fit_intercept:
            out["intercept"] = self.intercept_samples_
        return out

    def _posterior_dims(self):
        features = list(self.posterior_names_[: self.n_features_in_])
        return {"coef": ["feature"]}, {"feature": features}

    def _sample_stats(self):
        return {"accepted": self._accepted, "batch_size": self.batch_sizes_,
                "n_evaluated": self._n_evaluated}

    # ------------------------------------------------------------------ prediction

    def decision_function(self, X):
        """Posterior-predictive log-odds ``log p(y=1|x) - log p(y=0|x)``.

        ``p(y=1|x)`` averages ``σ(xᵀw + b)`` over all draws; the log-odds are computed in log
        space (log-mean-exp of ``log σ(±z)``), so they stay finite for ``|z| > 700``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            Positive values predict ``classes_[1]``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        coef = self.coef_samples_.reshape(-1, self.n_features_in_)
        intercept = self.intercept_samples_.reshape(-1)
        n_draws = coef.shape[0]
        out = np.empty(X.shape[0])
        # Rows per block so that the (rows, draws) logit matrix stays near 32 MB.
        step = max(1, (1 << 22) // n_draws)
        for start in range(0, X.shape[0], step):
            z = X[start:start + step] @ coef.T + intercept
            log_p1 = special.logsumexp(special.log_expit(z), axis=1)
            log_p0 = special.logsumexp(special.log_expit(-z), axis=1)
            out[start:start + step] = log_p1 - log_p0
        return out

    def predict_proba(self, X):
        """Posterior-predictive class probabilities (averaged over the draws).

        Returns
        -------
        ndarray of shape (n_samples, 2)
            Columns in the order of ``classes_``.
        """
        dec = self.decision_function(X)
        return np.column_stack([special.expit(-dec), special.expit(dec)])

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed without underflow."""
        dec = self.decision_function(X)
        return np.column_stack([special.log_expit(-dec), special.log_expit(dec)])

    def predict(self, X):
        """The class with the larger posterior-predictive probability.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        dec = self.decision_function(X)
        return self.classes_[(dec > 0).astype(int)]
