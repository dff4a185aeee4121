"""The ARCH target: likelihood against the arch package, derivatives, prior normalisation,
control variates, the SGLD proposal's ratio and the importance-sampling evidence."""

import math

import numpy as np
import pytest
from numpy.polynomial.hermite import hermgauss
from scipy import integrate, optimize, special, stats

from sksubsample.algorithms import MHState
from sksubsample.time_series import _arch_kernels as kernels
from sksubsample.time_series._arch_target import (
    ARCHTarget,
    arch_design,
    inverse_softplus,
    softplus,
)
from sksubsample.time_series._evidence import importance_log_evidence
from sksubsample.time_series._laplace import laplace_fit


def _series(n=600, n_series=1, seed=0):
    rng = np.random.default_rng(seed)
    r = rng.standard_t(6.0, size=(n, n_series))
    return r - r.mean(axis=0)


@pytest.mark.parametrize("order", [0, 1, 3])
def test_per_term_loglik_matches_arch_package(order):
    """Our scale-1 t terms equal arch's standardised-t terms with α_arch = α ν / (ν - 2)."""
    arch = pytest.importorskip("arch")
    r = _series(n=400, n_series=2, seed=order)
    max_order = 4
    y, z = arch_design(r, max_order)
    target = ARCHTarget(y, z, order)
    alpha = np.r_[0.6, np.linspace(0.3, 0.1, order)]
    nu = 5.5
    ours = target.loglik_terms(inverse_softplus(np.r_[alpha, nu]), np.arange(target.n_data))
    m = r.shape[0] - max_order
    for k in range(r.shape[1]):
        model = arch.arch_model(r[:, k], mean="Zero", vol="ARCH", p=order, dist="t") if order \
            else arch.arch_model(r[:, k], mean="Zero", vol="Constant", dist="t")
        params = np.r_[alpha * nu / (nu - 2.0), nu]
        sigma2 = model.fix(params).conditional_volatility ** 2
        theirs = model.distribution.loglikelihood([nu], r[:, k], sigma2, individual=True)
        np.testing.assert_allclose(ours[k * m:(k + 1) * m], theirs[max_order:], rtol=1e-12,
                                   atol=1e-12)


def test_design_uses_common_terms_and_lags():
    r = np.arange(1.0, 13.0).reshape(6, 2)
    y, z = arch_design(r, 2)
    np.testing.assert_array_equal(y, [5, 7, 9, 11, 6, 8, 10, 12])
    np.testing.assert_array_equal(z[0], [1, 9, 1])  # r_{t-1}² = 3², r_{t-2}² = 1²
    np.testing.assert_array_equal(z[4], [1, 16, 4])


def test_derivatives_match_finite_differences():
    r = _series(n=300, n_series=2)
    y, z = arch_design(r, 3)
    target = ARCHTarget(y, z, 2, prior_shape=1.7, prior_rate=0.8)
    x = np.array([-0.4, -1.2, 0.3, 1.5])
    idx = np.array([0, 5, 17, 300, 500])
    grads = target.grad_terms(x, idx)
    hess = target.hess_terms(x, idx)
    for k in range(idx.size):
        fd = optimize.approx_fprime(x, lambda v, k=k: target.loglik_terms(v, idx)[k], 1e-7)
        np.testing.assert_allclose(grads[k], fd, atol=1e-6)
        fdh = np.array([optimize.approx_fprime(x, lambda v, k=k, j=j:
                                               target.grad_terms(v, idx)[k, j], 1e-7)
                        for j in range(x.size)])
        np.testing.assert_allclose(hess[k], fdh, atol=1e-6)
    np.testing.assert_allclose(target.grad_log_prior(x),
                               optimize.approx_fprime(x, target.log_prior, 1e-7), atol=1e-6)
    fdh = np.array([optimize.approx_fprime(x, lambda v, j=j: target.grad_log_prior(v)[j], 1e-7)
                    for j in range(x.size)])
    np.testing.assert_allclose(target.hess_log_prior(x), fdh, atol=1e-6)
    loglik, grad, h = target.derivative_sums(x)
    every = np.arange(target.n_data)
    assert loglik == pytest.approx(target.loglik_terms(x, every).sum(), rel=1e-12)
    np.testing.assert_allclose(grad, target.grad_terms(x, every).sum(axis=0), rtol=1e-10)
    np.testing.assert_allclose(h, target.hess_terms(x, every).sum(axis=0), rtol=1e-10)


def test_prior_is_a_normalised_density_in_softplus_coordinates():
    """∫ exp(log_prior) dx = 1: the Gamma normaliser and the softplus Jacobian are right."""
    target = ARCHTarget(np.zeros(2), np.ones((2, 1)), 0, prior_shape=2.5, prior_rate=1.5)
    def density(u, v):
        return math.exp(target.log_prior(np.array([u, v])))
    total, _ = integrate.dblquad(density, -40, 15, -40, 15, epsabs=1e-10)
    assert total == pytest.approx(1.0, abs=1e-6)
    x = np.array([[0.3, -2.0], [4.0, 1.0]])
    np.testing.assert_allclose(target.log_prior_batch(x), [target.log_prior(v) for v in x])
    # Against scipy's Gamma in natural coordinates plus log sigmoid(x).
    expected = (stats.gamma(2.5, scale=1 / 1.5).logpdf(softplus(x)) + special.log_expit(x))
    np.testing.assert_allclose(target.log_prior_batch(x), expected.sum(axis=1))


def test_control_variates_are_exact_in_sum_and_shrink_rewards():
    r = _series(n=3000)
    y, z = arch_design(r, 3)
    target = ARCHTarget(y, z, 2)
    fit = laplace_fit(target, np.zeros(4))
    cv = target.control_variates(fit.mean)
    every = np.arange(target.n_data)
    rng = np.random.default_rng(1)
    np.testing.assert_allclose(cv.residual_at(fit.mean, every), 0.0, atol=1e-12)
    ratios = []
    for _ in range(5):
        x = fit.mean + fit.chol @ rng.standard_normal(4)
        raw = target.loglik_terms(x, every)
        res = cv.residual_at(x, every)
        # Σ_t ℓ_t = Σ_t h_t + Σ_t (ℓ_t - h_t): the Gibbs conditional is unchanged.
        assert cv.sum_value(x) + res.sum() == pytest.approx(raw.sum(), rel=1e-12)
        ratios.append(res.var() / raw.var())
        x2 = fit.mean + fit.chol @ rng.standard_normal(4)
        raw2 = target.loglik_terms(x2, every)
        # The MH test's terms plus the proxies' exact sum give the full log-likelihood ratio.
        assert (cv.residual_terms(x, x2, every).sum() + cv.sum_diff(x, x2)
                == pytest.approx(raw2.sum() - raw.sum(), abs=1e-8))
    # Residual variance at Laplace draws is at least 3 orders of magnitude below the raw reward
    # variance (the paper's binned control variates reach 2-3 orders, §5.2).
    assert max(ratios) < 1e-3


def test_special_functions_match_scipy():
    nus = np.r_[np.linspace(0.05, 6.0, 40), np.geomspace(6.0, 1e4, 40)]
    np.testing.assert_allclose([kernels.digamma(v) for v in nus], special.digamma(nus),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose([kernels.trigamma(v) for v in nus], special.polygamma(1, nus),
                               rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose([kernels.t_log_norm(v) for v in nus],
                               stats.t(nus).logpdf(0.0), rtol=1e-11, atol=1e-11)


def test_stochastic_gradient_is_unbiased_and_exact_on_all_terms():
    """With every term in the minibatch the variance-reduced gradient is the exact gradient
    of the log posterior; over minibatches its mean is that gradient too."""
    r = _series(n=800)
    y, z = arch_design(r, 2)
    target = ARCHTarget(y, z, 2, prior_shape=1.5, prior_rate=0.7)
    fit = laplace_fit(target, np.zeros(4))
    cv = target.control_variates(fit.mean)
    x = fit.mean + np.array([0.2, -0.3, 0.1, 0.25])
    exact = target.derivative_sums(x)[1] + target.grad_log_prior(x)

    def gradient(idx):
        out = np.empty(4)
        kernels.stochastic_gradient(target.y2, target.z, cv.coef, 0, 3, x, cv.rows(x),
                                    1.5, 0.7, cv.grad_theta, cv.hess_theta,
                                    np.asarray(idx, dtype=np.int64), out)
        return out

    np.testing.assert_allclose(gradient(np.arange(target.n_data)), exact, rtol=1e-9)
    # Minibatches partitioning the terms: their mean is the full-batch estimate, exactly.
    blocks = np.arange(target.n_data).reshape(21, -1)  # 798 = 21 × 38
    np.testing.assert_allclose(np.mean([gradient(b) for b in blocks], axis=0), exact,
                               rtol=1e-9)


def test_sgld_log_q_ratio_is_the_gaussian_density_ratio():
    from ._reference import sgld_proposal

    """For the forward minibatch, log q(θ|θ') - log q(θ'|θ) equals the direct computation."""
    n = 200
    data = np.random.default_rng(0).normal(size=n)

    def grad(theta, idx):
        return np.array([-theta[0] + n * np.mean(data[idx] - theta[0]), -theta[1]])

    proposal = sgld_proposal(grad, n, 20)
    chol = np.array([[0.3, 0.0], [0.1, 0.2]])
    eps = 0.7
    state = MHState(np.array([0.2, -0.5]), 0.0, None)
    new, aux = proposal.propose(np.random.default_rng(3), state, eps, chol)
    idx = aux[0]
    cov = eps**2 * chol @ chol.T

    def log_q(a, b):  # density of a given b
        mean = b + 0.5 * eps**2 * chol @ chol.T @ grad(b, idx)
        return stats.multivariate_normal(mean, cov).logpdf(a)

    expected = log_q(state.theta, new) - log_q(new, state.theta)
    got = proposal.log_q_ratio(state, new, None, aux, eps, chol)
    assert got == pytest.approx(expected, abs=1e-9)


def _gauss_hermite_log_evidence(target, fit, n_nodes=60):
    """Exact (to quadrature error) log evidence of a 2-parameter target around its Laplace fit."""
    nodes, weights = hermgauss(n_nodes)
    zz = np.stack(np.meshgrid(nodes, nodes, indexing="ij"), axis=-1).reshape(-1, 2)
    ww = np.outer(weights, weights).ravel()
    xs = fit.mean + math.sqrt(2.0) * zz @ fit.chol.T
    log_f = target.loglik_sums(xs) + target.log_prior_batch(xs) + (zz**2).sum(axis=1)
    log_det = np.sum(np.log(np.diag(fit.chol)))
    return float(special.logsumexp(log_f, b=ww) + log_det + math.log(2.0))


def test_importance_sampling_evidence_agrees_with_quadrature_and_across_proposals():
    r = _series(n=1500, seed=4)
    y, z = arch_design(r, 2)
    target0 = ARCHTarget(y, z, 0)
    fit0 = laplace_fit(target0, np.zeros(2))
    exact = _gauss_hermite_log_evidence(target0, fit0)
    gauss = importance_log_evidence(target0, fit0.mean, fit0.cov, n_draws=4000, random_state=0)
    assert abs(gauss.log_evidence - exact) < 4 * gauss.standard_error
    for order in (1, 2):
        target = ARCHTarget(y, z, order)
        fit = laplace_fit(target, np.zeros(order + 2))
        g = importance_log_evidence(target, fit.mean, fit.cov, n_draws=4000, random_state=1)
        t = importance_log_evidence(target, fit.mean, fit.cov, n_draws=4000,
                                    proposal="student", scale=1.2, random_state=2)
        assert abs(g.log_evidence - t.log_evidence) < 4 * math.hypot(g.standard_error,
                                                                    t.standard_error)
    # Negative control: a proposal that misses the posterior (shifted by 4 Laplace sds) gives a
    # wrong estimate, which the same agreement check flags.
    shifted = fit0.mean + 4.0 * np.sqrt(np.diag(fit0.cov))
    bad = importance_log_evidence(target0, shifted, fit0.cov, n_draws=4000, random_state=0)
    assert abs(bad.log_evidence - exact) > 4 * bad.standard_error
