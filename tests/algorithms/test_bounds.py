import math

import numpy as np
import pytest
from scipy import stats

from sksubsample.algorithms import b_ebs, b_normal, b_normal_union, doubling_schedule, g_normal
from sksubsample.algorithms.bandits._bounds import normal_crossing_probability
from tests._stats import assert_binomial_rate_at_most, binomial_upper_bound

# App. B, Table 1 of Chen & Ghahramani (2016): B_Normal(delta, pi_T(1)).
COLUMNS = [5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2]
TABLE_1 = {
    1e-6: [5.27250, 5.25978, 5.21523, 5.19704, 5.15638, 5.12982],
    9e-6: [4.85078, 4.83613, 4.78840, 4.76941, 4.72447, 4.69877],
    5e-5: [4.49660, 4.48108, 4.42961, 4.40734, 4.36137, 4.33158],
    3e-4: [4.09380, 4.07655, 4.02027, 3.99632, 3.94601, 3.91438],
    1e-3: [3.79932, 3.78066, 3.72003, 3.69596, 3.64066, 3.60812],
    7e-3: [3.26922, 3.24913, 3.17763, 3.14844, 3.08769, 3.04691],
    3e-2: [2.80261, 2.77885, 2.69625, 2.66350, 2.59450, 2.55058],
    5e-2: [2.61646, 2.59217, 2.50369, 2.46819, 2.39672, 2.34862],
    9e-2: [2.37768, 2.35127, 2.25533, 2.22026, 2.14145, 2.09317],
    1e-1: [2.33161, 2.30704, 2.20851, 2.17274, 2.09292, 2.04351],
}


@pytest.mark.parametrize("delta", sorted(TABLE_1))
def test_b_normal_agrees_with_table_1(delta):
    got = np.array([b_normal(delta, c) for c in COLUMNS])
    np.testing.assert_allclose(got, TABLE_1[delta], atol=0.01)


def test_b_normal_solves_its_defining_equation():
    b = b_normal(0.02, 1e-3)
    assert normal_crossing_probability(b, 1e-3) == pytest.approx(0.02, rel=1e-5)


def test_b_normal_crossing_probability_matches_simulated_walk():
    # Simulate the standardised running means of an actual Gaussian population sampled
    # without replacement on the doubling schedule: the first-passage probability at
    # B_Normal(delta) must be delta up to binomial error (two-sided, alpha = 1e-3 overall).
    rng = np.random.default_rng(12345)
    n_pop, first, delta = 4096, 32, 0.1
    b = b_normal(delta, first / n_pop)
    sched = doubling_schedule(first, n_pop)[:-1]
    n_sim = 20_000
    crossed = 0
    population = rng.standard_normal(n_pop)
    population = (population - population.mean()) / population.std()
    for _ in range(n_sim // 1000):
        perm = np.argsort(rng.random((1000, n_pop)), axis=1)[:, : sched[-1]]
        values = population[perm]
        cums = np.cumsum(values, axis=1)[:, sched - 1] / sched
        sd = np.sqrt((n_pop - sched) / (sched * (n_pop - 1)))
        crossed += int(np.sum(np.any(cums / sd > b, axis=1)))
    lo = stats.binom.ppf(0.0005, n_sim, delta)
    hi = stats.binom.isf(0.0005, n_sim, delta)
    assert lo <= crossed <= hi, (crossed / n_sim, delta)


def test_b_normal_is_between_single_round_quantile_and_union_bound():
    for delta in (1e-4, 0.01, 0.1):
        b = b_normal(delta, 1e-3)
        n_rounds = doubling_schedule(50, 50_000).size
        assert stats.norm.isf(delta) < b < b_normal_union(delta, n_rounds)


def test_b_normal_rejects_bad_input():
    with pytest.raises(ValueError, match="delta"):
        b_normal(0.0, 1e-3)
    with pytest.raises(ValueError, match="delta"):
        b_normal(1.5, 1e-3)
    with pytest.raises(ValueError, match="first_fraction"):
        b_normal(0.05, 0.0)
    assert b_normal(0.05, 1.0) == 0.0


def test_doubling_schedule_ends_at_population():
    sched = doubling_schedule(50, 100_000)
    assert sched[-1] == 100_000
    assert sched.size == math.ceil(math.log2(100_000 / 50)) + 1
    assert np.all(sched[1:-1] == 2 * sched[:-2])


def test_g_normal_vanishes_at_full_population():
    assert g_normal(1000, 1000, 2.0, 3.0) == 0.0
    expected = 2.0 / math.sqrt(10) * math.sqrt(1 - 9 / 999) * 3
    assert g_normal(10, 1000, 2.0, 3.0) == pytest.approx(expected)


def test_ebs_bound_holds_on_a_skewed_population():
    # Eq. 6 is a finite-sample bound: P(mean_n - mu > B_EBS) <= delta for any bounded population.
    rng = np.random.default_rng(7)
    n_pop, n, delta = 2000, 300, 0.05
    population = rng.exponential(size=n_pop)
    mu, c = population.mean(), np.ptp(population)
    n_sim = 4000
    draws = np.argsort(rng.random((n_sim, n_pop)), axis=1)[:, :n]
    values = population[draws]
    means, sds = values.mean(axis=1), values.std(axis=1)
    exceed = np.sum(means - mu > b_ebs(delta, n, n_pop, sds, c))
    assert_binomial_rate_at_most(int(exceed), n_sim, delta, label="EBS")


def test_ebs_rho_shrinks_bound_near_population():
    early = b_ebs(0.05, 100, 1000, 1.0, 0.0)
    late = b_ebs(0.05, 990, 1000, 1.0, 0.0)
    assert late < early * math.sqrt(100 / 990) * 0.2


def test_binomial_upper_bound_helper():
    assert binomial_upper_bound(0, 100) == pytest.approx(1 - 0.05 ** (1 / 100))


def test_b_normal_union_is_the_scipy_normal_quantile_bit_for_bit():
    # Eq. 27: Phi^-1(1 - delta / (t* - 1)), cached; the same float as scipy.stats.norm.isf.
    for delta in (0.5, 0.05, 1e-3, 1e-12):
        for n_rounds in (2, 3, 7, 40):
            b = b_normal_union(delta, n_rounds)
            assert b == float(stats.norm.isf(delta / (n_rounds - 1)))
            assert b_normal_union(delta, n_rounds) == b  # answered by the cache
    assert b_normal_union(0.05, 1) == 0.0
    with pytest.raises(ValueError, match="delta"):
        b_normal_union(1.5, 3)
    with pytest.raises((ValueError, TypeError), match="n_rounds"):
        b_normal_union(0.05, 0)
