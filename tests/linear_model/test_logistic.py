"""Tests of BayesianLogisticRegressionMH: scikit-learn contract, posterior correctness against
quadrature, determinism across joblib backends, persistence, input validation, workflows."""

import pickle
import warnings

import numpy as np
import pytest
from joblib import parallel_config
from numpy.polynomial.hermite import hermgauss
from scipy import linalg, sparse, special
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.algorithms import HAMILTONIAN, AcceptanceKind, AcceptInfo, GLMTarget, Proposal
from sksubsample.diagnostics import ConvergenceWarning

SMALL = {"n_draws": 100, "n_warmup": 100, "n_chains": 2}


@parametrize_with_checks([BayesianLogisticRegressionMH(random_state=0, **SMALL)],
                         expected_failed_checks=lambda est: est.SKLEARN_EXPECTED_FAILED_CHECKS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


# ----------------------------------------------------------------------------- reference


def _problem(n=2000, seed=0):
    """Two correlated features, no intercept: a 2-D posterior that quadrature resolves."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2)) @ np.array([[1.0, 0.0], [0.6, 0.8]])
    y = (rng.random(n) < special.expit(x @ np.array([1.0, -0.5]))).astype(int)
    return x, y


def _log_post(x, y, thetas, prior_scale, temperature):
    s = 2.0 * y - 1.0
    ll = special.log_expit(s[:, None] * (x @ thetas.T)).sum(axis=0)
    return ll / temperature - 0.5 * (thetas**2).sum(axis=1) / prior_scale**2


def _quadrature_moments(x, y, *, prior_scale=10.0, temperature=1.0, n_nodes=40):
    """Posterior mean and sd by tensor Gauss–Hermite quadrature around the Laplace Gaussian.

    With θ = m + √2 L z the posterior expectation of g is Σ w_k r(θ_k) g(θ_k) / Σ w_k r(θ_k),
    r = π / φ_Laplace (up to constants), exact for polynomial g·r; r is smooth here.
    """
    lr = LogisticRegression(C=prior_scale**2 / temperature, fit_intercept=False, tol=1e-12,
                            solver="newton-cholesky").fit(x, y)
    m = lr.coef_.ravel()
    w = special.expit(x @ m) * special.expit(-x @ m)
    prec = (x.T * w) @ x / temperature + np.eye(2) / prior_scale**2
    chol = np.linalg.cholesky(np.linalg.inv(prec))
    nodes, weights = hermgauss(n_nodes)
    z = np.stack(np.meshgrid(nodes, nodes, indexing="ij"), axis=-1).reshape(-1, 2)
    wz = np.outer(weights, weights).ravel()
    thetas = m + np.sqrt(2.0) * z @ chol.T
    log_r = _log_post(x, y, thetas, prior_scale, temperature) + (z**2).sum(axis=1)
    p = wz * np.exp(log_r - log_r.max())
    p /= p.sum()
    mean = p @ thetas
    sd = np.sqrt(p @ (thetas - mean) ** 2)
    return mean, sd


@pytest.fixture(scope="module")
def problem():
    x, y = _problem()
    mean, sd = _quadrature_moments(x, y)
    return x, y, mean, sd


def test_quadrature_reference_is_converged(problem):
    x, y, mean, sd = problem
    mean30, sd30 = _quadrature_moments(x, y, n_nodes=30)
    np.testing.assert_allclose(mean30, mean, rtol=0, atol=1e-6 * sd.min())
    np.testing.assert_allclose(sd30, sd, rtol=1e-6)


def _moment_failures(draws, ref_mean, ref_sd, z=4.0):
    """Mean and sd of chains (n_chains, n_draws, 2) vs a reference, within z MC errors.

    The Monte Carlo standard error of the mean is sd / sqrt(ESS_mean); that of the sd is
    sd / sqrt(2 ESS) for a near-Gaussian posterior, with ESS of the squared deviations.
    z = 4 makes the false-alarm probability ~6e-5 per comparison (≈ 0.4 % over this file).
    """
    from sksubsample import diagnostics

    failures = []
    flat = draws.reshape(-1, draws.shape[2])
    for k in range(draws.shape[2]):
        ess_mean = diagnostics.effective_sample_size(draws[:, :, k], method="mean")
        se_mean = ref_sd[k] / np.sqrt(ess_mean)
        err_mean = flat[:, k].mean() - ref_mean[k]
        if abs(err_mean) > z * se_mean:
            failures.append(f"mean[{k}] off by {err_mean / se_mean:.1f} MC errors")
        sq = (draws[:, :, k] - ref_mean[k]) ** 2
        ess_sq = diagnostics.effective_sample_size(sq, method="mean")
        se_sd = ref_sd[k] / np.sqrt(2.0 * ess_sq)
        err_sd = flat[:, k].std() - ref_sd[k]
        if abs(err_sd) > z * se_sd:
            failures.append(f"sd[{k}] off by {err_sd / se_sd:.1f} MC errors")
    return failures


TESTS = ["metropolis", "barker", "bounded_barker", "minibatch_barker", "austerity",
         "adaptive_subsampling", "racing-normal", "racing-ebs"]


@pytest.mark.parametrize("proposal", ["langevin", "random-walk"])
@pytest.mark.parametrize("test", TESTS)
def test_posterior_matches_quadrature(problem, test, proposal):
    x, y, mean, sd = problem
    # The proxy gradient, so that what is measured is the tests' work on the data. The random
    # walk mixes ~4 times slower: it runs longer, so that its R-hat is as well resolved.
    n_draws = 3000 if proposal == "random-walk" else 1500
    clf = BayesianLogisticRegressionMH(fit_intercept=False, test=test, proposal=proposal,
                                       gradient="proxy", n_draws=n_draws, n_warmup=300,
                                       n_chains=2, random_state=1).fit(x, y)
    failures = _moment_failures(clf.coef_samples_, mean, sd)
    assert not failures, failures
    assert np.all(clf.rhat_ < 1.05)
    if test in ("minibatch_barker", "austerity", "racing-normal"):
        # Subsampling touched a fraction of the data.
        assert clf.fraction_data_touched_ < 0.5
    elif test in ("adaptive_subsampling", "racing-ebs"):
        # Their range bound C is computed honestly from all N residuals under control
        # variates (the core passes the model's bound only for raw terms): no saving.
        assert clf.fraction_data_touched_ > 1.0


@pytest.mark.parametrize("control_variates", [False])
def test_posterior_without_control_variates(problem, control_variates):
    x, y, mean, sd = problem
    clf = BayesianLogisticRegressionMH(fit_intercept=False, control_variates=control_variates,
                                       n_draws=1500, n_warmup=300, n_chains=2,
                                       random_state=2).fit(x, y)
    assert not _moment_failures(clf.coef_samples_, mean, sd)


# ------------------------------------------------------- user-written proposal and test


def _autoregressive_proposal(center, declare_ratio=True):
    """A user's proposal: θ' = c + ρ(θ - c) + ρ ε L ξ with ρ = 1/sqrt(1 + ε²).

    It is reversible with respect to N(c, M), M = L Lᵀ, so
    log q(θ|θ') - log q(θ'|θ) = log N(θ; c, M) - log N(θ'; c, M). Declaring it symmetric
    (``declare_ratio=False``) is a classic mistake: the chain then samples ∝ π(θ) N(θ; c, M).
    """

    def propose(rng, state, step_size, chol):
        rho = 1.0 / np.hypot(1.0, step_size)
        xi = rng.standard_normal(state.theta.size)
        return center + rho * (state.theta - center) + rho * step_size * (chol @ xi), None

    def log_q_ratio(state, theta_new, grad_new, aux, step_size, chol):
        def half_norm2(v):
            z = linalg.solve_triangular(chol, v - center, lower=True)
            return 0.5 * float(z @ z)

        return half_norm2(theta_new) - half_norm2(state.theta)

    return Proposal(propose, log_q_ratio if declare_ratio else None, name="autoregressive")


def _user_exact_barker(log_ratio_terms, n_data, log_ratio_rest, rng, *, term_bound=None):
    """A user's acceptance test: exact Barker on all N terms."""
    delta = float(np.sum(log_ratio_terms(np.arange(n_data)))) + log_ratio_rest
    accepted = bool(rng.random() < special.expit(delta))
    return AcceptInfo(accepted, n_data, n_data, delta, True, 1)


_user_exact_barker.kind = AcceptanceKind("barker", exact=True)


def _user_naive_minibatch_barker(log_ratio_terms, n_data, log_ratio_rest, rng, *,
                                 term_bound=None):
    """A user's mistake: the Barker rule applied to a minibatch estimate of Δ, uncorrected."""
    idx = rng.choice(n_data, size=100, replace=False)
    delta = n_data * float(np.mean(log_ratio_terms(idx))) + log_ratio_rest
    accepted = bool(rng.random() < special.expit(delta))
    return AcceptInfo(accepted, 100, 100, delta, False, 1)


_user_naive_minibatch_barker.kind = AcceptanceKind("barker", exact=False)


def test_user_proposal_and_user_test_plug_into_the_estimator(problem):
    x, y, mean, sd = problem
    center = LogisticRegression(C=100.0, fit_intercept=False).fit(x, y).coef_.ravel()
    common = {"fit_intercept": False, "n_draws": 1500, "n_warmup": 300, "n_chains": 2,
              "random_state": 3, "gradient": "proxy"}
    with_proposal = BayesianLogisticRegressionMH(
        proposal=_autoregressive_proposal(center), test="metropolis", **common).fit(x, y)
    assert not _moment_failures(with_proposal.coef_samples_, mean, sd)
    with_test = BayesianLogisticRegressionMH(test=_user_exact_barker, **common).fit(x, y)
    assert not _moment_failures(with_test.coef_samples_, mean, sd)
    assert with_test.n_evaluations_ == x.shape[0] * (2 * 1800 + 1)  # N per step + the proxies
    # Negative controls: an asymmetric proposal declared symmetric, and an uncorrected
    # minibatch Barker test, must both be told apart from the posterior.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        wrong_ratio = BayesianLogisticRegressionMH(
            proposal=_autoregressive_proposal(center, declare_ratio=False), test="metropolis",
            **common).fit(x, y)
        naive = BayesianLogisticRegressionMH(test=_user_naive_minibatch_barker,
                                             proposal="random-walk", control_variates=False,
                                             **common).fit(x, y)
    assert _moment_failures(wrong_ratio.coef_samples_, mean, sd)
    assert _moment_failures(naive.coef_samples_, mean, sd)


@pytest.mark.parametrize(("test", "gradient"), [("metropolis", "proxy"),
                                               ("bounded_barker", "proxy"),
                                               ("bounded_barker", "exact")])
def test_hamiltonian_proposal_matches_quadrature(problem, test, gradient):
    x, y, mean, sd = problem
    clf = BayesianLogisticRegressionMH(fit_intercept=False, test=test, proposal="hamiltonian",
                                       gradient=gradient, n_draws=1500, n_warmup=300,
                                       n_chains=2, random_state=5).fit(x, y)
    assert not _moment_failures(clf.coef_samples_, mean, sd)
    if gradient == "exact":
        # Every leapfrog step's full-data gradient is counted: at least N terms per step on
        # top of the test's own.
        assert clf.fraction_data_touched_ > 1.0


def test_hamiltonian_without_its_kinetic_energy_term_is_wrong(problem):
    """Negative control: the leapfrog proposal declared symmetric (no ½|p_0|² - ½|p_L|²)."""
    x, y, mean, sd = problem
    symmetric = HAMILTONIAN._replace(log_q_ratio=None, uses_gradient=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = BayesianLogisticRegressionMH(fit_intercept=False, test="metropolis",
                                           proposal=symmetric, gradient="proxy", n_draws=1500,
                                           n_warmup=300, n_chains=2, random_state=5).fit(x, y)
    assert _moment_failures(clf.coef_samples_, mean, sd)


def test_negative_control_wrong_target_fails(problem):
    # The same machinery run on the T = 2 posterior (sd ×√2) must be told apart from T = 1.
    x, y, mean, sd = problem
    clf = BayesianLogisticRegressionMH(fit_intercept=False, temperature=2.0, n_draws=1500,
                                       n_warmup=300, n_chains=2, random_state=1).fit(x, y)
    assert _moment_failures(clf.coef_samples_, mean, sd)
    mean2, sd2 = _quadrature_moments(x, y, temperature=2.0)
    assert not _moment_failures(clf.coef_samples_, mean2, sd2)


# ----------------------------------------------------------------------------- MAP, target


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("temperature", [1.0, 3.0])
def test_map_is_the_mode_of_the_tempered_posterior(fit_intercept, temperature):
    x, y = _problem(n=500, seed=3)
    clf = BayesianLogisticRegressionMH(prior_scale=0.5, fit_intercept=fit_intercept,
                                       temperature=temperature, n_draws=10, n_warmup=0,
                                       n_chains=1, random_state=0).fit(x, y)
    design = np.column_stack([x, np.ones(len(x))]) if fit_intercept else x
    target = GLMTarget(design, 2.0 * y - 1.0, 0.5)
    idx = np.arange(len(x))
    grad = target.grad_terms(clf.map_, idx).sum(axis=0) / temperature \
        + target.grad_log_prior(clf.map_)
    # A strong prior (0.5) makes a prior/penalty mismatch (e.g. an unpenalised intercept)
    # move the gradient far from 0.
    assert np.max(np.abs(grad)) < 1e-6


def test_glm_target_derivatives_and_taylor_expansion_are_consistent():
    x, y = _problem(n=300, seed=4)
    design = np.column_stack([x, np.ones(len(x))])
    target = GLMTarget(design, 2.0 * y - 1.0, 2.0)
    rng = np.random.default_rng(0)
    theta, ref = rng.standard_normal(3), rng.standard_normal(3)
    idx = rng.choice(300, size=40, replace=False)
    h = 1e-6
    fd = np.array([(target.loglik_terms(theta + h * e, idx)
                    - target.loglik_terms(theta - h * e, idx)) / (2 * h) for e in np.eye(3)]).T
    np.testing.assert_allclose(target.grad_terms(theta, idx), fd, rtol=1e-6, atol=1e-8)
    a0, a1 = rng.standard_normal(3) * 0.1, rng.standard_normal(3) * 0.1
    g, hs = target.grad_terms(ref, idx), target.hess_terms(ref, idx)
    slow = g @ (a1 - a0) + 0.5 * (np.einsum("nij,i,j->n", hs, a1, a1)
                                  - np.einsum("nij,i,j->n", hs, a0, a0))
    expansion = target.taylor_expansion(ref, order=2)
    np.testing.assert_allclose(expansion.diff_terms(a0, a1, idx), slow, rtol=1e-10)
    # Third order adds t_i ((x_iᵀa')³ - (x_iᵀa)³) / 6, t_i the third derivative in z (here by
    # central differences of the second derivative).
    cubic = target.taylor_expansion(ref, order=3)
    z_ref = design[idx] @ ref
    step = 1e-5
    third = (target.family.d2(z_ref + step, target.y[idx])
             - target.family.d2(z_ref - step, target.y[idx])) / (2 * step)
    slow3 = slow + third * ((design[idx] @ a1) ** 3 - (design[idx] @ a0) ** 3) / 6.0
    np.testing.assert_allclose(cubic.diff_terms(a0, a1, idx), slow3, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(cubic.sum_diff(a0, a1),
                               cubic.diff_terms(a0, a1, np.arange(300)).sum(), rtol=1e-10)
    # The expansion's sums equal the sums of the per-datum derivatives.
    everything = np.arange(300)
    np.testing.assert_allclose(expansion.grad_sum, target.grad_terms(ref, everything).sum(0),
                               rtol=1e-10)
    np.testing.assert_allclose(expansion.hess_sum, target.hess_terms(ref, everything).sum(0),
                               rtol=1e-10)
    # Full-data path (a permutation of all indices) agrees with the gather path.
    perm = rng.permutation(300)
    direct = special.log_expit(target.y[perm] * (design[perm] @ theta))
    np.testing.assert_allclose(target.loglik_terms(theta, perm), direct, rtol=1e-12)
    halves = np.concatenate([expansion.diff_terms(a0, a1, perm[:150]),
                             expansion.diff_terms(a0, a1, perm[150:])])
    np.testing.assert_allclose(expansion.diff_terms(a0, a1, perm), halves, rtol=1e-10)
    # The fused residual and ratio terms equal their definitions (minibatch and full data).
    theta_new = theta + 0.1 * rng.standard_normal(3)
    for indices in (idx, perm):
        raw = target.loglik_terms(theta_new, indices) - target.loglik_terms(theta, indices)
        np.testing.assert_allclose(target.loglik_ratio_terms(theta, theta_new, indices), raw,
                                   rtol=1e-12, atol=1e-14)
        slow_resid = raw - expansion.diff_terms(theta - ref, theta_new - ref, indices)
        np.testing.assert_allclose(expansion.residual_terms(theta, theta_new, indices),
                                   slow_resid, rtol=1e-9, atol=1e-13)
    # The Lipschitz bound really bounds the per-datum log-ratio.
    theta2 = theta + rng.standard_normal(3)
    diff = np.abs(target.loglik_terms(theta2, np.arange(300))
                  - target.loglik_terms(theta, np.arange(300)))
    assert diff.max() <= target.loglik_ratio_bound(theta, theta2)


def test_subsampling_saves_data_evaluations():
    x, y = _problem(n=20_000, seed=5)
    kw = {"fit_intercept": False, "n_draws": 200, "n_warmup": 100, "n_chains": 1,
          "random_state": 0, "gradient": "proxy"}
    bounded = BayesianLogisticRegressionMH(**kw).fit(x, y)
    seita = BayesianLogisticRegressionMH(test="minibatch_barker", **kw).fit(x, y)
    exact = BayesianLogisticRegressionMH(test="metropolis", **kw).fit(x, y)
    # Exact MH evaluates all N terms at every step, plus N once for the proxies.
    assert exact.n_evaluations_ == 20_000 * 301
    assert bounded.n_evaluations_ < 0.05 * exact.n_evaluations_
    assert seita.n_evaluations_ < 0.05 * exact.n_evaluations_
    assert seita.mean_batch_size_ == 100.0
    np.testing.assert_array_equal(exact.batch_sizes_, 20_000)


# ----------------------------------------------------------------------------- determinism


def _small_fit(**kw):
    x, y = _problem(n=600, seed=6)
    params = {"n_draws": 50, "n_warmup": 30, "n_chains": 3, "random_state": 42, **kw}
    return BayesianLogisticRegressionMH(**params).fit(x, y)


def test_draws_identical_for_n_jobs_and_threading():
    ref = _small_fit(n_jobs=1)
    np.testing.assert_array_equal(_small_fit(n_jobs=2).coef_samples_, ref.coef_samples_)
    with parallel_config(backend="threading", n_jobs=2):
        threaded = _small_fit()
    np.testing.assert_array_equal(threaded.coef_samples_, ref.coef_samples_)
    np.testing.assert_array_equal(threaded.intercept_samples_, ref.intercept_samples_)
    assert not np.array_equal(_small_fit(random_state=43).coef_samples_, ref.coef_samples_)
    # Different chains get different streams.
    assert not np.array_equal(ref.coef_samples_[0], ref.coef_samples_[1])


def test_draws_identical_under_dask_local_cluster():
    distributed = pytest.importorskip("distributed")
    ref = _small_fit(n_jobs=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        with parallel_config(backend="dask"):
            out = _small_fit()
    np.testing.assert_array_equal(out.coef_samples_, ref.coef_samples_)
    np.testing.assert_array_equal(out.batch_sizes_, ref.batch_sizes_)


def test_pickle_round_trip_predicts_identically():
    clf = _small_fit()
    x, _ = _problem(n=100, seed=9)
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clone.predict_proba(x), clf.predict_proba(x))
    np.testing.assert_array_equal(clone.predict(x), clf.predict(x))
    np.testing.assert_array_equal(clone.sample_posterior(), clf.sample_posterior())


# ----------------------------------------------------------------------------- API


def test_fitted_attributes_and_posterior_api():
    x, y = _problem(n=600, seed=6)
    labels = np.array(["no", "yes"])[y]
    clf = BayesianLogisticRegressionMH(n_draws=60, n_warmup=30, n_chains=3,
                                       random_state=0).fit(x, labels)
    assert list(clf.classes_) == ["no", "yes"]
    assert clf.coef_samples_.shape == (3, 60, 2) and clf.intercept_samples_.shape == (3, 60)
    assert clf.coef_.shape == (1, 2) and clf.intercept_.shape == (1,)
    np.testing.assert_allclose(clf.coef_[0], clf.coef_samples_.mean(axis=(0, 1)))
    assert clf.ess_.shape == (3,) and clf.rhat_.shape == (3,)
    assert list(clf.posterior_names_) == ["x0", "x1", "intercept"]
    assert 0.0 < clf.acceptance_rate_ < 1.0 and clf.batch_sizes_.shape == (3, 60)
    draws = clf.sample_posterior()
    assert draws.shape == (180, 3)
    np.testing.assert_array_equal(draws[:60, :2], clf.coef_samples_[0])
    assert clf.sample_posterior(10, random_state=0).shape == (10, 3)
    proba = clf.predict_proba(x)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # Posterior predictive = average of σ(xᵀw + b) over all draws.
    z = x @ draws[:, :2].T + draws[:, 2]
    np.testing.assert_allclose(proba[:, 1], special.expit(z).mean(axis=1), rtol=1e-10)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(x)), proba, rtol=1e-10)
    assert set(clf.predict(x)) <= {"no", "yes"}
    # Far outside the data the log-odds stay finite (log space, |z| > 700).
    far = clf.decision_function(np.array([[1e4, 1e4], [-1e4, -1e4]]))
    assert np.all(np.isfinite(far)) and np.all(np.abs(far) > 700)


def test_to_inference_data_matches_diagnostics():
    az = pytest.importorskip("arviz")
    clf = _small_fit()
    idata = clf.to_inference_data()
    assert idata.posterior["coef"].shape == (3, 50, 2)
    assert idata.posterior["intercept"].shape == (3, 50)
    assert idata.sample_stats["batch_size"].shape == (3, 50)
    ess = az.ess(idata)
    np.testing.assert_allclose(ess["coef"].values, clf.ess_[:2], rtol=1e-8)
    np.testing.assert_allclose(float(az.rhat(idata)["intercept"]), clf.rhat_[2], rtol=1e-8)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"prior_scale": 0.0}, "prior_scale"),
        ({"prior_scale": -1.0}, "prior_scale"),
        ({"n_chains": 0}, "n_chains"),
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": -2.0}, "temperature"),
        ({"temperature": float("inf")}, "temperature"),
        ({"test": "exact"}, "test"),
        ({"proposal": "hmc"}, "proposal"),
        ({"test": "metropolis", "batch_size": 50}, "batch_size"),
        ({"test": "barker", "delta": 0.1}, "delta"),
        ({"batch_size": 10_000}, "batch_size"),
        ({"delta": 1.5}, "delta"),
    ],
)
def test_bad_parameters_raise_before_work(params, match):
    x, y = _problem(n=200, seed=1)
    with pytest.raises(ValueError, match=match):
        BayesianLogisticRegressionMH(**params).fit(x, y)


def test_bad_data_raise_clear_errors():
    x, y = _problem(n=200, seed=1)
    clf = BayesianLogisticRegressionMH(**SMALL)
    for bad in (np.nan, np.inf):
        xb = x.copy()
        xb[3, 1] = bad
        with pytest.raises(ValueError, match=r"NaN|infinity"):
            clf.fit(xb, y)
    with pytest.raises(ValueError, match="1 class"):
        clf.fit(x, np.zeros_like(y))
    with pytest.raises(ValueError, match="y should be a 1d array"):
        clf.fit(x, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clf.fit(x, y[:-1])
    with pytest.raises(ValueError, match="OneVsRestClassifier"):
        clf.fit(x, np.arange(200) % 3)
    with pytest.raises(ValueError, match="Unknown label type"):
        clf.fit(x, np.linspace(0, 1, 200))
    # A failed fit leaves no fitted estimator behind.
    for est in (clf, BayesianLogisticRegressionMH()):
        with pytest.raises(NotFittedError):
            est.sample_posterior()
        with pytest.raises(NotFittedError):
            est.predict_proba(x)
        with pytest.raises(NotFittedError):
            est.to_inference_data()


# ----------------------------------------------------------------------------- workflows


def test_pipeline_grid_search_cross_val_and_one_vs_rest():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3)) * [1.0, 10.0, 100.0]
    y = (x @ [1.0, 0.1, -0.01] + rng.logistic(size=300) > 0).astype(int)
    pipe = make_pipeline(StandardScaler(), BayesianLogisticRegressionMH(random_state=0,
                                                                        **SMALL))
    pipe.fit(x, y)
    assert pipe.score(x, y) > 0.7
    assert pipe[-1].sample_posterior(20, random_state=0).shape == (20, 4)
    search = GridSearchCV(pipe, {"bayesianlogisticregressionmh__prior_scale": [0.01, 10.0]},
                          cv=3, scoring="neg_log_loss").fit(x, y)
    assert search.best_params_["bayesianlogisticregressionmh__prior_scale"] == 10.0
    scores = cross_val_score(pipe, x, y, cv=3)
    assert scores.shape == (3,) and scores.min() > 0.6
    y3 = np.digitize(x[:, 0], [-0.5, 0.5])
    ovr = OneVsRestClassifier(BayesianLogisticRegressionMH(random_state=0, **SMALL)).fit(x, y3)
    assert ovr.predict_proba(x).shape == (300, 3) and ovr.score(x, y3) > 0.6


def test_too_short_a_fit_on_real_data_warns():
    """The demo's breast-cancer fit, cut to 30 draws per chain, must say it has not mixed."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    data = load_breast_cancer()
    X = StandardScaler().fit_transform(data.data)
    with pytest.warns(ConvergenceWarning, match="have not converged"):
        BayesianLogisticRegressionMH(prior_scale=1.0, n_draws=30, n_warmup=30,
                                     random_state=0).fit(X, data.target)


# ----------------------------------------------------------------------------- sample weights


def test_weight_two_is_a_duplicated_row(problem):
    """Weights of 2 on a third of the rows give the posterior of the data set with those rows
    duplicated (quadrature of the duplicated data as the reference); ignoring the weights (the
    negative control) does not."""
    x, y, mean, sd = problem
    heavy = (y == 1) & (x[:, 0] > 0.0)  # a slice whose duplication moves the posterior
    weights = np.where(heavy, 2.0, 1.0)
    dup_mean, dup_sd = _quadrature_moments(np.vstack([x, x[heavy]]),
                                           np.concatenate([y, y[heavy]]))
    assert np.max(np.abs(dup_mean - mean) / sd) > 1.0  # the two posteriors are far apart
    common = {"fit_intercept": False, "n_draws": 1500, "n_warmup": 300, "n_chains": 2,
              "random_state": 7}
    weighted = BayesianLogisticRegressionMH(**common).fit(x, y, sample_weight=weights)
    assert not _moment_failures(weighted.coef_samples_, dup_mean, dup_sd)
    subsampled = BayesianLogisticRegressionMH(gradient="proxy", **common).fit(
        x, y, sample_weight=weights)
    assert not _moment_failures(subsampled.coef_samples_, dup_mean, dup_sd)
    assert subsampled.fraction_data_touched_ < 1.0  # the weighted bound still subsamples
    unweighted = BayesianLogisticRegressionMH(**common).fit(x, y)
    assert _moment_failures(unweighted.coef_samples_, dup_mean, dup_sd)


def test_bad_sample_weight():
    x, y = _problem(n=50)
    clf = BayesianLogisticRegressionMH(n_draws=5, n_warmup=0, n_chains=1)
    with pytest.raises(ValueError, match=r"(?i)negative"):
        clf.fit(x, y, sample_weight=-np.ones(50))
    with pytest.raises(ValueError, match="sample_weight"):
        clf.fit(x, y, sample_weight=np.ones(49))


# ----------------------------------------------------------------------------- sparse input


def _sparse_problem(n=3000, d=25, density=0.15, seed=11):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < density)
    y = (rng.random(n) < special.expit(X @ rng.normal(0.0, 0.7, size=d) - 0.3)).astype(int)
    return X, y


def test_sparse_and_dense_inputs_give_identical_draws():
    """CSR input is summed and gathered in the same arithmetic as the dense array: the same
    draws to the last bit, for every test the compiled chain and the interpreted step run."""
    X, y = _sparse_problem()
    Xs = sparse.csr_matrix(X)
    for options in ({}, {"test": "metropolis", "proposal": "langevin"},
                    {"test": "minibatch_barker", "proposal": "random-walk"}):
        kw = {"n_draws": 150, "n_warmup": 100, "n_chains": 2, "random_state": 3, **options}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            dense = BayesianLogisticRegressionMH(**kw).fit(X, y)
            csr = BayesianLogisticRegressionMH(**kw).fit(Xs, y)
        np.testing.assert_array_equal(csr.coef_samples_, dense.coef_samples_)
        np.testing.assert_array_equal(csr.batch_sizes_, dense.batch_sizes_)
        np.testing.assert_allclose(csr.predict_proba(Xs), dense.predict_proba(X), rtol=1e-12)


def test_sparse_input_with_many_columns_is_sampled_without_densifying():
    """One-hot style data with more columns than are summed in dense blocks: the sparse
    products serve, and the posterior mean agrees with the dense fit's within Monte Carlo
    error (the two are not bit-identical there)."""
    rng = np.random.default_rng(12)
    n, levels = 3000, 300
    codes = rng.integers(0, levels, size=n)
    Xs = sparse.csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, levels))
    effects = rng.normal(0.0, 1.0, size=levels)
    y = (rng.random(n) < special.expit(effects[codes])).astype(int)
    clf = BayesianLogisticRegressionMH(prior_scale=1.0, n_draws=200, n_warmup=200, n_chains=2,
                                       random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(Xs, y)
    assert clf.coef_.shape == (1, levels)
    assert sparse.issparse(Xs) and np.isfinite(clf.coef_samples_).all()
    # Levels seen often have posterior means of the sign of their effect.
    seen = np.bincount(codes, minlength=levels) >= 8
    agree = np.sign(clf.coef_[0, seen]) == np.sign(effects[seen])
    assert agree.mean() > 0.7


# ----------------------------------------------------------------------------- continuation


def _glm_kernel(test, proposal, gradient, n=3000, seed=0):
    """A logistic kernel as the estimator builds it (control variates around a fixed point)."""
    from sksubsample.algorithms import build_kernel
    from sksubsample.algorithms.mh import TaylorProxy

    rng = np.random.default_rng(seed)
    design = np.column_stack([rng.normal(size=(n, 2)), np.ones(n)])
    y = (rng.random(n) < special.expit(design @ [1.0, -0.5, 0.2])).astype(float)
    target = GLMTarget(design, 2.0 * y - 1.0, 10.0)
    reference = np.array([1.0, -0.5, 0.2])
    kernel = build_kernel(target, dim=3, test=test, proposal=proposal,
                          proxy=TaylorProxy(target, reference), control_variates=True,
                          gradient=gradient)
    return kernel, reference


_CHAINS = [("bounded_barker", "hamiltonian", "proxy", (True, False)),
           ("metropolis", "langevin", "exact", (True, False)),
           ("bounded_barker", "random-walk", "proxy", (True, False)),
           ("minibatch_barker", "random-walk", "proxy", (False,))]


@pytest.mark.parametrize(("test", "proposal", "gradient", "compiled"), _CHAINS)
def test_a_chain_run_in_two_parts_or_in_segments_is_one_run(test, proposal, gradient,
                                                            compiled):
    """n_draws = a + b in one run equals a then b (from the last draw, with the frozen step
    size and integration time and the same generator, without warm-up), bit for bit, compiled
    and interpreted; so
    does a run reporting its progress in segments."""
    from sksubsample.algorithms.mh import run_kernel

    kernel, start = _glm_kernel(test, proposal, gradient)
    for flag in compiled:
        kw = {"n_warmup": 200, "compiled": flag}
        one = run_kernel(kernel, start, n_draws=300, random_state=np.random.default_rng(5), **kw)
        rng = np.random.default_rng(5)
        first = run_kernel(kernel, start, n_draws=120, random_state=rng, **kw)
        second = run_kernel(kernel, first.draws[-1], n_draws=180, n_warmup=0,
                            step_size=first.step_size, path_length=first.path_length,
                            random_state=rng, compiled=flag)
        np.testing.assert_array_equal(np.vstack([first.draws, second.draws]), one.draws)
        np.testing.assert_array_equal(np.concatenate([first.batch_sizes, second.batch_sizes]),
                                      one.batch_sizes)
        assert first.n_evaluations + second.n_evaluations == one.n_evaluations
        assert second.step_size == one.step_size
        np.testing.assert_array_equal(second.path_length, one.path_length)
        reported = []
        segmented = run_kernel(kernel, start, n_draws=300,
                               random_state=np.random.default_rng(5), callback=reported.append,
                               **kw)
        np.testing.assert_array_equal(segmented.draws, one.draws)
        assert sum(reported) == 500 and segmented.n_evaluations == one.n_evaluations


@pytest.mark.parametrize(("test", "proposal", "gradient"),
                         [("metropolis", "langevin", "exact"),
                          ("bounded_barker", "random-walk", "proxy")])
def test_compiled_and_interpreted_chains_agree(test, proposal, gradient):
    """The compiled chain runs the interpreted step's law on the same stream: the same
    decisions, draws equal up to rounding."""
    from sksubsample.algorithms.mh import run_kernel

    kernel, start = _glm_kernel(test, proposal, gradient)
    compiled, interpreted = (run_kernel(kernel, start, n_draws=300, n_warmup=200,
                                        random_state=np.random.default_rng(5), compiled=flag)
                             for flag in (True, False))
    np.testing.assert_array_equal(compiled.accepted, interpreted.accepted)
    np.testing.assert_array_equal(compiled.batch_sizes, interpreted.batch_sizes)
    np.testing.assert_allclose(compiled.draws, interpreted.draws, rtol=0, atol=1e-6)


def test_sample_more_continues_the_chains_as_one_long_fit():
    """fit(n_draws=a) then sample_more(b) gives the draws, statistics and counts of
    fit(n_draws=a + b), bit for bit, with chains in one process and in worker processes, and
    whether a progress bar is shown."""
    x, y = _problem(n=600, seed=6)
    kw = {"n_warmup": 100, "n_chains": 2, "random_state": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        long = BayesianLogisticRegressionMH(n_draws=250, **kw).fit(x, y)
        for n_jobs, progress in ((1, False), (2, False), (1, True)):
            clf = BayesianLogisticRegressionMH(n_draws=100, n_jobs=n_jobs, progress=progress,
                                               **kw).fit(x, y)
            assert clf.sample_more(60) is clf
            clf.sample_more(90)
            np.testing.assert_array_equal(clf.coef_samples_, long.coef_samples_)
            np.testing.assert_array_equal(clf.intercept_samples_, long.intercept_samples_)
            for key, value in long._stats.items():
                np.testing.assert_array_equal(clf._stats[key], value)
            assert clf.n_evaluations_ == long.n_evaluations_
            assert clf.fraction_data_touched_ == long.fraction_data_touched_
            np.testing.assert_array_equal(clf.rhat_, long.rhat_)
            np.testing.assert_array_equal(clf.coef_, long.coef_)
            assert clf.batch_sizes_.shape == (2, 250) and clf.n_draws == 100
    with pytest.raises(ValueError, match="n_draws"):
        long.sample_more(0)
    with pytest.raises(TypeError, match="n_draws"):
        long.sample_more(2.5)
    with pytest.raises(NotFittedError):
        BayesianLogisticRegressionMH().sample_more(10)
    # The sampler holds the training data and is not pickled: an unpickled estimator says so.
    clone = pickle.loads(pickle.dumps(long))
    np.testing.assert_array_equal(clone.predict_proba(x), long.predict_proba(x))
    with pytest.raises(RuntimeError, match="not pickled"):
        clone.sample_more(10)
    assert not hasattr(clone, "_sampler") and hasattr(long, "_sampler")


def test_progress_bar_counts_draws_and_does_not_change_them(capsys):
    x, y = _problem(n=600, seed=6)
    kw = {"n_draws": 60, "n_warmup": 40, "n_chains": 2, "random_state": 8}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        quiet = BayesianLogisticRegressionMH(**kw).fit(x, y)
        assert capsys.readouterr().err == ""
        for n_jobs in (1, 2):
            shown = BayesianLogisticRegressionMH(progress=True, n_jobs=n_jobs, **kw).fit(x, y)
            err = capsys.readouterr().err
            assert "200/200" in err and "draw" in err, err
            np.testing.assert_array_equal(shown.coef_samples_, quiet.coef_samples_)
        shown.sample_more(30)
        assert "60/60" in capsys.readouterr().err


# ----------------------------------------------------------------------------- ArviZ


@pytest.fixture(scope="module")
def small_fit():
    """A small, well mixed fit on which leave-one-out is well behaved."""
    x, y = _problem(n=300, seed=10)
    clf = BayesianLogisticRegressionMH(n_draws=500, n_warmup=200, n_chains=2,
                                       random_state=0).fit(x, y)
    return clf, x, y


def test_loo_and_waic_on_a_fitted_estimator(small_fit):
    az = pytest.importorskip("arviz")
    clf, x, y = small_fit
    idata = clf.to_inference_data(log_likelihood=True)
    draws = clf.sample_posterior()
    z = x @ draws[:, :2].T + draws[:, 2]  # (rows, draws)
    expected = special.log_expit((2.0 * y - 1.0)[:, None] * z).T.reshape(2, 500, 300)
    np.testing.assert_allclose(idata.log_likelihood["y"].values, expected, rtol=1e-12)
    np.testing.assert_array_equal(idata.observed_data["y"].values, y)
    assert list(idata.log_likelihood["y"].dims) == ["chain", "draw", "obs_id"]
    loo, waic = az.loo(idata, pointwise=True), az.waic(idata)
    assert np.all(loo.pareto_k.values < 0.7)
    # Three parameters, a concentrated posterior: the effective number of parameters is about
    # 3, and LOO and WAIC agree to a fraction of their standard error.
    assert 1.5 < loo.p_loo < 5.0
    assert abs(loo.elpd_loo - waic.elpd_waic) < 0.1 * loo.se
    lppd = np.sum(special.logsumexp(expected.reshape(1000, 300), axis=0) - np.log(1000))
    assert loo.elpd_loo < lppd and lppd - loo.elpd_loo == pytest.approx(loo.p_loo, rel=1e-6)
    # ArviZ's sample statistics: the acceptance probability, the step size, the exact lp.
    stats = idata.sample_stats
    assert {"acceptance_rate", "step_size", "lp", "accepted"} <= set(stats.data_vars)
    assert float(stats["acceptance_rate"].mean()) == pytest.approx(clf.acceptance_rate_,
                                                                    abs=0.05)
    log_prior = -0.5 * np.sum(draws**2, axis=1) / 100.0 - 3 * np.log(10.0 * np.sqrt(2 * np.pi))
    np.testing.assert_allclose(stats["lp"].values.ravel(),
                               log_prior + expected.reshape(1000, 300).sum(axis=1), rtol=1e-10)
    assert "lp" not in clf.to_inference_data(lp=False).sample_stats


def test_log_likelihood_on_a_subsample_and_posterior_predictive(small_fit):
    pytest.importorskip("arviz")
    clf, x, y = small_fit
    full = clf.to_inference_data(log_likelihood=True).log_likelihood["y"].values
    sub = clf.to_inference_data(log_likelihood=40, posterior_predictive=True, random_state=3)
    rows = sub.log_likelihood["obs_id"].values
    assert rows.size == 40 and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(sub.log_likelihood["y"].values, full[:, :, rows])
    np.testing.assert_array_equal(sub.observed_data["obs_id"].values, rows)
    np.testing.assert_array_equal(sub.observed_data["y"].values, y[rows])
    np.testing.assert_array_equal(sub.posterior_predictive["obs_id"].values, rows)
    chosen = clf.to_inference_data(log_likelihood=np.array([5, 2, 9]))
    np.testing.assert_array_equal(chosen.log_likelihood["obs_id"].values, [2, 5, 9])
    mask = np.zeros(300, dtype=bool)
    mask[[1, 4]] = True
    assert list(clf.to_inference_data(log_likelihood=mask).log_likelihood["obs_id"].values) \
        == [1, 4]
    # Replicated labels: their number of ones matches the summed probabilities within 4
    # binomial standard deviations.
    replicated = sub.posterior_predictive["y"].values.reshape(1000, 40)
    p = clf.predict_proba(x[rows], return_draws=True)[:, :, 1]
    assert abs(replicated.sum() - p.sum()) < 4.0 * np.sqrt(np.sum(p * (1 - p)))
    same = clf.to_inference_data(posterior_predictive=40, random_state=3)
    np.testing.assert_array_equal(same.posterior_predictive["y"].values,
                                  sub.posterior_predictive["y"].values)
    with pytest.raises(ValueError, match="different observations"):
        clf.to_inference_data(log_likelihood=40, posterior_predictive=[1, 2])
    with pytest.raises(ValueError, match="log_likelihood"):
        clf.to_inference_data(log_likelihood=301)
    with pytest.raises(ValueError, match="log_likelihood"):
        clf.to_inference_data(log_likelihood=[0, 300])
    with pytest.raises(TypeError, match="posterior_predictive"):
        clf.to_inference_data(posterior_predictive=[0.5, 1.5])
    with pytest.raises(ValueError, match="lp"):
        clf.to_inference_data(lp="always")


def test_log_likelihood_of_weighted_rows_and_size_limit(monkeypatch):
    pytest.importorskip("arviz")
    from sksubsample import _arviz

    x, y = _problem(n=200, seed=2)
    weights = np.where(np.arange(200) % 3 == 0, 2.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = BayesianLogisticRegressionMH(n_draws=20, n_warmup=20, n_chains=2,
                                           random_state=0).fit(x, y, sample_weight=weights)
    draws = clf.sample_posterior()
    z = x @ draws[:, :2].T + draws[:, 2]
    expected = (weights[:, None] * special.log_expit((2.0 * y - 1.0)[:, None] * z)).T
    ll = clf.to_inference_data(log_likelihood=True).log_likelihood["y"].values
    np.testing.assert_allclose(ll.reshape(40, 200), expected, rtol=1e-12)
    monkeypatch.setattr(_arviz, "MAX_POINTWISE_VALUES", 1000)
    with pytest.raises(ValueError, match="subsample"):
        clf.to_inference_data(log_likelihood=True)
    assert clf.to_inference_data(log_likelihood=25).log_likelihood["y"].shape == (2, 20, 25)


def test_to_inference_data_after_unpickling(small_fit):
    pytest.importorskip("arviz")
    clf, _, _ = small_fit
    clone = pickle.loads(pickle.dumps(clf))
    idata = clone.to_inference_data()  # the draws travel; the training data do not
    assert "observed_data" not in idata.groups() and "lp" not in idata.sample_stats
    with pytest.raises(RuntimeError, match=r"log_likelihood.*not pickled"):
        clone.to_inference_data(log_likelihood=True)
    with pytest.raises(RuntimeError, match="lp"):
        clone.to_inference_data(lp=True)


def test_predict_proba_per_draw(small_fit):
    clf, x, _ = small_fit
    per_draw = clf.predict_proba(x[:7], return_draws=True)
    assert per_draw.shape == (1000, 7, 2)
    draws = clf.sample_posterior()
    np.testing.assert_allclose(per_draw[:, :, 1],
                               special.expit(draws[:, :2] @ x[:7].T + draws[:, 2:]), rtol=1e-12)
    np.testing.assert_allclose(per_draw.sum(axis=2), 1.0)
    np.testing.assert_allclose(per_draw.mean(axis=0), clf.predict_proba(x[:7]), rtol=1e-10)
    sparse_draws = clf.predict_proba(sparse.csr_matrix(x[:7]), return_draws=True)
    np.testing.assert_allclose(sparse_draws, per_draw, rtol=1e-12)


# ----------------------------------------------------------------------------- rough inputs


def test_collinear_columns_warn_naming_them():
    from sksubsample.diagnostics import CollinearityWarning

    x, y = _problem(n=400, seed=3)
    kw = {"n_draws": 20, "n_warmup": 20, "n_chains": 2, "random_state": 0}
    duplicated = np.column_stack([x, x[:, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(CollinearityWarning, match=r"columns x0, x2 of X .*collinear"):
            BayesianLogisticRegressionMH(**kw).fit(duplicated, y)
        # A constant column is collinear with the intercept (and named with it).
        constant = np.column_stack([x, np.full(400, 3.0)])
        with pytest.warns(CollinearityWarning, match=r"column x2 of X and the intercept are"):
            BayesianLogisticRegressionMH(**kw).fit(constant, y)
        # Negative control: strongly but not exactly correlated columns do not warn.
        rng = np.random.default_rng(0)
        close = np.column_stack([x, x[:, 0] + 0.01 * rng.normal(size=400)])
        with warnings.catch_warnings():
            warnings.simplefilter("error", CollinearityWarning)
            BayesianLogisticRegressionMH(**kw).fit(close, y)
            BayesianLogisticRegressionMH(**kw).fit(x, y)


def test_huge_or_non_numeric_x_is_refused_naming_x():
    x, y = _problem(n=200, seed=1)
    clf = BayesianLogisticRegressionMH(**SMALL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the error comes first, before any warning
        with pytest.raises(ValueError, match=r"^X has entries as large as [\d.]+e\+200"):
            clf.fit(x * 1e200, y)
        with pytest.raises(ValueError, match=r"^X has entries"):
            clf.fit(sparse.csr_matrix(x * 1e200), y)
        words = np.array([["red", "small"]] * 200, dtype=object)
        with pytest.raises(ValueError, match=r"^X must hold numbers.*'red'.*OneHotEncoder"):
            clf.fit(words, y)
    fitted = BayesianLogisticRegressionMH(n_draws=20, n_warmup=10, n_chains=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted.fit(x, y)
    with pytest.raises(ValueError, match=r"^X must hold numbers"):
        fitted.predict(words)
    with pytest.raises(TypeError, match=r"^X must hold numbers"):
        fitted.predict(np.array([[{"a": 1}, 2.0]] * 3, dtype=object))


@pytest.mark.parametrize("labels", [np.array([0, 1, 1, 0, 1], dtype=np.int8),
                                    np.array(["no", "yes", "yes", "no", "yes"]),
                                    np.array([False, True, True, False, True]),
                                    np.array([0.0, 2.5, 2.5, 0.0, 2.5])])
def test_label_signs_are_plus_one_for_the_positive_class_with_or_without_an_array(labels):
    from sksubsample.linear_model._logistic_data import LabelSigns

    signs = LabelSigns(labels[1])
    expected = np.array([-1.0, 1.0, 1.0, -1.0, 1.0])
    np.testing.assert_array_equal(signs(labels), expected)
    out = np.full(labels.size, 7.0)  # (whatever a scratch array held before)
    assert signs.into(labels, out) is out
    np.testing.assert_array_equal(out, expected)
