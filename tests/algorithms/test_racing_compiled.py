"""The compiled racing core: compiled rewards, the remainder rule, and the round law.

* A race with :class:`CompiledRewards` runs the same compiled round functions as a race with
  the equivalent NumPy callable, on the same indices, so the two must agree bit for bit
  (result and generator state) for the same seed.
* The remainder rule (a round whose new indices would be at least half of what is left
  evaluates all of it) only drops rounds from the end of the schedule, so the error stays at
  most delta (one-sided exact binomial test at alpha = 0.01, with a deliberately wrong bound as
  negative control), and a race that evaluates everything returns the exact best arm.
* A small reference written with NumPy (used only here) recomputes each round's
  eliminations from the indices the race handed to the callable (Eq. 5 and 9).
* On a compiled factor so cheap that a race's set-up is a large share of the exact sums, the
  default measures the costs once, then draws exactly (every factor read), as
  ``method="exact"`` does for the same seed; with measuring off the same call races.
"""

import json

import numba
import numpy as np
import pytest
from scipy import stats

import sksubsample.algorithms.bandits._state as racing_module
from sksubsample.algorithms import (
    CompiledRewards,
    _calibration,
    b_normal,
    lil_ucb,
    race,
    sample_discrete,
)
from sksubsample.algorithms.bandits import _auto
from sksubsample.algorithms.bandits._schedule import REMAINDER_FRACTION, shared_rounds
from sksubsample.datasets import make_racing_problem
from tests._stats import assert_binomial_rate_at_most, assert_chisquare_pmf

DELTA = 0.05


@numba.njit
def _table(data, arm, index):
    return data[0][arm, index]


@numba.njit
def _ragged(data, arm, index):
    values, starts = data
    return values[starts[arm] + index]


@numba.njit
def _gaussian(data, state, index):
    y, means = data
    d = y[index] - means[state]
    return -0.5 * d * d


def _same_race(a, b):
    assert a.best == b.best
    assert a.n_evaluations == b.n_evaluations
    assert a.n_rounds == b.n_rounds
    assert len(a.survivors) == len(b.survivors)
    for x, y in zip(a.survivors, b.survivors, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.n_sampled, b.n_sampled)


@pytest.mark.parametrize(("variance", "bound"), [("pairwise", "normal"), ("marginal", "normal"),
                                                 ("pairwise", "ebs"), ("marginal", "ebs")])
def test_compiled_race_is_the_numpy_race_bit_for_bit(variance, bound):
    # Hard races (many rounds, leader changes, eliminations at every stage) on 6 arms.
    problem = make_racing_problem(6, 3000, "lognormal", 3.0 / 3000, random_state=21)
    table = problem.log_factors
    compiled = CompiledRewards(_table, (table,))
    options = {"variance": variance, "bound": bound, "first_batch": 5 if bound == "ebs" else 20}
    if bound == "ebs":
        options["reward_range"] = problem.reward_range
    rounds = []
    for seed in range(40):
        rng_a, rng_b = np.random.default_rng(seed), np.random.default_rng(seed)
        a = race(lambda arms, idx: table[np.ix_(arms, idx)], 6, 3000, random_state=rng_a,
                 **options)
        b = race(compiled, 6, 3000, random_state=rng_b, **options)
        _same_race(a, b)
        assert rng_a.bit_generator.state == rng_b.bit_generator.state
        rounds.append(a.n_rounds)
    assert max(rounds) >= 4  # the comparison covers multi-round races


@pytest.mark.parametrize("variance", ["pairwise", "marginal"])
def test_rounds_read_in_blocks_are_the_same_race(variance):
    # Rounds of more than 2^18 rewards are read in blocks (the callable is called once per
    # block): near ties keep 4 arms racing to large rounds, with leader changes on the way.
    problem = make_racing_problem(4, 300_000, "normal", 2.0, random_state=32)
    table = problem.log_factors
    compiled = CompiledRewards(_table, (table,))
    blocks = 0
    for seed in range(8):
        calls = []

        def rewards(arms, idx, calls=calls):
            calls.append(len(idx))
            return table[np.ix_(arms, idx)]

        rng_a, rng_b = np.random.default_rng(seed), np.random.default_rng(seed)
        a = race(rewards, 4, 300_000, variance=variance, random_state=rng_a)
        b = race(compiled, 4, 300_000, variance=variance, random_state=rng_b)
        _same_race(a, b)
        blocks += len(calls) - a.n_rounds
        full = np.flatnonzero(a.n_sampled == 300_000)  # the arms of the exact last round
        if a.best in full:
            assert a.best == full[np.argmax(table[full].mean(axis=1))]
    assert blocks > 0


def test_compiled_independent_race_is_the_numpy_race_bit_for_bit():
    rng = np.random.default_rng(22)
    sizes = np.array([1, 4, 9, 30, 200, 1500])
    values = rng.normal(0.0, 1.0, sizes.sum())
    starts = np.cumsum(sizes) - sizes
    offsets = rng.normal(0.0, 0.05, sizes.size)

    def rewards(arms, idx):
        arm = int(arms[0])
        return (values[starts[arm] + idx] + offsets[arm])[None, :]

    compiled = CompiledRewards(_ragged, (values, starts), offset=offsets)
    for seed in range(40):
        rng_a, rng_b = np.random.default_rng(seed), np.random.default_rng(seed)
        a = race(rewards, sizes.size, sizes, variance="independent", first_batch=3,
                 random_state=rng_a)
        b = race(compiled, sizes.size, sizes, variance="independent", first_batch=3,
                 random_state=rng_b)
        _same_race(a, b)
        assert rng_a.bit_generator.state == rng_b.bit_generator.state


@pytest.mark.parametrize("method", ["racing", "exact", "lil-ucb"])
def test_compiled_sample_discrete_draws_the_numpy_draws(method):
    y = np.random.default_rng(23).normal(0.0, 1.0, 5000)
    means = np.linspace(-0.06, 0.06, 5)

    def log_factors(states, idx):
        return -0.5 * (y[idx][None, :] - means[states][:, None]) ** 2

    compiled = CompiledRewards(_gaussian, (y, means))
    options = {"n_states": 5, "method": method}
    if method == "lil-ucb":
        options["reward_range"] = 5.0
    samples = []
    for seed in range(30):
        a = sample_discrete(log_factors, y.size, random_state=seed, **options)
        b = sample_discrete(compiled, y.size, random_state=seed, **options)
        assert a == b
        samples.append(a.sample)
    assert len(set(samples)) > 1


def test_compiled_sample_discrete_with_states_of_different_factor_counts():
    # The coreference layout: state 0 has no factors, the others a ragged population each.
    rng = np.random.default_rng(24)
    sizes = np.array([0, 3, 40, 300, 2000])
    values = rng.normal(0.0, 0.1, sizes.sum())
    starts = np.cumsum(sizes) - sizes

    def log_factors(states, idx):
        s = int(states[0])
        return values[starts[s] + idx][None, :]

    compiled = CompiledRewards(_ragged, (values, starts))
    log_prior = np.log(np.array([0.3, 0.3, 0.2, 0.1, 0.1]))
    for seed in range(40):
        a = sample_discrete(log_factors, sizes, log_prior, first_batch=3, random_state=seed)
        b = sample_discrete(compiled, sizes, log_prior, first_batch=3, random_state=seed)
        assert a == b


def test_compiled_rewards_scale_offset_and_errors():
    # Arm 0 is the constant log(u)/N of a racing MH test (scale 0: never evaluated).
    terms = np.random.default_rng(25).normal(1e-3, 1e-2, 10_000)
    rewards = CompiledRewards(_table, (terms[None, :].repeat(2, axis=0),), scale=[0.0, 1.0],
                              offset=[np.log(0.5) / terms.size, 0.0])
    result = race(rewards, 2, terms.size, random_state=0)
    assert result.best == 1
    assert result.n_evaluations == result.n_sampled[1] < terms.size
    with pytest.raises(TypeError, match="numba"):
        race(CompiledRewards(lambda data, arm, n: 0.0, ()), 2, 10, first_batch=5)
    with pytest.raises(TypeError, match="tuple"):
        race(CompiledRewards(_table, [terms]), 2, 10, first_batch=5)
    with pytest.raises(ValueError, match=">= 0"):
        race(CompiledRewards(_table, (terms[None],), scale=-1.0), 2, 10, first_batch=5)
    bad = np.zeros((3, 100))
    bad[1, 7] = np.nan
    with pytest.raises(ValueError, match=r"NaN or \+inf"):
        race(CompiledRewards(_table, (bad,)), 3, 100, first_batch=50, random_state=0)
    with pytest.raises(ValueError, match=r"NaN or \+inf"):
        sample_discrete(CompiledRewards(_table, (bad,)), 100, n_states=3, method="exact")
    dead = np.zeros((3, 100))
    dead[0] = 1.0
    dead[0, 3] = -np.inf
    assert race(CompiledRewards(_table, (dead,)), 3, 100, random_state=0).best != 0
    with pytest.raises(ValueError, match="positive probability"):
        race(CompiledRewards(_table, (np.full((3, 100), -np.inf),)), 3, 100, random_state=0)
    res = lil_ucb(CompiledRewards(_table, (np.vstack([np.zeros(50), np.ones(50)]),)), 2, 50,
                  reward_range=1.0, random_state=0)
    assert res.best == 1


# ----------------------------------------------------------------------------- remainder rule


def _remainder_error_count(problem, n_trials, seed, first_batch, **kwargs):
    errors = 0
    jumped = 0
    rng = np.random.default_rng(seed)
    sums = problem.log_factors.sum(axis=1)
    n_pop = problem.n_population
    for _ in range(n_trials):
        offsets = -np.log(rng.standard_exponential(problem.n_arms))
        shift = offsets / n_pop

        def rewards(arms, idx, shift=shift):
            return problem.log_factors[np.ix_(arms, idx)] + shift[arms, None]

        result = race(rewards, problem.n_arms, n_pop, first_batch=first_batch,
                      random_state=rng, **kwargs)
        errors += int(result.best != np.argmax(sums + offsets))
        jumped += int(result.n_sampled.max() == n_pop)
    return errors, jumped


def test_remainder_rule_schedule():
    # 50, 100, then 200 would be 100 new of the 200 left: half, so the rest is taken.
    assert shared_rounds(300, 50) == 3
    assert shared_rounds(400, 50) == 4  # 200 would be 100 of the 300 left: doubling goes on
    assert shared_rounds(100, 50) == 1  # the first batch is half the population: whole
    assert REMAINDER_FRACTION == 0.5


def test_remainder_rule_keeps_error_at_most_delta():
    # N = 300, first batch 50: rounds at T = 50, 100, then the remainder (the schedule without
    # the rule checks T = 200 as well). Noise chosen so that many races reach the remainder.
    problem = make_racing_problem(5, 300, "normal", 8.0 / 300, random_state=26)
    errors, jumped = _remainder_error_count(problem, 600, seed=27, first_batch=50, delta=DELTA)
    assert jumped > 100
    assert_binomial_rate_at_most(errors, 600, DELTA, label="racing with the remainder rule")


def test_remainder_rule_negative_control_wrong_bound_is_detected(monkeypatch):
    monkeypatch.setattr(racing_module, "b_normal", lambda delta, fraction: 0.1)
    problem = make_racing_problem(5, 300, "normal", 8.0 / 300, random_state=26)
    errors, _ = _remainder_error_count(problem, 600, seed=27, first_batch=50, delta=DELTA)
    with pytest.raises(AssertionError, match="error rate"):
        assert_binomial_rate_at_most(errors, 600, DELTA)


@pytest.mark.parametrize("variance", ["pairwise", "marginal", "independent"])
def test_fully_evaluated_race_returns_the_exact_best_arm(variance):
    # Near ties that no bound separates before T = N: every race ends in the remainder pass.
    # (Normal factors: with heavy-tailed ones a small sample can underestimate the spread, and
    # a race may then eliminate the best arm early, with probability up to δ.)
    problem = make_racing_problem(6, 900, "normal", 1.0, random_state=28)
    table = problem.log_factors
    rng = np.random.default_rng(29)
    for _ in range(50):
        offsets = rng.normal(0.0, 1e-6, 6)
        result = race(lambda arms, idx, o=offsets: table[np.ix_(arms, idx)] + o[arms, None],
                      6, 900, variance=variance, first_batch=10, random_state=rng)
        assert result.best == np.argmax(table.mean(axis=1) + offsets)
        assert result.n_sampled[result.best] == 900


def test_small_populations_are_evaluated_whole_in_one_round():
    # Populations of at most 2 * first_batch cannot save anything: one round reads them all.
    rng = np.random.default_rng(30)
    sizes = np.array([2, 5, 6, 4, 6])
    values = [rng.normal(0.0, 1.0, n) for n in sizes]
    calls = []

    def rewards(arms, idx):
        calls.append((int(arms[0]), np.array(idx)))
        return values[arms[0]][idx][None, :]

    result = race(rewards, sizes.size, sizes, variance="independent", first_batch=3,
                  random_state=0)
    assert result.n_rounds == 1 and result.n_evaluations == sizes.sum()
    assert result.best == np.argmax([v.mean() for v in values])
    for arm, idx in calls:
        np.testing.assert_array_equal(idx, np.arange(sizes[arm]))
    # ... and sample_discrete draws them exactly, with the exact sampler's evaluations.
    draws = [sample_discrete(lambda s, i: values[s[0]][i][None, :] * 0.5, sizes,
                             variance="independent", first_batch=3, random_state=seed)
             for seed in range(2000)]
    assert all(d.n_evaluations == sizes.sum() for d in draws)
    logp = np.array([0.5 * v.sum() for v in values])
    assert_chisquare_pmf([d.sample for d in draws], np.exp(logp - logp.max()),
                         label="small populations")


# ----------------------------------------------------------------------------- reference


def _doubtful(x):
    """The guard of the normal approximation, recomputed with SciPy: no spread, a mean whose
    skewness exceeds 1 beyond Cochran's base (n <= 28 + g1²), or fewer draws than
    kurtosis - 1."""
    n = x.size
    if not x.var() > 1e-12 * np.mean(x * x):
        return True
    g1 = stats.skew(x, bias=True)
    kurtosis = stats.kurtosis(x, fisher=False, bias=True)
    return n <= 28 + g1**2 or n < kurtosis - 1


def _reference_survivors(calls, n_pop, n_arms, delta, variance):
    """Alg. 1 recomputed with NumPy from the blocks a race was given (Eq. 5 and 9), with the
    guard of its normal approximation (an arm is kept while the sample behind its elimination
    is doubtful)."""
    delta_each = delta / (n_arms - 1) if variance == "pairwise" else delta / n_arms
    b = b_normal(delta_each, calls[0][1].shape[1] / n_pop)
    alive = np.arange(n_arms)
    history = []
    blocks = []
    for arms, values in calls:
        np.testing.assert_array_equal(arms, alive)
        blocks.append(values)
        rewards = np.concatenate(blocks, axis=1)
        t = rewards.shape[1]
        mean = rewards.mean(axis=1)
        x = int(np.argmax(mean))
        if t >= n_pop:
            alive = alive[[x]]
            history.append(alive)
            break
        width = b * np.sqrt((1 - (t - 1) / (n_pop - 1)) / t)
        if variance == "pairwise":
            threshold = width * (rewards[x] - rewards).std(axis=1)
        else:
            g = width * rewards.std(axis=1)
            threshold = g[x] + g
        keep = ~(mean[x] - mean > threshold)
        for a in np.flatnonzero(~keep):
            if variance == "pairwise":
                doubtful = _doubtful(rewards[x] - rewards[a])
            else:
                doubtful = _doubtful(rewards[x]) or _doubtful(rewards[a])
            keep[a] = doubtful
        keep[x] = True
        alive = alive[keep]
        blocks = [blk[keep] for blk in blocks]
        history.append(alive)
        if alive.size == 1:
            break
    return history


@pytest.mark.parametrize("variance", ["pairwise", "marginal"])
def test_round_law_matches_a_numpy_reference(variance):
    problem = make_racing_problem(8, 2000, "uniform", 4.0 / 2000, random_state=31)
    table = problem.log_factors
    for seed in range(30):
        calls = []

        def rewards(arms, idx, calls=calls):
            values = table[np.ix_(arms, idx)]
            calls.append((np.array(arms), values))
            return values

        result = race(rewards, 8, 2000, variance=variance, first_batch=25, random_state=seed)
        expected = _reference_survivors(calls, 2000, 8, DELTA, variance)
        assert len(expected) == result.n_rounds
        for got, want in zip(result.survivors, expected, strict=True):
            np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------- method="auto"


@pytest.fixture
def cost_store(tmp_path, monkeypatch):
    """A store of measured costs of the test's own, measuring on."""
    monkeypatch.setenv(_calibration.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(_calibration.MEASURE_ENV, "1")
    monkeypatch.setattr(_calibration, "_MEMO", {})
    monkeypatch.setattr(_auto, "_CHOICES", {})
    return tmp_path / _calibration.STORE_NAME


def _cheap_problem():
    # A table lookup per factor over 4 states and 2 000 factors: the exact sums take
    # microseconds, less than building a race.
    table = np.random.default_rng(0).normal(scale=1e-3, size=(4, 2000))
    return CompiledRewards(_table, (table,)), table


def test_auto_draws_exactly_where_a_race_cannot_pay(cost_store):
    rewards, table = _cheap_problem()
    for seed in range(3):
        auto = sample_discrete(rewards, 2000, n_states=4, random_state=seed)
        exact = sample_discrete(rewards, 2000, n_states=4, method="exact", random_state=seed)
        assert auto == exact and not auto.raced and auto.n_evaluations == auto.n_total
    result = race(rewards, 4, 2000, method="auto", random_state=0)
    assert result.n_evaluations == table.size
    assert result.best == int(np.argmax(table.mean(axis=1)))
    entries = json.loads(cost_store.read_text())["entries"]
    assert len(entries) == 1 and "_table#" in next(iter(entries))


def test_with_measuring_off_auto_races_as_before(cost_store, monkeypatch):
    # Negative control of the previous test: the rough costs have no set-up, so the same call
    # races (the draws of measuring off are those of the fixed costs, on every machine).
    monkeypatch.setenv(_calibration.MEASURE_ENV, "0")
    rewards, _ = _cheap_problem()
    draw = sample_discrete(rewards, 2000, n_states=4, random_state=0)
    assert draw.n_evaluations < draw.n_total
    assert not cost_store.exists()
