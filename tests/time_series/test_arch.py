"""Tests of ARCHOrderSelector: scikit-learn contract, the order posterior of the exact and racing
samplers against an independent importance-sampling estimate and against each other (with
negative controls), the posterior draws, continuation, scoring and model selection by
cross-validation, several series, and input validation."""

import math
import warnings

import numpy as np
import pytest
from joblib import parallel_config
from scipy import special, stats
from sklearn.model_selection import GridSearchCV, TimeSeriesSplit, cross_val_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from sksubsample.datasets._arch_data import simulate_arch
from sksubsample.diagnostics import ConvergenceWarning
from sksubsample.time_series import ARCHOrderSelector
from sksubsample.time_series._arch_target import ARCHTarget, arch_design
from sksubsample.time_series._evidence import importance_log_evidence
from sksubsample.time_series._laplace import laplace_fit
from tests._stats import assert_chisquare_pmf, meets_auto_criteria

TINY = {"n_draws": 30, "n_warmup": 8, "n_chains": 2, "orders": (0, 1, 2)}
ORDERS = (0, 1, 2, 3)
CHAIN = {"n_draws": 1000, "n_warmup": 300, "n_chains": 2}


@parametrize_with_checks([ARCHOrderSelector(random_state=0, **TINY)])
def test_sklearn_compatible_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # chains this short do not converge, by design
        check(estimator)


# ----------------------------------------------------------------------------- reference


@pytest.fixture(scope="module")
def series():
    """A small ARCH(2) series whose orders 1-3 all have non-negligible evidence ratios."""
    return simulate_arch(1000, alpha=(0.2, 0.3, 0.15), nu=6.0, random_state=0)


@pytest.fixture(scope="module")
def reference(series, computed_once):
    """log p(r | q) for each order by importance sampling, with its standard error.

    Two proposals (Laplace Gaussian, wider multivariate t) must agree; their
    inverse-variance-weighted mean is the reference. The model is the estimator's: the
    returns in units of their standard deviation (the prior of α_0 is in those units).
    """
    return computed_once("arch-importance-reference", lambda: _importance_reference(series))


def _importance_reference(series):
    r = series - series.mean(axis=0)
    r = r / np.sqrt(np.mean(r.var(axis=0)))
    y, z = arch_design(r, max(ORDERS))
    log_ev, se = [], []
    for q in ORDERS:
        target = ARCHTarget(y, z, q)
        fit = laplace_fit(target, np.zeros(q + 2))
        g = importance_log_evidence(target, fit.mean, fit.cov, n_draws=4000, random_state=q)
        t = importance_log_evidence(target, fit.mean, fit.cov, n_draws=4000,
                                    proposal="student", scale=1.2, random_state=10 + q)
        assert abs(g.log_evidence - t.log_evidence) < 4 * math.hypot(g.standard_error,
                                                                    t.standard_error)
        w = np.array([g.standard_error, t.standard_error]) ** -2.0
        log_ev.append((w[0] * g.log_evidence + w[1] * t.log_evidence) / w.sum())
        se.append(w.sum() ** -0.5)
    return np.array(log_ev), np.array(se)


def _fit(series, method, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ARCHOrderSelector(orders=ORDERS, method=method, random_state=1, **CHAIN,
                                 **kwargs).fit(series)


def _visit_z_scores(sel, reference):
    """z-scores of the chains' visit frequencies against p̃ = π̃ p(r | q) / Σ from the reference.

    With π̃ fixed, the sampling chains' stationary distribution of q is p̃_q ∝ π̃_q p(r | q):
    the visit frequency of each order estimates it with variance p̃ (1 - p̃) / ESS (ESS of the
    order's indicator), and the reference's own error moves p̃ by the delta method.
    """
    log_ev, se = reference
    log_adj = sel.adjusted_log_prior_ + log_ev
    p_adj = np.exp(log_adj - special.logsumexp(log_adj))
    freq = np.array([(sel.order_samples_ == q).mean() for q in ORDERS])
    ess = sel.ess(method="mean")[: len(ORDERS)]
    var_mc = p_adj * (1 - p_adj) / ess
    # d p̃_j / d log E_k = p̃_j (δ_jk - p̃_k)
    jac = np.diag(p_adj) - np.outer(p_adj, p_adj)
    var_ref = (jac**2) @ se**2
    return (freq - p_adj) / np.sqrt(var_mc + var_ref)


@pytest.fixture(scope="module")
def fits(series):
    return {method: _fit(series, method) for method in ("exact", "racing", "auto")}


@pytest.mark.parametrize("method", ["exact", "racing", "auto"])
def test_order_posterior_matches_importance_sampling(fits, reference, method):
    sel = fits[method]
    z = _visit_z_scores(sel, reference)
    # Four orders, each |z| < 4: a false alarm has probability < 4 × 6.3e-5.
    print(f"{method}: visit z-scores {np.round(z, 2)}")
    assert np.all(np.abs(z) < 4.0), z
    # Relative log evidences: log p̂(r|q) = log p̃_q - log π̃_q + const, with the delta-method
    # variance (1 - p̃) / (p̃ ESS) of log p̃_q, against the reference and its error.
    log_ev, se = reference
    freq = np.array([(sel.order_samples_ == q).mean() for q in ORDERS])
    var_log = (1 - freq) / (freq * sel.ess(method="mean")[: len(ORDERS)])
    best = int(np.argmax(log_ev))
    diff = (sel.log_evidence_ - sel.log_evidence_[best]) - (log_ev - log_ev[best])
    sd = np.sqrt(var_log + var_log[best] + se**2 + se[best] ** 2)
    assert np.all(np.abs(diff) < 4.0 * np.where(np.arange(len(ORDERS)) == best, 1.0, sd)), (
        diff, sd)
    assert sel.order_ == 2
    if method != "exact":
        assert sel.fraction_data_touched_ < 0.5
    else:
        assert 0.95 < sel.fraction_data_touched_ <= 1.0


def test_negative_control_with_another_prior_fails(series, reference):
    """A chain targeting another posterior (Gamma(1, 2) priors instead of Gamma(1, 1)) fails
    the same check against the reference: the check has the power to see a wrong target."""
    sel = _fit(series, "exact", prior_rate=2.0)
    z = _visit_z_scores(sel, reference)
    print(f"negative control: visit z-scores {np.round(z, 2)}")
    assert np.max(np.abs(z)) > 4.0, z


def _per_chain_posterior(sel):
    """``p(q | r)`` estimated by each chain alone (with the common π̃): shape (n_chains,
    n_orders). The chains are independent, so their spread gives the Monte Carlo error."""
    k = sel.orders_.size
    freq = np.stack([(sel.order_samples_ == q).mean(axis=1) for q in sel.orders_], axis=1)
    with np.errstate(divide="ignore"):
        log_post = np.log(freq) - sel.adjusted_log_prior_[None, :k]
    return np.exp(log_post - special.logsumexp(log_post, axis=1, keepdims=True))


def _agreement_z(pa, pb):
    """Per-order z-scores of the difference of two fits' p(q | r) (their chains' estimates,
    :func:`_per_chain_posterior`) with batch-means (per chain) standard errors."""
    se = np.sqrt(pa.var(axis=0, ddof=1) / len(pa) + pb.var(axis=0, ddof=1) / len(pb))
    return (pa.mean(axis=0) - pb.mean(axis=0)) / np.maximum(se, 1e-12)


AGREE = {"n_draws": 3000, "n_warmup": 400, "n_chains": 6}


@pytest.fixture(scope="module")
def agreement_fits(series, computed_once):
    """Each fit's per-chain ``p(q | r)`` (:func:`_per_chain_posterior`)."""

    def fits():
        out = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for key, params in (("racing", {"method": "racing"}),
                                ("exact", {"method": "exact"}),
                                ("wrong", {"method": "exact", "prior_rate": 1.5})):
                out[key] = _per_chain_posterior(ARCHOrderSelector(
                    orders=ORDERS, random_state=3, **AGREE, **params).fit(series))
        return out

    return computed_once("arch-agreement-fits", fits)


def test_racing_and_exact_posteriors_agree_within_monte_carlo_error(agreement_fits):
    """p(q | r) of racing and exact sampling differ by no more than their Monte Carlo errors:
    per order, the difference over its batch-means standard error (6 chains each, so about
    10 degrees of freedom) stays below 5 (P(|t_10| > 5) ≈ 5e-4)."""
    z = _agreement_z(agreement_fits["racing"], agreement_fits["exact"])
    print(f"racing vs exact z-scores {np.round(z, 2)}")
    assert np.all(np.abs(z) < 5.0), z


def test_agreement_check_detects_another_posterior(agreement_fits):
    """Negative control: the same check between racing and an exact chain with Gamma(1, 1.5)
    priors (a shift of a few per cent in p(q | r)) fails."""
    z = _agreement_z(agreement_fits["racing"], agreement_fits["wrong"])
    print(f"racing vs another posterior z-scores {np.round(z, 2)}")
    assert np.max(np.abs(z)) > 5.0, z


# ----------------------------------------------------------------------------- API


@pytest.fixture(scope="module")
def fitted(fits):
    return fits["racing"]


def test_fitted_attributes(fitted):
    sel = fitted
    np.testing.assert_array_equal(sel.orders_, ORDERS)
    assert sel.order_posterior_.sum() == pytest.approx(1.0)
    # Relative log evidences and the posterior differ by the (uniform) prior only.
    np.testing.assert_allclose(sel.log_evidence_ - np.log(sel.order_posterior_),
                               -np.log(sel.order_posterior_.max()), rtol=1e-12)
    assert sel.order_posterior_se_.shape == sel.log_evidence_se_.shape == (len(ORDERS),)
    assert np.all(sel.order_posterior_se_ < 0.05)
    n_warmup = CHAIN["n_warmup"]
    assert sel.adaptation_log_posterior_.shape == (CHAIN["n_chains"], n_warmup, len(ORDERS))
    assert np.all(np.diff(sel.adaptation_n_evaluations_, axis=1) > 0)
    assert sel.order_samples_.shape == (CHAIN["n_chains"], CHAIN["n_draws"])
    assert sel.sample_weights_.sum() == pytest.approx(1.0)
    assert sel.rhat_.shape == sel.ess_.shape == (len(sel.diagnostic_names_),)
    assert list(sel.posterior_names_) == ["order", "alpha_0", "alpha_1", "alpha_2",
                                          "alpha_3", "nu"]
    for q in ORDERS:
        assert sel.params_samples_[q].shape[1] == q + 2
        assert sel.map_[q].shape == (q + 2,)
    assert sel.alpha_.shape == (sel.order_ + 1,)
    assert sel.step_size_.shape == (CHAIN["n_chains"], len(ORDERS))
    assert sel.n_evaluations_ > 0


def test_fits_report_the_updates_they_raced(fits):
    updates = 2 * CHAIN["n_chains"] * CHAIN["n_draws"]
    for sel in fits.values():
        assert sel.n_updates_ == updates
        assert 0 <= sel.n_guarded_ <= sel.n_raced_ + sel.n_finished_exactly_ <= updates
    assert fits["exact"].n_raced_ == fits["exact"].n_finished_exactly_ == 0
    assert fits["racing"].n_finished_exactly_ == 0
    # Every Gibbs step races (N = 1000 > the first batch), and most MH tests do.
    assert fits["racing"].n_raced_ > 0.5 * updates
    assert fits["auto"].n_raced_ + fits["auto"].n_finished_exactly_ > 0.5 * updates


def test_importance_sampling_and_race_diagnostics_of_a_fit(fitted, reference):
    est = fitted.importance_log_evidence(2000, random_state=0)
    log_ev, se = reference
    diff = (est["log_evidence"] - log_ev) - (est["log_evidence"] - log_ev)[2]
    assert np.all(np.abs(diff) < 4 * np.hypot(est["standard_error"], se) + 1e-9)
    report = fitted.race_diagnostics(300, random_state=0)
    assert report["n_states"] == 300 and report["mh_tests"] > 200
    assert stats.binom.sf(report["gibbs_errors"] - 1, 300, 0.05) > 1e-4
    assert stats.binom.sf(report["mh_errors"] - 1, report["mh_tests"], 0.05) > 1e-4
    assert report["gibbs_fraction"] < 0.5
    # The control variates shrink the rewards' variance by orders of magnitude.
    assert report["pairwise_variance_cv"] < 1e-3 * report["pairwise_variance_raw"]


def test_sample_posterior_follows_order_posterior(fitted):
    draws = fitted.sample_posterior(4000, random_state=0)
    assert draws.shape == (4000, 6)
    q = draws[:, 0].astype(int)
    for k, order in enumerate(q):
        assert np.all(draws[k, 2 + order:5] == 0.0)  # α_i = 0 beyond the drawn order
    assert_chisquare_pmf(np.searchsorted(fitted.orders_, q), fitted.order_posterior_,
                         label="resampled orders")


def test_score_prefers_the_true_order_and_works_with_time_series_split(series):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        right = ARCHOrderSelector(orders=(2,), n_draws=300, n_warmup=100, n_chains=1,
                                  random_state=0).fit(series[:700])
        wrong = ARCHOrderSelector(orders=(0,), n_draws=300, n_warmup=100, n_chains=1,
                                  random_state=0).fit(series[:700])
        assert right.score(series[700:]) > wrong.score(series[700:])
        scores = cross_val_score(ARCHOrderSelector(orders=(0, 2), n_draws=100, n_warmup=50,
                                                   n_chains=1, random_state=0),
                                 series, cv=TimeSeriesSplit(n_splits=2))
    assert scores.shape == (2,) and np.all(np.isfinite(scores))


def test_grid_search_with_time_series_split_selects_an_order():
    """Cross-validated model choice: on a long ARCH(2) series, the one-step-ahead predictive
    score over time-ordered folds ranks ARCH(2) above ARCH(0) and ARCH(1), and GridSearchCV
    picks an order of at least 2."""
    r = simulate_arch(4000, alpha=(0.2, 0.3, 0.25), nu=6.0, random_state=11)
    search = GridSearchCV(ARCHOrderSelector(n_draws=150, n_warmup=60, n_chains=1,
                                            random_state=0),
                          {"orders": [(0,), (1,), (2,), (4,)]}, cv=TimeSeriesSplit(n_splits=3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(r)
    scores = dict(zip([p["orders"] for p in search.cv_results_["params"]],
                      search.cv_results_["mean_test_score"], strict=True))
    print(scores)
    assert scores[(2,)] > scores[(1,)] > scores[(0,)]
    assert search.best_params_["orders"] in ((2,), (4,))


def test_several_series_share_parameters():
    """Columns are independent series with common (q, α, ν): the likelihood of the stacked
    terms is the sum of the series' likelihoods, and three series pin the parameters down
    better than one."""
    r = simulate_arch(1500, alpha=(0.2, 0.4), nu=6.0, n_series=3, random_state=2)
    r = r - r.mean(axis=0)
    y, z = arch_design(r, 1)
    x = np.array([-1.2, -0.6, 1.7])
    stacked = ARCHTarget(y, z, 1).loglik_sums(x[None])[0]
    separate = sum(ARCHTarget(*arch_design(r[:, [k]], 1), 1).loglik_sums(x[None])[0]
                   for k in range(3))
    assert stacked == pytest.approx(separate, rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sels = [ARCHOrderSelector(orders=(1,), n_draws=800, n_warmup=200, n_chains=2,
                                  random_state=0).fit(data) for data in (r[:, :1], r)]
    assert sels[1].n_terms_ == 3 * 1499 and sels[1].n_features_in_ == 3
    sd = [s.params_samples_[1].std(axis=0) for s in sels]
    assert np.all(sd[1] < 0.8 * sd[0]), sd  # ~1/sqrt(3) of the one-series sd


def test_sample_more_gives_the_draws_of_a_longer_fit(series):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        long = ARCHOrderSelector(random_state=4, **TINY).fit(series)
        short = ARCHOrderSelector(random_state=4, **{**TINY, "n_draws": 20}).fit(series)
        short.sample_more(10)
    np.testing.assert_array_equal(short.order_samples_, long.order_samples_)
    np.testing.assert_array_equal(short.sample_posterior(random_state=0),
                                  long.sample_posterior(random_state=0))
    np.testing.assert_array_equal(short.order_posterior_, long.order_posterior_)
    assert list(short.posterior_names_) == list(long.posterior_names_)


@pytest.mark.parametrize(
    ("X", "params", "error", "match"),
    [
        (np.r_[np.ones(49), np.nan][:, None], {}, ValueError, "NaN"),
        (np.r_[np.ones(49), np.inf][:, None], {}, ValueError, "infinity"),
        (np.random.default_rng(0).normal(size=(6, 1)), {}, ValueError, "at least 7"),
        (np.random.default_rng(0).normal(size=(50, 1)), {"orders": (0, -1)}, ValueError,
         "non-negative"),
        (np.random.default_rng(0).normal(size=(50, 1)), {"orders": (1, 1)}, ValueError,
         "distinct"),
        (np.random.default_rng(0).normal(size=(50, 1)), {"orders": (1.5,)}, TypeError, "ints"),
        (np.random.default_rng(0).normal(size=(50, 1)), {"orders": ()}, ValueError,
         "at least one"),
        (np.c_[np.random.default_rng(0).normal(size=50), np.full(50, 3.0)], {}, ValueError,
         r"series \[1\] are constant \(variance 0 about a mean of 3\)"),
        # (returns whose squares overflow had been called constant)
        (np.random.default_rng(0).normal(size=(50, 1)) * 1e200, {}, ValueError,
         r"squares of series \[0\] overflow float64"),
        (np.random.default_rng(0).normal(size=50), {}, ValueError, "2D"),
    ],
)
def test_bad_input_raises_before_work(X, params, error, match):
    with pytest.raises(error, match=match):
        ARCHOrderSelector(**params).fit(X)


def test_bad_parameters_raise():
    X = np.random.default_rng(0).normal(size=(50, 1))
    for params in ({"method": "gibbs"}, {"delta": 1.5}, {"batch_size": 2},
                   {"prior_shape": 0.0}, {"orders": 3}):
        with pytest.raises((ValueError, TypeError)):
            ARCHOrderSelector(**params).fit(X)


def test_draws_do_not_depend_on_n_jobs():
    r = simulate_arch(300, alpha=(0.2, 0.3), nu=6.0, random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ARCHOrderSelector(n_jobs=1, random_state=5, **TINY).fit(r)
        # Threads share one process, so a chain that read another's state would show here.
        with parallel_config(backend="threading"):
            b = ARCHOrderSelector(n_jobs=2, random_state=5, **TINY).fit(r)
    np.testing.assert_array_equal(a.order_samples_, b.order_samples_)
    np.testing.assert_array_equal(a.sample_posterior(random_state=0),
                                  b.sample_posterior(random_state=0))


# ----------------------------------------------------------------------------- units, ArviZ


def test_fit_is_equivariant_to_the_units_of_the_returns(series):
    """Returns ×100 (basis points of percent returns) fit, to the same posterior over orders,
    with α_0 scaled by 100² and the other parameters unchanged."""
    settings = dict(orders=(0, 1, 2), n_draws=200, n_warmup=100, n_chains=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        base = ARCHOrderSelector(**settings).fit(series)
        scaled = ARCHOrderSelector(**settings).fit(100.0 * series)
    np.testing.assert_allclose(scaled.order_posterior_, base.order_posterior_, atol=1e-12)
    np.testing.assert_allclose(scaled.map_[2], base.map_[2] * [1e4, 1, 1, 1], rtol=1e-8)
    np.testing.assert_allclose(scaled.alpha_, base.alpha_ * np.r_[1e4, np.ones(2)],
                               rtol=1e-8)
    assert scaled.score(100.0 * series) == pytest.approx(base.score(series) - np.log(100.0))


def test_price_levels_are_refused_with_a_warning():
    prices = 100.0 * np.exp(np.cumsum(0.01 * np.random.default_rng(0).standard_t(5, 800)))
    with pytest.warns(UserWarning, match="price levels"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            ARCHOrderSelector(orders=(0, 1), n_draws=50, n_warmup=50, n_chains=1,
                              random_state=0).fit(prices[:, None])
    returns = 100.0 * np.diff(np.log(prices))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        ARCHOrderSelector(orders=(0, 1), n_draws=50, n_warmup=50, n_chains=1,
                          random_state=0).fit(returns[:, None])


def test_arviz_summary_of_the_order_agrees_with_the_order_posterior():
    """The posterior group holds the draws resampled by their importance weights, so ArviZ's
    plain mean of the order is the posterior mean of the order: within 0.05, on an ARCH(2)
    series with orders 0-5, where the unweighted visits average far above it. The log
    likelihood group gives az.loo."""
    az = pytest.importorskip("arviz")
    r = simulate_arch(3000, alpha=(0.2, 0.3, 0.15), nu=6.0, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sel = ARCHOrderSelector(orders=range(0, 6), n_draws=1000, n_warmup=300, n_chains=2,
                                random_state=0).fit(r)
    idata = sel.to_inference_data(log_likelihood=True)
    mean_order = float(az.summary(idata, var_names=["order"])["mean"].iloc[0])
    expected = float(np.dot(sel.orders_, sel.order_posterior_))
    assert abs(mean_order - expected) < 0.05
    # Negative control: the visits the chains made, unweighted, are far from it.
    assert abs(sel.order_samples_.mean() - expected) > 0.2
    loo = az.loo(idata)
    assert np.isfinite(float(loo["elpd_loo"] if "elpd_loo" in loo else loo.elpd_loo))


def test_auto_draws_run_until_converged_as_a_fit_of_that_many_draws(series):
    """The default ``n_draws="auto"``: the sweeps it kept meet the criteria (bulk and tail ESS
    of every diagnosed quantity >= 400, R-hat <= 1.01) and are, sweep for sweep, those of a
    fit asking for that many."""
    settings = {"orders": (1, 2), "n_warmup": 100, "n_chains": 2, "random_state": 6}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        auto = ARCHOrderSelector(**settings).fit(series)
    assert auto.convergence_["stopped"] == "converged" and auto.n_draws_ >= 1000
    assert meets_auto_criteria(auto._draws)
    fixed = ARCHOrderSelector(n_draws=auto.n_draws_, **settings).fit(series)
    assert fixed.convergence_ == {"rounds": 1, "stopped": "n_draws"}
    np.testing.assert_array_equal(auto._draws, fixed._draws)
    np.testing.assert_array_equal(auto.order_posterior_, fixed.order_posterior_)
