"""Exact posterior draws of Bayesian logistic regression by A* and PM-A*.

The bound of :class:`LogisticAStarTarget` is checked against dense evaluation inside random
boxes (finite, and reaching to infinity on one side), with a negative control; the draws of
``sample_exact`` on breast cancer (3 standardised features and an intercept) are compared
with an independent reference, 4000 independent random-walk Metropolis chains, by a KS test
per coordinate, and their lag-1 autocorrelation with 0 at the sampling error of an iid
sequence.
"""

import warnings

import numpy as np
import pytest
from scipy import special, stats
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.algorithms import LogisticAStarTarget, astar_sample

ALPHA = 0.01
# Exact draws per comparison (the KS tests and the lag-1 test; their negative controls alike).
N_EXACT = 250


@pytest.fixture(scope="module")
def breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X[:, :3]), y


@pytest.fixture(scope="module")
def fitted(breast_cancer):
    X, y = breast_cancer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BayesianLogisticRegressionMH(n_draws=1000, n_warmup=500, n_chains=4,
                                            random_state=0).fit(X, y)


@pytest.fixture(scope="module")
def exact(fitted):
    draws = fitted.sample_exact(N_EXACT, random_state=1)
    return draws, fitted.exact_evaluations_per_draw_.copy(), fitted.exact_converged_.copy()


def metropolis_reference(X, y, center, cov, n_chains=4000, n_steps=400, seed=2):
    """Last states of independent random-walk Metropolis chains (exact in the limit)."""
    rng = np.random.default_rng(seed)
    design = np.column_stack([X, np.ones(len(X))])
    s = 2.0 * y - 1.0
    chol = np.linalg.cholesky(cov)

    def log_post(theta):
        return (-np.sum(theta**2, axis=1) / 200.0
                + special.log_expit(s[:, None] * (design @ theta.T)).sum(axis=0))

    theta = center + 2.0 * rng.standard_normal((n_chains, center.size)) @ chol.T
    lp = log_post(theta)
    step = 2.4 / np.sqrt(center.size)
    for _ in range(n_steps):
        prop = theta + step * rng.standard_normal(theta.shape) @ chol.T
        lp_prop = log_post(prop)
        accept = np.log(rng.random(n_chains)) < lp_prop - lp
        theta[accept], lp[accept] = prop[accept], lp_prop[accept]
    return theta


@pytest.fixture(scope="module")
def reference(breast_cancer, fitted, computed_once):
    X, y = breast_cancer
    cov = np.cov(fitted.sample_posterior().T)
    return computed_once("logistic-metropolis-reference",
                         lambda: metropolis_reference(X, y, fitted.map_, cov))


# ---------------------------------------------------------------------------- the bound
def _target(X, y, center, **kw):
    design = np.column_stack([X, np.ones(len(X))])
    return LogisticAStarTarget(design, 2.0 * y - 1.0, prior_scale=kw.pop("prior_scale", 10.0),
                               center=center, **kw)


def _o(target, u):
    return target.log_density(u) - sum(q.logpdf(u[:, k]) for k, q in enumerate(target.proposal))


def _random_boxes(rng, d, n_boxes, half_infinite):
    for _ in range(n_boxes):
        mid = rng.standard_normal(d) * rng.choice([0.5, 2.0, 6.0])
        half = rng.exponential(rng.choice([0.05, 0.5, 2.0]), size=d)
        lo, hi = mid - half, mid + half
        if half_infinite:
            k = rng.integers(d)
            if rng.random() < 0.5:
                lo[k] = -np.inf
            else:
                hi[k] = np.inf
        yield lo, hi


def _points_in(rng, lo, hi, n=400):
    # the finite part of an infinite side reaches 40 whitened units (where o is far below)
    flo = np.where(np.isfinite(lo), lo, hi - 40.0)
    fhi = np.where(np.isfinite(hi), hi, lo + 40.0)
    u = flo + (fhi - flo) * rng.random((n, lo.size))
    corners = np.where(rng.random((2 ** lo.size, lo.size)) < 0.5, flo, fhi)
    return np.vstack([u, corners])


@pytest.mark.parametrize("case", ["map", "off-map-weighted-tempered"])
def test_bound_holds_on_random_boxes(breast_cancer, fitted, case):
    X, y = breast_cancer
    rng = np.random.default_rng(5)
    if case == "map":
        target = _target(X, y, fitted.map_)
    else:  # any centre gives a valid (looser) bound; weights and temperature enter c_i
        weights = rng.exponential(1.0, size=len(y))
        target = _target(X, y, fitted.map_ + 0.3, weights=weights, temperature=1.7,
                         prior_scale=3.0)
    d = target.n_params
    for half_infinite in (False, True):
        for lo, hi in _random_boxes(rng, d, 60, half_infinite):
            u = _points_in(rng, lo, hi)
            assert _o(target, u).max() <= target.bound(lo, hi), (lo, hi)


def test_bound_without_the_taylor_remainders_is_violated(breast_cancer, fitted, monkeypatch):
    # Negative control: dropping the third-order remainders from bound 1 leaves a bound that
    # the same dense check must catch.
    X, y = breast_cancer
    target = _target(X, y, fitted.map_)
    monkeypatch.setattr(target, "_remainder", lambda delta: np.zeros_like(delta))
    rng = np.random.default_rng(5)
    violated = 0
    for lo, hi in _random_boxes(rng, target.n_params, 60, False):
        u = _points_in(rng, lo, hi)
        violated += _o(target, u).max() > target.bound_taylor(lo, hi)
    assert violated > 0


@pytest.mark.parametrize("z0", [-4.0, -0.7, 0.0, 0.3, 2.5])
def test_taylor_remainder_is_quasi_convex(z0):
    # The supremum of r over any interval is at one of its ends (the claim bound 1 rests on).
    grid = np.linspace(-15.0, 15.0, 3001)
    g, kappa = special.expit(-z0), special.expit(z0) * special.expit(-z0)
    r = special.log_expit(z0 + grid) - special.log_expit(z0) - g * grid + 0.5 * kappa * grid**2
    rng = np.random.default_rng(0)
    for _ in range(500):
        i, j = np.sort(rng.integers(0, grid.size, 2))
        assert r[i:j + 1].max() <= max(r[i], r[j]) + 1e-12


# ---------------------------------------------------------------------------- the draws
def _lag1(x):
    x = x - x.mean()
    return float(x[1:] @ x[:-1] / (x @ x))


def test_exact_draws_agree_with_an_independent_reference_and_are_uncorrelated(
        exact, reference, fitted):
    # One test for both properties of the same costly draws (each pytest worker would
    # otherwise draw them anew).
    draws, evaluations, converged = exact
    assert draws.shape == (N_EXACT, 4) and converged.all()
    for k, name in enumerate(fitted.posterior_names_):
        p = stats.ks_2samp(draws[:, k], reference[:, k]).pvalue
        assert p >= ALPHA, f"{name}: KS p = {p:.3g}"
    assert np.all(evaluations > 0)
    # For iid draws the lag-1 autocorrelation is N(0, 1/n) asymptotically: two-sided 1 %.
    limit = stats.norm.ppf(1 - ALPHA / 2) / np.sqrt(draws.shape[0])
    for k in range(draws.shape[1]):
        assert abs(_lag1(draws[:, k])) < limit
    # Negative control of the lag-1 test: the fitted MH chain (as many consecutive draws)
    # fails it. (The KS test's is test_uncertified_draws_fail_the_same_ks_test.)
    chain = fitted.coef_samples_[0, :N_EXACT, 0]
    assert abs(_lag1(chain)) > limit


def test_uncertified_draws_fail_the_same_ks_test(breast_cancer, fitted, reference):
    # Negative control: searches stopped after one round, before the bound certifies them,
    # return the root's point, a draw from the proposal (1.8 times wider than the posterior
    # in every principal axis).
    X, y = breast_cancer
    target = _target(X, y, fitted.map_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = astar_sample(target.log_density, target.proposal,
                           bound=target.bound, n_draws=N_EXACT, max_iter=1, random_state=1)
    draws = target.to_params(res.samples)
    p = [stats.ks_2samp(draws[:, k], reference[:, k]).pvalue for k in range(4)]
    assert min(p) < ALPHA


def test_pm_astar_agrees_and_reports_costs(fitted, reference):
    draws = fitted.sample_exact(100, method="pm-astar", random_state=3)
    assert fitted.exact_method_ == "pm-astar" and fitted.exact_converged_.all()
    for k in range(4):
        assert stats.ks_2samp(draws[:, k], reference[:, k]).pvalue >= ALPHA
    n = fitted.exact_density_evaluations_per_draw_
    assert np.array_equal(fitted.exact_evaluations_per_draw_,
                          569 * (n + fitted.exact_bound_passes_per_draw_))


def test_draws_do_not_depend_on_n_jobs(fitted):
    # (a few draws: each is its own search with its own stream, however the draws are split)
    a = fitted.sample_exact(6, random_state=7, n_jobs=1)
    b = fitted.sample_exact(6, random_state=7, n_jobs=2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, fitted.sample_exact(6, random_state=8))


def test_sample_posterior_is_unchanged(fitted):
    before = fitted.sample_posterior()
    fitted.sample_exact(3, random_state=0)
    np.testing.assert_array_equal(before, fitted.sample_posterior())


def _short_fit(n_features):
    """A quick fit on random data: only its MAP and data matter to these tests."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, n_features))
    y = (X[:, 0] + rng.standard_normal(200) > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BayesianLogisticRegressionMH(n_draws=20, n_warmup=20, n_chains=1,
                                            random_state=0).fit(X, y)


def test_too_many_parameters_is_refused():
    clf = _short_fit(11)
    with pytest.raises(ValueError, match="12-dimensional"):
        clf.sample_exact(1)


def test_bad_arguments(fitted):
    with pytest.raises(ValueError, match="method"):
        fitted.sample_exact(2, method="nuts")
    with pytest.raises(ValueError, match="n_draws"):
        fitted.sample_exact(0)


def test_seven_parameters_warn_with_the_measured_cost():
    clf = _short_fit(6)
    with pytest.warns(UserWarning, match="7 parameters"), \
            pytest.warns(RuntimeWarning, match="max_rounds=1"):
        clf.sample_exact(1, max_rounds=1)
    assert not clf.exact_converged_.any()
