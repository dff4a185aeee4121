"""The guard of Racing-Normal's normal approximation and the default ``method="auto"``.

A race whose sample has not met the few factors that carry a state's advantage sees a sample
with no spread and trusts it; the guard holds such eliminations back. Each test compares draws
with the exact draw of the same seed (same Gumbel perturbations): the share of draws that
differ bounds the total variation from the exact distribution from above, and is tested
against δ by a one-sided exact binomial test (alpha = 0.01). The bound without its guard is the
negative control: on the same problem its error must be significantly above δ.
"""

import numpy as np
import pytest
from scipy import stats

from sksubsample.algorithms import race, sample_discrete
from sksubsample.datasets import make_racing_problem
from sksubsample.diagnostics import RacingGuardWarning, check_racing_guard
from tests._stats import assert_binomial_rate_at_most, assert_chisquare_pmf

DELTA = 0.05
N_STATES, N_FACTORS = 10, 20_000
N_DRAWS = 300


def _reversal(n_spikes, seed=0, deficit=2.0):
    """State 0 loses ``deficit`` nats over its ordinary factors and wins it back, with an
    advantage giving it probability 0.2, on ``n_spikes`` factors; every other factor is 0."""
    rng = np.random.default_rng(seed)
    factors = np.zeros((N_STATES, N_FACTORS))
    advantage = np.log(0.2 * (N_STATES - 1) / 0.8)
    spikes = rng.choice(N_FACTORS, size=n_spikes, replace=False)
    factors[0] -= deficit / (N_FACTORS - n_spikes)
    factors[0, spikes] += (advantage + deficit) / n_spikes + deficit / (N_FACTORS - n_spikes)
    return factors


def _student_t(seed=0):
    rng = np.random.default_rng(seed)
    factors = 0.01 * rng.standard_t(2.1, size=(N_STATES, N_FACTORS))
    factors += (np.linspace(0, 1.5, N_STATES) / N_FACTORS)[:, None]
    return factors - factors.mean(axis=1, keepdims=True) + factors.mean()


def _outliers(fraction, seed=0):
    rng = np.random.default_rng(seed)
    factors = 1e-3 * rng.standard_normal((N_STATES, N_FACTORS))
    count = int(fraction * N_FACTORS)
    where = rng.choice(N_FACTORS, size=count, replace=False)
    factors[:, where] += 0.3 * rng.standard_normal((N_STATES, count))
    return factors + (np.linspace(0, 2.0, N_STATES) / N_FACTORS)[:, None]


def _coupled_errors(factors, **options):
    """Draws (of ``N_DRAWS`` seeds) that differ from the exact draw of the same seed."""

    def log_factors(states, idx):
        return factors[np.ix_(states, idx)]

    errors = guarded = 0
    for seed in range(N_DRAWS):
        draw = sample_discrete(log_factors, N_FACTORS, n_states=N_STATES, delta=DELTA,
                               random_state=seed, **options)
        exact = sample_discrete(log_factors, N_FACTORS, n_states=N_STATES, method="exact",
                                random_state=seed)
        errors += draw.sample != exact.sample
        guarded += draw.n_guarded
    return errors, guarded


@pytest.mark.parametrize("options", [{}, {"method": "racing"}], ids=["auto", "racing"])
def test_sparse_spikes_stay_within_delta_with_the_guard(options):
    errors, guarded = _coupled_errors(_reversal(10), **options)
    assert guarded > 0
    assert_binomial_rate_at_most(errors, N_DRAWS, DELTA, label=f"spikes {options}")


def test_negative_control_the_bound_without_its_guard_errs_on_sparse_spikes():
    errors, guarded = _coupled_errors(_reversal(10), method="racing", guard=False)
    assert guarded == 0
    # Significantly above δ: the test above would have failed without the guard.
    assert stats.binom.sf(errors - 1, N_DRAWS, DELTA) < 0.01, errors


@pytest.mark.parametrize("factors", [_student_t(), _outliers(0.01)], ids=["t2.1", "outliers"])
def test_heavy_tails_and_outliers_stay_within_delta(factors):
    errors, _ = _coupled_errors(factors)
    assert_binomial_rate_at_most(errors, N_DRAWS, DELTA, label="heavy tails")


def test_guard_costs_nothing_on_the_papers_normal_problem():
    problem = make_racing_problem(10, 20_000, "normal", 1e-4, random_state=3)
    reads = {}
    for guard in (True, False):
        reads[guard] = sum(
            sample_discrete(problem.factors, problem.n_population, n_states=10,
                            method="racing", guard=guard, random_state=s).n_evaluations
            for s in range(40))
    assert reads[True] <= 1.2 * reads[False], reads


# ----------------------------------------------------------------------------- method="auto"


def test_auto_draws_the_enumerated_pmf_whether_it_races_or_not():
    """Cheap factors and close states: some races stop paying and end exactly."""
    problem = make_racing_problem(6, 500, "normal", 5e-3, random_state=11)
    rng = np.random.default_rng(12)
    draws = [sample_discrete(problem.factors, 500, n_states=6, delta=0.01, random_state=rng)
             for _ in range(3000)]
    raced = np.mean([d.raced for d in draws])
    assert 0.0 < raced < 1.0, raced
    assert_chisquare_pmf([d.sample for d in draws], problem.pmf, label="auto")


def test_auto_race_that_stops_paying_decides_by_the_exact_means():
    rng = np.random.default_rng(5)
    values = rng.standard_normal((4, 4000)) + np.array([[0.0], [0.001], [0.002], [0.003]])

    def rewards(arms, idx):
        return values[np.ix_(arms, idx)]

    result = race(rewards, 4, 4000, method="auto", random_state=0)
    assert result.exact_means is not None
    compared = np.flatnonzero(np.isfinite(result.exact_means))
    np.testing.assert_allclose(result.exact_means[compared], values[compared].mean(axis=1))
    assert result.best == compared[np.argmax(result.exact_means[compared])]
    plain = race(rewards, 4, 4000, method="racing", random_state=0)
    assert plain.exact_means is None


# ----------------------------------------------------------------------------- the warning


def test_check_racing_guard_warns_only_when_the_guard_fires_often():
    assert not check_racing_guard(0, 0)
    assert not check_racing_guard(10, 100)
    with pytest.warns(RacingGuardWarning, match="60 of 100 races"):
        assert check_racing_guard(60, 100)
