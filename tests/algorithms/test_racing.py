"""Statistical tests of racing, adapted lil'UCB and the Gumbel-max reduction.

The guarantee under test is Prop. 3 / Prop. 1 of Chen & Ghahramani (2016): a race returns a
sub-optimal arm with probability at most delta. Each error-rate assertion is a one-sided
exact binomial test at alpha = 0.01 against delta; a deliberately wrong bound must fail it.
"""

from itertools import pairwise

import numpy as np
import pytest

import sksubsample.algorithms.bandits._state as racing_module
from sksubsample.algorithms import lil_ucb, race, sample_discrete
from sksubsample.datasets import make_racing_problem
from tests._stats import assert_binomial_rate_at_most, assert_chisquare_pmf

DELTA = 0.05


def _error_count(problem, n_trials, seed, **kwargs):
    """Races on Gumbel-perturbed problems vs the exact argmax for the same perturbation."""
    errors = 0
    evaluations = 0
    rng = np.random.default_rng(seed)
    exact_sums = problem.log_factors.sum(axis=1)
    for _ in range(n_trials):
        offsets = -np.log(rng.standard_exponential(problem.n_arms))
        shift = offsets / problem.n_population

        def rewards(arms, idx, shift=shift):
            return problem.log_factors[np.ix_(arms, idx)] + shift[arms, None]

        result = race(rewards, problem.n_arms, problem.n_population, random_state=rng, **kwargs)
        errors += int(result.best != np.argmax(exact_sums + offsets))
        evaluations += result.n_evaluations
    return errors, evaluations / (n_trials * problem.log_factors.size)


# Noise levels where the race stops early but not trivially (mean gaps ~ 1/N vs sigma).
@pytest.mark.parametrize("distribution", ["normal", "uniform", "lognormal"])
@pytest.mark.parametrize("n_arms", [2, 10, 100])
def test_racing_normal_error_at_most_delta(distribution, n_arms):
    n_pop = 4000 if n_arms < 100 else 2000
    problem = make_racing_problem(n_arms, n_pop, distribution, 3.0 / n_pop, random_state=n_arms)
    n_trials = 300 if n_arms < 100 else 120
    errors, fraction = _error_count(problem, n_trials, seed=1, delta=DELTA)
    assert_binomial_rate_at_most(errors, n_trials, DELTA, label=f"Racing-Normal {distribution}")
    assert fraction < 1.0


@pytest.mark.parametrize("distribution", ["normal", "uniform", "lognormal"])
@pytest.mark.parametrize("n_arms", [2, 10, 100])
def test_racing_ebs_error_at_most_delta(distribution, n_arms):
    n_pop = 4000 if n_arms < 100 else 2000
    problem = make_racing_problem(n_arms, n_pop, distribution, 0.3 / n_pop, random_state=n_arms)
    n_trials = 200 if n_arms < 100 else 80
    ranges = problem.reward_range
    errors, _ = _error_count(problem, n_trials, seed=2, delta=DELTA, bound="ebs",
                             first_batch=2, reward_range=ranges)
    assert_binomial_rate_at_most(errors, n_trials, DELTA, label=f"Racing-EBS {distribution}")


def test_racing_marginal_variance_error_at_most_delta():
    problem = make_racing_problem(10, 4000, "normal", 3.0 / 4000, random_state=3)
    errors, _ = _error_count(problem, 300, seed=3, delta=DELTA, variance="marginal")
    assert_binomial_rate_at_most(errors, 300, DELTA, label="Racing-Normal marginal")


def test_negative_control_wrong_bound_is_detected(monkeypatch):
    # B = 0.1 instead of B_Normal ~ 2.5: the race eliminates the best arm far too often.
    monkeypatch.setattr(racing_module, "b_normal", lambda delta, fraction: 0.1)
    problem = make_racing_problem(10, 4000, "normal", 3.0 / 4000, random_state=10)
    errors, _ = _error_count(problem, 300, seed=1, delta=DELTA)
    with pytest.raises(AssertionError, match="error rate"):
        assert_binomial_rate_at_most(errors, 300, DELTA)


def test_exact_path_returns_true_argmax():
    problem = make_racing_problem(10, 1000, "lognormal", 1e-2, random_state=4)
    means = problem.log_factors.mean(axis=1)

    def rewards(arms, idx):
        return problem.log_factors[np.ix_(arms, idx)]

    for seed in range(20):
        full = race(rewards, 10, 1000, first_batch=1000, random_state=seed)
        assert full.best == np.argmax(means) and full.n_rounds == 1
        tiny = race(rewards, 10, 1000, delta=1e-12, random_state=seed)
        assert tiny.best == np.argmax(means)


def test_n_evaluations_is_exact_and_bounded():
    problem = make_racing_problem(7, 3000, "uniform", 1e-3, random_state=5)
    calls = []

    def rewards(arms, idx):
        calls.append(len(arms) * len(idx))
        return problem.log_factors[np.ix_(arms, idx)]

    for variance in ("pairwise", "marginal"):
        calls.clear()
        result = race(rewards, 7, 3000, variance=variance, random_state=0)
        assert result.n_evaluations == sum(calls) <= 7 * 3000
        assert result.n_sampled.max() <= 3000
        assert list(result.survivors[-1]) == [result.best]
        # survivors only shrink
        sizes = [s.size for s in result.survivors]
        assert sizes == sorted(sizes, reverse=True)


def test_indices_are_drawn_without_replacement():
    seen = []

    def rewards(arms, idx):
        seen.append(np.asarray(idx))
        return np.zeros((len(arms), len(idx))) + np.arange(len(arms))[:, None] * 0

    # identical arms never separate, so the race runs to T = N: 7, 14, ..., 448 by doubling,
    # then the remainder (a batch of 448 would be more than half of the 552 left) in one pass
    result = race(rewards, 3, 1000, first_batch=7, random_state=0)
    idx = np.concatenate(seen)
    assert [len(i) for i in seen] == [7, 7, 14, 28, 56, 112, 224, 552]
    assert result.n_rounds == 8
    assert np.array_equal(np.sort(idx), np.arange(1000))
    assert np.array_equal(seen[-1], np.sort(seen[-1]))  # the remainder in increasing order


def test_independent_arms_with_different_population_sizes():
    # first_batch = 5: with 3 rewards an arm's standard deviation is estimated from 2 degrees
    # of freedom, too few for the normal bound of Eq. 27 to hold; on this problem the error
    # rate at first_batch = 3 is about 0.066 (2000 races), above delta.
    rng = np.random.default_rng(6)
    sizes = np.array([1, 5, 40, 300, 2000])
    pops = [rng.normal(0.0, 1.0, n) for n in sizes]
    n_trials, errors = 200, 0
    calls = []
    for _ in range(n_trials):
        offsets = rng.normal(0.0, 0.3, sizes.size)
        exact = np.array([p.mean() for p in pops]) + offsets

        def rewards(arms, idx, offsets=offsets):
            calls.append(len(idx))
            return (pops[arms[0]][idx] + offsets[arms[0]])[None, :]

        calls.clear()
        result = race(rewards, sizes.size, sizes, variance="independent", first_batch=5,
                      random_state=rng)
        assert result.n_evaluations == sum(calls) <= sizes.sum()
        assert np.all(result.n_sampled <= sizes)
        errors += int(result.best != np.argmax(exact))
    assert_binomial_rate_at_most(errors, n_trials, DELTA, label="independent racing")


def _independent_schedule(first_batch, n_pop):
    """Cumulative per-arm sizes of App. C.3: m1, m1 + max(1, ceil((N - m1)/10)), doubling,
    where a batch of at least half of what is left takes all of it (the remainder rule)."""

    def rule(target, count):
        return n_pop if 2 * (target - count) >= n_pop - count else target

    sched = [rule(min(first_batch, n_pop), 0)]
    if sched[-1] < n_pop:
        count = sched[-1]
        sched.append(rule(min(n_pop, count + max(1, -(-(n_pop - count) // 10))), count))
    while sched[-1] < n_pop:
        sched.append(rule(min(2 * sched[-1], n_pop), sched[-1]))
    return sched


def _race_tied_independent_arms(sizes, first_batch, seed):
    """Race arms whose rewards are all 0 (never separated: every arm runs to N_i)."""
    calls = []

    def rewards(arms, idx):
        assert len(arms) == 1
        calls.append((int(arms[0]), np.array(idx)))
        return np.zeros((1, len(idx)))

    result = race(rewards, sizes.size, sizes, variance="independent", first_batch=first_batch,
                  random_state=seed)
    return result, calls


def test_independent_race_evaluation_counts_are_exact():
    sizes = np.array([1, 4, 9, 30, 200])
    for seed in range(5):
        result, calls = _race_tied_independent_arms(sizes, 3, seed)
        lengths = [idx.size for _, idx in calls]
        assert result.n_evaluations == sum(lengths) == sizes.sum()
        assert np.array_equal(result.n_sampled, sizes)
        assert result.best == 0 and result.n_rounds == len(result.survivors)
        for arm, n_pop in enumerate(sizes):
            batches = [idx for a, idx in calls if a == arm]
            # One call per round while the arm's population is not exhausted, with the
            # batch sizes of its schedule; the batches are new and exhaust range(N_i).
            assert np.cumsum([b.size for b in batches]).tolist() == _independent_schedule(3, n_pop)
            assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(n_pop))
        # Within a round the arms are called in increasing order.
        arms = [a for a, _ in calls]
        n_rounds = 1 + sum(int(b <= a) for a, b in pairwise(arms))
        assert n_rounds == result.n_rounds == max(len(_independent_schedule(3, n)) for n in sizes)


def test_independent_race_draws_each_arm_uniformly_without_replacement():
    # Chi-square on how often each index of the 30-reward arm is in its first three batches
    # (3, 3 and 6 new indices: first_batch, +ceil(27/10), doubling) and of the 20-reward arm in
    # its first two (3 of 20, then 2 of the 17 left), over 1500 races; each batch is,
    # unconditionally, a uniform subset.
    sizes = np.array([20, 30, 200])
    counts = {(arm, batch): np.zeros(n, dtype=int)
              for arm, n in ((0, 20), (1, 30)) for batch in range(2 + arm)}
    for seed in range(1500):
        _, calls = _race_tied_independent_arms(sizes, 3, seed)
        seen = {0: 0, 1: 0, 2: 0}
        for arm, idx in calls:
            if (arm, seen[arm]) in counts:
                counts[arm, seen[arm]][idx] += 1
            seen[arm] += 1
    for (arm, batch), inclusion in counts.items():
        n = inclusion.size
        assert_chisquare_pmf(np.repeat(np.arange(n), inclusion), np.full(n, 1 / n),
                             label=f"arm {arm} batch {batch + 1}")


def test_lil_ucb_error_and_pull_bound():
    problem = make_racing_problem(10, 4000, "uniform", 0.3 / 4000, random_state=7)
    rng = np.random.default_rng(8)
    exact_sums = problem.log_factors.sum(axis=1)
    n_trials, errors = 150, 0
    c = float(problem.reward_range.max())
    for _ in range(n_trials):
        offsets = -np.log(rng.standard_exponential(10))
        shift = offsets / 4000
        calls = []

        def rewards(arms, idx, shift=shift, calls=calls):
            calls.append(len(idx))
            return problem.log_factors[np.ix_(arms, idx)] + shift[arms, None]

        result = lil_ucb(rewards, 10, 4000, reward_range=c, random_state=rng)
        assert result.n_pulls <= result.n_evaluations == sum(calls) <= 10 * 4000
        assert np.all(result.n_sampled <= 4000)
        errors += int(result.best != np.argmax(exact_sums + offsets))
    assert_binomial_rate_at_most(errors, n_trials, DELTA, label="lil'UCB")


def test_lil_ucb_exact_arm_stops_the_search():
    # Two arms whose means differ by far less than any confidence width: lil'UCB must exhaust
    # the better arm's population and stop there (adaptation 3), never exceeding N per arm.
    values = np.vstack([np.full(50, 0.5), np.full(50, 0.5 + 1e-9)])
    result = lil_ucb(lambda arms, idx: values[np.ix_(arms, idx)], 2, 50, reward_range=1.0,
                     random_state=0)
    assert result.best == 1
    assert result.n_sampled[1] == 50


@pytest.mark.parametrize("method", ["exact", "racing"])
def test_sample_discrete_matches_enumerated_pmf(method):
    problem = make_racing_problem(6, 500, "normal", 5e-3, random_state=11)
    rng = np.random.default_rng(12)
    draws = [
        sample_discrete(problem.factors, 500, n_states=6, method=method, delta=0.01,
                        random_state=rng).sample
        for _ in range(3000)
    ]
    assert_chisquare_pmf(draws, problem.pmf, label=method)


def test_sample_discrete_negative_control_wrong_pmf_fails():
    problem = make_racing_problem(6, 500, "normal", 5e-3, random_state=11)
    rng = np.random.default_rng(13)
    draws = [
        sample_discrete(problem.factors, 500, n_states=6, method="exact", random_state=rng).sample
        for _ in range(3000)
    ]
    tilted = problem.pmf * np.linspace(1.0, 1.3, 6)
    with pytest.raises(AssertionError, match="chi-square"):
        assert_chisquare_pmf(draws, tilted / tilted.sum())


def test_sample_discrete_counts_factor_evaluations():
    problem = make_racing_problem(5, 2000, "uniform", 1e-4, random_state=14)
    calls = []

    def log_factors(states, idx):
        calls.append(len(states) * len(idx))
        return problem.factors(states, idx)

    exact = sample_discrete(log_factors, 2000, n_states=5, method="exact", random_state=0)
    assert exact.n_evaluations == sum(calls) == exact.n_total == 10_000
    calls.clear()
    fast = sample_discrete(log_factors, 2000, n_states=5, random_state=0)
    assert fast.n_evaluations == sum(calls) < fast.n_total
    assert fast.sample == exact.sample  # same Gumbel draw, easy problem


def test_sample_discrete_with_states_of_different_factor_counts():
    rng = np.random.default_rng(15)
    sizes = np.array([0, 3, 30, 300])
    data = [rng.normal(0.2 * k, 1.0, n) for k, n in enumerate(sizes)]
    log_prior = np.log(np.array([0.4, 0.3, 0.2, 0.1]))

    def log_factors(states, idx):
        s = int(states[0])
        return (-0.5 * data[s][idx] ** 2 * 0.01)[None, :]

    exact_logp = log_prior + np.array([(-0.5 * d**2 * 0.01).sum() for d in data])
    pmf = np.exp(exact_logp - exact_logp.max())
    draws = [
        sample_discrete(log_factors, sizes, log_prior, first_batch=3, delta=0.01,
                        random_state=rng).sample
        for _ in range(2000)
    ]
    assert_chisquare_pmf(draws, pmf / pmf.sum(), label="per-state factor counts")


def test_control_variate_in_the_reward_cuts_evaluations():
    # Cauchy location likelihood: log f_n(i) = -log(1 + (y_n - mu_i)^2). A second-order
    # Taylor expansion in y_n around y_bar (Eq. 11) removes most of the reward variance;
    # E[h] is exact from the first two moments of y, so the arm means are unchanged.
    rng = np.random.default_rng(16)
    y = rng.normal(0.0, 0.1, 20_000)
    mus = np.linspace(-0.01, 0.01, 5)
    y_bar, y_var = y.mean(), y.var()

    def loglik(states, idx):
        return -np.log1p((y[idx][None, :] - mus[states][:, None]) ** 2)

    u = y_bar - mus  # derivatives of -log(1 + u^2) at u
    l0 = -np.log1p(u**2)
    g = -2 * u / (1 + u**2)
    h2 = (2 * u**2 - 2) / (1 + u**2) ** 2
    mean_h = l0 + 0.5 * h2 * y_var

    def residual(states, idx):
        d = y[idx][None, :] - y_bar
        h = l0[states, None] + g[states, None] * d + 0.5 * h2[states, None] * d**2
        return loglik(states, idx) - h + mean_h[states, None]

    np.testing.assert_allclose(residual(np.arange(5), np.arange(y.size)).mean(axis=1),
                               loglik(np.arange(5), np.arange(y.size)).mean(axis=1), atol=1e-12)
    plain, reduced, errors = [], [], 0
    for seed in range(60):
        kwargs = {"n_states": 5, "variance": "marginal", "random_state": seed}
        exact = sample_discrete(loglik, y.size, method="exact", **kwargs)
        a = sample_discrete(loglik, y.size, **kwargs)
        b = sample_discrete(residual, y.size, **kwargs)
        plain.append(a.n_evaluations)
        reduced.append(b.n_evaluations)
        errors += int(b.sample != exact.sample)
    assert np.mean(reduced) < 0.5 * np.mean(plain)
    assert_binomial_rate_at_most(errors, 60, DELTA, label="racing with control variates")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"first_batch": 1}, "first_batch"),
        ({"first_batch": 101}, "first_batch"),
        ({"bound": "ebs"}, "reward_range"),
        ({"bound": "hoeffding"}, "bound"),
        ({"variance": "joint"}, "variance"),
    ],
)
def test_race_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        race(lambda a, i: np.zeros((len(a), len(i))), 3, 100, **kwargs)


def test_race_rejects_bad_rewards_and_arms():
    with pytest.raises(ValueError, match="n_arms"):
        race(lambda a, i: np.zeros((len(a), len(i))), 0, 100)
    with pytest.raises(ValueError, match="shape"):
        race(lambda a, i: np.zeros(len(i)), 3, 100)
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match=r"NaN or \+inf"):
            race(lambda a, i, bad=bad: np.full((len(a), len(i)), bad), 3, 100)
    with pytest.raises(ValueError, match="independent"):
        race(lambda a, i: np.zeros((len(a), len(i))), 2, np.array([10, 20]))
    with pytest.raises(TypeError, match="rewards"):
        race(None, 2, 10)


def test_single_arm_needs_no_evaluation():
    result = race(lambda a, i: 1 / 0, 1, 100)
    assert result.best == 0 and result.n_evaluations == 0



class _RoundSpy:
    """Wraps ``rewards`` and records the round in which ``arm`` first draws population index
    ``index``: with shared minibatches every call is a round; with independent arms a round
    calls the surviving arms in increasing order, so a call for a lower arm starts a new one.
    """

    def __init__(self, rewards, arm, index):
        self.rewards, self.arm, self.index = rewards, arm, index
        self.round, self.last_arm, self.seen_in = 0, np.inf, None

    def __call__(self, arms, idx):
        if len(arms) > 1 or arms[0] <= self.last_arm:
            self.round += 1
        self.last_arm = arms[-1]
        if self.seen_in is None and self.arm in arms and self.index in idx:
            self.seen_in = self.round
        return self.rewards(arms, idx)


@pytest.mark.parametrize("variance", ["pairwise", "marginal", "independent"])
def test_arm_with_a_neg_inf_reward_is_eliminated_in_the_round_it_is_seen(variance):
    # Four arms share one population of rewards, so no finite evidence separates them and the
    # race runs until it draws arm 1's single -inf, which makes arm 1's mean -inf.
    values = np.tile(np.random.default_rng(17).normal(0.0, 1.0, 256), (4, 1))
    values[1, 100] = -np.inf
    for seed in range(10):
        spy = _RoundSpy(lambda arms, idx: values[np.ix_(arms, idx)], 1, 100)
        result = race(spy, 4, 256, variance=variance, first_batch=4, delta=1e-6,
                      random_state=seed)
        assert result.best != 1
        assert spy.seen_in is not None
        if spy.seen_in > 1:  # still racing before that round
            assert 1 in result.survivors[spy.seen_in - 2]
        assert 1 not in result.survivors[spy.seen_in - 1]


@pytest.mark.parametrize("variance", ["pairwise", "independent"])
def test_race_rejects_neg_inf_in_every_arm_and_nan(variance):
    def all_neg_inf(arms, idx):
        return np.full((len(arms), len(idx)), -np.inf)

    with pytest.raises(ValueError, match="positive probability"):
        race(all_neg_inf, 3, 100, variance=variance)
    with pytest.raises(ValueError, match="NaN"):
        race(lambda a, i: np.full((len(a), len(i)), np.nan), 3, 100, variance=variance)


def test_lil_ucb_rejects_neg_inf_rewards():
    values = np.zeros((2, 50))
    values[0] = -np.inf
    with pytest.raises(ValueError, match="-inf"):
        lil_ucb(lambda arms, idx: values[np.ix_(arms, idx)], 2, 50, reward_range=1.0,
                random_state=0)


@pytest.mark.parametrize("method", ["exact", "racing"])
def test_sample_discrete_never_draws_a_state_with_a_neg_inf_factor(method):
    # State 0 is the most probable one until one in five of its factors is 0 (log = -inf):
    # then its probability is 0, and the other states keep their relative probabilities.
    problem = make_racing_problem(6, 500, "normal", 5e-3, random_state=11)
    log_factors = problem.log_factors.copy()
    log_factors[0, ::5] = -np.inf
    rng = np.random.default_rng(18)
    draws = [
        sample_discrete(lambda s, i: log_factors[np.ix_(s, i)], 500, n_states=6,
                        method=method, delta=0.01, random_state=rng).sample
        for _ in range(2000)
    ]
    assert 0 not in draws
    pmf = problem.pmf.copy()
    pmf[0] = 0.0
    assert_chisquare_pmf(draws, pmf, label=f"{method} with a zero-probability state")


def test_sample_discrete_with_every_state_at_probability_zero_raises():
    for method in ("exact", "racing"):
        with pytest.raises(ValueError, match="positive probability"):
            sample_discrete(lambda s, i: np.full((len(s), len(i)), -np.inf), 100, n_states=3,
                            method=method, random_state=0)
