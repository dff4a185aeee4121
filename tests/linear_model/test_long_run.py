"""Long stationary runs of the default sampler on skewed, heavy-tailed data.

A per-step bias of a subsampled test accumulates along a chain; a test that starts from exact
draws and runs a few dozen steps cannot see it. Here the estimator's default (bounded Barker
test, control variates, Hamiltonian proposal) runs 4 chains × 25 000 draws on data with
heavy-tailed, correlated features and flipped labels (skewed control-variate residuals), while
subsampling, and its posterior mean and sd are compared with a quadrature reference within 4
Monte Carlo errors (ESS-based). The negative control is the same run on a posterior tempered by
10 % (sd 4.9 % too wide): it must fail the same comparison. With about 22 000 effective draws
of the squared deviations, the Monte Carlo error of an sd is about 0.48 % of it, so a 4.9 %
excess is about 10 errors and the control misses it (stays under 4) with probability below
1e-9. (A 5 % tempering is only about 5 errors: it would be missed about once in eight runs,
too weak a control.)
"""

import warnings

import numpy as np
from scipy import special

from sksubsample import BayesianLogisticRegressionMH
from sksubsample.diagnostics import ConvergenceWarning
from tests.linear_model.test_logistic import _moment_failures, _quadrature_moments


def _heavy_tailed_problem(n=20_000, seed=21):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 2)) @ np.array([[1.0, 0.0], [0.7, 0.7]])
    x = z / np.sqrt(rng.chisquare(3, size=n) / 3)[:, None]  # Student-t rows: whole rows outlie
    y = (rng.random(n) < special.expit(x @ np.array([0.8, -0.4]))).astype(int)
    flip = rng.random(n) < 0.01
    y[flip] = 1 - y[flip]
    return x, y


def _long_fit(x, y, **kw):
    clf = BayesianLogisticRegressionMH(fit_intercept=False, n_draws=25_000, n_warmup=1000,
                                       n_chains=4, random_state=8, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return clf.fit(x, y)


def test_default_is_stationary_on_a_long_run_and_a_small_distortion_is_seen():
    x, y = _heavy_tailed_problem()
    mean, sd = _quadrature_moments(x, y)
    clf = _long_fit(x, y)
    assert clf.fraction_data_touched_ < 0.05  # the test subsampled: this is not exact MH
    assert clf.ess_.min() > 10_000
    failures = _moment_failures(clf.coef_samples_, mean, sd)
    assert not failures, failures
    # Negative control: 10 % of tempering (sd × 1.049) must be told apart from the posterior.
    tempered = _long_fit(x, y, temperature=1.10)
    assert _moment_failures(tempered.coef_samples_, mean, sd)
