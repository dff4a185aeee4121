"""Bayesian logistic regression sampled by (subsampled) Metropolis–Hastings."""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from scipy import linalg, special
from sklearn.base import ClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import _check_sample_weight, validate_data

from .._base import MCMCEstimator, keeps_state_on_interrupt
from .._utils import check_numeric
from ..algorithms.glm import GLMTarget
from ..algorithms.mh import PROPOSALS, Proposal, TaylorProxy, build_kernel
from ..algorithms.stores import RowStore, is_out_of_core
from ._exact import sample_exact
from ._logistic_data import LabelSigns, StoredRows, TrainingData, warn_collinear, warn_wide
from ._logistic_options import TESTS, exact_plan_gradients, proposal_gradient, test_options
from ._logistic_predict import PosteriorPredictiveMixin
from ._mh_chains import mh_chain, mh_chain_continue

__all__ = ["BayesianLogisticRegressionMH"]

# The tests a chain over data stored out of memory runs (compiled laws).
_STORED_TESTS = frozenset({"bounded_barker", "metropolis", "barker"})


class BayesianLogisticRegressionMH(ClassifierMixin, PosteriorPredictiveMixin, MCMCEstimator):
    """Bayesian binary logistic regression sampled by subsampled Metropolis–Hastings.

    The posterior ``π_T(θ) ∝ N(θ; 0, prior_scale² I) Π_i σ(s_i x_iᵀθ)^{1/T}`` over
    ``θ = (coef, intercept)`` is sampled by ``n_chains`` independent MH chains whose acceptance
    test may look at a minibatch only. By default: the bounded Barker test (its acceptance
    probability is within ``delta = 0.01`` of the exact Barker probability at every step, on
    any data: see :func:`sksubsample.algorithms.bounded_barker`), second-order Taylor control
    variates around the MAP, and a Hamiltonian (leapfrog) proposal preconditioned by the
    Laplace covariance. The MAP comes from :class:`sklearn.linear_model.LogisticRegression`
    with the L2 penalty that equals the prior (``C = prior_scale² / temperature``, intercept
    penalised as a coefficient).

    What the default costs depends on the data, not on a tuning knob: the test's minibatch is
    the smallest one for which the model's O(d²) bound on the control-variate residuals
    guarantees the error, so on a large concentrated problem it is a few dozen to a few hundred
    terms per step. Where no minibatch repays its overhead (a small or poorly identified
    problem: the minibatch the bound allows would be most of N, and Barker's decision on it is
    worth about half of an exact step), the plan chooses the exact Metropolis test on all N
    (``plan_.exact``), with the full-data gradient on small designs (``gradient="auto"``).

    Predictions average over the posterior draws (posterior predictive probabilities);
    ``predict_proba(X, return_draws=True)`` gives them per draw. :meth:`sample_more` continues
    the chains; :meth:`to_inference_data` exports the draws to ArviZ with, on request, the
    pointwise log likelihood (``az.loo``, ``az.waic``) and posterior predictive draws.

    Parameters
    ----------
    prior_scale : float > 0, default 10.0
        Standard deviation τ of the N(0, τ²) prior of every coefficient and of the intercept.
    fit_intercept : bool, default True
        Whether to sample an intercept.
    test : str or callable, default "bounded_barker"
        The MH acceptance test (:mod:`sksubsample.algorithms.mh`), or any callable
        with the acceptance-test signature ``test(log_ratio_terms, n_data, log_ratio_rest,
        rng, *, term_bound=None) -> AcceptInfo`` (its ``kind`` attribute, if any, sets the
        acceptance rate warm-up aims at). Names:
        ``"metropolis"`` and ``"barker"`` are exact full-data tests; ``"bounded_barker"`` has
        a per-step error of at most ``delta`` on any data; ``"minibatch_barker"``
        (Seita et al. 2017, Alg. 1), ``"austerity"`` (Korattikara et al. 2014),
        ``"adaptive_subsampling"`` (Bardenet et al. 2014, MHSubLhd), ``"racing"`` /
        ``"racing-normal"`` / ``"racing-ebs"`` (Chen & Ghahramani 2016, Eq. 12) look at
        minibatches.
    proposal : {"hamiltonian", "langevin", "random-walk"} or Proposal, default "hamiltonian"
        ``"hamiltonian"``: a jittered leapfrog trajectory (HMC's move, one acceptance test per
        trajectory); ``"langevin"``: one leapfrog step (MALA); ``"random-walk"``. All are
        preconditioned by the Laplace covariance at the MAP and have exact proposal ratios.
        Any :class:`sksubsample.algorithms.Proposal` may be given instead.
    control_variates : bool, default True
        Let the test see the residuals of second-order Taylor proxies around the MAP (Chen &
        Ghahramani 2016, Eq. 11); the proxies' sum is added back exactly, so exact tests stay
        exact and minibatch tests need far smaller batches at temperature 1.
    temperature : float > 0, default 1.0
        T of the tempered posterior (only the likelihood is tempered, Seita et al. Section 6).
    batch_size : int >= 2 or None, default None
        Initial minibatch size (and increment) of the minibatch tests; ``None`` means
        ``min(100, n_samples_fit)``. Must be None for the exact tests, ``"bounded_barker"``
        (which sizes its own minibatch) and callables.
    delta : float in (0, 1) or None, default None
        Error tolerance of the test: the bound on the per-step acceptance error of
        ``"bounded_barker"`` (default 0.01), the Novak-bound tolerance of
        ``"minibatch_barker"`` (Seita et al. Cor. 1), the decision error of
        ``"adaptive_subsampling"`` and ``"racing*"``, the per-look ε of ``"austerity"``.
        ``None`` keeps each test's default. Must be None for the exact tests.
    gradient : {"auto", "proxy", "exact"}, default "auto"
        Gradient of the gradient-based proposals: the Taylor proxy's (no data) or the
        full-data one (N gradient terms per leapfrog step, counted in ``n_evaluations_``).
        ``"auto"`` takes the full-data gradient when ``n_samples × n_params <= 10⁴``, or
        ``<= 10⁶`` and the test reads every row at every step anyway (the exact tests, and the
        default's plan where it is exact: small data, where the posterior is least Gaussian
        and a gradient costs about what the test does), and the proxy's otherwise. Never
        biases the chain.
    n_draws : int >= 1 or "auto", default "auto"
        Retained draws per chain. ``"auto"``: the chains run 1 000 draws, then continue (as
        :meth:`sample_more` does, draw for draw) in rounds sized by the ESS measured so far,
        until every parameter's bulk and tail ESS reach 400 and its split R-hat is at most
        1.01 (Vehtari et al. 2021, Section 4.3), or until a budget of 10 000 draws per chain,
        at which the ConvergenceWarning names the parameters that fall short.
        ``n_draws_`` and ``convergence_`` report the outcome.
    n_warmup : int >= 0, default 500
        Warm-up steps per chain (dual-averaging step-size adaptation, Hoffman & Gelman 2014,
        for ``proposal="hamiltonian"`` ChEES adaptation of the integration time, Hoffman,
        Radul & Sountsov 2021, and from 50 steps on a rescaling of the Laplace preconditioner
        estimated from the warm-up draws, as in Stan's windowed adaptation:
        ``preconditioner_``; discarded).
    n_chains : int >= 1, default 4
        Independent chains, each with its own random stream from ``SeedSequence.spawn``.
    n_jobs : int or None, default None
        Chains run in parallel through joblib (any backend, e.g. ``parallel_config("dask")``);
        the draws do not depend on ``n_jobs`` or on the backend.
    random_state : None, int, numpy.random.Generator, SeedSequence or RandomState, default None
    progress : bool or "notebook", default False
        Show a tqdm progress bar over the chains' draws (warm-up included), advanced as the
        chains run, in parallel workers too; it does not change the draws. ``"notebook"``
        draws the Jupyter widget, which needs ipywidgets (``pip install
        sksubsample[notebook]``).

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    coef_ : ndarray of shape (1, n_features)
        Posterior mean of the coefficients (the shape of ``LogisticRegression.coef_``).
    intercept_ : ndarray of shape (1,)
        Posterior mean of the intercept (0 when ``fit_intercept=False``).
    coef_samples_ : ndarray of shape (n_chains, n_draws, n_features)
    intercept_samples_ : ndarray of shape (n_chains, n_draws)
        Zeros when ``fit_intercept=False``.
    posterior_names_ : ndarray of str, shape (n_params,)
        Names of the columns of :meth:`sample_posterior` (features, then ``"intercept"``).
    map_ : ndarray of shape (n_params,)
        MAP of the tempered posterior. Rounded to single precision, it is the centre of the
        control variates and of the chains' starts.
    ess_ : ndarray of shape (n_params,)
        Bulk effective sample size of each parameter (NaN with fewer than 4 draws per chain).
    rhat_ : ndarray of shape (n_params,)
        Rank-normalised split R-hat of each parameter (NaN with fewer than 4 draws per chain).
    acceptance_rate_ : float
        Fraction of accepted proposals over chains (sampling phase). The per-step acceptance
        probabilities are the sample statistic ``acceptance_rate`` of
        :meth:`to_inference_data`.
    mean_batch_size_ : float
        Mean size of the minibatch the decisions used (sampling phase, all chains).
    batch_sizes_ : ndarray of shape (n_chains, n_draws)
        Decision minibatch size of every retained step (Seita et al. Fig. 2/4).
    step_size_ : ndarray of shape (n_chains,)
        Step size of each chain after warm-up.
    path_length_ : ndarray of shape (n_chains,)
        Integration time of each chain's Hamiltonian proposal after warm-up, in the
        coordinates whitened by the chain's ``preconditioner_`` (NaN for the other proposals).
    preconditioner_ : ndarray of shape (n_chains, n_params, n_params)
        The preconditioner M of each chain's proposal after warm-up (the covariance shape of
        its moves; for ``proposal="hamiltonian"`` the inverse mass matrix), in the order of
        ``posterior_names_``: the Laplace covariance at the MAP, rescaled in warm-up by the
        covariance of the warm-up draws (its diagonal, or all of it where the Laplace
        approximation misses the posterior's scales) in the coordinates that covariance whitens
        (:func:`sksubsample.algorithms.run_kernel`). Close to the Laplace covariance where
        that fits the posterior.
    n_draws_ : int
        Draws per chain kept (``n_draws``, or where ``n_draws="auto"`` stopped, plus the
        draws of :meth:`sample_more`).
    convergence_ : dict
        How the draws of ``fit`` ended: ``rounds`` of draws run and why they ``stopped``
        (``"n_draws"`` for an integer ``n_draws``; for ``"auto"``, ``"converged"`` or
        ``"budget"``, with the draws' ``min_bulk_ess``, ``min_tail_ess`` and ``max_rhat``
        and the budget ``max_draws`` per chain).
    n_evaluations_ : int
        Likelihood terms evaluated: by the acceptance tests over every warm-up and sampling
        step of every chain, plus N once to build the control-variate proxies. (The MAP
        optimisation is not counted; ``map_n_iter_`` reports its iterations.)
    fraction_data_touched_ : float
        ``n_evaluations_ / (N × steps)``: the work relative to exact MH, which evaluates
        all N terms at every step.
    plan_ : ExpansionPlan or None
        What the default test's control variates were planned as, decided before the chains
        ran, and what the plan expects to cost (see
        :class:`sksubsample.algorithms.ExpansionPlan`): the Taylor proxies' ``order``,
        the ``n_exact_rows`` of largest leverage summed at every step, the data
        ``rows_per_step`` expected after warm-up and ``warmup_rows_per_step`` during it,
        and the predicted ``seconds`` of the set-up and rows the plan decides. The plan is
        the cheapest by costs measured on this machine (once per kind of data, then
        stored), for the fit's ``n_chains × (n_warmup + n_draws)`` steps: a given fit plans
        alike, hence draws alike, on a given machine; a much longer or shorter fit may plan
        otherwise. ``plan_.exact``: the plan found the exact test cheaper per effective draw,
        and the chains ran ``test="metropolis"`` (the draws of a fit with that test). None for
        the other tests and without control variates.

    The fitted estimator keeps its sampler (which holds the training data) in memory for
    :meth:`sample_more` and for the log likelihood, ``lp``, observed data and posterior
    predictive draws of :meth:`to_inference_data`; it is not pickled, so an unpickled
    estimator predicts and exports its draws but cannot do those.
    map_n_iter_ : int
        Iterations of the MAP optimiser.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Only when ``X`` has string feature names.

    See Also
    --------
    sklearn.linear_model.LogisticRegression : the MAP point estimate.
    sklearn.multiclass.OneVsRestClassifier : wrap this estimator for more than two classes.

    Notes
    -----
    Exactness: ``"metropolis"`` and ``"barker"`` leave π_T invariant for any proposal,
    control variates or temperature. ``"bounded_barker"`` has a per-step acceptance error of
    at most ``delta`` whatever the data (a bound from the model, no normal approximation).
    ``"minibatch_barker"`` has a per-step error bounded by the Novak bound ε (Seita et al.
    Cor. 2) when ``delta`` is set and otherwise relies on a normal approximation that fails on
    small or skewed data (it biases the breast-cancer posterior); the other minibatch tests
    have the per-step decision errors of their papers. Data evaluations are counted, not
    estimated.

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
    >>> clf = BayesianLogisticRegressionMH(n_draws=1000, n_warmup=500, n_chains=2,
    ...                                    random_state=0).fit(X, y)
    >>> clf.coef_samples_.shape
    (2, 1000, 3)
    >>> clf.sample_posterior(50, random_state=0).shape
    (50, 4)
    >>> bool(clf.score(X, y) > 0.8)
    True
    >>> clf.sample_more(200).coef_samples_.shape
    (2, 1200, 3)
    >>> clf.predict_proba(X[:5], return_draws=True).shape
    (2400, 5, 2)
    """

    _parameter_constraints: ClassVar[dict] = {
        **MCMCEstimator._parameter_constraints,
        "prior_scale": [Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "test": [StrOptions(set(TESTS)), callable],
        "proposal": [StrOptions(set(PROPOSALS)), Proposal],
        "control_variates": ["boolean"],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 2, None, closed="left"), None],
        "delta": [Interval(Real, 0, 1, closed="neither"), None],
        "gradient": [StrOptions({"auto", "proxy", "exact"})],
        "n_draws": [*MCMCEstimator._parameter_constraints["n_draws"], StrOptions({"auto"})],
    }

    def __init__(self, *, prior_scale=10.0, fit_intercept=True, test="bounded_barker",
                 proposal="hamiltonian", control_variates=True, temperature=1.0, batch_size=None,
                 delta=None, gradient="auto", n_draws="auto", n_warmup=500, n_chains=4, n_jobs=None,
                 random_state=None, progress=False):
        self.prior_scale = prior_scale
        self.fit_intercept = fit_intercept
        self.test = test
        self.proposal = proposal
        self.control_variates = control_variates
        self.temperature = temperature
        self.batch_size = batch_size
        self.delta = delta
        self.gradient = gradient
        self.n_draws = n_draws
        self.n_warmup = n_warmup
        self.n_chains = n_chains
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.progress = progress

    #: The scikit-learn checks this estimator is expected to fail, with the reason (pass
    #: ``expected_failed_checks=lambda est: est.SKLEARN_EXPECTED_FAILED_CHECKS`` to
    #: ``parametrize_with_checks``; scikit-learn >= 1.6 no longer reads them from the tags).
    #: Integer weights and repeated rows give the same posterior, so the same law of the draws
    #: (a statistical test checks it), but data sets of different sizes give the chains
    #: different index streams, so not the same draws bit for bit.
    SKLEARN_EXPECTED_FAILED_CHECKS: ClassVar[dict] = {
        check: "sample_weight=k is equivalent to k repeated rows in law (the posterior and "
               "the draws' distribution), not draw for draw: the chains' index streams depend "
               "on the number of rows"
        for check in ("check_sample_weight_equivalence_on_dense_data",
                      "check_sample_weight_equivalence_on_sparse_data")}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Binary only: several classes go through OneVsRestClassifier.
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------ configuration

    def _test_options(self, n_data):
        """Options of the acceptance test, validated against the data size before any work."""
        return test_options(self.test, self.batch_size, self.delta, n_data)

    def _gradient(self, n_cells, n_data, planned_terms):
        """The proposal gradient (:func:`proposal_gradient`)."""
        return proposal_gradient(self.gradient, n_cells, n_data, planned_terms)

    def _plan(self, proxy):
        """The bounded test's plan (:class:`~sksubsample.algorithms.glm.ExpansionPlan`), or
        None when the test does not follow one."""
        expansion = proxy.expansion
        if self.test == "bounded_barker" and self.control_variates and expansion is not None:
            return expansion.plan
        return None

    def _plan_line(self):
        """The progress bar's label: the estimator, and what its plan expects a step to read."""
        name = type(self).__name__
        if self.plan_ is None:
            return name
        plan = self.plan_
        if plan.exact:
            return f"{name} (exact test: all {plan.rows_per_step:.0f} rows/step)"
        return (f"{name} (order-{plan.order} proxies, ~{plan.rows_per_step:.0f} rows/step, "
                f"~{plan.warmup_rows_per_step:.0f} in warm-up)")

    def _planned_terms(self, proxy):
        """Data terms a step's test is planned to read: the bounded test's plan, N otherwise."""
        expansion = proxy.expansion
        if self.test == "bounded_barker" and self.control_variates and expansion is not None:
            return expansion.planned_terms
        return float(proxy.n_data)

    def _validate_y(self, y):
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(f"{type(self).__name__} needs samples of 2 classes in y; got 1 "
                             f"class ({classes[0].item()!r})")
        if classes.size > 2:
            raise ValueError(
                f"Only binary classification is supported. The type of the target is "
                f"{type_of_target(y, input_name='y')} ({classes.size} classes): wrap "
                f"{type(self).__name__} in sklearn.multiclass.OneVsRestClassifier."
            )
        return classes

    # ------------------------------------------------------------------ fit

    @keeps_state_on_interrupt
    def fit(self, X, y, sample_weight=None):
        """Sample the posterior of the coefficients given ``X`` and binary ``y``.

        Parameters
        ----------
        X : {array-like, sparse matrix, stored array} of shape (n_samples, n_features)
            Finite values. Sparse input stays sparse (CSR): minibatches gather sparse rows,
            and neither the MAP nor the control variates densify it. A dense array stored
            out of memory (a :class:`numpy.memmap`, e.g. from ``np.load(path,
            mmap_mode="r")``, a zarr array or a Dask array) stays where it is: the set-up
            reads it in a few passes of blocks (Dask computations on the active scheduler for
            a Dask array), in its own dtype, and each chain reads the rows it samples, fetched
            many steps ahead (see the "Large data" page of the user guide). Such X is sampled
            with ``test`` in {"bounded_barker", "metropolis", "barker"} and a named proposal;
            the chains draw their minibatches from a stream of their own, so the draws are
            those of the in-memory fit in law, not bit for bit; ``sample_more`` continues a
            chain on a fresh stream (same law).
        y : array-like of shape (n_samples,)
            Two classes. Stored like X (or in memory) when X is stored out of memory.
        sample_weight : array-like of shape (n_samples,), default None
            Non-negative case weights: the log-likelihood is ``sum_i w_i log σ(s_i x_iᵀθ)``,
            so a weight of 2 is the same posterior as a duplicated row (frequency weights,
            not a rescaling of the data set). Subsampling, control variates and the tests'
            error bounds all carry the weights.

        Returns
        -------
        self : BayesianLogisticRegressionMH

        Raises
        ------
        ValueError
            Before any work, for entries of X that are not numbers, not finite, or so large
            that the sums of their squares overflow; for a y without exactly two classes. For
            X stored out of memory: for X, y and weights of different lengths before any
            read, and for a non-finite value in X (or a negative weight) when a pass reads it,
            naming its row and block of rows.

        Warns
        -----
        sksubsample.diagnostics.CostWarning
            Before any work, for 1000 or more parameters and fewer rows: it may take hours.
        sksubsample.diagnostics.CollinearityWarning
            When columns of X (with the intercept) are collinear, naming them: the data then
            determine only combinations of their coefficients.
        sksubsample.diagnostics.ConvergenceWarning
            When the chains have not mixed (R-hat > 1.01 or bulk ESS < 100 per chain; with
            ``n_draws="auto"``, when the budget ran out before every bulk and tail ESS
            reached 400).
        """
        self._validate_params()
        target, features = self._training_target(X, y, sample_weight)
        test_options = self._test_options(target.n_data)
        warn_wide(target.n_data, target.n_features,
                  self.n_chains * (self.n_warmup + self._first_round_draws()), 4)
        setup = target.set_up(self.temperature)
        self.map_, self.map_n_iter_ = setup.map, setup.n_passes
        weights = StoredRows(target, "w") if target.store.has_weights else None
        data = TrainingData(StoredRows(target, "design"), StoredRows(target, "y01"), weights,
                            float(self.prior_scale), float(self.temperature))
        n_data, dim = target.n_data, target.n_features
        proxy = TaylorProxy(target, setup.center, expansion_options={
            "n_steps": self.n_chains * (self._first_round_draws() + self.n_warmup), "setup": setup,
            "n_warmup_steps": self.n_chains * self.n_warmup, "exact_gradients":
            exact_plan_gradients(self.proposal, self.gradient, n_data * dim, n_data)})
        self.plan_ = self._plan(proxy)
        # The Laplace covariance at the expansion point shapes both the proposal and the
        # chains' starts.
        precision = proxy.laplace_precision(self.temperature, target.hess_log_prior(setup.center))
        warn_collinear(-proxy.hess_sum, features, self.fit_intercept, 4)
        laplace_cov = linalg.cho_solve(linalg.cho_factor(precision, lower=True), np.eye(dim))
        laplace_cov = 0.5 * (laplace_cov + laplace_cov.T)
        test = self.test
        if self.plan_ is not None and self.plan_.exact:
            # The plan found no minibatch that repays its overhead: every step reads every row,
            # so the test is the exact one (Metropolis's decision, as the bounded test makes
            # when its minibatch is all N), without a bound to compute.
            test, test_options = "metropolis", {}
        kernel = build_kernel(target, dim=dim, test=test, proposal=self.proposal,
                              proxy=proxy, control_variates=self.control_variates,
                              temperature=self.temperature, preconditioner=laplace_cov,
                              gradient=self._gradient(n_data * dim, n_data,
                                                      self._planned_terms(proxy)),
                              **test_options)
        init_chol = linalg.cholesky(laplace_cov, lower=True)
        names = features + (["intercept"] if self.fit_intercept else [])
        self._sample(mh_chain, (kernel, setup.center, init_chol), names=names, n_data=n_data,
                     n_setup_evaluations=proxy.n_setup_evaluations,
                     continue_fn=mh_chain_continue, data=data, desc=self._plan_line(),
                     caller_depth=2)
        return self

    def _training_target(self, X, y, sample_weight):
        """The fit's :class:`~sksubsample.algorithms.glm.GLMTarget` (its rows where they are:
        X in memory validated as scikit-learn does, in its own float dtype; X stored out of
        memory only checked for its shape, its rows checked as the passes read them) and the
        names of its columns. Sets ``classes_``, ``n_features_in_`` (and
        ``feature_names_in_``)."""
        if is_out_of_core(X):
            if (callable(self.test) or self.test not in _STORED_TESTS
                    or not isinstance(self.proposal, str)):
                raise ValueError(
                    f"X stored out of memory ({type(X).__name__}) is sampled by the compiled "
                    f"chain only: test must be one of {sorted(_STORED_TESTS)} and proposal a "
                    f"name, got test={self.test!r}, proposal={self.proposal!r}; the other tests "
                    f"read arbitrary rows at every look (load X in memory with np.asarray for "
                    f"them)")
            store = RowStore(X, y, sample_weight)
            self.classes_ = self._validate_y(store.unique_response())
            self.n_features_in_ = store.n_features
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        else:
            X, y = self._validate_X(X, y, reset=True, finite=False)
            if sample_weight is not None:
                check_numeric(sample_weight, "sample_weight")
                sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                                     ensure_non_negative=True)
            store = RowStore(X, y, sample_weight)
            # (y is 1-D here: its distinct values tell its type, found as for a stored y)
            self.classes_ = self._validate_y(store.unique_response())
        store.response = LabelSigns(self.classes_[1])
        features = (list(map(str, self.feature_names_in_))
                    if hasattr(self, "feature_names_in_")
                    else [f"x{j}" for j in range(store.n_features)])
        target = GLMTarget(store, None, self.prior_scale, intercept=self.fit_intercept)
        return target, features

    def _validate_X(self, X, y="no_validation", *, reset, finite=True):
        """``validate_data`` with a message naming X when its entries are not numbers. float32
        stays float32 (the kernels read it as it is and sum in float64); ``finite=False`` leaves
        NaN and infinity to the passes that read every row anyway (a fit's set-up), which name
        the row."""
        options = {"dtype": [np.float64, np.float32], "accept_sparse": "csr", "order": "C",
                   "reset": reset, "ensure_all_finite": finite}
        try:
            if isinstance(y, str) and y == "no_validation":
                return validate_data(self, X, **options)
            return validate_data(self, X, y, y_numeric=False, **options)
        except ValueError as exc:
            if "could not convert" not in str(exc):
                raise
            raise ValueError(
                f"X must hold numbers ({exc}): encode text or categorical columns first, "
                f"e.g. with sklearn.preprocessing.OneHotEncoder"
            ) from exc
        except TypeError as exc:
            raise TypeError(f"X must hold numbers: {exc}") from exc

    def _after_sampling(self):
        draws, n_features = self._draws, self.n_features_in_
        self.coef_samples_ = draws[:, :, :n_features].copy()
        self.intercept_samples_ = (draws[:, :, -1].copy() if draws.shape[2] > n_features
                                   else np.zeros(draws.shape[:2]))
        self.coef_ = self.coef_samples_.mean(axis=(0, 1))[None, :]
        self.intercept_ = np.array([self.intercept_samples_.mean()])
        self.batch_sizes_ = self._stats["batch_size"]
        self.mean_batch_size_ = float(self.batch_sizes_.mean())
        lengths = self._stats.get("path_length")
        self.path_length_ = (np.full(draws.shape[0], np.nan) if lengths is None
                             or lengths.shape[1] == 0 else lengths[:, 0].copy())
        factors = np.stack(self._latest_extras)
        self.preconditioner_ = factors @ np.swapaxes(factors, 1, 2)

    # ------------------------------------------------------------------ posterior hooks

    def _posterior_variables(self):
        out = {"coef": self.coef_samples_}
        if self._draws.shape[2] > self.n_features_in_:
            out["intercept"] = self.intercept_samples_
        return out

    # ------------------------------------------------------------------ to_inference_data hooks

    def _data(self, what="the training data"):
        return self._fitted_sampler(what).data

    def _n_observations(self):
        return self._data().design.shape[0]

    def _observed_data(self, rows):
        y01 = self._data().y01
        return {"y": (y01 if rows is None else y01[rows]).astype(np.int8)}

    def _linear_predictors(self, rows):
        """Blocks ``(columns, s, w, z)`` over the observations ``rows``: their slice of the
        rows, signs ``s = ±1``, weights (None without) and logits ``z`` (block, draws)."""
        data = self._data()
        design, y01, weights = data.design, data.y01, data.weights
        if rows is not None:
            design, y01 = design[rows], y01[rows]
            weights = None if weights is None else weights[rows]
        thetas = self._draws.reshape(-1, self._draws.shape[2])
        # Rows per block so that the (rows, draws) logit matrix stays near 32 MB.
        step = max(1, (1 << 22) // thetas.shape[0])
        for start in range(0, design.shape[0], step):
            block = slice(start, start + step)
            z = np.asarray(design[block] @ thetas.T)
            yield (block, 2.0 * y01[block] - 1.0, None if weights is None else weights[block],
                   z)

    def _pointwise_log_likelihood(self, rows):
        n_chains, n_draws = self._draws.shape[:2]
        n_rows = self._n_observations() if rows is None else rows.size
        out = np.empty((n_chains * n_draws, n_rows))
        for block, signs, weights, z in self._linear_predictors(rows):
            terms = special.log_expit(signs[:, None] * z)
            if weights is not None:
                terms *= weights[:, None]
            out[:, block] = terms.T
        return {"y": out.reshape(n_chains, n_draws, n_rows)}

    def _posterior_predictive(self, rows, rng):
        n_chains, n_draws = self._draws.shape[:2]
        n_rows = self._n_observations() if rows is None else rows.size
        out = np.empty((n_chains * n_draws, n_rows), dtype=np.int8)
        for block, _, _, z in self._linear_predictors(rows):
            out[:, block] = (rng.random(z.shape[::-1]) < special.expit(z.T))
        return {"y": out.reshape(n_chains, n_draws, n_rows)}

    def _log_density(self):
        data = self._data()
        thetas = self._draws.reshape(-1, self._draws.shape[2])
        loglik = np.zeros(thetas.shape[0])
        for _, signs, weights, z in self._linear_predictors(None):
            terms = special.log_expit(signs[:, None] * z)
            if weights is not None:
                terms *= weights[:, None]
            loglik += terms.sum(axis=0)
        log_prior = (-0.5 * np.sum(thetas**2, axis=1) / data.prior_scale**2
                     - thetas.shape[1] * np.log(data.prior_scale * np.sqrt(2.0 * np.pi)))
        return (log_prior + loglik / data.temperature).reshape(self._draws.shape[:2])

    def _posterior_dims(self):
        features = list(self.posterior_names_[: self.n_features_in_])
        return {"coef": ["feature"]}, {"feature": features}

    # ------------------------------------------------------------------ prediction

    sample_exact = sample_exact

