"""Taylor control variates: exact sums against brute force, residual shrinkage."""

import numpy as np
import pytest

from sksubsample.algorithms.mh import TaylorProxy


class Logistic:
    """Logistic regression log-likelihood terms with analytic derivatives."""

    def __init__(self, n=3000, d=3, seed=0, fast=False):
        rng = np.random.default_rng(seed)
        self.X = rng.normal(size=(n, d))
        self.y = (rng.random(n) < 0.5).astype(float)
        self.n_data = n
        if fast:
            self.taylor_diff_terms = self._taylor_diff_terms

    def loglik_terms(self, th, idx):
        z = self.X[idx] @ th
        return self.y[idx] * z - np.logaddexp(0.0, z)

    def grad_terms(self, th, idx):
        p = 1.0 / (1.0 + np.exp(-(self.X[idx] @ th)))
        return (self.y[idx] - p)[:, None] * self.X[idx]

    def hess_terms(self, th, idx):
        p = 1.0 / (1.0 + np.exp(-(self.X[idx] @ th)))
        w = p * (1 - p)
        return -w[:, None, None] * self.X[idx][:, :, None] * self.X[idx][:, None, :]

    def _taylor_diff_terms(self, ref, idx, a, a_new):
        xi = self.X[idx]
        p = 1.0 / (1.0 + np.exp(-(xi @ ref)))
        return (self.y[idx] - p) * (xi @ (a_new - a)) - 0.5 * p * (1 - p) * (
            (xi @ a_new) ** 2 - (xi @ a) ** 2)


def _brute_proxy(target, ref, theta, idx):
    a = theta - ref
    g = target.grad_terms(ref, idx)
    h = target.hess_terms(ref, idx)
    return target.loglik_terms(ref, idx) + g @ a + 0.5 * np.einsum("nij,i,j->n", h, a, a)


@pytest.mark.parametrize("fast", [False, True])
def test_sums_are_exact(fast):
    target = Logistic(fast=fast)
    ref = np.array([0.2, -0.1, 0.05])
    proxy = TaylorProxy(target, ref, chunk_size=700)  # several chunks
    everything = np.arange(target.n_data)
    rng = np.random.default_rng(1)
    for _ in range(5):
        theta, theta_new = ref + rng.normal(0, 0.3, 3), ref + rng.normal(0, 0.3, 3)
        brute = _brute_proxy(target, ref, theta, everything)
        brute_new = _brute_proxy(target, ref, theta_new, everything)
        assert proxy.sum_value(theta) == pytest.approx(brute.sum(), rel=1e-10, abs=1e-8)
        assert proxy.sum_diff(theta, theta_new) == pytest.approx(
            (brute_new - brute).sum(), rel=1e-10, abs=1e-8)
        idx = rng.choice(target.n_data, 50, replace=False)
        np.testing.assert_allclose(proxy.diff_terms(theta, theta_new, idx),
                                   brute_new[idx] - brute[idx], rtol=1e-10, atol=1e-12)
        # residuals + proxy differences recover the exact log-likelihood ratio
        exact = (target.loglik_terms(theta_new, everything)
                 - target.loglik_terms(theta, everything)).sum()
        total = proxy.residual_terms(theta, theta_new, everything).sum() + proxy.sum_diff(
            theta, theta_new)
        assert total == pytest.approx(exact, rel=1e-10, abs=1e-8)
    # gradient of the summed proxy, checked by central differences
    theta = ref + 0.1
    eps = 1e-6
    num = [(proxy.sum_value(theta + eps * e) - proxy.sum_value(theta - eps * e)) / (2 * eps)
           for e in np.eye(3)]
    np.testing.assert_allclose(proxy.grad(theta), num, rtol=1e-6, atol=1e-5)


def test_residuals_are_much_smaller_than_raw_terms():
    target = Logistic(n=5000)
    ref = np.zeros(3)
    proxy = TaylorProxy(target, ref)
    idx = np.arange(target.n_data)
    theta, theta_new = ref + 0.02, ref - 0.01
    raw = target.loglik_terms(theta_new, idx) - target.loglik_terms(theta, idx)
    resid = proxy.residual_terms(theta, theta_new, idx)
    # the residual is a third-order remainder: ~ |θ - θ̂|² smaller than the first-order terms
    assert resid.std() < 1e-2 * raw.std()


def test_bad_targets():
    with pytest.raises(TypeError, match="grad_terms"):
        TaylorProxy(object(), [0.0])
    with pytest.raises(ValueError, match="reference"):
        TaylorProxy(Logistic(), [np.nan, 0.0, 0.0])
