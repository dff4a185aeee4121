"""Acceptance tests: Barker acceptance probability, fallback, exact counts, bad input.

Tolerances: the issue's 0.01 band on the acceptance probability is split between the
correction's own CDF error (``BarkerCorrection.cdf_error``, Cor. 2) and sampling error; the
number of trials per Δ makes the remaining band at least 4 binomial standard errors (false-alarm
probability < 1e-4 per Δ), with at least 20 000 trials.
"""

import math

import numpy as np
import pytest
from scipy import special, stats

from sksubsample.algorithms.mh import (
    adaptive_subsampling,
    austerity,
    barker,
    get_acceptance_test,
    metropolis,
    minibatch_barker,
    racing,
)

from .._stats import assert_binomial_rate_at_most

N_POP = 10_000
BATCH = 100


def _population(delta, n, batch, s2, rng, skewed=False):
    """Terms whose sum is exactly ``delta`` and whose minibatch estimate has variance ~ s2."""
    z = rng.gamma(2.0, size=n) if skewed else rng.normal(size=n)
    z = (z - z.mean()) / z.std(ddof=1)
    # s²_Δ* = N² (1 - b/N) var(l) / b  ->  sd(l) = sqrt(s2 b / (1 - b/N)) / N
    terms = z * math.sqrt(s2 * batch / (1.0 - batch / n)) / n
    return terms - terms.mean() + delta / n


def _n_trials(p, band):
    return max(20_000, math.ceil((4.0 * math.sqrt(p * (1 - p)) / band) ** 2))


@pytest.mark.parametrize("delta", [-3.0, -1.0, 0.0, 0.5, 2.0])
def test_minibatch_barker_matches_logistic(delta):
    rng = np.random.default_rng(20170 + int(10 * delta))
    test = minibatch_barker(sigma=1.0, batch_size=BATCH)
    band = 0.01 - test.correction.cdf_error
    # split Δ between the data part and the rest to check both enter the estimate
    terms = _population(delta - 0.25, N_POP, BATCH, s2=0.5, rng=rng)
    p = special.expit(delta)
    n = _n_trials(p, band)
    accepted = 0
    for _ in range(n):
        info = test(lambda idx: terms[idx], N_POP, 0.25, rng)
        assert info.n_evaluations == BATCH and not info.exact
        accepted += info.accepted
    assert abs(accepted / n - p) <= band, (accepted / n, p, n)


def test_minibatch_barker_skewed_population():
    rng = np.random.default_rng(7)
    test = minibatch_barker(sigma=1.0, batch_size=400)
    terms = _population(0.5, N_POP, 400, s2=0.6, rng=rng, skewed=True)
    p = special.expit(0.5)
    band = 0.01 - test.correction.cdf_error
    n = _n_trials(p, band)
    accepted = sum(test(lambda idx: terms[idx], N_POP, 0.0, rng).accepted for _ in range(n))
    assert abs(accepted / n - p) <= band


def test_minibatch_barker_grows_then_falls_back_to_exact():
    rng = np.random.default_rng(11)
    n_data, delta = 500, 0.7
    # s² at b = 400 of 500 is still ~ 4 > σ², so every call must use all the data
    terms = _population(delta, n_data, 400, s2=4.0, rng=rng)
    test = minibatch_barker(sigma=1.0, batch_size=100)
    n = 10_000
    accepted = 0
    for _ in range(n):
        info = test(lambda idx: terms[idx], n_data, 0.0, rng)
        assert info.exact and info.n_evaluations == n_data and info.batch_size == n_data
        assert info.n_rounds == 5
        assert info.log_ratio == pytest.approx(delta, abs=1e-9)
        accepted += info.accepted
    p = special.expit(delta)
    # exact Barker: a two-sided binomial test at alpha = 1e-3
    assert stats.binomtest(accepted, n, p).pvalue > 1e-3


def test_minibatch_barker_intermediate_growth():
    rng = np.random.default_rng(12)
    terms = _population(0.0, N_POP, 300, s2=0.9, rng=rng)  # s² < 1 from b ≈ 300 on
    test = minibatch_barker(sigma=1.0, batch_size=100)
    sizes = [test(lambda idx: terms[idx], N_POP, 0.0, rng).n_evaluations for _ in range(300)]
    assert set(sizes) <= {200, 300, 400, 500} and min(sizes) >= 200
    assert np.median(sizes) <= 400


def test_novak_condition_forces_large_batches():
    rng = np.random.default_rng(13)
    terms = _population(0.0, 100_000, 100, s2=0.1, rng=rng)
    test = minibatch_barker(sigma=1.0, batch_size=1000, delta=0.2)
    info = test(lambda idx: terms[idx], 100_000, 0.0, rng)
    # ε >= 6.4 / sqrt(b) <= 0.2 needs b >= 1024, and normal terms give ε ≈ (6.4·1.6+1.6)/sqrt(b)
    assert info.n_evaluations >= (6.4 / 0.2) ** 2
    assert info.n_evaluations % 1000 == 0


def test_naive_barker_without_correction_is_wrong():
    """Negative control: using Δ* (variance s²) directly in Barker's test is detectably wrong."""
    rng = np.random.default_rng(14)
    terms = _population(2.0, N_POP, BATCH, s2=4.0, rng=rng)
    n = 20_000
    accepted = 0
    for _ in range(n):
        idx = rng.choice(N_POP, BATCH, replace=False)
        delta_star = N_POP * terms[idx].mean()
        accepted += np.log(rng.random()) < special.log_expit(delta_star)
    assert abs(accepted / n - special.expit(2.0)) > 0.03


class _Counter:
    def __init__(self, terms):
        self.terms = terms
        self.count = 0
        self.seen = []

    def __call__(self, idx):
        idx = np.asarray(idx)
        self.count += idx.size
        self.seen.append(idx)
        return self.terms[idx]


ALL_TESTS = {
    "metropolis": lambda: metropolis(),
    "barker": lambda: barker(),
    "minibatch_barker": lambda: minibatch_barker(batch_size=50),
    "austerity": lambda: austerity(epsilon=0.01, batch_size=50),
    "adaptive_subsampling": lambda: adaptive_subsampling(batch_size=50),
    "racing-normal": lambda: racing(bound="normal", first_batch=50),
    "racing-ebs": lambda: racing(bound="ebs", first_batch=50),
}


@pytest.mark.parametrize("name", sorted(ALL_TESTS))
@pytest.mark.parametrize("use_bound", [False, True])
def test_evaluation_counts_are_exact(name, use_bound):
    rng = np.random.default_rng(15)
    n_data = 5000
    terms = rng.normal(1e-4, 3e-4, n_data)
    test = ALL_TESTS[name]()
    for rest in (-0.3, 0.0, 0.4):
        counter = _Counter(terms)
        bound = float(np.abs(terms).max()) if use_bound else None
        info = test(counter, n_data, rest, rng, term_bound=bound)
        assert info.n_evaluations == counter.count
        seen = np.concatenate(counter.seen)
        if counter.count <= n_data:
            assert np.unique(seen).size == seen.size  # without replacement
        assert 0 < info.batch_size <= n_data
        if name in ("metropolis", "barker"):
            assert info.n_evaluations == n_data and info.exact
        if name in ("adaptive_subsampling", "racing-ebs") and not use_bound:
            # the range bound was paid for with all N terms, and counted
            assert info.n_evaluations == n_data
        if info.exact:
            assert info.log_ratio == pytest.approx(terms.sum() + rest)


@pytest.mark.parametrize("name", sorted(ALL_TESTS))
def test_subsampled_tests_save_work_on_easy_decisions(name):
    rng = np.random.default_rng(16)
    n_data = 100_000
    terms = rng.normal(1e-4, 1e-6, n_data)  # Δ ≈ 10, tiny spread: an easy accept
    counter = _Counter(terms)
    info = ALL_TESTS[name]()(counter, n_data, 0.0, rng, term_bound=float(terms.max()))
    assert info.accepted
    if name in ("metropolis", "barker"):
        assert counter.count == n_data
    else:
        assert counter.count <= 200


@pytest.mark.parametrize("name", sorted(ALL_TESTS))
def test_nan_rest_rejects_without_data(name):
    counter = _Counter(np.zeros(100))
    for rest in (math.nan, -math.inf):
        info = ALL_TESTS[name]()(counter, 100, rest, 0)
        assert not info.accepted and info.n_evaluations == 0
    assert counter.count == 0


@pytest.mark.parametrize("name", sorted(ALL_TESTS))
def test_non_finite_terms(name):
    test = ALL_TESTS[name]()
    for bad in (math.nan, math.inf):
        terms = np.zeros(100)
        terms[:] = bad
        with pytest.raises(ValueError, match="log_ratio_terms"):
            test(lambda idx, t=terms: t[idx], 100, 0.0, 0, term_bound=1.0)
    terms = np.full(100, -math.inf)  # the proposal has zero likelihood: reject
    info = test(lambda idx: terms[idx], 100, 50.0, 0, term_bound=1.0)
    assert not info.accepted
    with pytest.raises(ValueError, match="log_ratio_rest"):
        test(lambda idx: np.zeros(len(idx)), 100, math.inf, 0)


def test_bad_options():
    for sigma in (0.0, -1.0, 1.8, 2.5):
        with pytest.raises(ValueError, match="sigma"):
            minibatch_barker(sigma=sigma)
    for bs in (1, 0):
        with pytest.raises(ValueError, match="batch_size"):
            minibatch_barker(batch_size=bs)
        with pytest.raises(ValueError, match="batch_size"):
            austerity(batch_size=bs)
        with pytest.raises(ValueError, match="batch_size"):
            adaptive_subsampling(batch_size=bs)
    for delta in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="delta"):
            minibatch_barker(delta=delta)
        with pytest.raises(ValueError, match="delta"):
            adaptive_subsampling(delta=delta)
        with pytest.raises(ValueError, match="delta"):
            racing(delta=delta)
    with pytest.raises(ValueError, match="epsilon"):
        austerity(epsilon=0.0)
    with pytest.raises(ValueError, match="gamma"):
        adaptive_subsampling(gamma=1.0)
    with pytest.raises(ValueError, match="bound"):
        racing(bound="hoeffding")
    with pytest.raises(ValueError, match="batch_size"):  # batch larger than the data
        minibatch_barker(batch_size=200)(lambda idx: np.zeros(len(idx)), 100, 0.0, 0)
    with pytest.raises(ValueError, match="test"):
        get_acceptance_test("gibbs")
    with pytest.raises(ValueError, match="epsilon"):
        get_acceptance_test("metropolis", epsilon=0.1)
    with pytest.raises(TypeError, match="log_ratio_terms"):
        metropolis()(np.zeros(3), 3, 0.0, 0)
    with pytest.raises(ValueError, match="shape"):
        metropolis()(lambda idx: np.zeros(2), 3, 0.0, 0)


def test_exact_tests_have_the_right_probabilities():
    rng = np.random.default_rng(17)
    terms = np.full(10, -0.1)  # Δ = -1 + rest
    n = 20_000
    for test, prob in ((metropolis(), math.exp(-1.0)), (barker(), special.expit(-1.0))):
        acc = sum(test(lambda idx: terms[idx], 10, 0.0, rng).accepted for _ in range(n))
        assert stats.binomtest(acc, n, prob).pvalue > 1e-3
    # |Δ| > 700 neither overflows nor decides wrongly
    big = np.full(10, 80.0)
    assert barker()(lambda idx: big[idx], 10, 0.0, 0).accepted
    assert not barker()(lambda idx: -big[idx], 10, 0.0, 0).accepted


@pytest.mark.parametrize("name", ["austerity", "adaptive_subsampling", "racing-normal"])
def test_decision_error_is_small_on_hard_decisions(name):
    """The published tests agree with exact Metropolis except with small probability."""
    rng = np.random.default_rng(18)
    n_data = 5_000
    terms = rng.normal(-8e-5, 8e-4, n_data)
    terms += (-0.4 - terms.sum()) / n_data  # Δ = -0.4
    test = ALL_TESTS[name]()
    n = 600
    errors = 0
    for _ in range(n):
        seed = int(rng.integers(2**32))
        # the same uniform draw for both: each test draws log u first from its generator
        info = test(lambda idx: terms[idx], n_data, 0.0, np.random.default_rng(seed))
        log_u = -np.random.default_rng(seed).standard_exponential()
        errors += info.accepted != (log_u < -0.4)
    assert_binomial_rate_at_most(errors, n, 0.05, alpha=1e-3, label=name)
