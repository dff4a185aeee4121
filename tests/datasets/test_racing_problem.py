import numpy as np
import pytest
from scipy import special

from sksubsample.datasets import make_racing_problem


@pytest.mark.parametrize("distribution", ["normal", "uniform", "lognormal"])
def test_problem_has_the_requested_pmf_and_noise(distribution):
    problem = make_racing_problem(7, 3000, distribution, 2e-3, random_state=0)
    assert problem.log_factors.shape == (7, 3000)
    np.testing.assert_allclose(special.softmax(problem.log_factors.sum(axis=1)), problem.pmf,
                               rtol=1e-9)
    np.testing.assert_allclose(problem.log_factors.std(axis=1), 2e-3, rtol=1e-9)
    np.testing.assert_allclose(problem.reward_range, np.ptp(problem.log_factors, axis=1))
    assert problem.factors([1, 3], [0, 5, 9]).shape == (2, 3)


def test_lognormal_rewards_are_heavy_tailed():
    problem = make_racing_problem(3, 20_000, "lognormal", 1.0, random_state=1)
    z = problem.log_factors[0] - problem.log_factors[0].mean()
    excess_kurtosis = np.mean(z**4) / np.mean(z**2) ** 2 - 3
    assert excess_kurtosis > 100


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"distribution": "cauchy"}, "distribution"), ({"noise": 0.0}, "noise"),
     ({"n_arms": 0}, "n_arms"), ({"pmf": [0.5, 0.5]}, "pmf")],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_racing_problem(**{"n_arms": 3, "n_population": 100, **kwargs})
