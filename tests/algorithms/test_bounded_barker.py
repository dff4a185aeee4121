"""The bounded Barker test and the model bounds it relies on.

The test's guarantee is deterministic: ``|P(accept) - expit(Δ)| <= delta`` for every population
of terms, given ``V >= (1/N) sum_i l_i²``. It is checked three ways:

* exactly, by enumerating every minibatch of small populations built to break normal
  approximations (one huge outlier), where ``P(accept)`` is an exact average;
* by Monte Carlo on real, heavily skewed control-variate residual populations of the breast
  cancer posterior (skewness > 20), with a binomial tolerance ``delta + 4 SE``; the uncorrected
  minibatch Barker test of Seita et al. on the same populations is the negative control;
* the model bounds themselves (Taylor-remainder and Lipschitz) are checked to dominate the true
  second moments on real data, pair by pair.
"""

import itertools
import math

import numpy as np
import pytest
from scipy import linalg, special
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from sksubsample.algorithms import GLMTarget, TaylorProxy, bounded_barker, minibatch_barker
from sksubsample.algorithms.mh import Strata, bounded_batch_size
from sksubsample.algorithms.mh._exact_tests import _LOGISTIC_CURVATURE

# ----------------------------------------------------------------------------- batch size


@pytest.mark.parametrize("n_data", [10, 569, 100_000])
@pytest.mark.parametrize("variance_bound", [1e-12, 1e-8, 1e-5, 1e-3, 1.0])
def test_batch_size_is_the_smallest_admissible(n_data, variance_bound):
    delta = 0.01
    target = 2.0 * delta / _LOGISTIC_CURVATURE

    def variance(b):  # Var(Δ̂) for b draws without replacement, at the bound
        return n_data**2 * (n_data - b) / ((n_data - 1) * b) * variance_bound

    b = bounded_batch_size(n_data, variance_bound, delta)
    assert 1 <= b <= n_data
    if b < n_data:
        assert variance(b) <= target * (1 + 1e-12)
    if b > 1:
        assert variance(b - 1) > target


def test_zero_variance_bound_needs_one_term():
    assert bounded_batch_size(1000, 0.0, 0.01) == 1


# ----------------------------------------------------------------------------- exact check


def _exact_acceptance(terms, rest, b):
    """P(accept) of the Barker decision on Δ̂, averaged over every b-subset (exact)."""
    n = terms.size
    total = 0.0
    count = 0
    for subset in itertools.combinations(range(n), b):
        total += special.expit(n * terms[list(subset)].mean() + rest)
        count += 1
    return total / count


@pytest.mark.parametrize("outlier", [0.1, 0.3, 0.5])
@pytest.mark.parametrize("delta_exact", [-3.0, -0.5, 0.0, 1.5])
def test_guarantee_holds_exactly_on_outlier_populations(outlier, delta_exact):
    """One term far out: the minibatch mean is as non-normal as it gets."""
    n, delta = 14, 0.01
    terms = np.full(n, 0.01)
    terms[3] = outlier
    rest = delta_exact - terms.sum()
    variance_bound = float(np.mean(terms**2))
    b = bounded_batch_size(n, variance_bound, delta)
    assert b < n  # subsampled, so the check is not vacuous
    error = abs(_exact_acceptance(terms, rest, b) - special.expit(delta_exact))
    assert error <= delta


def _exact_stratified_acceptance(terms, rest, strata, b):
    n_sampled = strata.sampled.size
    fixed = terms[strata.exact].sum()
    total, count = 0.0, 0
    for subset in itertools.combinations(strata.sampled, b):
        total += special.expit(fixed + n_sampled * terms[list(subset)].mean() + rest)
        count += 1
    return total / count


@pytest.mark.parametrize("delta_exact", [-2.0, 0.0, 1.0])
def test_guarantee_holds_exactly_with_strata(delta_exact):
    """Outliers set apart and summed exactly: the bound over the rest allows a small batch,
    and the acceptance probability (enumerated) keeps the guarantee."""
    n, delta = 16, 0.01
    terms = np.linspace(-0.02, 0.02, n)
    terms[[2, 9]] = (3.0, -4.0)  # two outliers, far beyond any minibatch normal approximation
    strata = Strata(np.array([2, 9]), np.setdiff1d(np.arange(n), [2, 9]))
    rest = delta_exact - terms.sum()
    bound = float(np.mean(terms[strata.sampled] ** 2))
    b = bounded_batch_size(strata.sampled.size, bound, delta)
    assert b < strata.sampled.size
    error = abs(_exact_stratified_acceptance(terms, rest, strata, b) - special.expit(delta_exact))
    assert error <= delta
    # The test itself: the counts are those of this scheme (the batch is only evaluated when
    # the bound does not settle the decision).
    for seed in range(20):
        info = bounded_barker(delta=delta)(lambda idx: terms[idx], n, rest, seed,
                                           variance_bound=bound, strata=strata)
        assert info.n_evaluations in (2, 2 + b)
        assert info.batch_size == 2 + b and not info.exact


def _reference_bounded_decision(terms, rest, variance_bound, delta, strata, seed):
    """The bounded test without its shortcut: draw log u, then the batch, then decide."""
    from sksubsample.algorithms.sampling import IndexSampler

    rng = np.random.default_rng(seed)
    log_u = -rng.standard_exponential()
    exact_rows = np.empty(0, dtype=int) if strata is None else strata.exact
    sampled = np.arange(terms.size) if strata is None else strata.sampled
    b = bounded_batch_size(sampled.size, variance_bound, delta)
    if b == sampled.size:
        return log_u < rest + terms.sum()
    batch = sampled[IndexSampler(sampled.size, rng).draw(b)]
    estimate = rest + terms[exact_rows].sum() + sampled.size * terms[batch].mean()
    return log_u < special.log_expit(estimate)


def test_decisions_settled_by_the_bound_are_the_decisions_of_the_data():
    """The shortcut (a uniform outside the interval the bound allows decides at once) must
    never change a decision: same seed, same decision as the plain scheme, whether the test
    is subsampled or exact, with and without strata, for log ratios near and far from 0."""
    rng = np.random.default_rng(7)
    n = 200
    shortcut = 0
    for case in range(600):
        spread = (0.05, 1.0, 30.0)[case % 3]
        terms = rng.standard_t(3, size=n) * 0.002 * spread
        strata = None
        if case % 2:
            strata = Strata(np.array([5, 17]), np.setdiff1d(np.arange(n), [5, 17]))
            terms[[5, 17]] = rng.normal(0.0, 2.0, size=2)
        sampled = terms if strata is None else terms[strata.sampled]
        bound = float(np.mean(sampled**2)) * (1.0 + case % 4)  # a valid, sometimes loose, V
        rest = rng.normal(0.0, 3.0) - terms.sum() * (case % 5 == 0)
        seed = 1000 + case
        info = bounded_barker(delta=0.01)(lambda idx, t=terms: t[idx], n, rest, seed,
                                          variance_bound=bound, strata=strata)
        assert info.accepted == _reference_bounded_decision(terms, rest, bound, 0.01, strata,
                                                            seed)
        shortcut += math.isnan(info.log_ratio)
    assert 50 < shortcut < 550  # both paths were exercised


def test_too_small_a_batch_breaks_the_guarantee():
    """Negative control: the same Barker decision on a batch of 2 instead of the bounded size."""
    n = 14
    terms = np.full(n, 0.01)
    terms[3] = 2.0
    delta_exact = 0.0
    rest = delta_exact - terms.sum()
    error = abs(_exact_acceptance(terms, rest, 2) - special.expit(delta_exact))
    assert error > 0.05


# ------------------------------------------------------------------ real skewed residuals


@pytest.fixture(scope="module")
def breast_cancer_model():
    data = load_breast_cancer()
    X = StandardScaler().fit_transform(data.data)
    design = np.column_stack([X, np.ones(len(X))])
    y = data.target
    prior_scale = 2.5
    map_ = LogisticRegression(C=prior_scale**2, fit_intercept=False, tol=1e-10,
                              max_iter=5000).fit(design, y).coef_.ravel()
    target = GLMTarget(design, 2.0 * y - 1.0, prior_scale)
    # (the bounded plan: on data this small the plan would otherwise be the exact test)
    proxy = TaylorProxy(target, map_, expansion_options={"allow_exact": False})
    chol = linalg.cholesky(proxy.laplace_precision(1.0, target.hess_log_prior(map_)),
                           lower=True)
    return target, proxy, map_, chol


def _pairs(model, n_pairs, step, seed):
    """Pairs (θ, θ') around the posterior: θ from the Laplace approximation, θ' a step away."""
    _, _, map_, chol = model
    rng = np.random.default_rng(seed)
    d = map_.size
    for _ in range(n_pairs):
        theta = map_ + linalg.solve_triangular(chol.T, rng.normal(size=d), lower=False)
        theta_new = theta + step * linalg.solve_triangular(chol.T, rng.normal(size=d),
                                                           lower=False)
        yield theta, theta_new


def _most_skewed_residuals(model, n_keep):
    target, proxy, _, _ = model
    populations = []
    for theta, theta_new in _pairs(model, 60, 0.3, seed=0):
        r = proxy.residual_terms(theta, theta_new, np.arange(target.n_data))
        skew = float(np.mean((r - r.mean()) ** 3) / r.std() ** 3)
        populations.append((abs(skew), r))
    populations.sort(key=lambda item: -item[0])
    return populations[:n_keep]


def test_acceptance_error_on_real_skewed_residuals(breast_cancer_model):
    """|P̂ - expit(Δ)| <= delta + 4 SE for the bounded test; Seita et al.'s test (negative
    control) is off by far more than its sampling error on the same populations."""
    n_trials, delta, delta_exact = 4000, 0.01, -1.69  # Δ of the worst step seen in practice
    p = special.expit(delta_exact)
    se = math.sqrt(p * (1 - p) / n_trials)
    seita_errors = []
    for skew, r in _most_skewed_residuals(breast_cancer_model, 2):
        assert skew > 10  # these are the populations that break normal approximations
        n = r.size
        rest = delta_exact - float(r.sum())
        bound = float(np.mean(r**2))
        test = bounded_barker(delta=delta)
        rng = np.random.default_rng(1)
        accepted = [test(lambda idx, r=r: r[idx], n, rest, rng, variance_bound=bound).accepted
                    for _ in range(n_trials)]
        assert bounded_batch_size(n, bound, delta) < n  # really subsampled
        assert abs(np.mean(accepted) - p) <= delta + 4 * se
        seita = minibatch_barker()
        accepted = [seita(lambda idx, r=r: r[idx], n, rest, rng).accepted
                    for _ in range(n_trials)]
        seita_errors.append(abs(np.mean(accepted) - p))
    assert max(seita_errors) > delta + 4 * se


def test_no_bound_means_the_exact_test():
    terms = np.random.default_rng(2).normal(0.0, 0.01, 500)
    info = bounded_barker()(lambda idx: terms[idx], 500, 0.2, 0)
    assert info.exact and info.n_evaluations == 500 and info.rule == "metropolis"
    assert info.log_ratio == pytest.approx(terms.sum() + 0.2)


def test_exact_decisions_follow_metropolis():
    """With b = N the decision is log u < Δ: its acceptance rate is min(1, e^Δ)."""
    terms = np.zeros(50)
    test = bounded_barker()
    rng = np.random.default_rng(3)
    n_trials = 20_000
    rate = np.mean([test(lambda idx: terms[idx], 50, -0.7, rng).accepted
                    for _ in range(n_trials)])
    p = math.exp(-0.7)
    assert abs(rate - p) <= 4 * math.sqrt(p * (1 - p) / n_trials)


def test_bad_input():
    with pytest.raises(ValueError, match="delta"):
        bounded_barker(delta=0.0)
    test = bounded_barker()
    with pytest.raises(ValueError, match="variance_bound"):
        test(lambda idx: np.zeros(len(idx)), 10, 0.0, 0, variance_bound=-1.0)
    with pytest.raises(TypeError, match="variance_bound"):
        test(lambda idx: np.zeros(len(idx)), 10, 0.0, 0, variance_bound="1")
    info = test(lambda idx: np.zeros(len(idx)), 10, math.nan, 0)
    assert not info.accepted and info.n_evaluations == 0


# ----------------------------------------------------------------------------- model bounds


def _digits_model():
    digits = load_digits()
    keep = np.isin(digits.target, (3, 8))
    X = digits.data[keep]
    X = StandardScaler().fit_transform(X[:, X.std(axis=0) > 0])
    design = np.column_stack([X, np.ones(len(X))])
    y = (digits.target[keep] == 8).astype(float)
    map_ = LogisticRegression(C=1.0, fit_intercept=False, tol=1e-10,
                              max_iter=5000).fit(design, y).coef_.ravel()
    target = GLMTarget(design, 2.0 * y - 1.0, 1.0)
    # (the bounded plan: on data this small the plan would otherwise be the exact test)
    proxy = TaylorProxy(target, map_, expansion_options={"allow_exact": False})
    chol = linalg.cholesky(proxy.laplace_precision(1.0, target.hess_log_prior(map_)),
                           lower=True)
    return target, proxy, map_, chol


@pytest.mark.parametrize("step", [0.05, 0.5, 3.0])
def test_model_variance_bounds_dominate_the_truth(breast_cancer_model, step):
    for model in (breast_cancer_model, _digits_model()):
        target, proxy, _, _ = model
        every = np.arange(target.n_data)
        sampled = every if proxy.strata is None else proxy.strata.sampled_rows(target.n_data)
        for theta, theta_new in _pairs(model, 30, step, seed=4):
            residuals = proxy.residual_terms(theta, theta_new, sampled)
            assert proxy.residual_variance_bound(theta, theta_new) >= np.mean(residuals**2)
            raw = target.loglik_ratio_terms(theta, theta_new, every)
            assert target.loglik_ratio_variance_bound(theta, theta_new) >= np.mean(raw**2)


def test_heavy_tailed_rows_are_set_apart():
    """A few rows of huge leverage: the proxy sums them exactly, and the bound over the rest
    is far smaller than the bound over all rows."""
    rng = np.random.default_rng(8)
    n, d = 20_000, 4
    X = rng.standard_normal((n, d)) / np.sqrt(rng.chisquare(2, size=n) / 2)[:, None]
    y = (rng.random(n) < special.expit(X @ np.full(d, 0.3))).astype(float)
    map_ = LogisticRegression(C=100.0, fit_intercept=False, tol=1e-10).fit(X, y).coef_[0]
    proxy = TaylorProxy(GLMTarget(X, 2.0 * y - 1.0, 10.0), map_)
    assert proxy.strata is not None
    exact, sampled = proxy.strata.exact, proxy.strata.sampled_rows(n)
    assert np.intersect1d(exact, sampled).size == 0 and exact.size + sampled.size == n
    norms = np.linalg.norm(X, axis=1)
    assert np.median(norms[exact]) > np.percentile(norms, 90)  # the outlying rows


@pytest.mark.parametrize("order, factor", [(2, 5.0), (3, 50.0)])
def test_residual_bound_shrinks_with_the_data(order, factor):
    """On a concentrated posterior N² V falls as N grows: batches stay small at large N.

    Between N = 2 000 and 50 000 (25 times more data) the residuals of an order-k expansion
    scale as N^{-(k+1)/2}, so N² V ∝ N^{1-k}: a factor 25 expected at order 2 and 625 at
    order 3 (asserted with ample room: 5 and 50)."""
    rng = np.random.default_rng(5)
    d = 5
    beta = rng.normal(size=d) * 0.5
    scaled = []
    for n in (2_000, 50_000):
        X = rng.normal(size=(n, d))
        y = (rng.random(n) < special.expit(X @ beta)).astype(float)
        map_ = LogisticRegression(C=100.0, fit_intercept=False, tol=1e-10).fit(X, y).coef_[0]
        target = GLMTarget(X, 2.0 * y - 1.0, 10.0)
        expansion = target.taylor_expansion(map_, order=order)
        assert expansion.order == order
        proxy = TaylorProxy(target, map_)
        chol = linalg.cholesky(proxy.laplace_precision(1.0, target.hess_log_prior(map_)),
                               lower=True)
        n_sampled = expansion.bound.n_sampled
        bounds = [expansion.residual_variance_bound(a, b) * n_sampled**2
                  for a, b in _pairs((target, proxy, map_, chol), 20, 0.5, seed=6)]
        scaled.append(np.median(bounds))
    assert scaled[1] < scaled[0] / factor

def test_a_shortcut_with_too_little_slack_changes_decisions():
    """Negative control: an interval ten times narrower than the bound allows decides some
    steps against the data, and the comparison above sees it."""
    from sksubsample.algorithms.mh import decided_by_bound

    def narrow_shortcut(terms, rest, bound, delta, seed):
        # The bounded test's shortcut on a variance bound 100 times too small, else the data.
        log_u = -np.random.default_rng(seed).standard_exponential()
        size = bounded_batch_size(terms.size, bound, delta)
        code = decided_by_bound(log_u, rest, terms.size, bound / 100.0, size)
        if code >= 0:
            return bool(code)
        return _reference_bounded_decision(terms, rest, bound, delta, None, seed)

    rng = np.random.default_rng(7)
    n, mismatches = 200, 0
    for case in range(300):
        terms = rng.standard_t(3, size=n) * 0.002
        bound = float(np.mean(terms**2))
        rest = rng.normal(0.0, 3.0)
        decision = narrow_shortcut(terms, rest, bound, 0.01, case)
        mismatches += decision != _reference_bounded_decision(terms, rest, bound, 0.01,
                                                              None, case)
    assert mismatches > 0
