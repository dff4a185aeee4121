"""Shared statistical assertions for the test suite.

Every assertion has a stated false-alarm probability ``alpha`` under the null hypothesis that
the code is right, so a failure is evidence, not noise, and a wrong sampler fails with a power
that the individual tests argue for (each test also runs a negative control).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = [
    "assert_binomial_rate_at_most",
    "assert_chisquare_pmf",
    "assert_ks_cdf",
    "assert_mean_within",
    "binomial_upper_bound",
]


def binomial_upper_bound(n_events: int, n_trials: int, confidence: float = 0.95) -> float:
    """One-sided Clopper–Pearson upper confidence bound on a binomial rate."""
    if n_events >= n_trials:
        return 1.0
    return float(stats.beta.ppf(confidence, n_events + 1, n_trials - n_events))


def assert_binomial_rate_at_most(n_events, n_trials, rate, *, alpha=0.01, label=""):
    """Fail when ``n_events / n_trials`` is significantly above ``rate``.

    One-sided exact binomial test: the assertion fails iff the Clopper–Pearson lower bound at
    confidence ``1 - alpha`` exceeds ``rate`` (equivalently, P(Bin(n, rate) >= k) < alpha).
    """
    p_value = stats.binom.sf(n_events - 1, n_trials, rate)
    assert p_value >= alpha, (
        f"{label} error rate {n_events}/{n_trials} = {n_events / n_trials:.4g} is above "
        f"{rate:.4g} (one-sided binomial p = {p_value:.3g} < {alpha})"
    )


def assert_chisquare_pmf(samples, pmf, *, alpha=0.01, min_expected=5.0, label=""):
    """Pearson chi-square goodness of fit of integer ``samples`` against ``pmf``.

    Cells whose expected count is below ``min_expected`` are pooled into one so that the
    chi-square approximation holds.
    """
    samples = np.asarray(samples)
    pmf = np.asarray(pmf, dtype=float)
    pmf = pmf / pmf.sum()
    n = samples.size
    observed = np.bincount(samples, minlength=pmf.size).astype(float)
    assert observed.size == pmf.size, f"{label} samples outside the support of the pmf"
    expected = n * pmf
    big = expected >= min_expected
    if not big.all():
        observed = np.append(observed[big], observed[~big].sum())
        expected = np.append(expected[big], expected[~big].sum())
        if expected[-1] == 0:
            assert observed[-1] == 0, f"{label} samples fall on zero-probability states"
            observed, expected = observed[:-1], expected[:-1]
    statistic, p_value = stats.chisquare(observed, expected)
    assert p_value >= alpha, (
        f"{label} chi-square goodness of fit rejected: statistic {statistic:.2f} on "
        f"{observed.size - 1} dof, p = {p_value:.3g} < {alpha}"
    )
    return p_value


def assert_ks_cdf(samples, cdf, *, alpha=0.01, label=""):
    """One-sample Kolmogorov–Smirnov test of ``samples`` against the callable ``cdf``."""
    result = stats.kstest(np.asarray(samples, float).ravel(), cdf)
    assert result.pvalue >= alpha, (
        f"{label} KS test rejected: D = {result.statistic:.4f}, p = {result.pvalue:.3g} < {alpha}"
    )
    return result.pvalue


def assert_mean_within(samples, expected_mean, *, n_sigma=4.0, sd=None, ess=None, label=""):
    """Assert that the sample mean is within ``n_sigma`` Monte-Carlo standard errors.

    ``sd`` defaults to the sample standard deviation and ``ess`` to the number of samples
    (pass the effective sample size for correlated draws).
    """
    samples = np.asarray(samples, float)
    sd = samples.std(ddof=1) if sd is None else sd
    ess = samples.size if ess is None else ess
    se = sd / np.sqrt(ess)
    diff = samples.mean() - expected_mean
    assert abs(diff) <= n_sigma * se, (
        f"{label} mean {samples.mean():.5g} differs from {expected_mean:.5g} by "
        f"{abs(diff) / se:.2f} standard errors (> {n_sigma})"
    )


def meets_auto_criteria(draws):
    """Whether draws of shape (n_chains, n_draws, n_params) meet ``n_draws="auto"``'s
    criteria: every bulk and tail ESS at least 400, every split R-hat at most 1.01."""
    from sksubsample.diagnostics import effective_sample_size, split_rhat

    return bool((effective_sample_size(draws, method="bulk") >= 400).all()
                and (effective_sample_size(draws, method="tail") >= 400).all()
                and (split_rhat(draws) <= 1.01).all())
