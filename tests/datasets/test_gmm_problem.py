import math

import numpy as np
import pytest
from scipy import stats

from sksubsample.algorithms import sample_mh
from sksubsample.datasets._gmm_problem import make_gaussian_mixture_problem


def _mixture_cdf(theta):
    sd = math.sqrt(2.0)
    return lambda x: 0.5 * (stats.norm.cdf(x, theta[0], sd)
                            + stats.norm.cdf(x, theta[0] + theta[1], sd))


def test_data_follow_the_mixture_and_a_wrong_mixture_is_rejected():
    prob = make_gaussian_mixture_problem(50_000, random_state=0)
    assert prob.n_data == 50_000 and prob.x.shape == (50_000,)
    np.testing.assert_array_equal(prob.theta_true, [0.0, 1.0])
    assert stats.kstest(prob.x, _mixture_cdf((0.0, 1.0))).pvalue > 1e-3
    # negative control: the same data against θ2 = 0.5 (component means 0 and 0.5)
    assert stats.kstest(prob.x, _mixture_cdf((0.0, 0.5))).pvalue < 1e-6
    again = make_gaussian_mixture_problem(50_000, random_state=0)
    np.testing.assert_array_equal(prob.x, again.x)


def test_loglik_terms_match_the_mixture_density():
    prob = make_gaussian_mixture_problem(500, random_state=1)
    idx = np.arange(0, 500, 7)
    for th in ([0.0, 1.0], [1.3, -0.8], [-0.4, 2.2]):
        expected = np.log(0.5 * stats.norm.pdf(prob.x[idx], th[0], math.sqrt(2.0))
                          + 0.5 * stats.norm.pdf(prob.x[idx], th[0] + th[1], math.sqrt(2.0)))
        np.testing.assert_allclose(prob.loglik_terms(np.array(th), idx), expected, rtol=1e-12)
    th = np.array([0.3, 0.7])
    expected = stats.multivariate_normal.logpdf(th, cov=np.diag([10.0, 1.0]))
    # log_prior drops the constant
    assert prob.log_prior(th) - prob.log_prior(np.zeros(2)) == pytest.approx(
        expected - stats.multivariate_normal.logpdf(np.zeros(2), cov=np.diag([10.0, 1.0])))


def test_derivatives_match_central_differences():
    prob = make_gaussian_mixture_problem(200, random_state=2)
    idx = np.arange(200)
    th = np.array([0.4, -0.6])
    h = 1e-5
    eye = np.eye(2)
    fd_grad = np.stack([(prob.loglik_terms(th + h * e, idx) - prob.loglik_terms(th - h * e, idx))
                        / (2 * h) for e in eye], axis=1)
    np.testing.assert_allclose(prob.grad_terms(th, idx), fd_grad, atol=1e-7)
    fd_hess = np.stack([(prob.grad_terms(th + h * e, idx) - prob.grad_terms(th - h * e, idx))
                        / (2 * h) for e in eye], axis=2)
    np.testing.assert_allclose(prob.hess_terms(th, idx), fd_hess, atol=1e-7)
    fd_prior = [(prob.log_prior(th + h * e) - prob.log_prior(th - h * e)) / (2 * h) for e in eye]
    np.testing.assert_allclose(prob.grad_log_prior(th), fd_prior, atol=1e-8)
    np.testing.assert_allclose(prob.hess_log_prior(th), -np.diag([0.1, 1.0]))


def test_range_bound_covers_every_datum():
    prob = make_gaussian_mixture_problem(5000, random_state=3)
    rng = np.random.default_rng(4)
    idx = np.arange(prob.n_data)
    for _ in range(50):
        th = rng.normal(0.0, 1.0, 2)
        th_new = th + rng.normal(0.0, 0.4, 2)
        diff = np.abs(prob.loglik_terms(th_new, idx) - prob.loglik_terms(th, idx))
        assert prob.loglik_ratio_bound(th, th_new) >= diff.max() - 1e-12


def _direct_bin_probs(prob, temperature, bin_width, sub):
    """The same sub-grid posterior, but summing every datum's log-likelihood exactly."""
    h = bin_width / sub
    c1 = -1.5 + h * (np.arange(round(4 / bin_width) * sub) + 0.5)
    c2 = -3.0 + h * (np.arange(round(6 / bin_width) * sub) + 0.5)
    idx = np.arange(prob.n_data)
    logp = np.array([[prob.loglik_terms(np.array([a, b]), idx).sum() / temperature
                      + prob.log_prior(np.array([a, b])) for b in c2] for a in c1])
    p = np.exp(logp - logp.max())
    p /= p.sum()
    return p.reshape(c1.size // sub, sub, c2.size // sub, sub).sum(axis=(1, 3)), c1, c2


def test_binned_posterior_matches_the_exact_sum_over_the_data():
    prob = make_gaussian_mixture_problem(2000, random_state=5)
    temperature, bin_width, sub, x_bin = 200.0, 0.5, 2, 1e-5
    binned = prob.binned_posterior(temperature, bin_width=bin_width, sub=sub, x_bin=x_bin)
    expected, c1, c2 = _direct_bin_probs(prob, temperature, bin_width, sub)
    assert binned.probs.shape == (8, 12)
    assert binned.probs.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(binned.edges1, np.linspace(-1.5, 2.5, 9))
    np.testing.assert_allclose(binned.centres1, c1)
    np.testing.assert_allclose(binned.centres2, c2)
    # Moving every datum by at most x_bin / 2 moves the tempered log density by at most
    # sum_i |dℓ_i/dx| x_bin / (2T), where |dℓ/dx| <= max(|x - θ1|, |x - θ1 - θ2|) / σx² and
    # |θ1| <= 2.5, |θ1 + θ2| <= 5.5 over the window; probabilities (ratios of such sums) then
    # change by at most a factor exp(±2 bound).
    slope = (np.abs(prob.x).max() + 5.5) / 2.0
    bound = prob.n_data * slope * x_bin / (2 * temperature)
    np.testing.assert_allclose(binned.probs, expected, rtol=math.expm1(2 * bound), atol=1e-15)


def _draws_from_bins(binned, n, rng, shift=0.0):
    cells = rng.choice(binned.probs.size, size=n, p=binned.probs.ravel())
    i, j = np.unravel_index(cells, binned.probs.shape)
    w1 = np.diff(binned.edges1)[0]
    w2 = np.diff(binned.edges2)[0]
    return np.column_stack([binned.edges1[i] + w1 * rng.random(n) + shift,
                            binned.edges2[j] + w2 * rng.random(n)])


def test_score_accepts_independent_posterior_draws_and_rejects_shifted_ones():
    prob = make_gaussian_mixture_problem(20_000, random_state=6)
    binned = prob.binned_posterior(200.0, bin_width=0.5)
    rng = np.random.default_rng(7)
    good = _draws_from_bins(binned, 3000, rng)
    poisson, chi2, dof, p_value = binned.score(good)
    assert dof >= 5
    assert p_value > 1e-3
    assert p_value == pytest.approx(stats.chi2.sf(chi2, dof))
    # Eq. 23 is the Poisson log-likelihood of the cell counts
    counts, _, _ = np.histogram2d(good[:, 0], good[:, 1], bins=[binned.edges1, binned.edges2])
    assert counts.sum() == 3000
    expected = stats.poisson.logpmf(counts.ravel(), 3000 * binned.probs.ravel()).sum()
    assert poisson == pytest.approx(expected, rel=1e-10)
    # negative control: draws moved by one bin width along θ1
    bad = _draws_from_bins(binned, 3000, rng, shift=0.5)
    bad_poisson, _, _, bad_p = binned.score(bad)
    assert bad_p < 1e-6
    assert bad_poisson < poisson


def test_problem_is_a_target_for_the_subsampled_tests():
    prob = make_gaussian_mixture_problem(5000, random_state=8)
    for test, extra in (("adaptive_subsampling", {"delta": 0.01}), ("minibatch_barker", {})):
        res = sample_mh(prob, [0.0, 1.0], n_draws=30, n_warmup=0, test=test, batch_size=100,
                        temperature=50.0, step_size=0.3, preconditioner="identity",
                        random_state=0, **extra)
        assert res.draws.shape == (30, 2)
        assert np.all(np.isfinite(res.draws))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"n_data": 1}, "n_data"), ({"theta": (0.0, 1.0, 2.0)}, "theta"),
     ({"theta": (0.0, np.nan)}, "theta")],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_gaussian_mixture_problem(**{"n_data": 100, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"temperature": 0.0}, "temperature"), ({"bin_width": 0.3}, "bin_width"),
     ({"sub": 0}, "sub"), ({"x_bin": -1.0}, "x_bin")],
)
def test_bad_binning_arguments(kwargs, match):
    prob = make_gaussian_mixture_problem(100, random_state=0)
    with pytest.raises(ValueError, match=match):
        prob.binned_posterior(**kwargs)
    with pytest.raises(ValueError, match="draws"):
        prob.binned_posterior().score(np.zeros((5, 3)))
